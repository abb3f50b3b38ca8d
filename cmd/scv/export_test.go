package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestLedgerExportCommand: `scv ledger export` writes a bundle (to a file
// or stdout) that `scv ledger verify --bundle` finds intact, with no
// database; a tampered bundle exits 1 naming the edited sequence; bad
// command lines are usage errors.
func TestLedgerExportCommand(t *testing.T) {
	path, l, runID := acmeLedger(t, "one", "two")
	dir := filepath.Dir(path)
	ctx := context.Background()
	ids := []string{"01PROJECTA", "01TASK", runID}
	_, err := l.Compact(ctx, "acme", ledger.CompactOptions{Retain: 1})
	require.NoError(t, err)
	_, err = l.Execute(ctx, reducer.ProgressRun{Project: "acme", RunID: ids[2], Progress: "three"})
	require.NoError(t, err)
	p, err := l.Project(ctx, "acme")
	require.NoError(t, err)
	head := hex.EncodeToString(p.ChainHead)
	require.NoError(t, l.Close())

	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	bundle := filepath.Join(dir, "acme.jsonl")
	code, out, errOut := cli("ledger", "export", "--db", path, "acme", "-o", bundle)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "6 events, 1 snapshots")
	assert.Contains(t, out, head)

	// To stdout: the same bytes, the summary on stderr.
	code, stdout, errOut := cli("ledger", "export", "acme", "--db", path)
	require.Equal(t, 0, code, errOut)
	file, err := os.ReadFile(bundle)
	require.NoError(t, err)
	assert.Equal(t, string(file), stdout)
	assert.Contains(t, errOut, head)

	code, out, errOut = cli("ledger", "verify", "--bundle", bundle)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "6 events, 1 snapshots: intact")
	assert.Contains(t, out, head)
	code, _, errOut = cli("ledger", "verify", "--bundle", bundle, "--head", ids[0]+"="+head)
	assert.Equal(t, 0, code, errOut)
	code, _, errOut = cli("ledger", "verify", "--bundle", bundle, "--head", ids[0]+"="+strings.Repeat("ab", 32))
	assert.Equal(t, 4, code)
	assert.Contains(t, errOut, "saved head")

	// Edit one event's data: exit 1, naming its sequence.
	lines := strings.Split(string(file), "\n")
	var at int
	for i, line := range lines {
		if strings.Contains(line, `\"two\"`) {
			at = i
		}
	}
	require.NotZero(t, at)
	seq := strings.SplitN(strings.SplitN(lines[at], `"sequence":`, 2)[1], ",", 2)[0]
	lines[at] = strings.Replace(lines[at], `\"two\"`, `\"TWO\"`, 1)
	tampered := filepath.Join(dir, "tampered.jsonl")
	require.NoError(t, os.WriteFile(tampered, []byte(strings.Join(lines, "\n")), 0o600))
	code, _, errOut = cli("ledger", "verify", "--bundle", tampered)
	assert.Equal(t, 4, code)
	assert.Contains(t, errOut, "problem: project "+ids[0]+", sequence "+seq+": the hash does not match")

	// Cut the manifest off: truncated.
	cut := filepath.Join(dir, "cut.jsonl")
	trimmed := strings.TrimSuffix(string(file), "\n")
	require.NoError(t, os.WriteFile(cut, []byte(trimmed[:strings.LastIndex(trimmed, "\n")+1]), 0o600))
	code, _, errOut = cli("ledger", "verify", "--bundle", cut)
	assert.Equal(t, 4, code)
	assert.Contains(t, errOut, "truncated")

	for _, args := range [][]string{
		{"ledger", "export", "--db", path},
		{"ledger", "export", "--db", path, "acme", "extra"},
		{"ledger", "verify", "--bundle", bundle, "--db", path},
		{"ledger", "verify", "--bundle", bundle, "--project", "acme"},
	} {
		code, _, _ = cli(args...)
		assert.Equal(t, 2, code, "%v", args)
	}
	code, _, errOut = cli("ledger", "export", "--db", path, "nope", "-o", filepath.Join(dir, "nope.jsonl"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not found")
	assert.NoFileExists(t, filepath.Join(dir, "nope.jsonl"))
}
