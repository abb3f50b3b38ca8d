package postgres_test

import (
	"context"
	"testing"

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
