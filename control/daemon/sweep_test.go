package daemon

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/sweeper"
	"scv/ledger/driver"
	"scv/ledger/postgres/pgtest"
	"scv/reducer"
)

// TestSweepExpiresOrphanApprovals: an approval in the ledger that no
// question log of this daemon holds (its daemon is gone) is expired by
// the sweep once its deadline and the grace have passed.
func TestSweepExpiresOrphanApprovals(t *testing.T) {
	dir := shortDir(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	d := New(Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), Version: version, Clock: clock})
	require.NoError(t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	defer func() { require.NoError(t, d.Close()); require.NoError(t, <-served) }()

	ctx := context.Background()
	l := d.Ledger()
	_, err := l.Execute(ctx, reducer.CreateProject{ProjectID: "P1", Name: "orphan", Workspace: dir})
	require.NoError(t, err)
	_, err = l.Execute(ctx, reducer.AddTask{Project: "P1", TaskID: "T1", Title: "ship"})
	require.NoError(t, err)
	_, err = l.Execute(ctx, reducer.AskApproval{Project: "P1", TaskID: "T1", QuestionID: "Q-elsewhere", Question: "ship?",
		Deadline: clock().Add(time.Minute).UnixMilli(), By: "a daemon on another machine"})
	require.NoError(t, err)

	advance(time.Minute + sweeper.ApprovalGrace/2)
	d.Sweep(ctx)
	p, err := l.Project(ctx, "orphan")
	require.NoError(t, err)
	assert.Equal(t, reducer.ProjectWaitingApproval, p.Status(), "inside the grace")

	advance(sweeper.ApprovalGrace)
	d.Sweep(ctx)
	p, err = l.Project(ctx, "orphan")
	require.NoError(t, err)
	a, ok := p.Approval("Q-elsewhere")
	require.True(t, ok)
	assert.Equal(t, reducer.ApprovalExpired, a.Outcome)
	assert.Equal(t, reducer.ExpiredBy, a.DecidedBy)
	assert.Equal(t, reducer.ProjectBlocked, p.Status())
}

// TestSweeperKeepsItsLease: on a shared ledger, with a lease shorter than
// the sweep's pace (here a 1.5 s lease, a sweep every 6 s), the holder
// renews it in time: over two of its lengths it holds it from the start,
// in one term, never expired. A holder that renewed it only when it
// sweeps would let it run out within the first 1.5 s. (The lease is long
// enough that a renewal late by a busy machine, up to 1 s, still comes in
// time.) Alone on a SQLite file, a daemon takes no lease at all.
func TestSweeperKeepsItsLease(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(map[bool]string{true: "PostgreSQL", false: "SQLite"}[shared], func(t *testing.T) {
			dir := shortDir(t)
			cfg := Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), Version: version,
				StaleAfter: 2 * time.Minute, LeaseTTL: 1500 * time.Millisecond}
			if shared {
				cfg.DB, cfg.LocalDB = pgtest.Database(t), filepath.Join(dir, "local.db")
			}
			d := New(cfg)
			require.NoError(t, d.Open(context.Background()))
			served := make(chan error, 1)
			go func() { served <- d.Serve() }()
			defer func() { require.NoError(t, d.Close()); require.NoError(t, <-served) }()

			ctx := context.Background()
			leases := func() []driver.Lease {
				var ls []driver.Lease
				require.NoError(t, d.Ledger().Driver().Read(ctx, func(r driver.Reader) (err error) {
					ls, err = r.Leases(ctx)
					return err
				}))
				return ls
			}
			if !shared {
				time.Sleep(500 * time.Millisecond)
				assert.Empty(t, leases(), "a daemon alone on its file writes no lease")
				return
			}
			require.Eventually(t, func() bool { return len(leases()) == 1 }, 10*time.Second, 10*time.Millisecond, "the lease is taken at start")
			for range 30 {
				time.Sleep(100 * time.Millisecond)
				ls := leases()
				require.Len(t, ls, 1)
				assert.Equal(t, uint64(1), ls[0].Term, "one term: never run out and taken again")
				assert.Greater(t, ls[0].ExpiresMs, time.Now().UnixMilli(), "held, unexpired")
			}
		})
	}
}
