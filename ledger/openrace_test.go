package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestOpenWhileAnotherWriterAppends opens a ledger B while another writer
// appends to the same file. B must decide its first command against every
// event committed before it: here, a project named "beta" that another
// writer created while B was folding the history at Open. B creating
// "beta" again must be refused.
//
// The other writer's append is timed to land while B folds a long history
// (at 40, 60 and 80% of an Open of the same file measured just before);
// when it lands elsewhere the test passes without having probed the window, so it
// can pass by luck but never fail by luck.
func TestOpenWhileAnotherWriterAppends(t *testing.T) {
	path := dbPath(t)
	ws := t.TempDir()
	p := id()
	a := open(t, path, ledger.Options{})
	exec(t, a, reducer.CreateProject{ProjectID: p, Name: "alpha", Workspace: ws})
	require.NoError(t, a.Close())
	db := rawDB(t, path)
	_, err := db.Exec(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 4000)
		INSERT INTO events (project_id, kind, timestamp, timestamp_ms, data) SELECT ?, 'heartbeat', 1800000000 + i / 100, (1800000000 + i / 100) * 1000, '{}' FROM c`, p)
	require.NoError(t, err)

	start := time.Now()
	require.NoError(t, open(t, path, ledger.Options{}).Close())
	openTime := time.Since(start)

	// Three tries, the other writer's append landing at a different point
	// of B's Open each time.
	for i, frac := range []float64{0.4, 0.6, 0.8} {
		name := fmt.Sprintf("beta%d", i)
		inserted := make(chan error, 1)
		go func() {
			time.Sleep(time.Duration(frac * float64(openTime)))
			// A raw connection appending as a second ledger would.
			_, err := db.Exec(`INSERT INTO events (project_id, kind, timestamp, timestamp_ms, data) VALUES (?, 'project_created', 1900000000, 1900000000000, ?)`,
				id(), `{"name":"`+name+`","workspace":"`+ws+`"}`)
			inserted <- err
		}()
		b := open(t, path, ledger.Options{})
		require.NoError(t, <-inserted)

		_, err = b.Execute(context.Background(), reducer.CreateProject{ProjectID: id(), Name: name, Workspace: ws})
		assert.ErrorIs(t, err, reducer.ErrConflict, "try %d: b accepted a second project named %s", i, name)
		var n int
		require.NoError(t, db.Get(&n, `SELECT count(*) FROM events WHERE kind = 'project_created' AND json_extract(data, '$.name') = ?`, name))
		assert.Equal(t, 1, n, "try %d: project names are unique", i)
		require.NoError(t, b.Close())
	}
}
