package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestExecuteReturnsAfterCommit: once Execute returns, an independent
// connection sees the event.
func TestExecuteReturnsAfterCommit(t *testing.T) {
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	db := rawDB(t, path)
	f := newFixture(t, l, "alpha", t.TempDir())
	for i := range 5 {
		res := exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: fmt.Sprint(i)})
		require.Len(t, res.Events, 1)
		var data string
		require.NoError(t, db.Get(&data, `SELECT data FROM events WHERE sequence = ?`, res.Events[0].Sequence))
		assert.JSONEq(t, fmt.Sprintf(`{"run_id":%q,"progress":"%d"}`, f.run, i), data)
	}
}

// TestTwoLedgersOnOneFile: each writer re-reads the tail inside its
// transaction, so a command through B is decided against what A appended
// and the other way round.
func TestTwoLedgersOnOneFile(t *testing.T) {
	path := dbPath(t)
	ws := t.TempDir()
	a := open(t, path, ledger.Options{})
	b := open(t, path, ledger.Options{})

	proj, t1, t2 := id(), id(), id()
	exec(t, a, reducer.CreateProject{ProjectID: proj, Name: "shared", Workspace: ws})

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

	// Both views agree with a fold of the table once each has written.
	exec(t, b, reducer.RecordHeartbeat{Project: proj})
	exec(t, a, reducer.RecordHeartbeat{Project: proj})
	exec(t, b, reducer.RecordHeartbeat{Project: proj})
	want := fold(t, rows(t, rawDB(t, path)))
	assertMatches(t, want, b, []string{proj, "shared"})
	// a has not seen b's last heartbeat yet: its next transaction folds it.
	exec(t, a, reducer.MarkStale{Project: proj, Window: 3600})
	assertMatches(t, want, a, []string{proj, "shared"})
}

// TestTwoLedgersRaceForNames: goroutines on two ledgers create projects
// from a small pool of names at once; each name is taken exactly once.
func TestTwoLedgersRaceForNames(t *testing.T) {
	path := dbPath(t)
	ws := t.TempDir()
	ls := []*ledger.Ledger{open(t, path, ledger.Options{}), open(t, path, ledger.Options{})}
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
	rs := rows(t, rawDB(t, path))
	assert.Len(t, rs, len(names))
	for i, r := range rs {
		assert.Equal(t, uint64(i+1), r.Sequence)
	}
}
