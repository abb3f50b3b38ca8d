package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestLedgerVerifyCommand: `scv ledger verify` exits 0 on an intact
// database and prints each chain head; after someone drops the triggers
// and edits one event's data it exits 1 naming that event's sequence; a
// saved head catches a cut tail.
func TestLedgerVerifyCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	ctx := context.Background()
	l, err := ledger.Open(ctx, path, ledger.Options{})
	require.NoError(t, err)
	ids := []string{"01PROJECTA", "01TASK", "01RUN"}
	for _, c := range []reducer.Command{
		reducer.CreateProject{ProjectID: ids[0], Name: "acme", Workspace: dir},
		reducer.AddTask{Project: "acme", TaskID: ids[1], Title: "build"},
		reducer.StartRun{Project: "acme", TaskID: ids[1], RunID: ids[2], Agent: "codex"},
		reducer.ProgressRun{Project: "acme", RunID: ids[2], Progress: "one"},
		reducer.ProgressRun{Project: "acme", RunID: ids[2], Progress: "two"},
		reducer.ProgressRun{Project: "acme", RunID: ids[2], Progress: "three"},
	} {
		_, err := l.Execute(ctx, c)
		require.NoError(t, err)
	}
	p, _ := l.Project("acme")
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

	db, err := sqlx.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	for _, s := range []string{
		`DROP TRIGGER events_no_update`,
		`UPDATE events SET data = '{"run_id":"01RUN","progress":"forged"}' WHERE sequence = 5`,
	} {
		_, err := db.Exec(s)
		require.NoError(t, err)
	}
	code, _, errOut := verify()
	assert.Equal(t, 1, code)
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
