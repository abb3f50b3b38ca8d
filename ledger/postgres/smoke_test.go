package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/postgres"
	"scv/ledger/postgres/pgtest"
	"scv/reducer"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Database(t)
	db, err := postgres.Open(ctx, u, postgres.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	_, err = l.Execute(ctx, reducer.CreateProject{ProjectID: "P1", Name: "acme", Workspace: "/tmp"})
	require.NoError(t, err)
	_, err = l.Execute(ctx, reducer.CreateProject{ProjectID: "P2", Name: "acme", Workspace: "/tmp"})
	require.ErrorIs(t, err, reducer.ErrConflict)
	_, err = l.Execute(ctx, reducer.AddTask{Project: "acme", TaskID: "T1", Title: "build"})
	require.NoError(t, err)
	_, err = l.Execute(ctx, reducer.StartRun{Project: "acme", TaskID: "T1", RunID: "R1", Agent: "a"})
	require.NoError(t, err)
	for range 30 {
		_, err = l.Execute(ctx, reducer.ProgressRun{Project: "P1", RunID: "R1", Progress: "x"})
		require.NoError(t, err)
	}
	c, err := l.Compact(ctx, "acme", ledger.CompactOptions{Retain: 5})
	require.NoError(t, err)
	require.Equal(t, 5, c.Live)

	db2, err := postgres.Open(ctx, u, postgres.Options{})
	require.NoError(t, err)
	l2, err := ledger.Open(ctx, db2, ledger.Options{})
	require.NoError(t, err)
	_, err = l2.Execute(ctx, reducer.FinishRun{Project: "P1", RunID: "R1", Status: reducer.RunSucceeded})
	require.NoError(t, err)
	p, err := l.Project(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, reducer.ProjectCompleted, p.Status(), "a read on one daemon sees the other's write")
	require.NoError(t, l.Close())
	require.NoError(t, l2.Close())

	ro, err := postgres.Open(ctx, u, postgres.Options{ReadOnly: true})
	require.NoError(t, err)
	rep, err := ledger.Verify(ctx, ro, ledger.VerifyOptions{})
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
	at, err := ledger.ProjectAt(ctx, ro, "acme", 3)
	require.NoError(t, err)
	require.Equal(t, 1, at.TaskCount())
	require.NoError(t, ro.Close())
}

// TestLockTimeout: a writer stuck behind a lock it cannot get gives up
// after the lock timeout with a storage error, and nothing of its command
// is kept; once the lock is free, writes go on.
func TestLockTimeout(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Database(t)
	db, err := postgres.Open(ctx, u, postgres.Options{LockTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Execute(ctx, reducer.CreateProject{ProjectID: "P1", Name: "acme", Workspace: "/tmp"})
	require.NoError(t, err)

	// Someone else holds the ledger's write lock and does not let go.
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT seq FROM ledger_head FOR UPDATE`)
	require.NoError(t, err)

	start := time.Now()
	_, err = l.Execute(ctx, reducer.AddTask{Project: "acme", TaskID: "T1", Title: "build"})
	waited := time.Since(start)
	require.ErrorIs(t, err, ledger.ErrStorage)
	assert.Contains(t, err.Error(), "lock timeout")
	assert.Less(t, waited, 10*time.Second, "gave up at the lock timeout, not at the statement timeout")
	require.NoError(t, tx.Rollback(ctx))

	_, err = l.Execute(ctx, reducer.AddTask{Project: "acme", TaskID: "T2", Title: "test"})
	require.NoError(t, err)
	p, err := l.Project(ctx, "acme")
	require.NoError(t, err)
	assert.Equal(t, 1, p.TaskCount(), "the refused task was not kept")
}
