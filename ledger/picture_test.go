package ledger_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// TestPicture: a project and its own events, as of a sequence or at the
// head, read from a driver alone (a second handle, read-only, while the
// ledger is open), archived events included; past the head and unknown
// projects are refused as ProjectAt refuses them.
func TestPicture(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	defer l.Close()
	exec := func(cmd reducer.Command) uint64 {
		t.Helper()
		res, err := l.Execute(ctx, cmd)
		require.NoError(t, err)
		return res.Events[len(res.Events)-1].Sequence
	}
	exec(reducer.CreateProject{ProjectID: "01ACME", Name: "acme", Workspace: "/w/acme"})
	exec(reducer.CreateProject{ProjectID: "01BETA", Name: "beta", Workspace: "/w/beta"})
	exec(reducer.AddTask{Project: "acme", TaskID: "01BUILD", Title: "build"})
	exec(reducer.AddTask{Project: "beta", TaskID: "01OTHER", Title: "other"})
	started := exec(reducer.StartRun{Project: "acme", TaskID: "01BUILD", RunID: "01RUN", Agent: "codex"})
	_, err = l.Compact(ctx, "acme", ledger.CompactOptions{Retain: 1})
	require.NoError(t, err)
	head := exec(reducer.FinishRun{Project: "acme", RunID: "01RUN", Status: reducer.RunSucceeded})

	ro, err := sqlite.OpenReadOnly(ctx, path)
	require.NoError(t, err)
	defer ro.Close()
	kinds := func(pic *ledger.Picture) []string {
		var out []string
		for _, e := range pic.Events {
			assert.Equal(t, "01ACME", e.ProjectID)
			assert.LessOrEqual(t, e.Sequence, pic.Seq)
			out = append(out, e.Kind)
		}
		return out
	}

	now, err := ledger.PictureNow(ctx, ro, "acme")
	require.NoError(t, err)
	assert.Equal(t, head, now.Seq)
	assert.Equal(t, reducer.ProjectCompleted, now.Project.Status())
	assert.Equal(t, []string{"project_created", "task_added", "run_started", "run_finished"}, kinds(now))
	assert.True(t, now.Events[0].Archived, "the archive is read too")

	then, err := ledger.PictureAt(ctx, ro, "01ACME", started)
	require.NoError(t, err)
	assert.Equal(t, started, then.Seq)
	task, ok := then.Project.Task("01BUILD")
	require.True(t, ok)
	assert.Equal(t, reducer.TaskRunning, task.Status)
	assert.Equal(t, []string{"project_created", "task_added", "run_started"}, kinds(then))

	_, err = ledger.PictureAt(ctx, ro, "acme", head+1)
	assert.ErrorIs(t, err, ledger.ErrBeyondHead)
	_, err = ledger.PictureNow(ctx, ro, "nope")
	assert.ErrorIs(t, err, reducer.ErrNotFound)
	_, err = ledger.PictureAt(ctx, ro, "beta", 1)
	assert.ErrorIs(t, err, reducer.ErrNotFound, "beta was created at 2")
}
