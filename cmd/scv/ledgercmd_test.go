package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/drivertest"
	"scv/ledger/sqlite"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// acmeLedger opens a ledger in a temp dir with project acme (ID
// 01PROJECTA), task build (01TASK) and run 01RUN, which reported the given
// progress; it returns the database path, the open ledger and the run ID.
func acmeLedger(t *testing.T, progress ...string) (string, *ledger.Ledger, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	cmds := []reducer.Command{
		reducer.CreateProject{ProjectID: "01PROJECTA", Name: "acme", Workspace: dir},
		reducer.AddTask{Project: "acme", TaskID: "01TASK", Title: "build"},
		reducer.StartRun{Project: "acme", TaskID: "01TASK", RunID: "01RUN", Agent: "codex"},
	}
	for _, text := range progress {
		cmds = append(cmds, reducer.ProgressRun{Project: "acme", RunID: "01RUN", Progress: text})
	}
	for _, c := range cmds {
		_, err := l.Execute(ctx, c)
		require.NoError(t, err)
	}
	return path, l, "01RUN"
}

// TestLedgerVerifyCommand: `scv ledger verify` exits 0 on an intact
// database and prints each chain head, also with a matching saved head;
// after someone drops the triggers and edits one event's data it exits 1
// naming that event's sequence.
func TestLedgerVerifyCommand(t *testing.T) {
	path, l, _ := acmeLedger(t, "one", "two", "three")
	ids := []string{"01PROJECTA"}
	dir := filepath.Dir(path)
	p, err := l.Project(context.Background(), "acme")
	require.NoError(t, err)
	head := hex.EncodeToString(p.ChainHead)
	require.NoError(t, l.Close())

	verify := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"ledger", "verify", "--db", path}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, _ := verify()
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "6 events in 1 projects: intact")
	assert.Contains(t, out, head)
	code, _, _ = verify("--project", "acme", "--head", ids[0]+"="+head)
	assert.Equal(t, 0, code)

	require.NoError(t, sqlitetest.Harness{}.Tamper(t, path, drivertest.EditEvent{Sequence: 5, Data: `{"run_id":"01RUN","progress":"forged"}`}))
	code, _, errOut := verify()
	assert.Equal(t, 4, code, "verify found a problem")
	assert.Contains(t, errOut, "project 01PROJECTA, sequence 5: the hash does not match")

	code, _, errOut = verify("--head", "nothex")
	assert.Equal(t, 2, code, errOut)
	code, _, _ = run3("ledger")
	assert.Equal(t, 2, code)
	code, _, errOut = run3("ledger", "verify", "--db", filepath.Join(dir, "missing.db"))
	assert.Equal(t, 1, code)
	assert.True(t, strings.Contains(errOut, "no such file"), errOut)
}

func run3(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}
