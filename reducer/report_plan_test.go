package reducer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"scv/reducer"
)

// TestEvidencePlan: the report's notes of the plan: each epic with its
// children's progress, each task found during a run with the run and its
// task; an epic failed with a child is a root cause that names the child,
// and holds up the tasks that depend on it.
func TestEvidencePlan(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject,
		reducer.AddTask{Project: projID, TaskID: "e", Title: "release"},
		reducer.AddTask{Project: projID, TaskID: "a", Title: "alpha", Parent: "e"},
		reducer.AddTask{Project: projID, TaskID: "b", Title: "beta", Parent: "e"},
		reducer.AddTask{Project: projID, TaskID: "c", Title: "gamma", Parent: "e"},
		reducer.AddTask{Project: projID, TaskID: "d", Title: "announce", DependsOn: []string{"e"}},
		start("a", "r1"),
		reducer.AddTask{Project: projID, TaskID: "f", Title: "found", DiscoveredFrom: "r1"},
		finish("r1", succeeded),
		start("b", "r2"),
	)
	assert.Equal(t, []string{
		"1/6 tasks done",
		"2 runs: 1 running, 1 succeeded, 0 failed, 0 cancelled, 0 stale",
		"epic e (release): 1/3 children done, 1 running",
		"task f (found) was found during run r1 of task a (alpha)",
	}, reducer.Evidence(l.project()))

	l.do(finish("r2", runFailed))
	notes := reducer.Evidence(l.project())
	assert.Contains(t, notes, "epic e (release): 1/3 children done, 1 failed")
	assert.Contains(t, notes, "epic e (release) cannot progress: its child b (beta) failed [event 11]")
	assert.Contains(t, notes, "task d (announce) cannot progress: it waits on e (release), which failed [event 11]")
}
