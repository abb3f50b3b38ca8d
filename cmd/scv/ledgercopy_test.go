package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/postgres/pgtest"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// TestLedgerCopyToPostgresCommand: `scv ledger copy` into PostgreSQL says
// that it verified the copy; `scv ledger verify` of the copy says that
// PostgreSQL has no integrity_check of its own (and --json leaves
// "integrity" out); a second copy into the now full database exits 1
// saying why. (What a copy keeps: ledger's TestLedgerCopyToPostgres.)
func TestLedgerCopyToPostgresCommand(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "l.db")
	drv, err := sqlite.Open(ctx, db, sqlite.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, drv, ledger.Options{})
	require.NoError(t, err)
	_, err = l.Execute(ctx, reducer.CreateProject{ProjectID: "P1", Name: "acme", Workspace: "/w/acme"})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	scv := func(args ...string) (code int, stdout, stderr string) {
		var o, e bytes.Buffer
		code = run(args, &o, &e)
		return code, o.String(), e.String()
	}

	code, out, errOut := scv("ledger", "copy", "--from", db, "--to", url)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "verified, the same chains and heads")
	code, out, errOut = scv("ledger", "verify", "--db", url)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "\nintegrity_check: none: this database has no file check of its own")
	assert.Contains(t, out, "1 events in 1 projects: intact")
	code, out, errOut = scv("--json", "ledger", "verify", "--db", url)
	require.Equal(t, 0, code, errOut)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.NotContains(t, v, "integrity")
	assert.Equal(t, true, v["intact"])

	code, _, errOut = scv("ledger", "copy", "--from", db, "--to", url)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "copy only into an empty one")
}
