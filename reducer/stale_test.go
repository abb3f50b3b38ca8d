package reducer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// TestStaleRuns checks the stale window: a run is stale only when its last
// heartbeat (or its start, without one) is strictly more than window
// seconds before now. MarkStale must mark exactly the runs StaleRuns names.
func TestStaleRuns(t *testing.T) {
	at := func(c reducer.Command, now int64) reducer.Command { return withNow(c, now) }
	oneRun := cmds(add("a", 1), at(start("a", "r1"), 1000))
	cases := []struct {
		name   string
		setup  []reducer.Command
		now    int64
		window int64
		want   []string
	}{
		{"no heartbeat, exactly the window after start: not stale", oneRun, 1300, 300, nil},
		{"no heartbeat, one second past the window: stale", oneRun, 1301, 300, []string{"r1"}},
		{"heartbeat resets: window past start but not past the heartbeat", append(oneRun, at(beat("", "r1"), 1200)), 1301, 300, nil},
		{"heartbeat resets: exactly the window after it: not stale", append(oneRun, at(beat("", "r1"), 1200)), 1500, 300, nil},
		{"heartbeat resets: one second past the window after it: stale", append(oneRun, at(beat("", "r1"), 1200)), 1501, 300, []string{"r1"}},
		{"run-and-task heartbeat resets", append(oneRun, at(beat("a", "r1"), 1200)), 1500, 300, nil},
		{"progress counts as a heartbeat", append(oneRun, at(progress("r1", "x"), 1200)), 1500, 300, nil},
		{"progress counts as a heartbeat, one second past", append(oneRun, at(progress("r1", "x"), 1200)), 1501, 300, []string{"r1"}},
		{"task-only heartbeat does not keep the run alive", append(oneRun, at(beat("a", ""), 1200)), 1301, 300, []string{"r1"}},
		{"project heartbeat does not keep the run alive", append(oneRun, at(beat("", ""), 1200)), 1301, 300, []string{"r1"}},
		{"window 0: the same second is not stale", oneRun, 1000, 0, nil},
		{"window 0: one second later is stale", oneRun, 1001, 0, []string{"r1"}},
		{"a finished run is never stale", append(oneRun, at(finish("r1", cancelled), 1100)), 9000, 300, nil},
		{"a stale run is not reported again", append(oneRun, at(reducer.MarkStale{Project: projID, Window: 300}, 1400)), 9000, 300, nil},
		{"no runs", cmds(add("a", 0)), 9000, 300, nil},
		{"several runs: only the silent ones, in start order",
			cmds(add("a", 0), add("b", 0), add("c", 0),
				at(start("a", "r1"), 1000), at(start("b", "r2"), 1010), at(start("c", "r3"), 1020), at(beat("", "r2"), 1250)),
			1321, 300, []string{"r1", "r3"}},
		{"several runs: one second earlier only the first", cmds(add("a", 0), add("b", 0), add("c", 0),
			at(start("a", "r1"), 1000), at(start("b", "r2"), 1010), at(start("c", "r3"), 1020), at(beat("", "r2"), 1250)),
			1320, 300, []string{"r1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.do(baseProject)
			l.do(tc.setup...)
			p := l.project()
			assert.Equal(t, tc.want, reducer.StaleRuns(p, tc.now, tc.window))

			evs, err := l.s.decide(reducer.MarkStale{Project: projName, Window: tc.window, Now: tc.now})
			require.NoError(t, err)
			var marked []string
			for _, e := range evs {
				require.IsType(t, reducer.RunStaleMarked{}, e.Body)
				marked = append(marked, e.Body.(reducer.RunStaleMarked).RunID)
				assert.Equal(t, tc.now, e.Time)
				assert.Equal(t, projID, e.ProjectID)
			}
			assert.Equal(t, tc.want, marked, "MarkStale marks what StaleRuns names")
		})
	}
}
