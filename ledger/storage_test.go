package ledger_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestStorageFailureKeepsNothing makes the database refuse the second
// event of a command (MarkStale over two silent runs): the command fails
// with ErrStorage, neither event is in the table or in the ledger's view,
// no sequence is spent, and the ledger goes on working.
func TestStorageFailureKeepsNothing(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	ws := t.TempDir()
	clk := newClock(1000)
	l := open(t, path, ledger.Options{Clock: clk.Now})
	db := rawDB(t, path)

	f := newFixture(t, l, "alpha", ws)
	task2, run2 := id(), id()
	exec(t, l, reducer.AddTask{Project: f.project, TaskID: task2, Title: "second"})
	exec(t, l, reducer.StartRun{Project: f.project, TaskID: task2, RunID: run2, Agent: "a"})
	before := rows(t, db)
	p, _ := l.Project(f.project)
	viewBefore := observe(p)

	// run2 is a ULID: safe to put in the SQL text (triggers take no
	// parameters).
	_, err := db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON events
		WHEN NEW.kind = 'run_stale' AND NEW.data LIKE '%` + run2 + `%'
		BEGIN SELECT RAISE(ABORT, 'poison'); END`)
	require.NoError(t, err)

	clk.Set(5000)
	res, err := l.Execute(ctx, reducer.MarkStale{Project: f.project, Window: 60})
	require.ErrorIs(t, err, ledger.ErrStorage)
	assert.Empty(t, res.Events)
	assert.Equal(t, before, rows(t, db), "a failed transaction keeps nothing")
	p, _ = l.Project(f.project)
	assert.Equal(t, viewBefore, observe(p), "the view must not show the first, rolled back event")

	// The in-memory state was rolled back too: the next command is decided
	// against the state before the failure.
	res = exec(t, l, reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
	assert.Equal(t, before[len(before)-1].Sequence+1, res.Events[0].Sequence, "no sequence spent on the failure")
	r1, _ := res.Project.Run(f.run)
	assert.Equal(t, reducer.RunRunning, r1.Status, "run 1 was never marked stale")

	_, err = db.Exec(`DROP TRIGGER poison`)
	require.NoError(t, err)
	res = exec(t, l, reducer.MarkStale{Project: f.project, Window: 60})
	require.Len(t, res.Events, 1, "only run 2 is silent now")
	assert.Equal(t, reducer.RunStaleMarked{RunID: run2}, res.Events[0].Body)

	want := fold(t, rows(t, db))
	assertMatches(t, want, l, []string{f.project})
	require.NoError(t, l.Close())
	assertMatches(t, want, open(t, path, ledger.Options{}), []string{f.project})
}

// TestOpenTakesThePathLiterally: a database path is a file name, not a
// URI. A '%' in it must not be decoded (a folder "50%41off" is not
// "50Aoff"), and '#', '&' or a space are ordinary characters.
func TestOpenTakesThePathLiterally(t *testing.T) {
	for _, folder := range []string{"50%41off", "a#b", "a&_pragma=x", "a b"} {
		dir := t.TempDir()
		decoy := filepath.Join(dir, "50Aoff")
		require.NoError(t, os.Mkdir(decoy, 0o700))
		path := filepath.Join(dir, folder, "ledger.db")

		l, err := ledger.Open(context.Background(), path, ledger.Options{})
		require.NoError(t, err, "open %q", path)
		exec(t, l, reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: dir})
		require.NoError(t, l.Close())
		assert.NoFileExists(t, filepath.Join(decoy, "ledger.db"), "the ledger wrote to another file")
		if assert.FileExists(t, path) {
			assert.Equal(t, 1, count(t, rawDB(t, path)), "folder %q", folder)
		}
	}
}

// TestOpenSetsWAL: the database file is in WAL mode, so that readers never
// wait for the writer.
func TestOpenSetsWAL(t *testing.T) {
	path := dbPath(t)
	open(t, path, ledger.Options{})
	var mode string
	require.NoError(t, rawDB(t, path).Get(&mode, `PRAGMA journal_mode`))
	assert.Equal(t, "wal", mode)
}
