package reducer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"scv/reducer"
)

// TestPhaseAndStatus derives a project's phase and status (SPEC section 3)
// from the state that setup leaves behind.
func TestPhaseAndStatus(t *testing.T) {
	cases := []struct {
		name   string
		setup  []reducer.Command
		phase  reducer.Phase
		status reducer.ProjectStatus
	}{
		{"no tasks", nil, reducer.PhaseDiscovery, reducer.ProjectActive},
		{"tasks, no run started", cmds(add("a", 0), add("b", 0, "a")), reducer.PhasePlanning, reducer.ProjectActive},
		{"no run started, one task done by update", cmds(add("a", 0), add("b", 0), upd("a", done)),
			reducer.PhasePlanning, reducer.ProjectActive},
		{"a run is running", cmds(add("a", 0), add("b", 0), start("a", "r1")), reducer.PhaseImplementation, reducer.ProjectActive},
		{"a run is running after an earlier run finished", cmds(add("a", 1), start("a", "r1"), finish("r1", runFailed), start("a", "r2")),
			reducer.PhaseImplementation, reducer.ProjectActive},
		{"a run is running beside blocked tasks", cmds(add("a", 0), add("b", 0), upd("b", blocked), start("a", "r1")),
			reducer.PhaseImplementation, reducer.ProjectActive},
		{"a run is running, another task failed", cmds(add("a", 0), add("b", 0), upd("a", failed), start("b", "r1")),
			reducer.PhaseImplementation, reducer.ProjectFailed},
		{"a run failed, work left", cmds(add("a", 1), add("b", 0), start("a", "r1"), finish("r1", runFailed)),
			reducer.PhaseVerification, reducer.ProjectActive},
		{"a run succeeded, work left", cmds(add("a", 0), add("b", 0, "a"), start("a", "r1"), finish("r1", succeeded)),
			reducer.PhaseVerification, reducer.ProjectActive},
		{"a run was cancelled, work left", cmds(add("a", 0), start("a", "r1"), finish("r1", cancelled)),
			reducer.PhaseVerification, reducer.ProjectActive},
		{"the only run went stale", cmds(add("a", 1), start("a", "r1"), markStale()),
			reducer.PhaseVerification, reducer.ProjectActive},
		{"all tasks done by runs", cmds(add("a", 0), add("b", 0, "a"), start("a", "r1"), finish("r1", succeeded),
			start("b", "r2"), finish("r2", succeeded)), reducer.PhaseStaging, reducer.ProjectCompleted},
		{"all tasks done by updates, no run ever", cmds(add("a", 0), add("b", 0), upd("a", done), upd("b", done)),
			reducer.PhaseStaging, reducer.ProjectCompleted},
		{"all tasks done, by a run and by an update", cmds(add("a", 0), add("b", 0), start("a", "r1"), finish("r1", succeeded), upd("b", done)),
			reducer.PhaseStaging, reducer.ProjectCompleted},
		{"one ready task among blocked ones", cmds(add("a", 0), add("b", 0), upd("a", blocked)), reducer.PhasePlanning, reducer.ProjectActive},
		{"a stale task keeps the project active", cmds(add("a", 1), add("b", 0), upd("b", blocked), start("a", "r1"), markStale()),
			reducer.PhaseVerification, reducer.ProjectActive},
		{"all tasks blocked", cmds(add("a", 0), add("b", 0), upd("a", blocked), upd("b", blocked)),
			reducer.PhasePlanning, reducer.ProjectBlocked},
		{"pending behind a blocked task", cmds(add("a", 0), add("b", 0, "a"), upd("a", blocked)),
			reducer.PhasePlanning, reducer.ProjectBlocked},
		{"done and blocked, nothing movable", cmds(add("a", 0), add("b", 0), upd("a", done), upd("b", blocked)),
			reducer.PhasePlanning, reducer.ProjectBlocked},
		{"blocked after a cancelled run", cmds(add("a", 0), add("b", 0, "a"), start("a", "r1"), finish("r1", cancelled), upd("a", blocked)),
			reducer.PhaseVerification, reducer.ProjectBlocked},
		{"failed beats completed", cmds(add("a", 0), add("b", 0), upd("a", done), upd("b", failed)),
			reducer.PhasePlanning, reducer.ProjectFailed},
		{"failed beats blocked", cmds(add("a", 0), add("b", 0, "a"), upd("a", failed)), reducer.PhasePlanning, reducer.ProjectFailed},
		{"failed beats active", cmds(add("a", 0), add("b", 0), upd("a", failed)), reducer.PhasePlanning, reducer.ProjectFailed},
		{"failed by exhausted retries", cmds(add("a", 0), add("b", 0), start("a", "r1"), finish("r1", runFailed)),
			reducer.PhaseVerification, reducer.ProjectFailed},
		{"failed by a stale run without retries", cmds(add("a", 0), start("a", "r1"), markStale()),
			reducer.PhaseVerification, reducer.ProjectFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.do(baseProject)
			l.do(tc.setup...)
			p := l.project()
			assert.Equal(t, tc.phase, p.Phase(), "phase")
			assert.Equal(t, tc.status, p.Status(), "status")
		})
	}
}

// TestEvidence pins the report notes for a project with one task in each
// state that needs attention.
func TestEvidence(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject)
	assert.Equal(t, []string{"0/0 tasks done"}, reducer.Evidence(l.project()))

	l.do(
		reducer.AddTask{Project: projID, TaskID: "a", Title: "alpha"},
		reducer.AddTask{Project: projID, TaskID: "b", Title: "beta", MaxRetries: 1},
		reducer.AddTask{Project: projID, TaskID: "c", Title: "gamma", MaxRetries: 1},
		reducer.AddTask{Project: projID, TaskID: "d", Title: "delta"},
		reducer.AddTask{Project: projID, TaskID: "e", Title: "epsilon"},
		start("a", "r1"), finish("r1", succeeded),
		start("b", "r2"), finish("r2", runFailed), start("b", "r3"), finish("r3", runFailed),
		start("c", "r4"), markStale(),
		upd("d", blocked),
		start("e", "r5"), finish("r5", cancelled), start("e", "r6"),
	)
	assert.Equal(t, []string{
		"1/5 tasks done",
		"6 runs: 1 running, 1 succeeded, 2 failed, 1 cancelled, 1 stale",
		"task b (beta) cannot progress: it failed after 2 attempts, its retry budget spent (2 retries of 1 allowed) [event 12]",
		"task c (gamma) cannot progress: its run went silent (stale owner); it can be started again [event 14]",
		"task d (delta) cannot progress: it is blocked on an external condition [event 15]",
	}, reducer.Evidence(l.project()))

	// Root causes through dependencies: f waits on the failed b, g on f;
	// h waits on the running e and can progress; i was given up by the
	// owner; j waits on the blocked d.
	l.do(
		reducer.AddTask{Project: projID, TaskID: "f", Title: "phi", DependsOn: []string{"a", "b"}},
		reducer.AddTask{Project: projID, TaskID: "g", Title: "chi", DependsOn: []string{"f"}},
		reducer.AddTask{Project: projID, TaskID: "h", Title: "eta", DependsOn: []string{"e"}},
		reducer.AddTask{Project: projID, TaskID: "i", Title: "iota"},
		upd("i", failed),
		reducer.AddTask{Project: projID, TaskID: "j", Title: "kappa", DependsOn: []string{"d"}},
	)
	notes := reducer.Evidence(l.project())
	assert.Equal(t, []string{
		"task f (phi) cannot progress: it waits on b (beta), and that failed after 2 attempts, its retry budget spent (2 retries of 1 allowed) [event 12]",
		"task g (chi) cannot progress: it waits on f (phi), and that waits on b (beta), and that failed after 2 attempts, its retry budget spent (2 retries of 1 allowed) [event 12]",
		"task i (iota) cannot progress: the owner marked it failed [event 23]",
		"task j (kappa) cannot progress: it waits on d (delta), and that is blocked on an external condition [event 15]",
	}, notes[5:])
}

// TestEvidenceSingular pins the singular forms.
func TestEvidenceSingular(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, reducer.AddTask{Project: projID, TaskID: "a", Title: "alpha"}, start("a", "r1"), finish("r1", runFailed))
	assert.Equal(t, []string{
		"0/1 tasks done",
		"1 run: 0 running, 0 succeeded, 1 failed, 0 cancelled, 0 stale",
		"task a (alpha) cannot progress: it failed after 1 attempt, its retry budget spent (1 retries of 0 allowed) [event 4]",
	}, reducer.Evidence(l.project()))
}
