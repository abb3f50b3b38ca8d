package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// foldTo is the reference answer: the project's state from a plain fold of
// every event up to and including seq.
func foldTo(t *testing.T, all []ledger.Row, project string, seq uint64) []byte {
	t.Helper()
	var upTo []ledger.Row
	for _, r := range all {
		if r.Sequence <= seq {
			upTo = append(upTo, r)
		}
	}
	p, ok := fold(t, upTo).Project(project)
	require.True(t, ok, "project %s in the fold up to %d", project, seq)
	b, err := reducer.Snapshot(p)
	require.NoError(t, err)
	return b
}

func snapshotAt(t *testing.T, path, project string, seq uint64) (*reducer.Project, []byte) {
	t.Helper()
	p, err := ledger.ProjectAt(context.Background(), path, project, seq)
	require.NoError(t, err, "ProjectAt(%s, %d)", project, seq)
	b, err := reducer.Snapshot(p)
	require.NoError(t, err)
	return p, b
}

// TestProjectAt: a task goes ready → running → done over sequences, with
// another project's events interleaved; ProjectAt at every sequence gives
// exactly the state a fold up to it gives, before and after a compaction
// with retain 0 moved everything into the archive and a snapshot, and by
// ID or name.
func TestProjectAt(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	project, task, run := id(), id(), id()
	other := newFixture(t, l, "beta", t.TempDir())
	seqOf := func(c reducer.Command) uint64 {
		evs := exec(t, l, c).Events
		require.NotEmpty(t, evs)
		return evs[len(evs)-1].Sequence
	}
	created := seqOf(reducer.CreateProject{ProjectID: project, Name: "acme", Workspace: t.TempDir()})
	added := seqOf(reducer.AddTask{Project: project, TaskID: task, Title: "build"})
	exec(t, l, reducer.ProgressRun{Project: other.project, RunID: other.run, Progress: "elsewhere"})
	started := seqOf(reducer.StartRun{Project: project, TaskID: task, RunID: run, Agent: "codex"})
	progressed := seqOf(reducer.ProgressRun{Project: project, RunID: run, Progress: "half"})
	finished := seqOf(reducer.FinishRun{Project: project, RunID: run, Status: reducer.RunSucceeded})
	last := seqOf(reducer.ProgressRun{Project: other.project, RunID: other.run, Progress: "later"})

	all := rows(t, rawDB(t, path))
	statusAt := func(seq uint64) reducer.TaskStatus {
		p, _ := snapshotAt(t, path, "acme", seq)
		tk, ok := p.Task(task)
		require.True(t, ok)
		return tk.Status
	}
	check := func(when string) {
		t.Helper()
		for s := created; s <= last+5; s++ {
			want := foldTo(t, all, project, s)
			_, byName := snapshotAt(t, path, "acme", s)
			_, byID := snapshotAt(t, path, project, s)
			assert.Equal(t, want, byName, "%s: acme at %d", when, s)
			assert.Equal(t, want, byID, "%s: by ID at %d", when, s)
		}
		assert.Equal(t, reducer.TaskReady, statusAt(added), when)
		assert.Equal(t, reducer.TaskRunning, statusAt(started), when)
		assert.Equal(t, reducer.TaskRunning, statusAt(progressed), when)
		assert.Equal(t, reducer.TaskDone, statusAt(finished), when)

		// Beyond the newest event: the current state.
		cur, ok := l.Project(project)
		require.True(t, ok)
		want, err := reducer.Snapshot(cur)
		require.NoError(t, err)
		_, got := snapshotAt(t, path, "acme", 1<<62)
		assert.Equal(t, want, got, "%s: the current state past the end", when)

		// Before the project existed, and a project never created.
		_, err = ledger.ProjectAt(ctx, path, "acme", created-1)
		assert.ErrorIs(t, err, reducer.ErrNotFound, when)
		_, err = ledger.ProjectAt(ctx, path, "nope", last)
		assert.ErrorIs(t, err, reducer.ErrNotFound, when)
	}
	check("live")

	c, err := l.Compact(ctx, "acme", 0)
	require.NoError(t, err)
	require.Equal(t, finished, c.Sequence, "everything of acme in the snapshot")
	var live int
	require.NoError(t, rawDB(t, path).Get(&live, `SELECT count(*) FROM events WHERE project_id = ?`, project))
	require.Zero(t, live)
	check("compacted")

	// One more event after the snapshot: folded on top of it.
	after := seqOf(reducer.AddTask{Project: project, TaskID: id(), Title: "ship"})
	all = rows(t, rawDB(t, path))
	var archived []ledger.Row
	require.NoError(t, rawDB(t, path).Select(&archived, `SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash
		FROM events_archive ORDER BY sequence`))
	all = append(archived, all...)
	reordered := make([]ledger.Row, 0, len(all))
	for s := uint64(1); s <= after; s++ {
		for _, r := range all {
			if r.Sequence == s {
				reordered = append(reordered, r)
			}
		}
	}
	_, got := snapshotAt(t, path, "acme", after)
	assert.Equal(t, foldTo(t, reordered, project, after), got)
	_, got = snapshotAt(t, path, "acme", started)
	assert.Equal(t, foldTo(t, reordered, project, started), got, "before the snapshot, from the archive")
}

// TestProjectAtMissingFile: a path with no database is an error, and no
// file is created.
func TestProjectAtMissingFile(t *testing.T) {
	path := dbPath(t)
	_, err := ledger.ProjectAt(context.Background(), path, "acme", 1)
	require.Error(t, err)
	assert.NoFileExists(t, path)
}
