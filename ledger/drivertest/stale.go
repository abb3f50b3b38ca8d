package drivertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// staleSetup opens a ledger on a settable clock with one project and one
// task (maxRetries).
func staleSetup(t *testing.T, h Harness, maxRetries uint32) (*ledger.Ledger, *clock, string, string) {
	t.Helper()
	clk := newClock(1_800_000_000_000)
	l := newEnv(t, h).open(ledger.Options{Clock: clk.Now})
	p, task := id(), id()
	exec(t, l, reducer.CreateProject{ProjectID: p, Name: "alpha", Workspace: t.TempDir()})
	exec(t, l, reducer.AddTask{Project: p, TaskID: task, Title: "build", MaxRetries: maxRetries})
	return l, clk, p, task
}

func startRun(t *testing.T, l *ledger.Ledger, p, task string) string {
	t.Helper()
	r := id()
	exec(t, l, reducer.StartRun{Project: p, TaskID: task, RunID: r, Agent: "codex"})
	return r
}

// sweepUntil advances the clock in sweeper ticks (a twentieth of the
// window, as the daemon does), sweeping at each, until a run is marked or
// limit has passed; it returns the clock time of the sweep that marked.
func sweepUntil(t *testing.T, l *ledger.Ledger, clk *clock, window, limit time.Duration) (time.Time, bool) {
	t.Helper()
	tick := window / 20
	for passed := time.Duration(0); passed <= limit; passed += tick {
		n, err := l.MarkStale(context.Background(), window, nil)
		require.NoError(t, err)
		if n > 0 {
			return clk.Now(), true
		}
		clk.Advance(tick)
	}
	return time.Time{}, false
}

// testStale: the sweep for silent runs.
func testStale(t *testing.T, h Harness) {
	const window = 300 * time.Second
	ctx := context.Background()

	t.Run("HeartbeatingRunNeverMarked", func(t *testing.T) {
		t.Parallel()
		l, clk, p, task := staleSetup(t, h, 0)
		r := startRun(t, l, p, task)
		for range 100 { // heartbeats a third of the window apart
			clk.Advance(window / 3)
			n, err := l.MarkStale(ctx, window, nil)
			require.NoError(t, err)
			require.Zero(t, n, "a live run was marked stale")
			exec(t, l, reducer.RecordHeartbeat{Project: p, RunID: r})
		}
		run, _ := project(t, l, p).Run(r)
		assert.Equal(t, reducer.RunRunning, run.Status)
	})

	t.Run("SilentRunMarkedWithinATenth", func(t *testing.T) {
		t.Parallel()
		l, clk, p, task := staleSetup(t, h, 1)
		r := startRun(t, l, p, task)
		clk.Advance(time.Minute)
		last := exec(t, l, reducer.ProgressRun{Project: p, RunID: r, Progress: "compiling"}).Events[0].Time
		marked, ok := sweepUntil(t, l, clk, window, 2*window)
		require.True(t, ok, "never marked")
		lag := marked.Sub(time.UnixMilli(last))
		assert.Greater(t, lag, window, "marked before its window ran out")
		assert.LessOrEqual(t, lag, window+window/10, "marked too late")

		prj := project(t, l, p)
		run, _ := prj.Run(r)
		tk, _ := prj.Task(task)
		assert.Equal(t, reducer.RunStale, run.Status)
		assert.Equal(t, reducer.TaskStale, tk.Status)
		assert.Equal(t, uint32(1), tk.Retries, "the stale attempt spends a retry")
		assert.Equal(t, reducer.ProjectActive, prj.Status(), "a stale task can be started again")

		// The zombie is fenced.
		before := prj.LastSequence
		for _, c := range []reducer.Command{
			reducer.RecordHeartbeat{Project: p, RunID: r},
			reducer.ProgressRun{Project: p, RunID: r, Progress: "still here"},
			reducer.FinishRun{Project: p, RunID: r, Status: reducer.RunSucceeded},
		} {
			_, err := l.Execute(ctx, c)
			assert.ErrorIs(t, err, reducer.ErrRunNotRunning, "%T", c)
		}
		assert.Equal(t, before, project(t, l, p).LastSequence, "a fenced write appended")

		// Started again, a second stale attempt exhausts max_retries 1.
		r2 := startRun(t, l, p, task)
		run2, _ := project(t, l, p).Run(r2)
		assert.Equal(t, uint32(2), run2.Attempt)
		_, ok = sweepUntil(t, l, clk, window, 2*window)
		require.True(t, ok, "second run never marked")
		prj = project(t, l, p)
		tk, _ = prj.Task(task)
		assert.Equal(t, reducer.TaskFailed, tk.Status)
		assert.Equal(t, reducer.ProjectFailed, prj.Status())
	})

	t.Run("NeverHeartbeatedMarkedFromItsStart", func(t *testing.T) {
		t.Parallel()
		l, clk, p, task := staleSetup(t, h, 0)
		r := startRun(t, l, p, task)
		run, _ := project(t, l, p).Run(r)
		marked, ok := sweepUntil(t, l, clk, window, 2*window)
		require.True(t, ok)
		lag := marked.Sub(time.UnixMilli(run.Started))
		assert.Greater(t, lag, window)
		assert.LessOrEqual(t, lag, window+window/10)
		prj := project(t, l, p)
		tk, _ := prj.Task(task)
		assert.Equal(t, reducer.TaskFailed, tk.Status, "max_retries 0: the first stale attempt is final")
		assert.Equal(t, reducer.ProjectFailed, prj.Status())
	})

	t.Run("EvictedProjects", func(t *testing.T) {
		t.Parallel()
		// With room for one project in the cache, the sweep still finds
		// the silent runs of every project, cached or not, by the
		// projects table, and marks exactly those.
		clk := newClock(1_800_000_000_000)
		e := newEnv(t, h)
		l := e.open(ledger.Options{Clock: clk.Now, CacheSize: 1})
		silent := []fixture{newFixture(t, l, "s0"), newFixture(t, l, "s1"), newFixture(t, l, "s2")}
		idle := newFixture(t, l, "idle")
		exec(t, l, reducer.FinishRun{Project: idle.project, RunID: idle.run, Status: reducer.RunSucceeded})
		clk.Advance(2 * time.Minute)
		alive := newFixture(t, l, "alive")
		clk.Advance(time.Minute)
		_, _, cached := l.CacheStats()
		require.Equal(t, 1, cached)

		n, err := l.MarkStale(ctx, 150*time.Second, nil)
		require.NoError(t, err)
		assert.Equal(t, len(silent), n, "every silent run, cached or evicted")
		for _, f := range silent {
			run, _ := project(t, l, f.project).Run(f.run)
			assert.Equal(t, reducer.RunStale, run.Status, f.name)
			assert.Zero(t, e.row(f.project).Running, "%s: the projects row knows", f.name)
		}
		run, _ := project(t, l, alive.project).Run(alive.run)
		assert.Equal(t, reducer.RunRunning, run.Status, "a run inside its window")
		n, err = l.MarkStale(ctx, 150*time.Second, nil)
		require.NoError(t, err)
		assert.Zero(t, n, "nothing twice")

		// After a restart, with nothing cached at all.
		clk.Advance(5 * time.Minute)
		l = e.restart(l, ledger.Options{Clock: clk.Now, CacheSize: 1})
		n, err = l.MarkStale(ctx, 150*time.Second, nil)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "alive is silent now")
	})

	t.Run("CoalescedHeartbeats", func(t *testing.T) {
		t.Parallel()
		// Heartbeats inside one interval append one event, each is
		// answered with the project's state, and the first after the
		// interval appends the next. Progress is always journaled.
		const every = 30 * time.Second
		l, clk, p, task := staleSetup(t, h, 0)
		r := startRun(t, l, p, task)
		beat := reducer.RecordHeartbeat{Project: p, RunID: r, Every: every.Milliseconds()}
		before := project(t, l, p).LastSequence
		first := exec(t, l, beat)
		require.Len(t, first.Events, 1)
		for range 99 {
			clk.Advance(every / 100)
			res := exec(t, l, beat)
			assert.Empty(t, res.Events, "a heartbeat inside the interval was journaled")
			require.NotNil(t, res.Project, "a coalesced heartbeat is answered with the project")
			assert.Equal(t, p, res.Project.ID)
		}
		prj := project(t, l, p)
		assert.Equal(t, before+1, prj.LastSequence, "100 heartbeats inside one interval")
		assert.Equal(t, first.Events[0].Time, prj.LastHeartbeat, "the journaled heartbeat is the last one known")

		clk.Set(first.Events[0].Time + every.Milliseconds()) // exactly one interval later
		assert.Len(t, exec(t, l, beat).Events, 1, "the first heartbeat after the interval is journaled")
		clk.Advance(time.Second)
		assert.Len(t, exec(t, l, reducer.ProgressRun{Project: p, RunID: r, Progress: "a"}).Events, 1)
		assert.Len(t, exec(t, l, reducer.ProgressRun{Project: p, RunID: r, Progress: "b"}).Events, 1)
		assert.Empty(t, exec(t, l, beat).Events, "progress counts as a heartbeat")
		beat.Every = 0
		assert.Len(t, exec(t, l, beat).Events, 1, "Every 0 journals every heartbeat")
		exec(t, l, reducer.FinishRun{Project: p, RunID: r, Status: reducer.RunCancelled})
		beat.Every = every.Milliseconds()
		_, err := l.Execute(ctx, beat)
		assert.ErrorIs(t, err, reducer.ErrRunNotRunning, "a coalesced heartbeat from a fenced run is refused")
	})

	t.Run("SweeperAtTheEdge", func(t *testing.T) {
		t.Parallel()
		// A heartbeat races the sweep at the instant the run's window
		// runs out: the two are decided one after the other in the
		// writer, so the run is refreshed (and not marked) or marked
		// (and the heartbeat refused), never both.
		const window = 10 * time.Second
		refreshed, stale := 0, 0
		for round := range 20 {
			l, clk, p, task := staleSetup(t, h, 5)
			r := startRun(t, l, p, task)
			run, _ := project(t, l, p).Run(r)
			clk.Set(run.Started + window.Milliseconds() + 1)
			var wg sync.WaitGroup
			var beatErr, sweepErr error
			var beat ledger.Result
			var marked int
			wg.Go(func() { beat, beatErr = l.Execute(ctx, reducer.RecordHeartbeat{Project: p, RunID: r}) })
			wg.Go(func() { marked, sweepErr = l.MarkStale(ctx, window, nil) })
			wg.Wait()
			require.NoError(t, sweepErr)
			run, _ = project(t, l, p).Run(r)
			msg := fmt.Sprintf("round %d", round)
			if beatErr == nil {
				refreshed++
				assert.Len(t, beat.Events, 1, msg)
				assert.Zero(t, marked, "%s: refreshed and marked stale", msg)
				assert.Equal(t, reducer.RunRunning, run.Status, msg)
			} else {
				stale++
				assert.ErrorIs(t, beatErr, reducer.ErrRunNotRunning, msg)
				assert.Equal(t, 1, marked, msg)
				assert.Equal(t, reducer.RunStale, run.Status, msg)
			}
			require.NoError(t, l.Close())
		}
		t.Logf("edge: %d rounds refreshed first, %d marked first", refreshed, stale)
	})
}
