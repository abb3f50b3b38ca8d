package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/postgres/pgtest"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// TestLedgerCopyToPostgres: a compacted SQLite ledger (one project
// archived, one whose compaction dropped its events) copied into
// PostgreSQL keeps its sequences and hashes: verify passes on the copy
// with the same chains and heads, the state and the stored events at
// every sequence (what `--at`, the graph and the timeline read) are the
// same on both, and a second copy into the now full database is refused.
func TestLedgerCopyToPostgres(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	exec := func(cmd reducer.Command) {
		t.Helper()
		_, err := l.Execute(ctx, cmd)
		require.NoError(t, err)
	}
	for _, p := range []string{"kept", "dropped"} {
		exec(reducer.CreateProject{ProjectID: "P-" + p, Name: p, Workspace: "/w/" + p})
		exec(reducer.AddTask{Project: p, TaskID: "T-" + p, Title: "build"})
		exec(reducer.StartRun{Project: p, TaskID: "T-" + p, RunID: "R-" + p, Agent: "codex"})
		for i := range 30 {
			exec(reducer.ProgressRun{Project: p, RunID: "R-" + p, Progress: fmt.Sprint("step ", i)})
		}
		exec(reducer.FinishRun{Project: p, RunID: "R-" + p, Status: reducer.RunSucceeded})
	}
	_, err = l.Compact(ctx, "kept", ledger.CompactOptions{Retain: 5})
	require.NoError(t, err)
	_, err = l.Compact(ctx, "dropped", ledger.CompactOptions{Retain: 3, Drop: true})
	require.NoError(t, err)
	require.NoError(t, l.Close())

	from, err := sqlite.OpenReadOnly(ctx, path)
	require.NoError(t, err)
	defer from.Close()
	to := pgtest.Harness{}.Open(t, url)
	rep, err := ledger.Copy(ctx, from, to, nil)
	require.NoError(t, err)
	assert.Positive(t, rep.Archived)
	assert.Equal(t, 2, rep.Projects)

	src, err := ledger.Verify(ctx, from, ledger.VerifyOptions{})
	require.NoError(t, err)
	dst, err := ledger.Verify(ctx, to, ledger.VerifyOptions{})
	require.NoError(t, err)
	assert.Empty(t, src.Problems)
	assert.Empty(t, dst.Problems, "the copy is intact")
	assert.Equal(t, src.Events, rep.Events, "every stored event copied")
	assert.Equal(t, src.Events, dst.Events)
	require.Len(t, src.Chains, 2)
	assert.Equal(t, src.Chains, dst.Chains, "the same chains and heads on both")
	assert.Equal(t, "ok", src.Integrity)
	assert.Empty(t, dst.Integrity, "PostgreSQL has no integrity_check")

	for seq := uint64(1); seq <= 70; seq++ {
		for _, p := range []string{"kept", "dropped"} {
			a, aerr := ledger.PictureAt(ctx, from, p, seq)
			b, berr := ledger.PictureAt(ctx, to, p, seq)
			if aerr != nil {
				require.Error(t, berr, "%s at %d: %v on SQLite", p, seq, aerr)
				require.Equal(t, aerr.Error(), berr.Error(), "%s at %d", p, seq)
				continue
			}
			require.NoError(t, berr, "%s at %d", p, seq)
			require.Equal(t, a, b, "%s at %d", p, seq)
		}
	}
	// The early history of the dropped project is gone (on both); the
	// kept one's is read from the archive.
	_, err = ledger.PictureAt(ctx, to, "dropped", 40)
	assert.ErrorIs(t, err, reducer.ErrNotFound)
	pic, err := ledger.PictureAt(ctx, to, "kept", 10)
	require.NoError(t, err)
	assert.True(t, pic.Events[0].Archived)

	_, err = ledger.Copy(ctx, from, to, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "copy only into an empty one")
}
