package ledger_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestTimestampsNeverGoBack steps Options.Clock back and forth: every
// command is stamped max(clock, time of the last event), also after a
// reopen and across two ledgers on one file.
func TestTimestampsNeverGoBack(t *testing.T) {
	path := dbPath(t)
	ws := t.TempDir()
	clk := newClock(1000)
	l := open(t, path, ledger.Options{Clock: clk.Now})

	p := id()
	steps := []struct{ clock, want int64 }{
		{1000, 1000}, // create
		{2000, 2000},
		{500, 2000}, // the clock stepped back
		{1999, 2000},
		{3000, 3000},
		{3000, 3000},
		{-5, 3000},
		{3001, 3001},
	}
	for i, s := range steps {
		clk.Set(s.clock)
		var c reducer.Command = reducer.RecordHeartbeat{Project: p}
		if i == 0 {
			c = reducer.CreateProject{ProjectID: p, Name: "alpha", Workspace: ws}
		}
		res := exec(t, l, c)
		require.Len(t, res.Events, 1)
		assert.Equal(t, s.want, res.Events[0].Time, "step %d, clock at %d", i, s.clock)
		assert.Equal(t, s.want, res.Project.Updated, "step %d", i)
	}
	prj, _ := l.Project(p)
	assert.Equal(t, int64(1000), prj.Created)
	assert.Equal(t, int64(3001), prj.LastHeartbeat)

	// A reopened ledger takes the last event's time from the table.
	require.NoError(t, l.Close())
	clk.Set(100)
	l = open(t, path, ledger.Options{Clock: clk.Now})
	res := exec(t, l, reducer.RecordHeartbeat{Project: p})
	assert.Equal(t, int64(3001), res.Events[0].Time, "after reopen")

	// A second ledger whose clock is far behind stamps after the first's
	// events, and the first after the second's.
	behind := newClock(50)
	b := open(t, path, ledger.Options{Clock: behind.Now})
	clk.Set(9000)
	assert.Equal(t, int64(9000), exec(t, l, reducer.RecordHeartbeat{Project: p}).Events[0].Time)
	assert.Equal(t, int64(9000), exec(t, b, reducer.RecordHeartbeat{Project: p}).Events[0].Time, "b behind a")
	behind.Set(9500)
	clk.Set(9100)
	assert.Equal(t, int64(9500), exec(t, b, reducer.RecordHeartbeat{Project: p}).Events[0].Time)
	assert.Equal(t, int64(9500), exec(t, l, reducer.RecordHeartbeat{Project: p}).Events[0].Time, "a behind b")

	assertNonDecreasing(t, path)
}

// TestTimestampsNeverGoBackUnderLoad jitters the clock while goroutines
// append: the table's timestamps never decrease along the sequence.
func TestTimestampsNeverGoBackUnderLoad(t *testing.T) {
	path := dbPath(t)
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(7, 7))
	jitter := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Unix(10_000+r.Int64N(1000), 0)
	}
	l := open(t, path, ledger.Options{Clock: jitter})
	f := newFixture(t, l, "alpha", t.TempDir())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				_, err := l.Execute(t.Context(), reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	assertNonDecreasing(t, path)
	p, _ := l.Project(f.project)
	rs := rows(t, rawDB(t, path))
	assert.Equal(t, rs[len(rs)-1].TimestampMs, p.Updated)
}

func assertNonDecreasing(t *testing.T, path string) {
	t.Helper()
	rs := rows(t, rawDB(t, path))
	for i := 1; i < len(rs); i++ {
		assert.GreaterOrEqual(t, rs[i].TimestampMs, rs[i-1].TimestampMs, "event %d is stamped before event %d", rs[i].Sequence, rs[i-1].Sequence)
	}
}
