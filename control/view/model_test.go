package view_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/render"
	"scv/control/view"
	"scv/reducer"
)

func tm(min int) time.Time { return time.UnixMilli(at(min)).In(time.UTC) }

// TestModelDiamond: the drawing's input of a project built by the
// reducer: every task with its runs as attempts, every run from its start
// to its end (running: no end), its beats from its run_progress and
// heartbeat events, a marker for the stale mark, each retry and each
// approval step, the gap threshold at half the stale window, and nothing
// from events of another project, of unknown kinds, or that do not parse.
func TestModelDiamond(t *testing.T) {
	h := diamond(t, "build")
	now := tm(20)
	got := view.Model(h.p, h.rows, view.Options{Now: now, StaleAfter: 5 * time.Minute})
	want := render.Project{
		ID: pid, Name: "diamond", Now: now, GapAfter: 150 * time.Second,
		Tasks: []render.Task{
			{ID: "a", Title: "fetch sources", Status: "done", DependsOn: []string{}, Attempts: 1},
			{ID: "b", Title: "build", Status: "done", DependsOn: []string{"a"}, Attempts: 2, Retries: 1, MaxRetries: 1},
			{ID: "c", Title: "lint", Status: "done", DependsOn: []string{"a"}, Attempts: 2, Retries: 1, MaxRetries: 1},
			{ID: "d", Title: "package", Status: "running", DependsOn: []string{"b", "c"}, Attempts: 1},
		},
		Runs: []render.Run{
			{ID: "a1", TaskID: "a", Agent: "codex", Status: "succeeded", Attempt: 1, Start: tm(1), End: tm(4), Beats: []time.Time{tm(2), tm(3)}},
			{ID: "b1", TaskID: "b", Agent: "codex", Status: "failed", Attempt: 1, Start: tm(5), End: tm(6)},
			{ID: "c1", TaskID: "c", Agent: "claude", Status: "stale", Attempt: 1, Start: tm(5), End: tm(12), Beats: []time.Time{tm(6)}},
			{ID: "b2", TaskID: "b", Agent: "codex", Status: "succeeded", Attempt: 2, Start: tm(7), End: tm(9)},
			{ID: "c2", TaskID: "c", Agent: "claude", Status: "succeeded", Attempt: 2, Start: tm(13), End: tm(15)},
			{ID: "d1", TaskID: "d", Agent: "codex", Status: "running", Attempt: 1, Start: tm(16)},
		},
		Markers: []render.Marker{
			{TaskID: "b", RunID: "b2", At: tm(7), Kind: render.MarkerRetry, Label: "attempt 2"},
			{TaskID: "c", RunID: "c2", At: tm(13), Kind: render.MarkerRetry, Label: "attempt 2"},
			{TaskID: "c", RunID: "c1", At: tm(12), Kind: render.MarkerStale, Label: "marked stale: silent for over 5m0s"},
			{TaskID: "d", At: tm(17), Kind: render.MarkerApprovalAsked, Label: "approval asked (question Q1)"},
			{TaskID: "d", At: tm(18), Kind: render.MarkerApprovalYes, Label: "approved (question Q1)"},
		},
	}
	assert.Equal(t, want, got)
	// c2 ended (15) after b2 (9), so c's attempts decided when d started.
	assert.Equal(t, []string{"a1", "c1", "c2", "d1"}, render.CriticalPath(got))
}

// TestModelWithoutEvents: without events the bars are there, with no
// beats and no markers but the retries; zero StaleAfter draws no gaps.
func TestModelWithoutEvents(t *testing.T) {
	h := diamond(t, "build")
	got := view.Model(h.p, nil, view.Options{})
	require.Len(t, got.Runs, 6)
	for _, r := range got.Runs {
		assert.Empty(t, r.Beats, r.ID)
	}
	assert.Zero(t, got.GapAfter)
	require.Len(t, got.Markers, 2)
	assert.Equal(t, render.MarkerRetry, got.Markers[0].Kind)
	assert.True(t, got.Runs[5].End.IsZero(), "d1 is running")
}

// TestModelApprovalOutcomes: each outcome gets its marker; an outcome of
// a later release still gets one, of a generic kind.
func TestModelApprovalOutcomes(t *testing.T) {
	for outcome, kind := range map[string]string{
		"yes": render.MarkerApprovalYes, "no": render.MarkerApprovalNo, "expired": render.MarkerApprovalExpired,
		"withdrawn": render.MarkerApprovalExpired, "maybe": "approval_decided",
	} {
		h := diamond(t, "build")
		h.rows = h.rows[:len(h.rows)-1]
		h.row(19, pid, "approval_decided", `{"question_id":"Q1","task_id":"d","outcome":"`+outcome+`"}`)
		got := view.Model(h.p, h.rows, view.Options{})
		last := got.Markers[len(got.Markers)-1]
		assert.Equal(t, kind, last.Kind, outcome)
		assert.Equal(t, "d", last.TaskID, outcome)
	}
}

// TestModelArchived: an archived project is finished, so its drawing ends
// at its last event whatever now is: its timeline does not run to now and
// grow each time it is drawn.
func TestModelArchived(t *testing.T) {
	h := &history{t: t}
	h.do(0, reducer.CreateProject{ProjectID: pid, Name: "done", Workspace: "/work/done"})
	h.do(0, reducer.AddTask{Project: pid, TaskID: "a", Title: "build"})
	h.do(1, reducer.StartRun{Project: pid, TaskID: "a", RunID: "a1", Agent: "codex"})
	h.do(4, reducer.FinishRun{Project: pid, RunID: "a1", Status: reducer.RunSucceeded})
	active := view.Model(h.p, h.rows, view.Options{Now: tm(5)})
	assert.Equal(t, tm(5), active.Now, "a project not archived runs to now")
	h.do(6, reducer.ArchiveProject{Project: pid})

	var drawn []string
	for _, now := range []time.Time{tm(60), tm(600)} {
		m := view.Model(h.p, h.rows, view.Options{Now: now})
		assert.Equal(t, tm(6), m.Now, "the archive is its last event")
		var b bytes.Buffer
		require.NoError(t, render.TimelineText(&b, m, render.TextOptions{}))
		drawn = append(drawn, b.String())
	}
	assert.Contains(t, drawn[0], "10:01:00 → 10:06:00 UTC (5m00s)")
	assert.Equal(t, drawn[0], drawn[1], "drawn later, the same timeline")
}

// TestShortRun: a run shorter than a second has its length in the runs
// table and on the critical path, in milliseconds, not "—" or 0s.
func TestShortRun(t *testing.T) {
	h := &history{t: t}
	h.do(0, reducer.CreateProject{ProjectID: pid, Name: "quick", Workspace: "/work/quick"})
	h.do(0, reducer.AddTask{Project: pid, TaskID: "a", Title: "build"})
	start := at(1)
	for _, c := range []reducer.Command{
		reducer.StartRun{Project: pid, TaskID: "a", RunID: "a1", Agent: "codex"},
		reducer.FinishRun{Project: pid, RunID: "a1", Status: reducer.RunSucceeded},
	} {
		evs, err := reducer.Decide(h.p, reducer.Stamp(c, start))
		require.NoError(t, err)
		h.p = reducer.Evolve(h.p, evs[0])
		start += 40 // the run lasts 40 ms
	}
	v, err := view.Build(h.p, nil, view.Options{Now: tm(2)})
	require.NoError(t, err)
	require.Len(t, v.Runs, 1)
	assert.Equal(t, "40ms", view.Duration(v.Runs[0].Duration))
	assert.Contains(t, string(v.Timeline), "critical path (40ms): build")
}

// TestShellQuote: a word of the commands the pages and the log show is
// quoted when a shell would split or expand it.
func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/run/user/1000/scv/daemon.sock": "/run/user/1000/scv/daemon.sock",
		"/tmp/my dir/d.sock":             "'/tmp/my dir/d.sock'",
		"/tmp/it's/$HOME.sock":           `'/tmp/it'\''s/$HOME.sock'`,
		"":                               "''",
	} {
		assert.Equal(t, want, view.ShellQuote(in), in)
	}
}
