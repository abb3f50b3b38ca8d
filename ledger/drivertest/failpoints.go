package drivertest

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

// testFailpoints: a write that fails at any failpoint (the error action)
// keeps nothing: not in the database, not in the served state, not a
// sequence; and the ledger goes on.
func testFailpoints(t *testing.T, h Harness) {
	failpoints := func(t *testing.T, spec string) ledger.Failpoints {
		t.Helper()
		fp, err := ledger.ParseFailpoints(spec)
		require.NoError(t, err)
		require.NotNil(t, fp)
		return fp
	}

	for _, point := range []ledger.Failpoint{ledger.FailAfterBegin, ledger.FailAfterInsert} {
		t.Run(string(point), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t, h)
			clk := newClock(1_800_000_000_000)
			l := e.open(ledger.Options{Clock: clk.Now})
			f := newFixture(t, l, "acme")
			f.progress(t, l, 20, "step")
			want := viewOf(t, project(t, l, f.project))
			require.NoError(t, l.Close())
			before := e.contents()

			clk.Advance(time.Hour)
			l = e.open(ledger.Options{Clock: clk.Now, Failpoints: failpoints(t, string(point)+"=error")})
			assert.Equal(t, want, viewOf(t, project(t, l, f.project)), "reads pass no failpoint")
			// Several writers at once, so that a batch may carry more
			// than one command, a new project among them: each fails.
			ws := t.TempDir()
			cmds := []reducer.Command{reducer.CreateProject{ProjectID: id(), Name: "beta", Workspace: ws}}
			for range 8 {
				cmds = append(cmds, reducer.AddTask{Project: f.project, TaskID: id(), Title: "lost"})
			}
			errs := make([]error, len(cmds))
			var wg sync.WaitGroup
			for i, c := range cmds {
				wg.Go(func() { _, errs[i] = l.Execute(ctx, c) })
			}
			wg.Wait()
			for i, err := range errs {
				require.ErrorIs(t, err, ledger.ErrStorage, "command %d: as a failed write", i)
				assert.Contains(t, err.Error(), "failpoint "+string(point), "command %d", i)
			}
			_, err := l.MarkStale(ctx, time.Minute, nil)
			assert.ErrorIs(t, err, ledger.ErrStorage, "the sweep's write fails too")
			assert.ErrorContains(t, err, "failpoint "+string(point))
			if point == ledger.FailAfterBegin {
				// A maintenance op passes after-begin too (after-insert
				// is for command batches only).
				_, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 1})
				require.ErrorIs(t, err, ledger.ErrStorage)
				assert.Contains(t, err.Error(), "failpoint after-begin")
			}
			assert.Equal(t, want, viewOf(t, project(t, l, f.project)), "the served state is as before")
			_, err = l.Project(ctx, "beta")
			assert.ErrorIs(t, err, reducer.ErrNotFound, "the failed project is not served")
			assert.Equal(t, before, e.contents(), "the database is as before")
			require.NoError(t, l.Close())

			l = e.open(ledger.Options{})
			assert.Equal(t, want, viewOf(t, project(t, l, f.project)), "the state after a reopen is as before")
			res := exec(t, l, reducer.CreateProject{ProjectID: id(), Name: "beta", Workspace: ws})
			assert.Equal(t, before.Last+1, res.Events[0].Sequence, "no sequence was used by what failed, and the name is free")
			require.NoError(t, l.Close())
			assert.Empty(t, e.verify(ledger.VerifyOptions{}).Problems)
		})
	}

	for _, tc := range []struct {
		point ledger.Failpoint
		drop  bool
	}{
		{ledger.FailSnapshot, false},
		{ledger.FailSnapshot, true},
		{ledger.FailCompactArchive, false},
		{ledger.FailCompactDelete, false},
		{ledger.FailCompactDelete, true},
	} {
		name := string(tc.point)
		if tc.drop {
			name += "/drop"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A compaction that fails between its steps keeps nothing:
			// no snapshot, nothing archived or deleted, the same live
			// counts; a compaction without the failpoint then works.
			ctx := context.Background()
			e := newEnv(t, h)
			l := e.open(ledger.Options{})
			f := newFixture(t, l, "acme")
			f.progress(t, l, 30, "step")
			want := viewOf(t, project(t, l, f.project))
			require.NoError(t, l.Close())
			before := e.contents()

			l = e.open(ledger.Options{Failpoints: failpoints(t, string(tc.point)+"=error")})
			_, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 10, Drop: tc.drop})
			require.ErrorIs(t, err, ledger.ErrFailpoint)
			assert.ErrorIs(t, err, ledger.ErrStorage)
			assert.Contains(t, err.Error(), string(tc.point))
			assert.Equal(t, before, e.contents(), "the database is as before")
			assert.Equal(t, want, viewOf(t, project(t, l, f.project)))
			// Commands pass none of the compaction's failpoints.
			exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "after"})
			require.NoError(t, l.Close())

			l = e.open(ledger.Options{})
			c, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 10, Drop: tc.drop})
			require.NoError(t, err)
			assert.Positive(t, c.Archived)
			require.NoError(t, l.Close())
			assert.Empty(t, e.verify(ledger.VerifyOptions{}).Problems)
		})
	}

	t.Run("compact-archive/drop", func(t *testing.T) {
		t.Parallel()
		// A compaction that drops does not reach compact-archive.
		e := newEnv(t, h)
		l := e.open(ledger.Options{Failpoints: failpoints(t, "compact-archive=error")})
		f := newFixture(t, l, "acme")
		f.progress(t, l, 10, "step")
		c, err := l.Compact(context.Background(), f.project, ledger.CompactOptions{Retain: 2, Drop: true})
		require.NoError(t, err)
		assert.Positive(t, c.Archived)
	})
}
