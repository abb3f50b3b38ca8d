package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestConcurrentAppendersGetGaplessSequences has 64 goroutines append to
// their own runs at once. Every acknowledged command must have got distinct
// sequences, increasing for each goroutine, that together with the setup
// form 1..max without a gap; after a reopen, the table must hold exactly the
// acknowledged events and fold to the same state.
func TestConcurrentAppendersGetGaplessSequences(t *testing.T) {
	const appenders, perAppender = 64, 50
	ctx := context.Background()
	path := dbPath(t)
	ws := t.TempDir()
	l := open(t, path, ledger.Options{})

	fixtures := make([]fixture, appenders)
	acked := map[uint64]reducer.Event{}
	ids := []string{}
	var setup sync.WaitGroup
	for i := range fixtures {
		setup.Go(func() { fixtures[i] = newFixture(t, l, fmt.Sprintf("project-%02d", i), ws) })
	}
	setup.Wait()
	for _, f := range fixtures {
		ids = append(ids, f.project)
		for _, e := range f.setup {
			acked[e.Sequence] = e
		}
	}

	type outcome struct {
		events []reducer.Event
		errs   []error
	}
	outcomes := make([]outcome, appenders)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range appenders {
		wg.Go(func() {
			f, out := fixtures[g], &outcomes[g]
			for i := range perAppender {
				var c reducer.Command = reducer.RecordHeartbeat{Project: f.project, RunID: f.run}
				if i%2 == 1 {
					c = reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: fmt.Sprintf("step %d", i)}
				}
				res, err := l.Execute(ctx, c)
				if err != nil {
					out.errs = append(out.errs, err)
					continue
				}
				out.events = append(out.events, res.Events...)
				if res.Project == nil || len(res.Events) != 1 || res.Project.LastSequence < res.Events[0].Sequence {
					out.errs = append(out.errs, fmt.Errorf("command %d: result %+v does not show its own event", i, res))
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	total := 0
	for g, out := range outcomes {
		require.Empty(t, out.errs, "appender %d", g)
		require.Len(t, out.events, perAppender, "appender %d", g)
		total += len(out.events)
		var last uint64
		for _, e := range out.events {
			assert.Equal(t, fixtures[g].project, e.ProjectID, "appender %d got an event of another project", g)
			assert.Greater(t, e.Sequence, last, "appender %d: sequences must strictly increase", g)
			last = e.Sequence
			_, dup := acked[e.Sequence]
			assert.False(t, dup, "sequence %d acknowledged twice", e.Sequence)
			acked[e.Sequence] = e
		}
	}
	t.Logf("ledger: 64 appenders: %d commands acked in %v, %.0f appends/s (race detector %v)",
		total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), raceEnabled)

	seqs := slices.Sorted(func(yield func(uint64) bool) {
		for s := range acked {
			if !yield(s) {
				return
			}
		}
	})
	require.Len(t, seqs, appenders*(3+perAppender))
	for i, s := range seqs {
		if !assert.Equal(t, uint64(i+1), s, "sequences must be exactly 1..max with no gap") {
			break
		}
	}

	before := map[string]observed{}
	for _, id := range ids {
		p, ok := l.Project(id)
		require.True(t, ok)
		before[id] = observe(p)
	}
	require.NoError(t, l.Close())

	l2 := open(t, path, ledger.Options{})
	rs := rows(t, rawDB(t, path))
	require.Len(t, rs, len(acked), "the table must hold exactly the acknowledged events")
	for _, r := range rs {
		e, err := r.Event()
		require.NoError(t, err)
		want, ok := acked[r.Sequence]
		if assert.True(t, ok, "row %d was never acknowledged", r.Sequence) {
			assert.Equal(t, want, e, "row %d differs from what Execute returned", r.Sequence)
		}
	}
	assertMatches(t, fold(t, rs), l2, ids)
	for _, id := range ids {
		p, ok := l2.Project(id)
		require.True(t, ok)
		assert.Equal(t, before[id], observe(p), "project %s after reopen", id)
		if r := p.Runs()[0]; assert.NotNil(t, r.Progress) {
			assert.Equal(t, fmt.Sprintf("step %d", perAppender-1), *r.Progress, "the last progress wins")
		}
	}
}
