package render

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimelineTextGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		opts TextOptions
	}{
		{"timeline-80.golden", TextOptions{Width: 80}},
		{"timeline-100.golden", TextOptions{Width: 100}},
		{"timeline-ascii-80.golden", TextOptions{Width: 80, ASCII: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, TimelineText(&b, diamond(), c.opts))
			golden(t, c.name, b.Bytes())
		})
	}
}

func TestTimelineTextFitsWidth(t *testing.T) {
	projects := []Project{diamond(), hostileProject(), randomProject(4, 60, 3, 10), {Name: "empty"}}
	projectMarker := diamond()
	projectMarker.Markers = append(projectMarker.Markers, Marker{At: at(50), Kind: MarkerApprovalAsked, Label: "ship it?"})
	projects = append(projects, projectMarker)
	for _, p := range projects {
		for _, w := range []int{16, 24, 40, 60, 80, 100, 132, 200} {
			for _, color := range []bool{false, true} {
				var b bytes.Buffer
				require.NoError(t, TimelineText(&b, p, TextOptions{Width: w, Color: color}))
				assertFits(t, b.Bytes(), w)
			}
		}
	}
}

func TestTimelineTextASCII(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, TimelineText(&b, randomProject(9, 30, 2, 5), TextOptions{Width: 70, ASCII: true}))
	for i, r := range b.String() {
		require.Less(t, r, rune(0x80), "non-ASCII %q at byte %d", r, i)
	}
}

func TestTimelineTextColor(t *testing.T) {
	var plain, color bytes.Buffer
	require.NoError(t, TimelineText(&plain, hostileProject(), TextOptions{Width: 100}))
	require.NoError(t, TimelineText(&color, hostileProject(), TextOptions{Width: 100, Color: true}))
	assert.NotContains(t, plain.String(), "\x1b")
	assert.Contains(t, color.String(), "\x1b[32;4m█", "a succeeded run on the critical path: green, underlined")
	assert.Contains(t, color.String(), "\x1b[32m█", "a succeeded run off the critical path: green")
	assert.Contains(t, color.String(), "\x1b[31;4m✗", "a failed run on the critical path: red, underlined")
	assert.Equal(t, plain.String(), ansi.ReplaceAllString(color.String(), ""))
}

// timelineRows reads the rows of a TimelineText output: the critical
// mark, the label and the plot of each, by label.
func timelineRows(t *testing.T, out string) map[string]struct{ critical, plot string } {
	t.Helper()
	rows := map[string]struct{ critical, plot string }{}
	for _, l := range strings.Split(out, "\n") {
		parts := strings.Split(l, "│")
		if len(parts) != 3 || strings.TrimSpace(parts[0]) == "" {
			continue
		}
		label := []rune(parts[0])
		rows[strings.TrimSpace(string(label[1:]))] = struct{ critical, plot string }{string(label[0]), parts[1]}
	}
	return rows
}

// TestTimelineTextRows reads the diamond's rows back: which are critical,
// and the characters each row's plot holds (outcomes, gap, markers).
func TestTimelineTextRows(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, TimelineText(&b, diamond(), TextOptions{Width: 120}))
	rows := timelineRows(t, b.String())
	require.Len(t, rows, 4)
	for label, want := range map[string]struct {
		critical string
		has      []string
		hasNot   []string
	}{
		"✓ fetch sources":                {"*", []string{"█"}, []string{"┈", "✗"}},
		"✓ build":                        {"*", []string{"✗", "█", "↻"}, []string{"┈"}},
		"✓ lint the whole tree with ev…": {" ", []string{"░", "┈", "!", "█"}, nil},
		"▶ package":                      {"*", []string{"▒", "┈", "?", "✔"}, []string{"█"}},
	} {
		row, ok := rows[label]
		require.True(t, ok, "no row %q in\n%s", label, b.String())
		assert.Equal(t, want.critical, row.critical, "critical mark of %q", label)
		for _, s := range want.has {
			assert.Contains(t, row.plot, s, "row %q", label)
		}
		for _, s := range want.hasNot {
			assert.NotContains(t, row.plot, s, "row %q", label)
		}
	}
	assert.Contains(t, b.String(), "critical path (1h00m): fetch sources → build ×2 → package")

	// Without GapAfter no gap is drawn.
	p := diamond()
	p.GapAfter = 0
	b.Reset()
	require.NoError(t, TimelineText(&b, p, TextOptions{Width: 120}))
	for label, row := range timelineRows(t, b.String()) {
		assert.NotContains(t, row.plot, "┈", "row %q", label)
	}
}

// TestTimelineTextBars: each bar starts in the column of its start and
// ends in the column of its end, on a time axis of one minute a column.
func TestTimelineTextBars(t *testing.T) {
	p := Project{
		Tasks: []Task{{ID: "a", Title: "a", Status: TaskDone}},
		Runs:  []Run{run("a1", "a", RunFailed, 0, 10), run("a2", "a", RunSucceeded, 20, 30), run("a3", "a", RunCancelled, 40, 60)},
	}
	// 60 minutes in 60 columns: width = 1 + label (3) + 2 + 60.
	var b bytes.Buffer
	require.NoError(t, TimelineText(&b, p, TextOptions{Width: 66}))
	rows := timelineRows(t, b.String())
	require.Contains(t, rows, "✓ a")
	want := strings.Repeat("✗", 10) + strings.Repeat(" ", 10) + strings.Repeat("█", 10) + strings.Repeat(" ", 10) + strings.Repeat("─", 20)
	assert.Equal(t, want, rows["✓ a"].plot)
}

// TestTimelineTextNow: when every run has ended, the axis still runs to
// Now, so the idle time since shows.
func TestTimelineTextNow(t *testing.T) {
	p := Project{
		Tasks: []Task{{ID: "a", Title: "a", Status: TaskDone}},
		Runs:  []Run{run("a1", "a", RunSucceeded, 0, 30)},
		Now:   at(60),
	}
	var b bytes.Buffer
	require.NoError(t, TimelineText(&b, p, TextOptions{Width: 66}))
	assert.Equal(t, strings.Repeat("█", 30)+strings.Repeat(" ", 30), timelineRows(t, b.String())["✓ a"].plot)
}

func TestTimelineTextEmpty(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, TimelineText(&b, Project{Name: "idle", Tasks: []Task{{ID: "a"}}}, TextOptions{}))
	assert.Equal(t, "idle: 0 runs of 1 task, nothing to draw yet\n", b.String())
}

func TestRunGaps(t *testing.T) {
	r := Run{Start: at(0), Beats: beats(2, 10, 11, 20)}
	assert.Equal(t, []interval{{at(2), at(10)}, {at(11), at(20)}}, runGaps(r, at(21), 5*time.Minute), "between beats")
	assert.Equal(t, []interval{{at(2), at(10)}, {at(11), at(20)}, {at(20), at(30)}}, runGaps(r, at(30), 5*time.Minute), "the last beat to the end")
	assert.Equal(t, []interval{{at(0), at(9)}}, runGaps(Run{Start: at(0), Beats: beats(9)}, at(10), 5*time.Minute), "the start to the first beat")
	assert.Equal(t, []interval{{at(0), at(10)}}, runGaps(Run{Start: at(0)}, at(10), 5*time.Minute), "no beat at all")
	assert.Empty(t, runGaps(Run{Start: at(0), Beats: beats(5)}, at(10), 5*time.Minute), "exactly GapAfter is no gap")
	assert.Empty(t, runGaps(r, at(30), 0), "GapAfter 0 draws none")
	assert.Equal(t, []interval{{at(2), at(10)}}, runGaps(Run{Start: at(0), Beats: beats(10, 2, 12)}, at(12), 5*time.Minute), "beats out of order")
}

func TestTicks(t *testing.T) {
	tks := ticks(at(3), at(63), time.UTC, 7)
	var labels []string
	for _, tk := range tks {
		labels = append(labels, tk.label)
	}
	assert.Equal(t, []string{"10:10", "10:20", "10:30", "10:40", "10:50", "11:00"}, labels)

	// Across midnight the day is named.
	night := time.Date(2025, 3, 1, 22, 0, 0, 0, time.UTC)
	labels = labels[:0]
	for _, tk := range ticks(night, night.Add(4*time.Hour), time.UTC, 5) {
		labels = append(labels, tk.label)
	}
	assert.Equal(t, []string{"22:00", "23:00", "Mar 2", "01:00", "02:00"}, labels)

	for _, span := range []time.Duration{time.Second, 90 * time.Second, 7 * time.Hour, 50 * time.Hour, 400 * 24 * time.Hour, 30 * 365 * 24 * time.Hour} {
		for _, most := range []int{1, 3, 10} {
			tks := ticks(at(0), at(0).Add(span), time.UTC, most)
			assert.LessOrEqual(t, len(tks), most, "span %v", span)
			for k, tk := range tks {
				assert.False(t, tk.at.Before(at(0)) || tk.at.After(at(0).Add(span)), "span %v: tick %v outside", span, tk.at)
				if k > 0 {
					assert.True(t, tk.at.After(tks[k-1].at))
				}
			}
		}
	}
}

func TestDurText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 42 * time.Second: "42s", 7*time.Minute + 5*time.Second: "7m05s",
		2*time.Hour + 5*time.Minute: "2h05m", 76 * time.Hour: "3d04h",
		12 * time.Millisecond: "12ms", 999 * time.Millisecond: "999ms", 1400 * time.Millisecond: "1s",
	} {
		assert.Equal(t, want, durText(d))
	}
}

func TestTimelineSVG(t *testing.T) {
	projectMarker := diamond()
	projectMarker.Markers = append(projectMarker.Markers, Marker{At: at(50), Kind: MarkerApprovalAsked})
	for _, p := range []Project{diamond(), randomProject(6, 40, 3, 8), hostileProject(), projectMarker} {
		var b bytes.Buffer
		require.NoError(t, TimelineSVG(&b, p))
		root := parseSVG(t, b.Bytes())
		assertStandalone(t, root)

		critical := map[string]bool{}
		for _, id := range CriticalPath(p) {
			critical[id] = true
		}
		require.NotEmpty(t, critical)
		bars := root.find("rect", "bar")
		require.Len(t, bars, len(p.Runs), "one bar per run")
		byRun := map[string]xnode{}
		for _, bar := range bars {
			byRun[bar.attr("data-run-id")] = bar
		}
		for _, r := range p.Runs {
			bar, ok := byRun[r.ID]
			require.True(t, ok, "no bar for run %q", r.ID)
			assert.Equal(t, r.TaskID, bar.attr("data-task-id"))
			assert.Contains(t, bar.classes(), "run-"+statusWord(r.Status, runStatuses))
			assert.Equal(t, critical[r.ID], bar.hasClass("critical"), "run %s: critical class", r.ID)
		}

		gaps := 0
		tl := buildTimeline(p)
		for i := range p.Runs {
			gaps += len(tl.gaps[i])
		}
		drawn := 0
		for _, g := range root.find("rect", "gap") {
			if !g.hasClass("swatch") {
				drawn++
				assert.NotEmpty(t, g.attr("data-run-id"))
			}
		}
		assert.Equal(t, gaps, drawn, "one gap element per heartbeat gap")

		markers := root.find("", "marker")
		require.Len(t, markers, len(p.Markers), "one element per marker")
		kinds := map[string]int{}
		for _, m := range p.Markers {
			kinds["marker-"+kindWord(m.Kind)]++
		}
		for _, m := range markers {
			require.Len(t, m.classes(), 2, "class %q", m.attr("class"))
			kinds[m.classes()[1]]--
		}
		for k, n := range kinds {
			assert.Zero(t, n, "markers of class %s", k)
		}
		assert.GreaterOrEqual(t, len(root.find("line", "tick")), 2, "a time axis with ticks")
		assert.Len(t, root.find("text", "tick-label"), len(root.find("line", "tick")))
	}
}

// TestTimelineSVGGeometry: on the diamond (an hour on 880 pixels), bars
// sit where their times are, the running one reaches the line at Now, and
// each row holds its own task's bars.
func TestTimelineSVGGeometry(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, TimelineSVG(&b, diamond()))
	root := parseSVG(t, b.Bytes())
	num := func(n xnode, a string) int {
		v, err := strconv.Atoi(n.attr(a))
		require.NoError(t, err, "%s=%q", a, n.attr(a))
		return v
	}
	plotX := margin + tlLabelW + 10
	x := func(min int) int { return plotX + min*tlPlotW/60 }
	bars := map[string]xnode{}
	for _, bar := range root.find("rect", "bar") {
		bars[bar.attr("data-run-id")] = bar
	}
	for _, r := range diamond().Runs {
		end := r.End
		if end.IsZero() {
			end = at(60)
		}
		bar := bars[r.ID]
		assert.Equal(t, x(int(r.Start.Sub(t0).Minutes())), num(bar, "x"), "run %s starts", r.ID)
		assert.Equal(t, x(int(end.Sub(t0).Minutes())), num(bar, "x")+num(bar, "width"), "run %s ends", r.ID)
	}
	now := root.find("line", "now")
	require.Len(t, now, 1)
	assert.Equal(t, x(60), num(now[0], "x1"))
	assert.Equal(t, num(bars["b1"], "y"), num(bars["b2"], "y"), "a task's runs share its row")
	assert.Less(t, num(bars["a1"], "y"), num(bars["b1"], "y"), "rows in task order")
	assert.Less(t, num(bars["b1"], "y"), num(bars["c1"], "y"))
}

// TestTimelineSVGMarkerRows: a marker sits on its task's row, else on its
// run's task's row, else on the project's row, drawn first.
func TestTimelineSVGMarkerRows(t *testing.T) {
	p := Project{
		Tasks: []Task{{ID: "a", Title: "a"}, {ID: "b", Title: "b"}},
		Runs:  []Run{run("a1", "a", RunSucceeded, 0, 10), run("b1", "b", RunSucceeded, 10, 20)},
		Markers: []Marker{
			{TaskID: "b", RunID: "a1", At: at(5), Kind: MarkerRetry}, // the task wins
			{RunID: "a1", At: at(5), Kind: MarkerStale},
			{At: at(15), Kind: MarkerApprovalAsked},
		},
	}
	var b bytes.Buffer
	require.NoError(t, TimelineSVG(&b, p))
	root := parseSVG(t, b.Bytes())
	rowMid := map[string]int{} // task ID → the middle of its bars
	for _, bar := range root.find("rect", "bar") {
		y, _ := strconv.Atoi(bar.attr("y"))
		rowMid[bar.attr("data-task-id")] = y + tlBarH/2
	}
	markerMid := map[string]int{}
	for _, m := range root.find("", "marker") {
		var x, y int
		_, err := fmt.Sscanf(m.attr("d"), "M%d,%d", &x, &y)
		require.NoError(t, err)
		markerMid[m.classes()[1]] = y + 7
	}
	assert.Equal(t, rowMid["b"], markerMid["marker-retry"])
	assert.Equal(t, rowMid["a"], markerMid["marker-stale"])
	assert.Equal(t, rowMid["a"]-tlRowH, markerMid["marker-approval_asked"], "the project's row, above the first task's")
}

func TestTimelineSVGEscapes(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, TimelineSVG(&b, hostileProject()))
	root := parseSVG(t, b.Bytes())
	assert.Empty(t, root.find("img", ""))
	assert.Empty(t, root.find("script", ""))
	assert.Contains(t, root.allText(), `<img src=x onerror=alert(1)>`)
	assert.NotEmpty(t, root.find("", "marker-_weird_kind_"), "an unknown kind is made a class word")
	var ids []string
	for _, bar := range root.find("rect", "bar") {
		ids = append(ids, bar.attr("data-task-id"))
	}
	assert.Contains(t, ids, `"><script>alert(1)</script>`)
}

func TestTimelineSVGEmpty(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, TimelineSVG(&b, Project{Name: "idle"}))
	root := parseSVG(t, b.Bytes())
	assert.Empty(t, root.find("rect", "bar"))
	assert.Contains(t, root.allText(), "nothing to draw yet")
}
