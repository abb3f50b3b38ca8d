package view_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"scv/control/api"
	"scv/control/render"
	"scv/control/view"
	"scv/reducer"
)

// planned is the diamond of hostile titles with a plan: "release" is an
// epic of d and c, a is the most urgent, and e ("docs") was found during
// run b2 at minute 8, with a description and an acceptance that try to
// be markup.
func planned(t *testing.T) *history {
	h := diamond(t, hostile)
	zero := 0
	h.do(19, reducer.AddTask{Project: pid, TaskID: "r", Title: "release", Priority: &zero})
	h.do(19, reducer.EditTask{Project: pid, TaskID: "d", Parent: ptr("r"), By: "owner"})
	h.do(19, reducer.EditTask{Project: pid, TaskID: "c", Parent: ptr("r"), By: "owner"})
	h.do(19, reducer.AddTask{Project: pid, TaskID: "e", Title: "docs", DiscoveredFrom: "b2", Labels: []string{"writing"},
		Description: "Document the flags.\n" + hostile, Acceptance: "<script>alert(1)</script> passes"})
	return h
}

func ptr[T any](v T) *T { return &v }

// TestModelPlan: the drawing's tasks carry the plan (priority, an
// epic's children's progress, the epic, the task and run the work was
// found in, the description), and the work found is a marker on the
// row of the run's task, when the task was added.
func TestModelPlan(t *testing.T) {
	h := planned(t)
	m := view.Model(h.p, h.rows, view.Options{Now: tm(20)})
	byID := map[string]render.Task{}
	for _, tk := range m.Tasks {
		byID[tk.ID] = tk
	}
	assert.Equal(t, 0, *byID["r"].Priority)
	assert.Nil(t, byID["a"].Priority, "the default is not drawn")
	assert.Equal(t, [2]int{2, 1}, [2]int{byID["r"].Children, byID["r"].ChildrenDone})
	assert.Equal(t, "r", byID["c"].Parent)
	assert.Equal(t, [2]string{"b", "b2"}, [2]string{byID["e"].FoundIn, byID["e"].FoundRun})
	assert.Contains(t, byID["e"].Description, "Document the flags.")
	var found []render.Marker
	for _, mk := range m.Markers {
		if mk.Kind == render.MarkerFound {
			found = append(found, mk)
		}
	}
	assert.Equal(t, []render.Marker{{TaskID: "b", RunID: "b2", At: tm(19).In(time.UTC), Kind: render.MarkerFound, Label: "found: docs"}}, found)

	g := view.Graph(api.ProjectReportOf(h.p, at(20)))
	assert.Equal(t, m.Tasks, g.Tasks, "the MCP resource's graph has the same plan")
}

// TestReportPlan: the report's tasks table shows each task's priority,
// the epic's children's progress, labels, epic, where its work was found
// (linked to the run's row) and its description and acceptance, escaped;
// its evidence has the plan's notes.
func TestReportPlan(t *testing.T) {
	h := planned(t)
	var b bytes.Buffer
	require.NoError(t, view.Report(&b, h.p, h.rows, view.ReportOptions{Options: view.Options{Now: tm(20)}}))
	raw := b.String()
	doc, err := html.Parse(strings.NewReader(raw))
	require.NoError(t, err)
	row := func(id string) *html.Node {
		rows := find(doc, func(n *html.Node) bool { v, _ := attr(n, "id"); return n.Data == "tr" && v == "task-"+id })
		require.Len(t, rows, 1, "task %s", id)
		return rows[0]
	}
	epic := row("r")
	assert.True(t, hasClass(epic, "epic"))
	assert.Contains(t, text(epic), "P0")
	assert.Contains(t, text(epic), "epic · 1/2 done")
	assert.Contains(t, text(row("c")), "in epic release")
	docs := text(row("e"))
	assert.Contains(t, docs, "found during run b2 of "+hostile)
	assert.Contains(t, docs, "writing")
	assert.Contains(t, docs, "Document the flags.\n"+hostile)
	assert.Contains(t, docs, "Acceptance: <script>alert(1)</script> passes")
	links := find(row("e"), func(n *html.Node) bool { return n.Data == "a" })
	var hrefs []string
	for _, a := range links {
		v, _ := attr(a, "href")
		hrefs = append(hrefs, v)
	}
	assert.Equal(t, []string{"#run-b2", "#task-b"}, hrefs)
	assert.Len(t, find(doc, func(n *html.Node) bool { v, _ := attr(n, "id"); return n.Data == "tr" && v == "run-b2" }), 1, "the run's row it links to")
	assert.Empty(t, find(doc, func(n *html.Node) bool { return n.Data == "script" || n.Data == "img" }), "ledger text stays text")
	assert.Contains(t, raw, "epic r (release): 1/2 children done, 1 running")
	assert.Contains(t, raw, "task e (docs) was found during run b2 of task b (")
}
