package ledger_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

func sqliteSequence(t *testing.T, db *sqlx.DB) uint64 {
	t.Helper()
	var s uint64
	require.NoError(t, db.Get(&s, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`))
	return s
}

// TestRefusedCommandAppendsNothing runs commands the reducer refuses: each
// must return the reducer's sentinel, leave the table, the sequence counter
// and the committed view as they were, and the next accepted command must
// get the very next sequence.
func TestRefusedCommandAppendsNothing(t *testing.T) {
	path := dbPath(t)
	ws := t.TempDir()
	l := open(t, path, ledger.Options{})
	db := rawDB(t, path)

	f := newFixture(t, l, "alpha", ws)
	pending, finished := id(), id()
	exec(t, l, reducer.AddTask{Project: f.project, TaskID: pending, Title: "after work", DependsOn: []string{f.task}})
	other := id()
	exec(t, l, reducer.AddTask{Project: f.project, TaskID: other, Title: "other"})
	exec(t, l, reducer.StartRun{Project: f.project, TaskID: other, RunID: finished, Agent: "a"})
	exec(t, l, reducer.FinishRun{Project: f.project, RunID: finished, Status: reducer.RunCancelled})

	cases := []struct {
		name string
		cmd  reducer.Command
		want error
	}{
		{"run_start on a pending task", reducer.StartRun{Project: f.project, TaskID: pending, RunID: id(), Agent: "a"}, reducer.ErrInvalidTransition},
		{"duplicate project name", reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: ws}, reducer.ErrConflict},
		{"duplicate project ID", reducer.CreateProject{ProjectID: f.project, Name: "beta", Workspace: ws}, reducer.ErrConflict},
		{"unknown project", reducer.AddTask{Project: "nope", TaskID: id(), Title: "t"}, reducer.ErrNotFound},
		{"unknown dependency", reducer.AddTask{Project: f.project, TaskID: id(), Title: "t", DependsOn: []string{id()}}, reducer.ErrNotFound},
		{"empty title", reducer.AddTask{Project: "alpha", TaskID: id(), Title: ""}, reducer.ErrInvalidArgument},
		{"relative workspace", reducer.CreateProject{ProjectID: id(), Name: "gamma", Workspace: "rel/ws"}, reducer.ErrInvalidArgument},
		{"progress of a finished run", reducer.ProgressRun{Project: f.project, RunID: finished, Progress: "zombie"}, reducer.ErrRunNotRunning},
		{"finish as running", reducer.FinishRun{Project: f.project, RunID: f.run, Status: reducer.RunRunning}, reducer.ErrInvalidArgument},
		{"update of a running task", reducer.UpdateTask{Project: f.project, TaskID: f.task, Status: reducer.TaskDone}, reducer.ErrInvalidTransition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rowsBefore, seqBefore := rows(t, db), sqliteSequence(t, db)
			p, ok := l.Project(f.project)
			require.True(t, ok)
			viewBefore := observe(p)

			res, err := l.Execute(context.Background(), c.cmd)
			assert.ErrorIs(t, err, c.want)
			assert.Empty(t, res.Events)
			assert.Nil(t, res.Project)

			assert.Equal(t, rowsBefore, rows(t, db), "a refused command appends nothing")
			assert.Equal(t, seqBefore, sqliteSequence(t, db), "a refused command uses no sequence")
			p, ok = l.Project(f.project)
			require.True(t, ok)
			assert.Equal(t, viewBefore, observe(p), "a refused command changes no state")
			_, ok = l.Project("gamma")
			assert.False(t, ok)
		})
	}

	seq := sqliteSequence(t, db)
	res := exec(t, l, reducer.RecordHeartbeat{Project: f.project})
	require.Len(t, res.Events, 1)
	assert.Equal(t, seq+1, res.Events[0].Sequence, "refusals leave no gap")

	// A MarkStale that finds nothing is accepted and appends nothing.
	res = exec(t, l, reducer.MarkStale{Project: f.project, Window: 3600})
	assert.Empty(t, res.Events)
	assert.Equal(t, seq+1, sqliteSequence(t, db))
}

// TestRefusalsInABatchAppendNothing queues refused and accepted commands at
// once, so that group commit carries both in one transaction: exactly the
// accepted ones are appended.
func TestRefusalsInABatchAppendNothing(t *testing.T) {
	path := dbPath(t)
	ws := t.TempDir()
	l := open(t, path, ledger.Options{})
	db := rawDB(t, path)
	f := newFixture(t, l, "alpha", ws)
	before := count(t, db)

	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	results := make([]ledger.Result, n)
	for i := range n {
		wg.Go(func() {
			var c reducer.Command = reducer.RecordHeartbeat{Project: f.project, RunID: f.run}
			if i%2 == 1 {
				c = reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: ws}
			}
			results[i], errs[i] = l.Execute(context.Background(), c)
		})
	}
	wg.Wait()
	for i := range n {
		if i%2 == 1 {
			assert.ErrorIs(t, errs[i], reducer.ErrConflict, "command %d", i)
			assert.Empty(t, results[i].Events)
		} else {
			assert.NoError(t, errs[i], "command %d", i)
			assert.Len(t, results[i].Events, 1)
		}
	}
	assert.Equal(t, before+n/2, count(t, db))
	assert.Equal(t, uint64(before+n/2), sqliteSequence(t, db))
	assert.Len(t, fold(t, rows(t, db)).Projects(), 1)
}
