package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// planned is the diamond with a plan: "ship" is an epic of "build" and
// "lint" (1 of 2 done), "fetch sources" is the most urgent, and "docs"
// was found during build's second run.
func planned() Project {
	p := diamond()
	zero, one := 0, 1
	p.Tasks = append([]Task{{ID: "e", Title: "ship", Status: TaskRunning, Children: 2, ChildrenDone: 1, Priority: &one,
		Description: "Everything that goes\ninto the release."}}, p.Tasks...)
	p.Tasks[1].Priority = &zero
	p.Tasks[2].Parent, p.Tasks[3].Parent = "e", "e"
	p.Tasks[3].Status = TaskRunning
	p.Tasks = append(p.Tasks, Task{ID: "f", Title: "docs", Status: TaskReady, FoundIn: "b", FoundRun: "b2",
		Description: "The build's flags are undocumented."})
	p.Markers = append(p.Markers, Marker{TaskID: "b", RunID: "b2", At: at(25), Kind: MarkerFound, Label: "found: docs"})
	return p
}

// TestPlanText: the graph and the timeline as text show priorities, an
// epic's progress (never attempts: it does not run), each task's epic and
// the task it was found in; the timeline marks the work found.
func TestPlanText(t *testing.T) {
	for _, c := range []struct {
		name string
		draw func(*bytes.Buffer, Project, TextOptions) error
	}{
		{"graph-plan-100.golden", func(b *bytes.Buffer, p Project, o TextOptions) error { return GraphText(b, p, o) }},
		{"timeline-plan-100.golden", func(b *bytes.Buffer, p Project, o TextOptions) error { return TimelineText(b, p, o) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, c.draw(&b, planned(), TextOptions{Width: 100}))
			golden(t, c.name, b.Bytes())
			assertFits(t, b.Bytes(), 100)
		})
	}
	var g bytes.Buffer
	require.NoError(t, GraphText(&g, planned(), TextOptions{Width: 100}))
	out := g.String()
	assert.Regexp(t, `ship\s+P1, epic 1/2 done\n`, out, "an epic: its progress, no attempts")
	assert.NotRegexp(t, `ship.*att`, out)
	assert.Regexp(t, `fetch sources\s+P0, 1 att`, out)
	assert.Regexp(t, `build .*in epic #\d+ ship`, out)
	assert.Regexp(t, `docs .*found in #\d+ build`, out)

	var tl bytes.Buffer
	require.NoError(t, TimelineText(&tl, planned(), TextOptions{Width: 100}))
	assert.Contains(t, tl.String(), "ship (P1, epic 1/2 don…")
	assert.Contains(t, tl.String(), "fetch sources (P0)")
	assert.Contains(t, tl.String(), "✚ work found")

	// Narrow: the links go on a line of their own, cut to the width.
	var narrow bytes.Buffer
	require.NoError(t, GraphText(&narrow, planned(), TextOptions{Width: 40}))
	assertFits(t, narrow.Bytes(), 40)
}

// TestPlanSVG: the graph's epic is classed and says its progress, each
// task's tooltip has its epic, where it was found and its description on
// one line; a dotted line joins the task of the run to the work found;
// the timeline's row labels say the plan, and its marker of work found
// has a class of its own.
func TestPlanSVG(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, GraphSVG(&b, planned()))
	root := parseSVG(t, b.Bytes())
	nodes := root.find("g", "node")
	require.Len(t, nodes, 6)
	assert.Contains(t, nodes[0].classes(), "epic")
	assert.NotContains(t, nodes[1].classes(), "epic")
	assert.Contains(t, nodes[0].allText(), "running · P1, epic 1/2 done")
	assert.Contains(t, nodes[0].allText(), "Everything that goes into the release.")
	assert.Contains(t, nodes[2].allText(), "in epic ship")
	assert.Contains(t, nodes[5].allText(), "found in build (run b2)")
	assert.Contains(t, nodes[5].allText(), "The build's flags are undocumented.")
	found := root.find("path", "found")
	require.Len(t, found, 1)
	assert.Equal(t, "b", found[0].attr("data-from"))
	assert.Equal(t, "f", found[0].attr("data-to"))

	b.Reset()
	require.NoError(t, TimelineSVG(&b, planned()))
	root = parseSVG(t, b.Bytes())
	var marks []string
	for _, m := range root.find("path", "marker-found") {
		if m.attr("data-run-id") != "" {
			marks = append(marks, m.attr("data-run-id"))
		}
	}
	assert.Equal(t, []string{"b2"}, marks, "the work found, on the run that found it")
	var labels []string
	for _, l := range root.find("text", "label") {
		labels = append(labels, l.allText())
	}
	assert.True(t, strings.HasPrefix(labels[0], "ship (P1, epic 1/2 done)"), "%q", labels[0])
	assert.Contains(t, labels[0], "Everything that goes into the release.", "the tooltip")
}

// TestPlanDescriptionCut: a long description is cut in the tooltip.
func TestPlanDescriptionCut(t *testing.T) {
	p := planned()
	p.Tasks[0].Description = strings.Repeat("word ", 1000)
	var b bytes.Buffer
	require.NoError(t, GraphSVG(&b, p))
	tip := parseSVG(t, b.Bytes()).find("g", "node")[0].find("title", "")[0].allText()
	assert.Less(t, len([]rune(tip)), maxTipDescription+100)
	assert.True(t, strings.HasSuffix(tip, "…"))
}
