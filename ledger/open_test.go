package ledger_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestConcurrentFirstOpens: two writers on one file are allowed, so two
// processes may also start on a fresh file at once. Every Open must
// succeed, each migrating the schema or finding it migrated, and the
// ledgers must then work together.
func TestConcurrentFirstOpens(t *testing.T) {
	const openers = 4
	for round := range 3 {
		path := dbPath(t)
		ws := t.TempDir()
		ls := make([]*ledger.Ledger, openers)
		errs := make([]error, openers)
		var wg sync.WaitGroup
		for i := range openers {
			wg.Go(func() { ls[i], errs[i] = ledger.Open(context.Background(), path, ledger.Options{}) })
		}
		wg.Wait()
		for i := range openers {
			if !assert.NoError(t, errs[i], "round %d opener %d", round, i) {
				continue
			}
			_, err := ls[i].Execute(context.Background(), reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: ws})
			if err != nil {
				assert.ErrorIs(t, err, reducer.ErrConflict)
			}
			require.NoError(t, ls[i].Close())
		}
		assert.Len(t, fold(t, rows(t, rawDB(t, path))).Projects(), 1, "round %d", round)
	}
}
