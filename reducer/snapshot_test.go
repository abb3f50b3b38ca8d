package reducer_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// TestSnapshotPlusTailEqualsFullHistory: for random histories and every
// k, the state restored from a snapshot taken after event k and then fed
// the events after k encodes to exactly the bytes of the state folded from
// the whole history; and two folds of the same history encode alike.
func TestSnapshotPlusTailEqualsFullHistory(t *testing.T) {
	for seed := range uint64(30) {
		events := randomHistory(t, seed, 120)
		full := fold(t, events, 0)
		want := snapshotOf(t, full)
		require.Equal(t, want, snapshotOf(t, fold(t, events, 0)), "seed %d: two replays differ", seed)

		var prefix *reducer.Project
		for k, e := range events {
			prefix = reducer.Evolve(prefix, e)
			snap, err := reducer.Snapshot(prefix)
			require.NoError(t, err)
			restored, err := reducer.Restore(snap)
			require.NoError(t, err)
			for _, tail := range events[k+1:] {
				restored = reducer.Evolve(restored, tail)
			}
			got, err := reducer.Snapshot(restored)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "seed %d, snapshot after event %d", seed, k+1)
			q, _ := full.project(projID)
			assert.Equal(t, q.Phase(), restored.Phase())
			assert.Equal(t, q.Status(), restored.Status())
			assert.Equal(t, dumpProject(q), dumpProject(restored))
		}
	}
}

func snapshotOf(t *testing.T, s *world) []byte {
	t.Helper()
	p, ok := s.project(projID)
	require.True(t, ok)
	b, err := reducer.Snapshot(p)
	require.NoError(t, err)
	return b
}

// randomHistory decides random commands on one project and returns the
// events they caused, numbered.
func randomHistory(t *testing.T, seed uint64, n int) []reducer.Event {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	l := newLedger(t)
	l.do(baseProject)
	var tasks, runs []string
	for i := range n {
		l.now += int64(r.IntN(5000))
		var c reducer.Command
		pick := func(xs []string) string {
			if len(xs) == 0 {
				return "none"
			}
			return xs[r.IntN(len(xs))]
		}
		switch r.IntN(7) {
		case 0:
			id := "t" + string(rune('a'+i%26)) + string(rune('0'+i/26))
			var deps []string
			if len(tasks) > 0 && r.IntN(2) == 0 {
				deps = []string{pick(tasks)}
			}
			c = reducer.AddTask{Project: projID, TaskID: id, Title: id, DependsOn: deps, MaxRetries: uint32(r.IntN(3))}
			tasks = append(tasks, id)
		case 1:
			id := "r" + string(rune('a'+i%26)) + string(rune('0'+i/26))
			c = reducer.StartRun{Project: projID, TaskID: pick(tasks), RunID: id, Agent: "a"}
			runs = append(runs, id)
		case 2:
			c = reducer.ProgressRun{Project: projID, RunID: pick(runs), Progress: "p"}
		case 3:
			c = reducer.FinishRun{Project: projID, RunID: pick(runs), Status: []reducer.RunStatus{reducer.RunSucceeded, reducer.RunFailed, reducer.RunCancelled}[r.IntN(3)]}
		case 4:
			c = reducer.RecordHeartbeat{Project: projID, RunID: pick(runs)}
		case 5:
			c = reducer.MarkStale{Project: projID, Window: 3000}
		default:
			c = reducer.UpdateTask{Project: projID, TaskID: pick(tasks), Status: []reducer.TaskStatus{reducer.TaskBlocked, reducer.TaskReady, reducer.TaskDone, reducer.TaskFailed}[r.IntN(4)]}
		}
		c = withNow(c, l.now)
		evs, err := l.s.decide(c)
		if err != nil {
			continue
		}
		l.evolve(evs...)
	}
	return l.events
}

// TestSnapshotVersion1StillReads: a state without the owner's decisions
// encodes exactly as format 1 did (the new fields are left out), so a
// version 1 snapshot re-derives to its own bytes; one with them carries
// them through a restore.
func TestSnapshotVersion1StillReads(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 1), start("a", "r1"), progress("r1", "x"))
	b, err := reducer.Snapshot(l.project())
	require.NoError(t, err)
	for _, key := range []string{`"released"`, `"archived"`, `"approvals"`, `"approval"`} {
		assert.NotContains(t, string(b), key, "a field of format 2 in a state without it")
	}
	assert.True(t, reducer.ReadsSnapshot(1))
	assert.True(t, reducer.ReadsSnapshot(reducer.SnapshotVersion))
	assert.False(t, reducer.ReadsSnapshot(reducer.SnapshotVersion+1))

	l.do(finish("r1", succeeded), add("b", 0), ask("q1", "b"), decide("q1", reducer.ApprovalNo), ask("q2", ""))
	p := l.project()
	b, err = reducer.Snapshot(p)
	require.NoError(t, err)
	q, err := reducer.Restore(b)
	require.NoError(t, err)
	assert.Equal(t, dumpProject(p), dumpProject(q))
	assert.Equal(t, reducer.ProjectWaitingApproval, q.Status())
	again, err := reducer.Snapshot(q)
	require.NoError(t, err)
	assert.Equal(t, string(b), string(again))
	a, ok := q.Approval("q1")
	require.True(t, ok)
	assert.Equal(t, reducer.ApprovalNo, a.Outcome)
}

// TestEvidenceOfApprovals: a task gated by a pending approval is a root
// cause, and the tasks behind it name it.
func TestEvidenceOfApprovals(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 0), add("b", 0, "a"), ask("q1", "a"))
	notes := reducer.Evidence(l.project())
	assert.Equal(t, []string{
		"0/2 tasks done",
		`task a (task a) cannot progress: it waits for the owner's answer to approval q1 ("ship a?") [event 4]`,
		"task b (task b) cannot progress: it waits on a (task a), which waits for approval q1 [event 4]",
		`approval q1 ("ship a?") of task a (task a), asked by agent: pending [event 4]`,
	}, notes)

	// Pending ones first, then the decided, each with its outcome.
	l.do(decide("q1", reducer.ApprovalNo), ask("q2", ""), decide("q2", reducer.ApprovalExpired), ask("q3", ""))
	notes = reducer.Evidence(l.project())
	assert.Equal(t, []string{
		`approval q3 ("ship a?"), asked by agent: pending [event 8]`,
		`approval q1 ("ship a?") of task a (task a), asked by agent: no, answered by owner [events 4, 5]`,
		`approval q2 ("ship a?"), asked by agent: expired, owner [events 6, 7]`,
	}, notes[len(notes)-3:])
}
