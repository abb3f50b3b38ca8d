package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestReadsAnswerWhileTheWriterIsStuck holds the database's write lock
// from another connection, so that the ledger's writer cannot begin its
// transaction: Project and Events must still answer, and the writes must
// still be pending when they have.
func TestReadsAnswerWhileTheWriterIsStuck(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	f := newFixture(t, l, "alpha", t.TempDir())

	conn, err := rawDB(t, path).Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)

	const writes = 8
	done := make(chan error, writes)
	for range writes {
		go func() {
			_, err := l.Execute(ctx, reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
			done <- err
		}()
	}
	for range 20 {
		p, ok := l.Project(f.name)
		require.True(t, ok)
		assert.Equal(t, f.setup[2].Sequence, p.LastSequence)
		rs, err := l.Events(ctx, f.project, 0, 0)
		require.NoError(t, err)
		assert.Len(t, rs, len(f.setup))
	}
	select {
	case err := <-done:
		t.Fatalf("a write finished while another connection held the write lock (err %v): the test proves nothing", err)
	default:
	}

	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	require.NoError(t, err)
	for range writes {
		assert.NoError(t, <-done)
	}
	rs, err := l.Events(ctx, f.project, 0, 0)
	require.NoError(t, err)
	assert.Len(t, rs, len(f.setup)+writes)
}

// TestReadsRunAlongsideManyWriters reads while appenders keep the writer
// busy. Every read must answer, a project's LastSequence never goes back
// for a reader, and the view is never ahead of the table: the event a
// project's LastSequence names can always be read.
func TestReadsRunAlongsideManyWriters(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	ws := t.TempDir()
	const appenders, perAppender, readers = 16, 20, 4
	fixtures := make([]fixture, appenders)
	var setup sync.WaitGroup
	for i := range fixtures {
		setup.Go(func() { fixtures[i] = newFixture(t, l, fmt.Sprintf("p%02d", i), ws) })
	}
	setup.Wait()

	var writing sync.WaitGroup
	var stop atomic.Bool
	for _, f := range fixtures {
		writing.Go(func() {
			for range perAppender {
				_, err := l.Execute(ctx, reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
				assert.NoError(t, err)
			}
		})
	}
	var reading sync.WaitGroup
	var reads atomic.Int64
	for r := range readers {
		reading.Go(func() {
			last := map[string]uint64{}
			for i := 0; !stop.Load(); i++ {
				f := fixtures[(r+i)%appenders]
				p, ok := l.Project(f.project)
				if !assert.True(t, ok) {
					return
				}
				assert.GreaterOrEqual(t, p.LastSequence, last[f.project], "a reader saw %s go back", f.project)
				last[f.project] = p.LastSequence
				rs, err := l.Events(ctx, f.project, p.LastSequence-1, 1)
				if !assert.NoError(t, err) {
					return
				}
				if assert.Len(t, rs, 1, "the view names event %d, which the table lacks", p.LastSequence) {
					assert.Equal(t, p.LastSequence, rs[0].Sequence)
					assert.Equal(t, f.project, rs[0].ProjectID)
				}
				all, err := l.Events(ctx, f.project, 0, 0)
				if !assert.NoError(t, err) {
					return
				}
				for j := 1; j < len(all); j++ {
					assert.Less(t, all[j-1].Sequence, all[j].Sequence)
				}
				reads.Add(1)
			}
		})
	}
	writing.Wait()
	stop.Store(true)
	reading.Wait()
	assert.Positive(t, reads.Load())
	t.Logf("%d reads answered alongside %d appends", reads.Load(), appenders*perAppender)

	for _, f := range fixtures {
		rs, err := l.Events(ctx, f.project, 0, 0)
		require.NoError(t, err)
		assert.Len(t, rs, len(f.setup)+perAppender)
		page, err := l.Events(ctx, f.project, rs[10].Sequence, 5)
		require.NoError(t, err)
		assert.Equal(t, rs[11:16], page, "Events pages with after and limit")
	}
}
