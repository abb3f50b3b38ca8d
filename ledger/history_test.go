package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// A stored history that does not fold is the database's fault: loading
// its project is ErrStorage naming the event, whether the event does not
// decode or contradicts the state before it, and with many batches of the
// history still to be read after it.
func TestLoadRefusesAHistoryThatDoesNotFold(t *testing.T) {
	for name, data := range map[string]string{
		"undecodable":   `{"run_id":5}`,
		"contradicting": `{"run_id":"R-nowhere","progress":"x"}`,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h := sqlitetest.Harness{}
			path := h.Create(t)
			l, err := ledger.Open(ctx, h.Open(t, path), ledger.Options{})
			require.NoError(t, err)
			_, err = l.Execute(ctx, reducer.CreateProject{ProjectID: "P", Name: "acme", Workspace: "/tmp"})
			require.NoError(t, err)
			_, err = l.Execute(ctx, reducer.AddTask{Project: "P", TaskID: "T", Title: "t"})
			require.NoError(t, err)
			_, err = l.Execute(ctx, reducer.StartRun{Project: "P", TaskID: "T", RunID: "R", Agent: "a"})
			require.NoError(t, err)
			// The bad event, then many good ones, written under the
			// ledger by a second handle on the file.
			drv := h.Open(t, path)
			tx, err := drv.Begin(ctx)
			require.NoError(t, err)
			head, err := tx.Head(ctx)
			require.NoError(t, err)
			now := time.Now()
			bad := driver.Event{Sequence: head + 1, ProjectID: "P", Kind: reducer.KindRunProgress,
				Timestamp: now.Unix(), TimestampMs: now.UnixMilli(), Data: data}
			events := []driver.Event{bad}
			for i := range 2000 {
				e := bad
				e.Sequence, e.Data = bad.Sequence+1+uint64(i), fmt.Sprintf(`{"run_id":"R","progress":"%d"}`, i)
				events = append(events, e)
			}
			require.NoError(t, tx.Append(ctx, events))
			require.NoError(t, tx.Commit())

			// A second ledger on the file, which has not loaded P.
			fresh, err := ledger.Open(ctx, drv, ledger.Options{})
			require.NoError(t, err)
			_, err = fresh.Project(ctx, "P")
			require.ErrorIs(t, err, ledger.ErrStorage)
			assert.Contains(t, err.Error(), fmt.Sprintf("sequence %d", head+1))

			// The history up to the event before it still folds.
			p, err := ledger.ProjectAt(ctx, drv, "P", head)
			require.NoError(t, err)
			assert.Equal(t, head, p.LastSequence)
		})
	}
}
