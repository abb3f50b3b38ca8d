package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// testLeases: a ledger-wide job has one holder at a time, whose term
// fences every write it makes for it; and the sweeps that run under it.
func testLeases(t *testing.T, h Harness) {
	ctx := context.Background()
	const ttl = 10 * time.Second

	t.Run("OneHolderAndItsTerm", func(t *testing.T) {
		t.Parallel()
		clk := newClock(1_800_000_000_000)
		e := newEnv(t, h)
		a := e.open(ledger.Options{Clock: clk.Now})
		b := e.open(ledger.Options{Clock: clk.Now}) // a second daemon on the same database

		la, held, err := a.AcquireLease(ctx, "sweeper", "a", ttl)
		require.NoError(t, err)
		require.True(t, held)
		assert.Equal(t, uint64(1), la.Term)
		assert.Equal(t, clk.Now().Add(ttl).UnixMilli(), la.Expires)

		_, held, err = b.AcquireLease(ctx, "sweeper", "b", ttl)
		require.NoError(t, err)
		assert.False(t, held, "a holds it, unexpired")

		clk.Advance(ttl / 2)
		renewed, held, err := a.AcquireLease(ctx, "sweeper", "a", ttl)
		require.NoError(t, err)
		require.True(t, held)
		assert.Equal(t, la.Term, renewed.Term, "a renewal keeps the term")

		clk.Advance(ttl / 2) // the old expiry: renewed, so a still holds it
		_, held, err = b.AcquireLease(ctx, "sweeper", "b", ttl)
		require.NoError(t, err)
		assert.False(t, held, "renewed before it ran out")

		clk.Advance(ttl) // a is silent past its renewed expiry
		lb, held, err := b.AcquireLease(ctx, "sweeper", "b", ttl)
		require.NoError(t, err)
		require.True(t, held, "an expired lease is taken over")
		assert.Equal(t, la.Term+1, lb.Term, "a new holder, a new term")

		// Another job's lease is its own.
		other, held, err := a.AcquireLease(ctx, "other", "a", ttl)
		require.NoError(t, err)
		require.True(t, held)
		assert.Equal(t, uint64(1), other.Term)

		var leases []driver.Lease
		e.read(func(r driver.Reader) (err error) {
			leases, err = r.Leases(ctx)
			return err
		})
		require.Len(t, leases, 2)
		assert.Equal(t, driver.Lease{Name: "other", Holder: "a", Term: 1, ExpiresMs: other.Expires}, leases[0])
		assert.Equal(t, driver.Lease{Name: "sweeper", Holder: "b", Term: lb.Term, ExpiresMs: lb.Expires}, leases[1])

		// a's writes under its old term are refused, and change nothing.
		p, task := id(), id()
		exec(t, a, reducer.CreateProject{ProjectID: p, Name: "alpha", Workspace: t.TempDir()})
		exec(t, a, reducer.AddTask{Project: p, TaskID: task, Title: "build"})
		r := id()
		exec(t, a, reducer.StartRun{Project: p, TaskID: task, RunID: r, Agent: "codex"})
		for range 30 {
			exec(t, a, reducer.ProgressRun{Project: p, RunID: r, Progress: "x"})
		}
		clk.Advance(time.Hour)
		lb, held, err = b.AcquireLease(ctx, "sweeper", "b", ttl) // b takes it again, so a's term stays lost
		require.NoError(t, err)
		require.True(t, held)
		assert.Greater(t, lb.Term, la.Term)
		before := e.lastSequence()
		n, err := a.MarkStale(ctx, time.Minute, &la)
		assert.ErrorIs(t, err, ledger.ErrLeaseLost)
		assert.Zero(t, n)
		_, err = a.Compact(ctx, p, ledger.CompactOptions{Retain: 1, Fence: &la})
		assert.ErrorIs(t, err, ledger.ErrLeaseLost)
		assert.Equal(t, before, e.lastSequence(), "nothing appended under a lost lease")
		assert.Equal(t, 33, e.row(p).Live, "nothing compacted under a lost lease")

		// b's, under its term, go ahead.
		n, err = b.MarkStale(ctx, time.Minute, &lb)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		c, err := b.Compact(ctx, p, ledger.CompactOptions{Retain: 1, Fence: &lb})
		require.NoError(t, err)
		assert.Equal(t, 1, c.Live)
	})

	t.Run("ExpireApprovals", func(t *testing.T) {
		t.Parallel()
		// An approval nobody decides (its daemon is gone) is expired by
		// the sweep once its deadline and the grace have passed, once;
		// one decided first is left as it was. The projects table finds
		// them, cached or not.
		clk := newClock(1_800_000_000_000)
		e := newEnv(t, h)
		l := e.open(ledger.Options{Clock: clk.Now, CacheSize: 1})
		deadline := clk.Now().Add(time.Minute).UnixMilli()
		var projects, questions []string
		for i, name := range []string{"gone", "decided", "later"} {
			p, task, q := id(), id(), id()
			exec(t, l, reducer.CreateProject{ProjectID: p, Name: name, Workspace: t.TempDir()})
			exec(t, l, reducer.AddTask{Project: p, TaskID: task, Title: "ship"})
			d := deadline
			if i == 2 {
				d += time.Hour.Milliseconds()
			}
			exec(t, l, reducer.AskApproval{Project: p, TaskID: task, QuestionID: q, Question: "ship it?", Deadline: d, By: "agent"})
			projects, questions = append(projects, p), append(questions, q)
		}
		exec(t, l, reducer.DecideApproval{Project: projects[1], QuestionID: questions[1], Outcome: reducer.ApprovalYes, By: "owner"})
		assert.Equal(t, string(reducer.ProjectWaitingApproval), e.row(projects[0]).Status)

		clk.Advance(time.Minute + 30*time.Second) // past the deadline, inside the grace
		n, err := l.ExpireApprovals(ctx, time.Minute, nil)
		require.NoError(t, err)
		assert.Zero(t, n, "inside the grace the asking daemon decides")

		clk.Advance(time.Minute)
		n, err = l.ExpireApprovals(ctx, time.Minute, nil)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		p := project(t, l, projects[0])
		a, ok := p.Approval(questions[0])
		require.True(t, ok)
		assert.Equal(t, reducer.ApprovalExpired, a.Outcome)
		assert.Equal(t, reducer.ExpiredBy, a.DecidedBy)
		assert.NotEqual(t, reducer.ProjectWaitingApproval, p.Status())
		assert.NotEqual(t, string(reducer.ProjectWaitingApproval), e.row(projects[0]).Status, "the projects row knows")
		a, _ = project(t, l, projects[1]).Approval(questions[1])
		assert.Equal(t, reducer.ApprovalYes, a.Outcome, "decided first: left as it was")
		a, _ = project(t, l, projects[2]).Approval(questions[2])
		assert.Equal(t, reducer.ApprovalPending, a.Outcome, "its deadline is an hour later")

		n, err = l.ExpireApprovals(ctx, time.Minute, nil)
		require.NoError(t, err)
		assert.Zero(t, n, "nothing twice")
	})
}
