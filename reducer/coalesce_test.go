package reducer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// TestCoalescing: Decide journals a heartbeat only when the last journaled
// one of the same run (or task, or project) is at least Every old, and a
// coalesced heartbeat is accepted with no event and no change.
func TestCoalescing(t *testing.T) {
	const every = 100
	cases := []struct {
		name    string
		setup   []reducer.Command
		beat    reducer.RecordHeartbeat
		journal bool
	}{
		{name: "run: first heartbeat is journaled", setup: cmds(add("a", 0), start("a", "r1")),
			beat: reducer.RecordHeartbeat{Project: projID, RunID: "r1"}, journal: true},
		{name: "run: inside the interval", setup: cmds(add("a", 0), start("a", "r1"), withNow(beat("", "r1"), cmdNow-every+1)),
			beat: reducer.RecordHeartbeat{Project: projID, RunID: "r1"}, journal: false},
		{name: "run: exactly one interval later", setup: cmds(add("a", 0), start("a", "r1"), withNow(beat("", "r1"), cmdNow-every)),
			beat: reducer.RecordHeartbeat{Project: projID, RunID: "r1"}, journal: true},
		{name: "run: progress counts as the last heartbeat", setup: cmds(add("a", 0), start("a", "r1"), withNow(progress("r1", "x"), cmdNow-1)),
			beat: reducer.RecordHeartbeat{Project: projID, RunID: "r1"}, journal: false},
		{name: "run: another run's heartbeat does not count", setup: cmds(add("a", 0), add("b", 0), start("a", "r1"), start("b", "r2"), withNow(beat("", "r2"), cmdNow-1)),
			beat: reducer.RecordHeartbeat{Project: projID, RunID: "r1"}, journal: true},
		{name: "task: inside the interval of its own heartbeat", setup: cmds(add("a", 0), withNow(beat("a", ""), cmdNow-1)),
			beat: reducer.RecordHeartbeat{Project: projID, TaskID: "a"}, journal: false},
		{name: "task: first heartbeat", setup: cmds(add("a", 0), add("b", 0), withNow(beat("b", ""), cmdNow-1)),
			beat: reducer.RecordHeartbeat{Project: projID, TaskID: "a"}, journal: true},
		{name: "project: inside the interval of any heartbeat", setup: cmds(add("a", 0), withNow(beat("a", ""), cmdNow-1)),
			beat: reducer.RecordHeartbeat{Project: projID}, journal: false},
		{name: "project: past the interval", setup: cmds(add("a", 0), withNow(beat("a", ""), cmdNow-every-1)),
			beat: reducer.RecordHeartbeat{Project: projID}, journal: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.do(baseProject)
			l.do(tc.setup...)
			before := dumpState(l.s, projID)
			for _, e := range []int64{every, 0} {
				c := tc.beat
				c.Every, c.Now = e, cmdNow
				evs, err := l.s.decide(c)
				require.NoError(t, err)
				if e == 0 {
					assert.Len(t, evs, 1, "Every 0 journals every heartbeat")
					continue
				}
				if tc.journal {
					assert.Len(t, evs, 1)
				} else {
					assert.Empty(t, evs, "coalesced")
				}
			}
			assert.Equal(t, before, dumpState(l.s, projID), "Decide changed the state")
		})
	}
}

// TestProgressCoalescing: with Every, Decide journals a run's progress only
// when the run's last journaled progress or heartbeat is at least Every
// old; a coalesced one is accepted with no event and no change, and Every
// 0 journals every one. A run that is not running is refused either way.
func TestProgressCoalescing(t *testing.T) {
	const every = 100
	cases := []struct {
		name    string
		setup   []reducer.Command
		journal bool
	}{
		{name: "first progress", setup: cmds(add("a", 0), start("a", "r1")), journal: true},
		{name: "inside the interval of a progress", setup: cmds(add("a", 0), start("a", "r1"), withNow(progress("r1", "x"), cmdNow-every+1)), journal: false},
		{name: "inside the interval of a heartbeat", setup: cmds(add("a", 0), start("a", "r1"), withNow(beat("", "r1"), cmdNow-1)), journal: false},
		{name: "exactly one interval later", setup: cmds(add("a", 0), start("a", "r1"), withNow(progress("r1", "x"), cmdNow-every)), journal: true},
		{name: "another run's progress does not count", setup: cmds(add("a", 0), add("b", 0), start("a", "r1"), start("b", "r2"), withNow(progress("r2", "x"), cmdNow-1)), journal: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.do(baseProject)
			l.do(tc.setup...)
			before := dumpState(l.s, projID)
			for _, e := range []int64{every, 0} {
				c := progress("r1", "y")
				c.Every, c.Now = e, cmdNow
				evs, err := l.s.decide(c)
				require.NoError(t, err)
				switch {
				case e == 0:
					assert.Len(t, evs, 1, "Every 0 journals every progress")
				case tc.journal:
					assert.Len(t, evs, 1)
				default:
					assert.Empty(t, evs, "coalesced")
				}
			}
			assert.Equal(t, before, dumpState(l.s, projID), "Decide changed the state")
		})
	}
	t.Run("a finished run is refused", func(t *testing.T) {
		l := newLedger(t)
		l.do(baseProject)
		l.do(add("a", 0), start("a", "r1"), withNow(progress("r1", "x"), cmdNow-1), finish("r1", reducer.RunSucceeded))
		c := progress("r1", "y")
		c.Every, c.Now = every, cmdNow
		_, err := l.s.decide(c)
		assert.ErrorIs(t, err, reducer.ErrRunNotRunning, "fenced, coalesced or not")
	})
}
