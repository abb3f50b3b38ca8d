package reducer_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		"task b (beta) cannot progress: it failed after 2 attempts: its last run finished failed, and its retry budget of 1 retry is spent [event 12]",
		"task c (gamma) cannot progress: its run went silent and was marked stale; it can be started again [event 14]",
		"task d (delta) cannot progress: it is blocked on an external condition [event 15]",
	}, reducer.Evidence(l.project()))

	// Root causes through dependencies: f waits on the failed b, g on f;
	// h waits on the running e and can progress; i was given up by the
	// owner; j waits on the blocked d; k waits on g and j, so on b and d.
	l.do(
		reducer.AddTask{Project: projID, TaskID: "f", Title: "phi", DependsOn: []string{"a", "b"}},
		reducer.AddTask{Project: projID, TaskID: "g", Title: "chi", DependsOn: []string{"f"}},
		reducer.AddTask{Project: projID, TaskID: "h", Title: "eta", DependsOn: []string{"e"}},
		reducer.AddTask{Project: projID, TaskID: "i", Title: "iota"},
		upd("i", failed),
		reducer.AddTask{Project: projID, TaskID: "j", Title: "kappa", DependsOn: []string{"d"}},
		reducer.AddTask{Project: projID, TaskID: "k", Title: "lambda", DependsOn: []string{"h", "g", "j"}},
	)
	notes := reducer.Evidence(l.project())
	assert.Equal(t, []string{
		"task f (phi) cannot progress: it waits on b (beta), which failed [event 12]",
		"task g (chi) cannot progress: it waits on b (beta), which failed [event 12], through f (phi)",
		"task i (iota) cannot progress: the owner marked it failed [event 23]",
		"task j (kappa) cannot progress: it waits on d (delta), which is blocked [event 15]",
		"task k (lambda) cannot progress: it waits on b (beta), which failed [event 12], through g (chi); on d (delta), which is blocked [event 15], through j (kappa)",
	}, notes[5:])
}

// TestEvidenceSingular pins the singular forms, and says when a failure
// was a run that went silent rather than one that finished failed.
func TestEvidenceSingular(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, reducer.AddTask{Project: projID, TaskID: "a", Title: "alpha"}, start("a", "r1"), finish("r1", runFailed))
	assert.Equal(t, []string{
		"0/1 tasks done",
		"1 run: 0 running, 0 succeeded, 1 failed, 0 cancelled, 0 stale",
		"task a (alpha) cannot progress: it failed after 1 attempt: its last run finished failed, and no retry was allowed [event 4]",
	}, reducer.Evidence(l.project()))

	l = newLedger(t)
	l.do(baseProject, reducer.AddTask{Project: projID, TaskID: "a", Title: "alpha", MaxRetries: 2},
		start("a", "r1"), markStale(), start("a", "r2"), finish("r2", runFailed), start("a", "r3"), markStale())
	assert.Equal(t, []string{
		"0/1 tasks done",
		"3 runs: 0 running, 0 succeeded, 1 failed, 0 cancelled, 2 stale",
		"task a (alpha) cannot progress: it failed after 3 attempts: its last run went silent and was marked stale, and its retry budget of 2 retries is spent [event 8]",
	}, reducer.Evidence(l.project()))
}

// TestEvidenceNamesEveryCause: a task held by several root causes names
// each (up to MaxCausesNamed) with the dependency it waits through, then
// counts the rest; the same cause reached through two branches is one.
func TestEvidenceNamesEveryCause(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject)
	var deps []string
	for i := range 5 {
		id := fmt.Sprintf("x%d", i)
		l.do(reducer.AddTask{Project: projID, TaskID: id, Title: "root " + id}, upd(id, failed))
		deps = append(deps, id)
	}
	// Two branches over the same root: one cause, not two.
	l.do(add("m", 0, "x0"), add("n", 0, "x0"), add("top2", 0, "m", "n"))
	l.do(add("both", 0, "x1", "x0"), add("all", 0, deps...))
	notes := reducer.Evidence(l.project())
	assert.Equal(t, []string{
		"task m (task m) cannot progress: it waits on x0 (root x0), which failed [event 3]",
		"task n (task n) cannot progress: it waits on x0 (root x0), which failed [event 3]",
		"task top2 (task top2) cannot progress: it waits on x0 (root x0), which failed [event 3], through m (task m)",
		"task both (task both) cannot progress: it waits on x0 (root x0), which failed [event 3]; on x1 (root x1), which failed [event 5]",
		"task all (task all) cannot progress: it waits on x0 (root x0), which failed [event 3]; on x1 (root x1), which failed [event 5]; on x2 (root x2), which failed [event 7]; and on 2 more tasks that cannot progress",
	}, notes[6:])
}

// chain adds n tasks t0 … t(n-1), each depending on the one before, and
// fails t0.
func chain(l *ledger, n int) {
	l.do(reducer.AddTask{Project: projID, TaskID: "t0", Title: "first"}, upd("t0", failed))
	for i := 1; i < n; i++ {
		l.do(reducer.AddTask{Project: projID, TaskID: fmt.Sprintf("t%d", i), Title: fmt.Sprintf("step %d", i), DependsOn: []string{fmt.Sprintf("t%d", i-1)}})
	}
}

// diamonds adds layers of diamonds over a bottom task "b0": each layer is
// two tasks depending on the layer's base and a top depending on both,
// which is the next layer's base.
func diamonds(l *ledger, layers int) {
	l.do(reducer.AddTask{Project: projID, TaskID: "b0", Title: "bottom"})
	base := "b0"
	for i := range layers {
		left, right, top := fmt.Sprintf("l%d", i), fmt.Sprintf("r%d", i), fmt.Sprintf("b%d", i+1)
		l.do(add(left, 0, base), add(right, 0, base), add(top, 0, left, right))
		base = top
	}
}

// TestEvidenceBounded: on a chain of 5,000 tasks behind a failed first
// task, every other task names that root cause and the task before it,
// in a note of bounded size (no path to the root), and on a deep DAG of
// diamonds every task names its one root once.
func TestEvidenceBounded(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject)
	const n = 5000
	chain(l, n)
	notes := reducer.Evidence(l.project())
	require.Len(t, notes, 1+n, "the count, then a note per task")
	size := 0
	for i, note := range notes[2:] {
		size += len(note)
		want := fmt.Sprintf("task t%d (step %d) cannot progress: it waits on t0 (first), which failed [event 3]", i+1, i+1)
		if i > 0 {
			want += fmt.Sprintf(", through t%d (step %d)", i, i)
		}
		require.Equal(t, want, note)
	}
	assert.Less(t, size/(n-1), 120, "bytes per held task")

	l = newLedger(t)
	l.do(baseProject)
	diamonds(l, 40)
	l.do(start("b0", "run"))
	assert.Equal(t, []string{"0/121 tasks done", "1 run: 1 running, 0 succeeded, 0 failed, 0 cancelled, 0 stale"},
		reducer.Evidence(l.project()), "nothing is stuck while the bottom task runs")
	l.do(finish("run", runFailed))
	notes = reducer.Evidence(l.project())
	require.Len(t, notes, 2+121)
	for _, note := range notes[3:] {
		assert.Contains(t, note, "it waits on b0 (bottom), which failed")
		assert.Equal(t, 1, strings.Count(note, "b0 (bottom)"), note)
	}
}

// BenchmarkEvidence measures the report's evidence on a 5,000-task chain
// behind a failed first task and on a 40-layer DAG of diamonds whose
// bottom task runs: its time, and its size in bytes.
func BenchmarkEvidence(b *testing.B) {
	for _, bc := range []struct {
		name  string
		build func(l *ledger)
	}{
		{"chain5000", func(l *ledger) { chain(l, 5000) }},
		{"diamonds40", func(l *ledger) { diamonds(l, 40); l.do(start("b0", "run")) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := newLedger(b)
			l.do(baseProject)
			bc.build(l)
			p := l.project()
			b.ResetTimer()
			size := 0
			for range b.N {
				size = 0
				for _, n := range reducer.Evidence(p) {
					size += len(n)
				}
			}
			b.ReportMetric(float64(size), "bytes")
		})
	}
}
