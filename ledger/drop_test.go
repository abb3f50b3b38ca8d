package ledger_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestCompactionDrop: the operator may drop what compaction folds instead
// of archiving it. The state is the same, before and after a reopen; the
// chain from the snapshot on verifies; an edit of the snapshot is found;
// time travel before the snapshot says the history was dropped.
func TestCompactionDrop(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	f := bigProject(t, l, 40)
	p, _ := l.Project(f.project)
	want := observe(p)

	c, err := l.CompactWith(ctx, f.project, ledger.CompactOptions{Retain: 10, Drop: true})
	require.NoError(t, err)
	db := rawDB(t, path)
	var archived, live int
	require.NoError(t, db.Get(&archived, `SELECT count(*) FROM events_archive`))
	require.NoError(t, db.Get(&live, `SELECT count(*) FROM events WHERE project_id = ?`, f.project))
	assert.Zero(t, archived, "dropped, not archived")
	assert.Equal(t, 10, live)
	p, _ = l.Project(f.project)
	assert.Equal(t, want, observe(p))
	exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "after"})
	require.NoError(t, l.Close())

	l = open(t, path, ledger.Options{})
	p, _ = l.Project(f.project)
	want = observe(p)
	require.NoError(t, l.Close())

	rep := verify(t, path, ledger.VerifyOptions{})
	assert.Empty(t, rep.Problems)
	require.Len(t, rep.Chains, 1)
	assert.Equal(t, c.Sequence, rep.Chains[0].From)
	assert.Equal(t, "alpha", rep.Chains[0].Name)
	assert.Equal(t, 11, rep.Chains[0].Events)

	// Time travel: after the snapshot it works; before it, the history is gone.
	at, err := ledger.ProjectAt(ctx, path, "alpha", c.Sequence+1)
	require.NoError(t, err)
	assert.Equal(t, f.project, at.ID)
	now, err := ledger.ProjectAt(ctx, path, "alpha", 1<<40)
	require.NoError(t, err)
	assert.Equal(t, want, observe(now))
	_, err = ledger.ProjectAt(ctx, path, "alpha", c.Sequence-1)
	assert.ErrorIs(t, err, reducer.ErrNotFound)

	// A bundle of the dropped project verifies the same way.
	var bundle bytes.Buffer
	_, err = ledger.Export(ctx, path, "alpha", &bundle)
	require.NoError(t, err)
	brep, err := ledger.VerifyBundle(&bundle, nil)
	require.NoError(t, err)
	assert.Empty(t, brep.Problems)

	// The snapshot is now the proof of the dropped history: an edit of it
	// is found.
	var state []byte
	require.NoError(t, db.Get(&state, `SELECT state FROM snapshots`))
	state[len(state)-2] ^= 1
	_, err = db.Exec(`UPDATE snapshots SET state = ?`, state)
	require.NoError(t, err)
	pr := firstProblem(t, verify(t, path, ledger.VerifyOptions{}))
	assert.Equal(t, c.Sequence, pr.Sequence)
	assert.Contains(t, pr.What, "dropped")
}
