package drivertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// testReads: reads are bounded, paged, and never wait for the writer.
func testReads(t *testing.T, h Harness) {
	t.Run("Paging", func(t *testing.T) {
		t.Parallel()
		// A page holds at most MaxPage events; paging with after walks
		// the whole live tail in order, each event once.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		other := newFixture(t, l, "beta")
		f.progress(t, l, reducer.MaxEventsPage+50, "step")
		exec(t, l, reducer.ProgressRun{Project: other.project, RunID: other.run, Progress: "elsewhere"})
		live := e.live(f.project)
		require.Len(t, live, reducer.MaxEventsPage+53)

		for _, limit := range []int{0, -1, reducer.MaxEventsPage + 1, 1 << 30} {
			page, err := l.EventsPage(ctx, f.project, 0, limit)
			require.NoError(t, err)
			assert.Equal(t, live[:reducer.MaxEventsPage], page.Rows, "limit %d: at most MaxPage", limit)
			assert.Zero(t, page.CompactedBefore, "nothing compacted")
		}
		var walked []ledger.Row
		for after, pages := uint64(0), 0; ; pages++ {
			rows, err := l.Events(ctx, f.project, after, 300)
			require.NoError(t, err)
			require.LessOrEqual(t, len(rows), 300)
			if len(rows) == 0 {
				assert.Equal(t, 4, pages)
				break
			}
			walked = append(walked, rows...)
			after = rows[len(rows)-1].Sequence
		}
		assert.Equal(t, live, walked, "paging with after walks the tail once, in order")
		rows, err := l.Events(ctx, f.project, live[10].Sequence, 5)
		require.NoError(t, err)
		assert.Equal(t, live[11:16], rows)
		rows, err = l.Events(ctx, f.project, live[len(live)-1].Sequence, 0)
		require.NoError(t, err)
		assert.Empty(t, rows, "nothing after the newest")
		assert.NotNil(t, rows, "an empty page, not null")
		rows, err = l.Events(ctx, "nope", 0, 0)
		require.NoError(t, err)
		assert.Empty(t, rows, "an unknown project has no events")
		rows, err = l.Events(ctx, f.project, 1<<63, 0)
		require.NoError(t, err)
		assert.Empty(t, rows, "after past any sequence")
	})

	t.Run("WhileTheWriteLockIsHeld", func(t *testing.T) {
		t.Parallel()
		// Another driver on the database holds the write lock (an open
		// write transaction): the ledger's writes wait, its reads
		// answer, and the writes go through once the lock is released.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		tx, err := e.h.Open(t, e.db).Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback()

		const writes = 8
		done := make(chan error, writes)
		for range writes {
			go func() {
				_, err := l.Execute(ctx, reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
				done <- err
			}()
		}
		for range 20 {
			p := project(t, l, f.name)
			assert.Equal(t, f.setup[2].Sequence, p.LastSequence)
			rows, err := l.Events(ctx, f.project, 0, 0)
			require.NoError(t, err)
			assert.Len(t, rows, len(f.setup))
		}
		select {
		case err := <-done:
			t.Fatalf("a write finished while another driver held the write lock (err %v): the test proves nothing", err)
		default:
		}
		require.NoError(t, tx.Rollback())
		for range writes {
			assert.NoError(t, <-done)
		}
		rows, err := l.Events(ctx, f.project, 0, 0)
		require.NoError(t, err)
		assert.Len(t, rows, len(f.setup)+writes)
	})

	t.Run("AlongsideManyWriters", func(t *testing.T) {
		t.Parallel()
		// Reads while appenders keep the writer busy: every read answers,
		// a project's LastSequence never goes back for a reader, and the
		// state served is never ahead of the database: the event it names
		// can always be read.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		const appenders, perAppender, readers = 16, 15, 4
		fixtures := make([]fixture, appenders)
		var setup sync.WaitGroup
		for i := range fixtures {
			setup.Go(func() { fixtures[i] = newFixture(t, l, fmt.Sprintf("p%02d", i)) })
		}
		setup.Wait()
		var writing, reading sync.WaitGroup
		var stop atomic.Bool
		for _, f := range fixtures {
			writing.Go(func() {
				for range perAppender {
					_, err := l.Execute(ctx, reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
					assert.NoError(t, err)
				}
			})
		}
		var reads atomic.Int64
		for r := range readers {
			reading.Go(func() {
				last := map[string]uint64{}
				for i := 0; !stop.Load(); i++ {
					f := fixtures[(r+i)%appenders]
					p, err := l.Project(ctx, f.project)
					if !assert.NoError(t, err) {
						return
					}
					assert.GreaterOrEqual(t, p.LastSequence, last[f.project], "a reader saw %s go back", f.project)
					last[f.project] = p.LastSequence
					rows, err := l.Events(ctx, f.project, p.LastSequence-1, 1)
					if !assert.NoError(t, err) {
						return
					}
					if assert.Len(t, rows, 1, "the state names event %d, which the database lacks", p.LastSequence) {
						assert.Equal(t, p.LastSequence, rows[0].Sequence)
						assert.Equal(t, f.project, rows[0].ProjectID)
					}
					reads.Add(1)
				}
			})
		}
		writing.Wait()
		stop.Store(true)
		reading.Wait()
		assert.Positive(t, reads.Load())
		for _, f := range fixtures {
			rows, err := l.Events(ctx, f.project, 0, 0)
			require.NoError(t, err)
			assert.Len(t, rows, len(f.setup)+perAppender)
		}
	})
}

// testCache: a project not in the cache is loaded from its latest snapshot
// and the events after it, and is the same as when it was cached.
func testCache(t *testing.T, h Harness) {
	t.Run("EvictedEqualsCached", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{CacheSize: 1})
		a := newFixture(t, l, "alpha")
		a.progress(t, l, 40, "a")
		_, err := l.Compact(ctx, a.project, ledger.CompactOptions{Retain: 7})
		require.NoError(t, err)
		done := id()
		exec(t, l, reducer.AddTask{Project: a.project, TaskID: done, Title: "extra"})
		exec(t, l, reducer.UpdateTask{Project: a.project, TaskID: done, Status: reducer.TaskDone})
		a.progress(t, l, 3, "after the snapshot")
		cached := viewOf(t, project(t, l, a.name))
		_, _, n := l.CacheStats()
		assert.Equal(t, 1, n)

		b := newFixture(t, l, "beta") // evicts alpha
		_, missesBefore, _ := l.CacheStats()
		loaded := project(t, l, a.project)
		_, missesAfter, _ := l.CacheStats()
		assert.Greater(t, missesAfter, missesBefore, "alpha was evicted: the read missed the cache")
		assert.Equal(t, cached, viewOf(t, loaded), "loaded from snapshot + tail, alpha is what it was")
		assert.Equal(t, cached, viewOf(t, foldRows(t, e.history())[a.project]), "and what its whole history folds to")

		// Commands decided against an evicted project see all of it.
		project(t, l, b.project) // evicts alpha again
		_, err = l.Execute(ctx, reducer.AddTask{Project: a.name, TaskID: done, Title: "again"})
		assert.ErrorIs(t, err, reducer.ErrConflict, "the task added before the snapshot's tail")
		dep := id()
		project(t, l, b.project)
		res := exec(t, l, reducer.AddTask{Project: a.name, TaskID: dep, Title: "depends", DependsOn: []string{done}})
		tk, ok := res.Project.Task(dep)
		require.True(t, ok)
		assert.Equal(t, reducer.TaskReady, tk.Status, "decided against the evicted state: its dependency is done")

		// A fresh ledger (a restart) loads it the same way.
		want := viewOf(t, project(t, l, a.project))
		l = e.restart(l, ledger.Options{CacheSize: 1})
		assert.Equal(t, want, viewOf(t, project(t, l, a.name)))
		assertMatches(t, foldRows(t, e.history()), l, a.project, b.project, "alpha", "beta")
	})

	t.Run("ReadersNeverCacheAStaleVersion", func(t *testing.T) {
		t.Parallel()
		// A reader loads a project, and before it caches what it loaded
		// the writer commits a newer version of it, which the next commit
		// (of another project, with room for one) evicts again. The
		// version the reader loaded must not come back into the cache:
		// the next read would go back before an acknowledged write, and
		// the next command be decided (and chained) against an old state.
		ctx := context.Background()
		e := newEnv(t, h)
		drv := &heldDriver{Driver: e.h.Open(t, e.db), loaded: make(chan struct{}), release: make(chan struct{})}
		l, err := ledger.Open(ctx, drv, ledger.Options{CacheSize: 1})
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		a, b := newFixture(t, l, "alpha"), newFixture(t, l, "beta") // alpha is not cached

		drv.armed.Store(true)
		read := make(chan error, 1)
		go func() {
			_, err := l.Project(ctx, a.project)
			read <- err
		}()
		<-drv.loaded
		acked := lastSeq(t, l, reducer.ProgressRun{Project: a.project, RunID: a.run, Progress: "newer"})
		exec(t, l, reducer.ProgressRun{Project: b.project, RunID: b.run, Progress: "evicts alpha"})
		close(drv.release)
		require.NoError(t, <-read)

		assert.Equal(t, acked, project(t, l, a.project).LastSequence, "a read went back before an acknowledged write")
		exec(t, l, reducer.ProgressRun{Project: a.project, RunID: a.run, Progress: "next"})
		assert.Empty(t, problems(e.verify(ledger.VerifyOptions{})), "the next command is decided against the newest state")
		assertMatches(t, foldRows(t, e.history()), l)
	})

	t.Run("ManyProjectsOneSlot", func(t *testing.T) {
		t.Parallel()
		// Commands to projects in turn, with room for one: each is
		// decided against the project's newest state.
		e := newEnv(t, h)
		l := e.open(ledger.Options{CacheSize: 1})
		fs := make([]fixture, 4)
		for i := range fs {
			fs[i] = newFixture(t, l, fmt.Sprintf("p%d", i))
		}
		tasks := map[string][]string{}
		for round := range 6 {
			for _, f := range fs {
				tk := id()
				var deps []string
				if prev := tasks[f.project]; len(prev) > 0 {
					deps = []string{prev[len(prev)-1]}
				}
				res := exec(t, l, reducer.AddTask{Project: f.project, TaskID: tk, Title: fmt.Sprint(round), DependsOn: deps})
				assert.Equal(t, round+2, res.Project.TaskCount(), "%s round %d", f.name, round)
				tasks[f.project] = append(tasks[f.project], tk)
			}
		}
		assertMatches(t, foldRows(t, e.history()), l)
		_, misses, n := l.CacheStats()
		assert.Equal(t, 1, n)
		assert.Positive(t, misses)
	})
}

// heldDriver is a driver whose next Read, once armed, holds on after it
// loaded (its function returned) until released: a reader caught between
// reading the database and caching what it read.
type heldDriver struct {
	driver.Driver
	armed           atomic.Bool
	loaded, release chan struct{}
}

func (d *heldDriver) Read(ctx context.Context, fn func(driver.Reader) error) error {
	if !d.armed.CompareAndSwap(true, false) {
		return d.Driver.Read(ctx, fn)
	}
	err := d.Driver.Read(ctx, fn)
	close(d.loaded)
	<-d.release
	return err
}
