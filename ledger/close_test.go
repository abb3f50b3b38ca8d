package ledger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

func TestExecuteAfterCloseIsErrClosed(t *testing.T) {
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	f := newFixture(t, l, "alpha", t.TempDir())
	require.NoError(t, l.Close())
	assert.NoError(t, l.Close(), "Close twice")

	res, err := l.Execute(context.Background(), reducer.RecordHeartbeat{Project: f.project})
	assert.ErrorIs(t, err, ledger.ErrClosed)
	assert.Empty(t, res.Events)
	assert.Equal(t, len(f.setup), count(t, rawDB(t, path)))
}

// TestCloseLosesNoAcknowledgement closes the ledger while 32 goroutines
// append: each command is answered either with success, and is then in the
// table after a reopen, or with ErrClosed; nothing else, and nothing that
// was not acknowledged is in the table.
func TestCloseLosesNoAcknowledgement(t *testing.T) {
	for round := range 3 {
		path := dbPath(t)
		l, err := ledger.Open(context.Background(), path, ledger.Options{})
		require.NoError(t, err)
		f := newFixture(t, l, "alpha", t.TempDir())

		const appenders = 32
		var acks atomic.Int64
		acked := make([][]reducer.Event, appenders)
		others := make([][]error, appenders)
		var wg sync.WaitGroup
		for g := range appenders {
			wg.Go(func() {
				for {
					res, err := l.Execute(context.Background(), reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
					switch {
					case errors.Is(err, ledger.ErrClosed):
						return
					case err != nil:
						others[g] = append(others[g], err)
						return
					}
					acked[g] = append(acked[g], res.Events...)
					acks.Add(1)
				}
			})
		}
		// Close once the appenders are well under way.
		for acks.Load() < 100 {
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, l.Close())
		answered := make(chan struct{})
		go func() { wg.Wait(); close(answered) }()
		select {
		case <-answered:
		case <-time.After(time.Minute): // a deadlock guard, not a timing check
			t.Fatalf("round %d: Execute calls still unanswered a minute after Close returned", round)
		}

		want := map[uint64]reducer.Event{}
		for _, e := range f.setup {
			want[e.Sequence] = e
		}
		for g := range appenders {
			assert.Empty(t, others[g], "round %d appender %d: an error other than ErrClosed", round, g)
			for _, e := range acked[g] {
				want[e.Sequence] = e
			}
		}

		l2 := open(t, path, ledger.Options{})
		rs := rows(t, rawDB(t, path))
		got := map[uint64]reducer.Event{}
		for _, r := range rs {
			e, err := r.Event()
			require.NoError(t, err)
			got[e.Sequence] = e
		}
		assert.Equal(t, want, got, "round %d: the table holds exactly the acknowledged events", round)
		t.Logf("round %d: %d commands acknowledged before Close", round, len(want)-len(f.setup))
		p, ok := l2.Project(f.project)
		require.True(t, ok)
		assert.Equal(t, rs[len(rs)-1].Sequence, p.LastSequence)
	}
}
