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
