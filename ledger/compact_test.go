package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// bigProject appends n progress events to a fresh project and returns the
// ledger's path and the fixture.
func bigProject(t *testing.T, l *ledger.Ledger, n int) fixture {
	t.Helper()
	f := newFixture(t, l, "alpha", t.TempDir())
	for range n {
		exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "step"})
	}
	return f
}

// TestCompaction: a project with 600+ events compacted with retain 100
// keeps exactly its 100 newest events live, says compacted_before, keeps
// its state, also after a reopen, archives the rest row for row, and goes
// on appending to the same chain.
func TestCompaction(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	f := bigProject(t, l, 620)
	other := newFixture(t, l, "beta", t.TempDir())
	db := rawDB(t, path)
	before := rows(t, db)
	p, _ := l.Project(f.project)
	want := observe(p)

	c, err := l.Compact(ctx, "alpha", 100)
	require.NoError(t, err)
	assert.Equal(t, 100, c.Live)
	var live, archived int
	require.NoError(t, db.Get(&live, `SELECT count(*) FROM events WHERE project_id = ?`, f.project))
	require.NoError(t, db.Get(&archived, `SELECT count(*) FROM events_archive WHERE project_id = ?`, f.project))
	assert.Equal(t, 100, live)
	assert.Equal(t, c.Archived, archived)
	var liveSeqs []uint64
	require.NoError(t, db.Select(&liveSeqs, `SELECT sequence FROM events WHERE project_id = ? ORDER BY sequence`, f.project))
	assert.Greater(t, liveSeqs[0], c.Sequence, "the live tail starts after S")

	// The archive holds the removed events exactly, hashes included.
	var arch []ledger.Row
	require.NoError(t, db.Select(&arch, `SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM events_archive ORDER BY sequence`))
	var removed []ledger.Row
	for _, r := range before {
		if r.ProjectID == f.project && r.Sequence <= c.Sequence {
			removed = append(removed, r)
		}
	}
	assert.Equal(t, removed, arch)

	// Reads: the same state; events that reach back before S are marked.
	p, _ = l.Project(f.project)
	assert.Equal(t, want, observe(p))
	page, err := l.EventsPage(ctx, f.project, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, c.Sequence, page.CompactedBefore)
	assert.Len(t, page.Rows, 100)
	page, err = l.EventsPage(ctx, f.project, c.Sequence, 0)
	require.NoError(t, err)
	assert.Zero(t, page.CompactedBefore, "reading from S on carries no compaction mark")
	page, err = l.EventsPage(ctx, other.project, 0, 0)
	require.NoError(t, err)
	assert.Zero(t, page.CompactedBefore, "another project is untouched")

	// After a reopen: the same state, from the snapshot plus the tail.
	require.NoError(t, l.Close())
	l = open(t, path, ledger.Options{})
	p, _ = l.Project(f.project)
	assert.Equal(t, want, observe(p))

	// The chain goes on, and verify walks archive and tail as one.
	exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "after"})
	require.NoError(t, l.Close())
	rep := verify(t, path, ledger.VerifyOptions{})
	assert.Empty(t, rep.Problems)
	assert.Equal(t, 1, rep.Snapshots)

	// Retaining more than there is does nothing; an unknown project is
	// not found.
	l = open(t, path, ledger.Options{})
	c2, err := l.Compact(ctx, "alpha", 1000)
	require.NoError(t, err)
	assert.Zero(t, c2.Sequence)
	_, err = l.Compact(ctx, "nope", 0)
	assert.ErrorIs(t, err, reducer.ErrNotFound)

	// Compacting again with retain 0 folds everything, on top of the
	// first snapshot.
	c3, err := l.Compact(ctx, "alpha", 0)
	require.NoError(t, err)
	assert.Zero(t, c3.Live)
	p, _ = l.Project(f.project)
	require.NoError(t, l.Close())
	l = open(t, path, ledger.Options{})
	q, _ := l.Project(f.project)
	assert.Equal(t, observe(p), observe(q))
	require.NoError(t, l.Close())
	assert.Empty(t, verify(t, path, ledger.VerifyOptions{}).Problems)
}

// TestCompactionCrash: a compaction that fails between its steps (after
// the snapshot, after the archive copy, after the DELETE) keeps nothing:
// after a restart the database is as before it, and verify passes.
func TestCompactionCrash(t *testing.T) {
	for _, point := range []ledger.Failpoint{ledger.FailSnapshot, ledger.FailCompactArchive, ledger.FailCompactDelete} {
		t.Run(string(point), func(t *testing.T) {
			ctx := context.Background()
			path := dbPath(t)
			l := open(t, path, ledger.Options{})
			f := bigProject(t, l, 50)
			db := rawDB(t, path)
			before := rows(t, db)
			undo, err := ledger.SetFailpoints(string(point) + "=error")
			require.NoError(t, err)
			_, err = l.Compact(ctx, f.project, 10)
			undo()
			require.ErrorIs(t, err, ledger.ErrFailpoint)
			assert.ErrorIs(t, err, ledger.ErrStorage)
			assert.Contains(t, err.Error(), string(point))
			require.NoError(t, l.Close())

			l = open(t, path, ledger.Options{})
			assert.Equal(t, before, rows(t, db), "the live tail is as before")
			var snaps, archived int
			require.NoError(t, db.Get(&snaps, `SELECT count(*) FROM snapshots`))
			require.NoError(t, db.Get(&archived, `SELECT count(*) FROM events_archive`))
			assert.Zero(t, snaps)
			assert.Zero(t, archived)
			// and compaction works afterwards
			_, err = l.Compact(ctx, f.project, 10)
			require.NoError(t, err)
			require.NoError(t, l.Close())
			assert.Empty(t, verify(t, path, ledger.VerifyOptions{}).Problems)
		})
	}
}
