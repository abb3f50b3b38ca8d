package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// testWrites: sequences, acknowledgements and refusals.
func testWrites(t *testing.T, h Harness) {
	t.Run("GaplessUnder64Appenders", func(t *testing.T) {
		t.Parallel()
		// 64 goroutines append to their own runs at once, half of them
		// through Submit (answered by the goroutine that committed the
		// batch), half through Execute. Every
		// acknowledged command has distinct sequences, increasing for
		// each goroutine, that with the setup form 1..max without a gap;
		// after a reopen the database holds exactly the acknowledged
		// events and folds to the same states.
		const appenders, perAppender = 64, 20
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})

		fixtures := make([]fixture, appenders)
		var setup sync.WaitGroup
		for i := range fixtures {
			setup.Go(func() { fixtures[i] = newFixture(t, l, fmt.Sprintf("project-%02d", i)) })
		}
		setup.Wait()
		acked := map[uint64]reducer.Event{}
		var ids []string
		for _, f := range fixtures {
			ids = append(ids, f.project)
			for _, ev := range f.setup {
				acked[ev.Sequence] = ev
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
					var res ledger.Result
					var err error
					if g%2 == 0 {
						res, err = l.Execute(ctx, c)
					} else {
						answered := make(chan struct{})
						l.Submit(ctx, c, func(r ledger.Result, e error) {
							res, err = r, e
							close(answered) // a second answer panics
						})
						<-answered
					}
					if err != nil {
						out.errs = append(out.errs, err)
						continue
					}
					out.events = append(out.events, res.Events...)
					if res.Project == nil || len(res.Events) != 1 || res.Project.LastSequence != res.Events[0].Sequence {
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
			for _, ev := range out.events {
				assert.Equal(t, fixtures[g].project, ev.ProjectID, "appender %d got an event of another project", g)
				assert.Greater(t, ev.Sequence, last, "appender %d: sequences must strictly increase", g)
				last = ev.Sequence
				_, dup := acked[ev.Sequence]
				assert.False(t, dup, "sequence %d acknowledged twice", ev.Sequence)
				acked[ev.Sequence] = ev
			}
		}
		t.Logf("64 appenders: %d commands acknowledged in %v", total, elapsed.Round(time.Millisecond))
		seqs := slices.Sorted(mapKeys(acked))
		require.Len(t, seqs, appenders*(3+perAppender))
		for i, s := range seqs {
			if !assert.Equal(t, uint64(i+1), s, "sequences must be exactly 1..max with no gap") {
				break
			}
		}

		before := map[string]view{}
		for _, id := range ids {
			before[id] = viewOf(t, project(t, l, id))
		}
		l = e.restart(l, ledger.Options{})
		rows := e.history()
		require.Len(t, rows, len(acked), "the database holds exactly the acknowledged events")
		for _, r := range rows {
			want, ok := acked[r.Sequence]
			if assert.True(t, ok, "event %d was never acknowledged", r.Sequence) {
				assert.Equal(t, want, eventOf(t, r), "event %d differs from what Execute returned", r.Sequence)
			}
		}
		assertMatches(t, foldRows(t, rows), l, ids...)
		for _, id := range ids {
			p := project(t, l, id)
			assert.Equal(t, before[id], viewOf(t, p), "project %s after the reopen", id)
			if r := p.Runs()[0]; assert.NotNil(t, r.Progress) {
				assert.Equal(t, fmt.Sprintf("step %d", perAppender-1), *r.Progress, "the last progress wins")
			}
		}
	})

	t.Run("RefusedAppendsNothing", func(t *testing.T) {
		t.Parallel()
		// Each refused command returns the reducer's sentinel and leaves
		// the database (events, sequence, projects rows) and the
		// committed state as they were; the next accepted command gets
		// the very next sequence.
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		ws := t.TempDir()
		f := newFixture(t, l, "alpha")
		pending, finished, other := id(), id(), id()
		exec(t, l, reducer.AddTask{Project: f.project, TaskID: pending, Title: "after work", DependsOn: []string{f.task}})
		exec(t, l, reducer.AddTask{Project: f.project, TaskID: other, Title: "other"})
		exec(t, l, reducer.StartRun{Project: f.project, TaskID: other, RunID: finished, Agent: "a"})
		exec(t, l, reducer.FinishRun{Project: f.project, RunID: finished, Status: reducer.RunCancelled})

		for _, c := range []struct {
			name string
			cmd  reducer.Command
			want error
		}{
			{"run_start on a pending task", reducer.StartRun{Project: f.project, TaskID: pending, RunID: id(), Agent: "a"}, reducer.ErrInvalidTransition},
			{"duplicate project name", reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: ws}, reducer.ErrConflict},
			{"duplicate project ID", reducer.CreateProject{ProjectID: f.project, Name: "gamma", Workspace: ws}, reducer.ErrConflict},
			{"a name that is another project's ID", reducer.CreateProject{ProjectID: id(), Name: f.project, Workspace: ws}, reducer.ErrConflict},
			{"an ID that is another project's name", reducer.CreateProject{ProjectID: "alpha", Name: "gamma", Workspace: ws}, reducer.ErrConflict},
			{"unknown project", reducer.AddTask{Project: "nope", TaskID: id(), Title: "t"}, reducer.ErrNotFound},
			{"unknown dependency", reducer.AddTask{Project: f.project, TaskID: id(), Title: "t", DependsOn: []string{id()}}, reducer.ErrNotFound},
			{"duplicate task", reducer.AddTask{Project: f.project, TaskID: f.task, Title: "again"}, reducer.ErrConflict},
			{"empty title", reducer.AddTask{Project: "alpha", TaskID: id(), Title: ""}, reducer.ErrInvalidArgument},
			{"relative workspace", reducer.CreateProject{ProjectID: id(), Name: "gamma", Workspace: "rel/ws"}, reducer.ErrInvalidArgument},
			{"empty name", reducer.CreateProject{ProjectID: id(), Name: "", Workspace: ws}, reducer.ErrInvalidArgument},
			{"progress of a finished run", reducer.ProgressRun{Project: f.project, RunID: finished, Progress: "zombie"}, reducer.ErrRunNotRunning},
			{"finish as running", reducer.FinishRun{Project: f.project, RunID: f.run, Status: reducer.RunRunning}, reducer.ErrInvalidArgument},
			{"update of a running task", reducer.UpdateTask{Project: f.project, TaskID: f.task, Status: reducer.TaskDone}, reducer.ErrInvalidTransition},
		} {
			before := e.contents()
			viewBefore := viewOf(t, project(t, l, f.project))
			res, err := l.Execute(context.Background(), c.cmd)
			assert.ErrorIs(t, err, c.want, c.name)
			assert.Empty(t, res.Events, c.name)
			assert.Nil(t, res.Project, c.name)
			assert.Equal(t, before, e.contents(), "%s: a refused command changes nothing in the database", c.name)
			assert.Equal(t, viewBefore, viewOf(t, project(t, l, f.project)), "%s: a refused command changes no state", c.name)
			_, err = l.Project(context.Background(), "gamma")
			assert.ErrorIs(t, err, reducer.ErrNotFound, c.name)
		}

		seq := e.lastSequence()
		res := exec(t, l, reducer.RecordHeartbeat{Project: f.project})
		require.Len(t, res.Events, 1)
		assert.Equal(t, seq+1, res.Events[0].Sequence, "refusals leave no gap")

		// Accepted commands that decide nothing append nothing: a
		// MarkStale that finds no silent run, a coalesced heartbeat.
		before := e.contents()
		res = exec(t, l, reducer.MarkStale{Project: f.project, Window: time.Hour.Milliseconds()})
		assert.Empty(t, res.Events)
		require.NotNil(t, res.Project)
		assert.Equal(t, f.project, res.Project.ID)
		res = exec(t, l, reducer.RecordHeartbeat{Project: f.project, Every: time.Hour.Milliseconds()})
		assert.Empty(t, res.Events)
		assert.Equal(t, before, e.contents())
	})

	t.Run("RefusalsInABatchAppendNothing", func(t *testing.T) {
		t.Parallel()
		// Refused and accepted commands queued at once, so that group
		// commit carries both in one transaction: exactly the accepted
		// ones are appended, and no refused project gets a row.
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		ws := t.TempDir()
		f := newFixture(t, l, "alpha")
		before := e.lastSequence()

		const n = 150
		var wg sync.WaitGroup
		errs := make([]error, n)
		results := make([]ledger.Result, n)
		for i := range n {
			wg.Go(func() {
				var c reducer.Command
				switch i % 3 {
				case 0:
					c = reducer.RecordHeartbeat{Project: f.project, RunID: f.run}
				case 1:
					c = reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: ws}
				default:
					c = reducer.CreateProject{ProjectID: id(), Name: fmt.Sprintf("new-%d", i), Workspace: "relative"}
				}
				results[i], errs[i] = l.Execute(context.Background(), c)
			})
		}
		wg.Wait()
		accepted := 0
		for i := range n {
			switch i % 3 {
			case 0:
				if assert.NoError(t, errs[i], "command %d", i) {
					assert.Len(t, results[i].Events, 1)
					accepted++
				}
			case 1:
				assert.ErrorIs(t, errs[i], reducer.ErrConflict, "command %d", i)
				assert.Empty(t, results[i].Events)
			default:
				assert.ErrorIs(t, errs[i], reducer.ErrInvalidArgument, "command %d", i)
			}
		}
		c := e.contents()
		assert.Equal(t, before+uint64(accepted), c.Last)
		assert.Len(t, c.History, len(f.setup)+accepted)
		assert.Len(t, c.Projects, 1, "no row for a refused project")
		assert.Len(t, foldRows(t, c.History), 1)
	})

	t.Run("AcknowledgedIsCommitted", func(t *testing.T) {
		t.Parallel()
		// Once Execute returns, another driver on the database reads the
		// event, and the projects row says where the project ends.
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		for i := range 5 {
			res := exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: fmt.Sprint(i)})
			require.Len(t, res.Events, 1)
			live := e.live(f.project)
			require.NotEmpty(t, live)
			got := live[len(live)-1]
			assert.Equal(t, res.Events[0].Sequence, got.Sequence)
			assert.JSONEq(t, fmt.Sprintf(`{"run_id":%q,"progress":"%d"}`, f.run, i), got.Data)
			row := e.row(f.project)
			assert.Equal(t, got.Sequence, row.Head)
			assert.Equal(t, len(live), row.Live)
		}
	})
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// testNames: project names are unique, and the database holds them so.
func testNames(t *testing.T, h Harness) {
	t.Run("TwoLedgersRace", func(t *testing.T) {
		t.Parallel()
		// Goroutines on two ledgers, each on a driver of its own, create
		// projects from a small pool of names at once: each name is
		// taken exactly once.
		e := newEnv(t, h)
		ls := []*ledger.Ledger{e.open(ledger.Options{}), e.open(ledger.Options{})}
		ws := t.TempDir()
		names := []string{"n0", "n1", "n2", "n3", "n4"}
		const tries = 40
		var mu sync.Mutex
		won := map[string]int{}
		var wg sync.WaitGroup
		for i := range tries {
			wg.Go(func() {
				name := names[i%len(names)]
				_, err := ls[i%2].Execute(context.Background(), reducer.CreateProject{ProjectID: id(), Name: name, Workspace: ws})
				if err != nil {
					assert.ErrorIs(t, err, reducer.ErrConflict)
					return
				}
				mu.Lock()
				won[name]++
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, n := range names {
			assert.Equal(t, 1, won[n], "name %s taken %d times", n, won[n])
		}
		c := e.contents()
		assert.Len(t, c.History, len(names))
		for i, r := range c.History {
			assert.Equal(t, uint64(i+1), r.Sequence)
		}
		require.Len(t, c.Projects, len(names))
		for _, l := range ls {
			for _, n := range names {
				assert.Equal(t, n, project(t, l, n).Name, "both ledgers resolve every name")
			}
		}
	})

	t.Run("OneWinnerEachRound", func(t *testing.T) {
		t.Parallel()
		// Two ledgers on one database, each with a writer of its own,
		// create the same name at the same instant, round after round:
		// exactly one wins, the other is refused with a conflict.
		e := newEnv(t, h)
		a, b := e.open(ledger.Options{}), e.open(ledger.Options{})
		ws := t.TempDir()
		for round := range 10 {
			name := fmt.Sprintf("race-%d", round)
			start := make(chan struct{})
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, l := range []*ledger.Ledger{a, b} {
				wg.Go(func() {
					<-start
					_, errs[i] = l.Execute(context.Background(), reducer.CreateProject{ProjectID: id(), Name: name, Workspace: ws})
				})
			}
			close(start)
			wg.Wait()
			ok := 0
			for _, err := range errs {
				if err == nil {
					ok++
				} else {
					assert.ErrorIs(t, err, reducer.ErrConflict, "round %d", round)
				}
			}
			assert.Equal(t, 1, ok, "round %d: %v", round, errs)
			assert.Equal(t, project(t, a, name).ID, project(t, b, name).ID, "round %d: both resolve the name to the winner", round)
		}
		assert.Len(t, e.contents().Projects, 10)
	})
}

// testTwoLedgers: two ledgers on one database each decide against what
// the other appended.
func testTwoLedgers(t *testing.T, h Harness) {
	t.Run("DecideAgainstTheOther", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, h)
		a, b := e.open(ledger.Options{}), e.open(ledger.Options{})
		ws := t.TempDir()
		proj, t1, t2 := id(), id(), id()
		exec(t, a, reducer.CreateProject{ProjectID: proj, Name: "shared", Workspace: ws})
		// Both have the project cached from here on.
		project(t, a, proj)
		project(t, b, proj)

		res := exec(t, b, reducer.AddTask{Project: "shared", TaskID: t1, Title: "through b"})
		require.NotNil(t, res.Project, "b knows the project a created")
		assert.Equal(t, proj, res.Project.ID)
		assert.Equal(t, uint64(2), res.Events[0].Sequence)

		res = exec(t, a, reducer.AddTask{Project: proj, TaskID: t2, Title: "through a", DependsOn: []string{t1}})
		assert.Equal(t, uint64(3), res.Events[0].Sequence)
		require.NotNil(t, res.Project)
		require.Len(t, res.Project.Tasks(), 2, "a folded b's task before deciding")
		assert.Equal(t, reducer.TaskPending, res.Project.Tasks()[1].Status)

		_, err := b.Execute(context.Background(), reducer.CreateProject{ProjectID: id(), Name: "shared", Workspace: ws})
		assert.ErrorIs(t, err, reducer.ErrConflict, "b must see that a took the name")
		_, err = b.Execute(context.Background(), reducer.AddTask{Project: proj, TaskID: t2, Title: "again"})
		assert.ErrorIs(t, err, reducer.ErrConflict, "b must see a's task")

		// A run started through a cannot be started again through b.
		run := id()
		exec(t, a, reducer.UpdateTask{Project: proj, TaskID: t1, Status: reducer.TaskReady})
		exec(t, a, reducer.StartRun{Project: proj, TaskID: t1, RunID: run, Agent: "a"})
		_, err = b.Execute(context.Background(), reducer.StartRun{Project: proj, TaskID: t1, RunID: id(), Agent: "b"})
		assert.ErrorIs(t, err, reducer.ErrInvalidTransition, "b must see a's run")
		exec(t, b, reducer.FinishRun{Project: proj, RunID: run, Status: reducer.RunSucceeded})
		_, err = a.Execute(context.Background(), reducer.ProgressRun{Project: proj, RunID: run, Progress: "zombie"})
		assert.ErrorIs(t, err, reducer.ErrRunNotRunning, "a must see b finish the run")

		// Both views agree with a fold of the database once each has
		// written.
		exec(t, b, reducer.RecordHeartbeat{Project: proj})
		exec(t, a, reducer.RecordHeartbeat{Project: proj})
		exec(t, b, reducer.RecordHeartbeat{Project: proj})
		want := foldRows(t, e.history())
		assertMatches(t, want, b, proj, "shared")
		// a has not seen b's last heartbeat yet: its next transaction
		// folds it.
		exec(t, a, reducer.MarkStale{Project: proj, Window: time.Hour.Milliseconds()})
		assertMatches(t, want, a, proj, "shared")
		assert.Empty(t, e.verify(ledger.VerifyOptions{}).Problems, "the chain and the projects rows of two writers")
	})
}

// testClose: closing answers every command, and loses no acknowledgement.
func testClose(t *testing.T, h Harness) {
	t.Run("AfterClose", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		require.NoError(t, l.Close())
		assert.NoError(t, l.Close(), "Close twice")
		res, err := l.Execute(context.Background(), reducer.RecordHeartbeat{Project: f.project})
		assert.ErrorIs(t, err, ledger.ErrClosed)
		assert.Empty(t, res.Events)
		_, err = l.Project(context.Background(), f.project)
		assert.ErrorIs(t, err, ledger.ErrClosed)
		_, err = l.EventsPage(context.Background(), f.project, 0, 0)
		assert.ErrorIs(t, err, ledger.ErrClosed)
		_, err = l.Compact(context.Background(), f.project, ledger.CompactOptions{})
		assert.ErrorIs(t, err, ledger.ErrClosed)
		assert.Len(t, e.history(), len(f.setup))
	})

	t.Run("LosesNoAcknowledgement", func(t *testing.T) {
		t.Parallel()
		// Close while 32 goroutines append: each command is answered
		// with success, and is then in the database after a reopen, or
		// with ErrClosed; nothing else, and nothing that was not
		// acknowledged is in the database.
		for round := range 2 {
			e := newEnv(t, h)
			l := e.open(ledger.Options{})
			f := newFixture(t, l, "alpha")
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
			for _, ev := range f.setup {
				want[ev.Sequence] = ev
			}
			for g := range appenders {
				assert.Empty(t, others[g], "round %d appender %d: an error other than ErrClosed", round, g)
				for _, ev := range acked[g] {
					want[ev.Sequence] = ev
				}
			}
			l2 := e.open(ledger.Options{})
			got := map[uint64]reducer.Event{}
			rows := e.history()
			for _, r := range rows {
				got[r.Sequence] = eventOf(t, r)
			}
			assert.Equal(t, want, got, "round %d: the database holds exactly the acknowledged events", round)
			assert.Equal(t, rows[len(rows)-1].Sequence, project(t, l2, f.project).LastSequence)
		}
	})
}

// testTime: timestamps never go back.
func testTime(t *testing.T, h Harness) {
	t.Run("NeverBack", func(t *testing.T) {
		t.Parallel()
		// Step the clock back and forth: every command is stamped
		// max(clock, the time of the project's last event), also after
		// a reopen and across two ledgers on one database.
		e := newEnv(t, h)
		clk := newClock(1000)
		l := e.open(ledger.Options{Clock: clk.Now})
		ws := t.TempDir()
		p := id()
		for i, s := range []struct{ clock, want int64 }{
			{1000, 1000}, // create
			{2000, 2000},
			{500, 2000}, // the clock stepped back
			{1999, 2000},
			{3000, 3000},
			{3000, 3000},
			{-5, 3000},
			{3001, 3001},
		} {
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
		prj := project(t, l, p)
		assert.Equal(t, int64(1000), prj.Created)
		assert.Equal(t, int64(3001), prj.LastHeartbeat)

		// Another project, on a clock behind: stamped after the newest
		// event of the ledger too.
		clk.Set(100)
		q := id()
		assert.Equal(t, int64(3001), exec(t, l, reducer.CreateProject{ProjectID: q, Name: "beta", Workspace: ws}).Events[0].Time)

		// A reopened ledger takes the last event's time from the database.
		l = e.restart(l, ledger.Options{Clock: clk.Now})
		assert.Equal(t, int64(3001), exec(t, l, reducer.RecordHeartbeat{Project: p}).Events[0].Time, "after a reopen")
		assert.Equal(t, int64(3001), exec(t, l, reducer.RecordHeartbeat{Project: q}).Events[0].Time, "after a reopen, another project")

		// A second ledger whose clock is far behind stamps after the
		// first's events, and the first after the second's.
		behind := newClock(50)
		b := e.open(ledger.Options{Clock: behind.Now})
		clk.Set(9000)
		assert.Equal(t, int64(9000), exec(t, l, reducer.RecordHeartbeat{Project: p}).Events[0].Time)
		assert.Equal(t, int64(9000), exec(t, b, reducer.RecordHeartbeat{Project: p}).Events[0].Time, "b behind a")
		behind.Set(9500)
		clk.Set(9100)
		assert.Equal(t, int64(9500), exec(t, b, reducer.RecordHeartbeat{Project: p}).Events[0].Time)
		assert.Equal(t, int64(9500), exec(t, l, reducer.RecordHeartbeat{Project: p}).Events[0].Time, "a behind b")
		assertNonDecreasing(t, e.history())
	})

	t.Run("NeverBackAfterCompaction", func(t *testing.T) {
		t.Parallel()
		// The newest event leaves the live tail (compaction keeping
		// nothing live, archived or dropped), then the ledger restarts
		// on a clock that stepped back: the next event, of another
		// project, is still not stamped before it.
		for _, drop := range []bool{false, true} {
			e := newEnv(t, h)
			clk := newClock(1000)
			l := e.open(ledger.Options{Clock: clk.Now})
			ws := t.TempDir()
			old, recent := id(), id()
			exec(t, l, reducer.CreateProject{ProjectID: old, Name: "old", Workspace: ws})
			clk.Set(5000)
			exec(t, l, reducer.CreateProject{ProjectID: recent, Name: "recent", Workspace: ws})
			exec(t, l, reducer.RecordHeartbeat{Project: recent})
			_, err := l.Compact(context.Background(), recent, ledger.CompactOptions{Retain: 0, Drop: drop})
			require.NoError(t, err)
			clk.Set(2000)
			l = e.restart(l, ledger.Options{Clock: clk.Now})
			res := exec(t, l, reducer.RecordHeartbeat{Project: old})
			assert.Equal(t, int64(5000), res.Events[0].Time, "drop %v: stamped before the newest event", drop)
			assertNonDecreasing(t, e.history())
		}
	})

	t.Run("NeverBackUnderLoad", func(t *testing.T) {
		t.Parallel()
		// A jittering clock while goroutines append: the stored times
		// never decrease along the sequence.
		e := newEnv(t, h)
		var mu sync.Mutex
		r := rand.New(rand.NewPCG(7, 7))
		jitter := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return time.Unix(10_000+r.Int64N(1000), 0)
		}
		l := e.open(ledger.Options{Clock: jitter})
		fs := []fixture{newFixture(t, l, "alpha"), newFixture(t, l, "beta")}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				f := fs[i%2]
				for range 20 {
					_, err := l.Execute(context.Background(), reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
					assert.NoError(t, err)
				}
			})
		}
		wg.Wait()
		rows := e.history()
		assertNonDecreasing(t, rows)
		newest := map[string]int64{}
		for _, r := range rows {
			newest[r.ProjectID] = r.TimestampMs
		}
		for _, f := range fs {
			assert.Equal(t, newest[f.project], project(t, l, f.project).Updated)
		}
	})
}

func assertNonDecreasing(t *testing.T, rows []driver.Event) {
	t.Helper()
	for i := 1; i < len(rows); i++ {
		assert.GreaterOrEqual(t, rows[i].TimestampMs, rows[i-1].TimestampMs, "event %d is stamped before event %d", rows[i].Sequence, rows[i-1].Sequence)
	}
}
