package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// staleSetup opens a ledger on a settable clock with one project, one task
// (maxRetries) and returns them.
func staleSetup(t *testing.T, maxRetries uint32) (*ledger.Ledger, *clock, string, string) {
	t.Helper()
	clk := newClock(1_800_000_000_000)
	l := open(t, dbPath(t), ledger.Options{Clock: clk.Now})
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
// limit has passed; it returns the clock time of the sweep that marked it.
func sweepUntil(t *testing.T, l *ledger.Ledger, clk *clock, window, limit time.Duration) (time.Time, bool) {
	t.Helper()
	tick := window / 20
	for passed := time.Duration(0); passed <= limit; passed += tick {
		n, err := l.MarkStale(context.Background(), window)
		require.NoError(t, err)
		if n > 0 {
			return clk.Now(), true
		}
		clk.Advance(tick)
	}
	return time.Time{}, false
}

// TestStalenessDeterministic drives the sweeper with an injected clock.
func TestStalenessDeterministic(t *testing.T) {
	const window = 300 * time.Second
	ctx := context.Background()

	t.Run("a run that heartbeats is never marked", func(t *testing.T) {
		l, clk, p, task := staleSetup(t, 0)
		r := startRun(t, l, p, task)
		for range 200 { // 200 heartbeats, a third of the window apart: 100 windows
			clk.Advance(window / 3)
			n, err := l.MarkStale(ctx, window)
			require.NoError(t, err)
			require.Zero(t, n, "a live run was marked stale")
			exec(t, l, reducer.RecordHeartbeat{Project: p, RunID: r})
		}
		prj, _ := l.Project(p)
		run, _ := prj.Run(r)
		assert.Equal(t, reducer.RunRunning, run.Status)
	})

	t.Run("a run that stops is marked within the window plus a tenth", func(t *testing.T) {
		l, clk, p, task := staleSetup(t, 1)
		r := startRun(t, l, p, task)
		clk.Advance(time.Minute)
		last := exec(t, l, reducer.ProgressRun{Project: p, RunID: r, Progress: "compiling"}).Events[0].Time
		marked, ok := sweepUntil(t, l, clk, window, 2*window)
		require.True(t, ok, "never marked")
		lag := marked.Sub(time.UnixMilli(last))
		assert.Greater(t, lag, window, "marked before its window ran out")
		assert.LessOrEqual(t, lag, window+window/10, "marked too late")

		prj, _ := l.Project(p)
		run, _ := prj.Run(r)
		tk, _ := prj.Task(task)
		assert.Equal(t, reducer.RunStale, run.Status)
		assert.Equal(t, reducer.TaskStale, tk.Status)
		assert.Equal(t, uint32(1), tk.Retries, "the stale attempt spends a retry")
		assert.Equal(t, reducer.ProjectActive, prj.Status(), "a stale task can be started again")

		// The zombie is fenced: heartbeat, progress and finish are refused
		// and append nothing.
		before := prj.LastSequence
		for _, c := range []reducer.Command{
			reducer.RecordHeartbeat{Project: p, RunID: r},
			reducer.ProgressRun{Project: p, RunID: r, Progress: "still here"},
			reducer.FinishRun{Project: p, RunID: r, Status: reducer.RunSucceeded},
		} {
			_, err := l.Execute(ctx, c)
			assert.ErrorIs(t, err, reducer.ErrRunNotRunning, "%T", c)
		}
		prj, _ = l.Project(p)
		assert.Equal(t, before, prj.LastSequence, "a fenced write appended")

		// The stale task starts again; a second stale attempt exhausts
		// max_retries 1 and fails the task and the project.
		r2 := startRun(t, l, p, task)
		prj, _ = l.Project(p)
		run2, _ := prj.Run(r2)
		assert.Equal(t, uint32(2), run2.Attempt)
		_, ok = sweepUntil(t, l, clk, window, 2*window)
		require.True(t, ok, "second run never marked")
		prj, _ = l.Project(p)
		tk, _ = prj.Task(task)
		assert.Equal(t, reducer.TaskFailed, tk.Status)
		assert.Equal(t, uint32(2), tk.Retries)
		assert.Equal(t, reducer.ProjectFailed, prj.Status())
	})

	t.Run("a run that never heartbeated is marked from its start", func(t *testing.T) {
		l, clk, p, task := staleSetup(t, 0)
		r := startRun(t, l, p, task)
		prj, _ := l.Project(p)
		run, _ := prj.Run(r)
		marked, ok := sweepUntil(t, l, clk, window, 2*window)
		require.True(t, ok)
		lag := marked.Sub(time.UnixMilli(run.Started))
		assert.Greater(t, lag, window)
		assert.LessOrEqual(t, lag, window+window/10)
		prj, _ = l.Project(p)
		tk, _ := prj.Task(task)
		assert.Equal(t, reducer.TaskFailed, tk.Status, "max_retries 0: the first stale attempt is final")
		assert.Equal(t, reducer.ProjectFailed, prj.Status())
	})
}

// TestCoalescedHeartbeats: N heartbeats inside one interval append one
// event, each is acknowledged with the project's state, and the first
// after the interval appends the next. Progress is always journaled.
func TestCoalescedHeartbeats(t *testing.T) {
	const every = 30 * time.Second
	l, clk, p, task := staleSetup(t, 0)
	r := startRun(t, l, p, task)
	db := rawDB(t, l.Path())
	beat := reducer.RecordHeartbeat{Project: p, RunID: r, Every: every.Milliseconds()}

	before := count(t, db)
	first := exec(t, l, beat)
	require.Len(t, first.Events, 1)
	for range 299 {
		clk.Advance(every / 300)
		res := exec(t, l, beat)
		assert.Empty(t, res.Events, "a heartbeat inside the interval was journaled")
		require.NotNil(t, res.Project, "a coalesced heartbeat is answered with the project")
		assert.Equal(t, p, res.Project.ID)
	}
	assert.Equal(t, before+1, count(t, db), "300 heartbeats inside one interval")
	prj, _ := l.Project(p)
	assert.Equal(t, first.Events[0].Time, prj.LastHeartbeat, "the journaled heartbeat is the last one known")

	clk.Set(first.Events[0].Time + every.Milliseconds()) // exactly one interval later
	next := exec(t, l, beat)
	assert.Len(t, next.Events, 1, "the first heartbeat after the interval is journaled")

	// Progress is journaled whatever the interval, and counts as a
	// heartbeat: a heartbeat right after it is coalesced.
	clk.Advance(time.Second)
	assert.Len(t, exec(t, l, reducer.ProgressRun{Project: p, RunID: r, Progress: "a"}).Events, 1)
	assert.Len(t, exec(t, l, reducer.ProgressRun{Project: p, RunID: r, Progress: "b"}).Events, 1)
	assert.Empty(t, exec(t, l, beat).Events)

	// Every 0 journals every heartbeat.
	beat.Every = 0
	assert.Len(t, exec(t, l, beat).Events, 1)
	assert.Len(t, exec(t, l, beat).Events, 1)

	// A coalesced heartbeat from a fenced run is still refused.
	exec(t, l, reducer.FinishRun{Project: p, RunID: r, Status: reducer.RunCancelled})
	beat.Every = every.Milliseconds()
	_, err := l.Execute(context.Background(), beat)
	assert.ErrorIs(t, err, reducer.ErrRunNotRunning)
}

// TestSweeperAtTheEdge races a heartbeat against the sweep at the instant
// the run's window runs out: the two are decided one after the other in
// the writer, so the run is either refreshed (and not marked) or marked
// (and the heartbeat refused), never both.
func TestSweeperAtTheEdge(t *testing.T) {
	const window = 10 * time.Second
	ctx := context.Background()
	refreshed, stale := 0, 0
	for round := range 40 {
		l, clk, p, task := staleSetup(t, 5)
		r := startRun(t, l, p, task)
		prj, _ := l.Project(p)
		run, _ := prj.Run(r)
		clk.Set(run.Started + window.Milliseconds() + 1) // just past the window

		var wg sync.WaitGroup
		var beatErr, sweepErr error
		var beat ledger.Result
		var marked int
		wg.Go(func() { beat, beatErr = l.Execute(ctx, reducer.RecordHeartbeat{Project: p, RunID: r}) })
		wg.Go(func() { marked, sweepErr = l.MarkStale(ctx, window) })
		wg.Wait()
		require.NoError(t, sweepErr)

		prj, _ = l.Project(p)
		run, _ = prj.Run(r)
		if beatErr == nil {
			refreshed++
			assert.Len(t, beat.Events, 1, "round %d", round)
			assert.Zero(t, marked, "round %d: refreshed and marked stale", round)
			assert.Equal(t, reducer.RunRunning, run.Status, "round %d", round)
		} else {
			stale++
			assert.ErrorIs(t, beatErr, reducer.ErrRunNotRunning, "round %d", round)
			assert.Equal(t, 1, marked, "round %d", round)
			assert.Equal(t, reducer.RunStale, run.Status, "round %d", round)
		}
		require.NoError(t, l.Close())
	}
	t.Logf("edge: %d rounds refreshed first, %d marked first", refreshed, stale)
}
