package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/postgres"
	"scv/ledger/postgres/pgtest"
	"scv/reducer"
)

// slowDriver is a driver whose write transactions wait before they insert
// their events: a daemon descheduled, or on a slow link, between deciding
// a command and writing what it decided.
type slowDriver struct {
	driver.Driver
	delay time.Duration
}

func (d slowDriver) Begin(ctx context.Context) (driver.Tx, error) {
	tx, err := d.Driver.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return slowTx{tx, d.delay}, nil
}

type slowTx struct {
	driver.Tx
	delay time.Duration
}

func (t slowTx) Append(ctx context.Context, evs []driver.Event) error {
	time.Sleep(t.delay)
	return t.Tx.Append(ctx, evs)
}

// TestHeadWithoutItsLock: with the head lock turned off (the broken
// variant), two daemons race for one task. The slow one decides its claim
// on the head it read and inserts a second later, after the other claimed
// the task and compacted the project, which moved that claim out of the
// events table, so the events' keys cannot see the clash. The head's
// compare-and-set refuses the stale write: one claim acknowledged, the
// other refused, each sequence stored once, the task run by the first.
func TestHeadWithoutItsLock(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Database(t)
	open := func(slow time.Duration) *ledger.Ledger {
		db, err := postgres.Open(ctx, u, postgres.Options{})
		require.NoError(t, err)
		postgres.SetNoHeadLock(db)
		var d driver.Driver = db
		if slow > 0 {
			d = slowDriver{db, slow}
		}
		l, err := ledger.Open(ctx, d, ledger.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		return l
	}
	fast, slow := open(0), open(time.Second)
	_, err := fast.Execute(ctx, reducer.CreateProject{ProjectID: "P", Name: "acme", Workspace: "/tmp"})
	require.NoError(t, err)
	_, err = fast.Execute(ctx, reducer.AddTask{Project: "P", TaskID: "T1", Title: "build"})
	require.NoError(t, err)

	late := make(chan error, 1)
	go func() {
		_, err := slow.Execute(ctx, reducer.StartRun{Project: "P", TaskID: "T1", RunID: "R2", Agent: "slow"})
		late <- err
	}()
	time.Sleep(200 * time.Millisecond) // the slow one has read the head and decided
	_, err = fast.Execute(ctx, reducer.StartRun{Project: "P", TaskID: "T1", RunID: "R1", Agent: "fast"})
	require.NoError(t, err, "no lock: the fast claim does not wait")
	_, err = fast.Compact(ctx, "P", ledger.CompactOptions{})
	require.NoError(t, err)
	err = <-late
	require.ErrorIs(t, err, ledger.ErrStorage, "the stale claim is refused")
	assert.Contains(t, err.Error(), "another writer committed since")

	db, err := postgres.Open(ctx, u, postgres.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	seen := map[uint64]int{}
	require.NoError(t, db.Read(ctx, func(r driver.Reader) error {
		return r.History(ctx, "P", 0, 1<<62, func(e driver.Event) error {
			seen[e.Sequence]++
			return nil
		})
	}))
	for seq, n := range seen {
		assert.Equal(t, 1, n, "sequence %d stored once", seq)
	}
	fresh, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	p, err := fresh.Project(ctx, "P")
	require.NoError(t, err)
	task, _ := p.Task("T1")
	require.NotNil(t, task)
	assert.Equal(t, "R1", task.RunID, "the acknowledged claim is the one the ledger shows")
}
