package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// serverClock is a driver whose clock is a database server's, here one
// set an hour ahead of this machine's.
type serverClock struct {
	driver.Driver
	now time.Time
}

func (d serverClock) Now(context.Context) (time.Time, error) { return d.now, nil }

// Without Options.Clock, events are stamped with the driver's clock (the
// server's, for a database daemons share), not this machine's.
func TestStampedWithTheDriversClock(t *testing.T) {
	ctx := context.Background()
	h := sqlitetest.Harness{}
	server := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	l, err := ledger.Open(ctx, serverClock{Driver: h.Open(t, h.Create(t)), now: server}, ledger.Options{})
	require.NoError(t, err)
	defer l.Close()
	res, err := l.Execute(ctx, reducer.CreateProject{ProjectID: "P1", Name: "acme", Workspace: "/tmp"})
	require.NoError(t, err)
	assert.Equal(t, server.UnixMilli(), res.Events[0].Time)
}

// slowBegin is a driver whose first write transaction waits for release
// before it holds the write lock, as a daemon of a fleet waits for
// another's turn.
type slowBegin struct {
	driver.Driver
	once    *sync.Once
	release chan struct{}
}

func (d slowBegin) Begin(ctx context.Context) (driver.Tx, error) {
	d.once.Do(func() { <-d.release })
	return d.Driver.Begin(ctx)
}

// batches records the sizes of the committed write transactions.
type batches struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batches) ObserveBatch(n int, _ time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, n)
}
func (*batches) EventAppended(string) {}
func (*batches) HeartbeatCoalesced()  {}
func (*batches) RunsMarkedStale(int)  {}
func (*batches) Compacted()           {}

// What queues while the writer waits for the write lock rides in the
// transaction it then holds.
func TestBatchTakenOnceTheLockIsHeld(t *testing.T) {
	ctx := context.Background()
	h := sqlitetest.Harness{}
	drv := slowBegin{Driver: h.Open(t, h.Create(t)), once: &sync.Once{}, release: make(chan struct{})}
	m := &batches{}
	l, err := ledger.Open(ctx, drv, ledger.Options{Metrics: m})
	require.NoError(t, err)
	defer l.Close()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			_, err := l.Execute(ctx, reducer.CreateProject{ProjectID: fmt.Sprint("P", i), Name: fmt.Sprint("p", i), Workspace: "/tmp"})
			assert.NoError(t, err)
		})
		if i == 0 {
			time.Sleep(50 * time.Millisecond) // the first leads, and waits for the lock
		}
	}
	time.Sleep(200 * time.Millisecond) // the nine others queue meanwhile
	close(drv.release)
	wg.Wait()
	assert.Equal(t, []int{10}, m.sizes, "one transaction carried all ten")
}

// A group's commands share one transaction, each decided on its own: a
// refused one refuses nothing else, and each sees the ones before it.
func TestExecuteAllOneTransaction(t *testing.T) {
	ctx := context.Background()
	h := sqlitetest.Harness{}
	m := &batches{}
	l, err := ledger.Open(ctx, h.Open(t, h.Create(t)), ledger.Options{Metrics: m})
	require.NoError(t, err)
	defer l.Close()
	res, errs := l.ExecuteAll(ctx, []reducer.Command{
		reducer.CreateProject{ProjectID: "P1", Name: "acme", Workspace: "/tmp"},
		reducer.AddTask{Project: "acme", TaskID: "T1", Title: "one"},
		reducer.CreateProject{ProjectID: "P2", Name: "acme", Workspace: "/tmp"}, // the name is taken
		reducer.AddTask{Project: "nowhere", TaskID: "T2", Title: "two"},
		reducer.AddTask{Project: "acme", TaskID: "T3", Title: "three"},
	})
	require.Len(t, errs, 5)
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.ErrorIs(t, errs[2], reducer.ErrConflict)
	assert.ErrorIs(t, errs[3], reducer.ErrNotFound)
	assert.NoError(t, errs[4])
	assert.Equal(t, 2, res[4].Project.TaskCount(), "T3 sees T1")
	assert.Equal(t, []int{5}, m.sizes, "one transaction")
	assert.Nil(t, res[2].Project)
}

// A group is never split, not even by the MaxBatch cut: what queued
// before it rides in one transaction, the group in the next.
func TestGroupNotSplit(t *testing.T) {
	ctx := context.Background()
	h := sqlitetest.Harness{}
	drv := slowBegin{Driver: h.Open(t, h.Create(t)), once: &sync.Once{}, release: make(chan struct{})}
	m := &batches{}
	l, err := ledger.Open(ctx, drv, ledger.Options{Metrics: m})
	require.NoError(t, err)
	defer l.Close()
	project := func(i int) reducer.Command {
		return reducer.CreateProject{ProjectID: fmt.Sprint("P", i), Name: fmt.Sprint("p", i), Workspace: "/tmp"}
	}
	// queued waits until n requests wait in the queue: the first leads,
	// and waits for the write lock before it takes any.
	queued := func(n int) {
		for l.Queued() < n {
			time.Sleep(time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	first := ledger.MaxBatch - 10
	for i := range first {
		wg.Go(func() {
			_, err := l.Execute(ctx, project(i))
			assert.NoError(t, err)
		})
	}
	queued(first)
	group := make([]reducer.Command, 20)
	for i := range group {
		group[i] = project(first + i)
	}
	wg.Go(func() {
		_, errs := l.ExecuteAll(ctx, group)
		for _, err := range errs {
			assert.NoError(t, err)
		}
	})
	queued(first + len(group))
	close(drv.release)
	wg.Wait()
	assert.Equal(t, []int{first, 20}, m.sizes, "the group, which the first transaction had no room for, in the next")
}
