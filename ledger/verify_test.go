package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// verifiable builds a closed database with two projects and a few dozen
// events each, and returns its path and the first project's ID.
func verifiable(t *testing.T) (string, string) {
	t.Helper()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	var first string
	for _, name := range []string{"alpha", "beta"} {
		f := newFixture(t, l, name, t.TempDir())
		if first == "" {
			first = f.project
		}
		for i := range 20 {
			exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: strings.Repeat("x", i)})
		}
	}
	require.NoError(t, l.Close())
	return path, first
}

func verify(t *testing.T, path string, opts ledger.VerifyOptions) *ledger.VerifyReport {
	t.Helper()
	rep, err := ledger.Verify(context.Background(), path, opts)
	require.NoError(t, err)
	return rep
}

// tamper runs SQL against the file as someone who dropped the triggers.
func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db := rawDB(t, path)
	for _, s := range append([]string{`DROP TRIGGER events_no_update`, `DROP TRIGGER events_no_uncovered_delete`}, stmts...) {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
}

func firstProblem(t *testing.T, rep *ledger.VerifyReport) ledger.Problem {
	t.Helper()
	require.NotEmpty(t, rep.Problems, "verify passed a tampered database")
	return rep.Problems[0]
}

func TestVerifyIntact(t *testing.T) {
	path, p := verifiable(t)
	rep := verify(t, path, ledger.VerifyOptions{})
	assert.Empty(t, rep.Problems)
	assert.Equal(t, "ok", rep.Integrity)
	require.Len(t, rep.Chains, 2)
	assert.Equal(t, "alpha", rep.Chains[0].Name)
	assert.Equal(t, rep.Events, rep.Chains[0].Events+rep.Chains[1].Events)

	// The heads are the ledger's own: a reopened ledger holds the same.
	l := open(t, path, ledger.Options{})
	prj, _ := l.Project(p)
	assert.Equal(t, prj.ChainHead, rep.Chains[0].Head)
	require.NoError(t, l.Close())

	// One project, by name, with its saved head.
	rep = verify(t, path, ledger.VerifyOptions{Project: "alpha", Heads: map[string][]byte{p: rep.Chains[0].Head}})
	assert.Empty(t, rep.Problems)
	assert.Len(t, rep.Chains, 1)

	_, err := ledger.Verify(context.Background(), path, ledger.VerifyOptions{Project: "nope"})
	assert.ErrorIs(t, err, reducer.ErrNotFound)
}

func TestVerifyCatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stmts []string
		seq   uint64 // the sequence the first problem must name
		what  string
	}{
		{"an edited event", []string{`UPDATE events SET data = '{"run_id":"x","progress":"forged"}' WHERE sequence = 10`}, 10, "hash does not match"},
		{"an edited timestamp", []string{`UPDATE events SET timestamp = timestamp + 1, timestamp_ms = timestamp_ms + 1000 WHERE sequence = 7`}, 7, "hash does not match"},
		{"a deleted event", []string{`DELETE FROM events WHERE sequence = 12`}, 13, "missing or out of order"},
		{"a reordered pair", []string{ // events 14 and 15 swap places
			`UPDATE events SET sequence = -14 WHERE sequence = 14`,
			`UPDATE events SET sequence = 14 WHERE sequence = 15`,
			`UPDATE events SET sequence = 15 WHERE sequence = -14`,
		}, 14, "hash does not match"},
		{"an event moved to another project", []string{`UPDATE events SET project_id = 'someone-else' WHERE sequence = 9`}, 9, ""},
		{"a row the ledger did not write", []string{
			`INSERT INTO events (project_id, kind, timestamp, timestamp_ms, data) SELECT project_id, 'heartbeat', timestamp, timestamp_ms, '{}' FROM events WHERE sequence = 1`,
		}, 0, "no hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := verifiable(t)
			tamper(t, path, tc.stmts...)
			pr := firstProblem(t, verify(t, path, ledger.VerifyOptions{}))
			if tc.seq != 0 {
				assert.Equal(t, tc.seq, pr.Sequence, "%s", pr)
			}
			assert.Contains(t, pr.What, tc.what)
			assert.NotEmpty(t, pr.ProjectID)
		})
	}
}

// TestVerifyTruncatedTail: cutting events off the end leaves a chain that
// is whole as far as it goes; only a head saved before tells.
func TestVerifyTruncatedTail(t *testing.T) {
	path, p := verifiable(t)
	saved := verify(t, path, ledger.VerifyOptions{}).Chains[0].Head
	tamper(t, path, `DELETE FROM events WHERE sequence = (SELECT max(sequence) FROM events WHERE project_id = '`+p+`')`)
	assert.Empty(t, verify(t, path, ledger.VerifyOptions{}).Problems, "a chain alone cannot see a cut tail")
	pr := firstProblem(t, verify(t, path, ledger.VerifyOptions{Heads: map[string][]byte{p: saved}}))
	assert.Equal(t, p, pr.ProjectID)
	assert.Contains(t, pr.What, "saved head")
}

// TestChainHashCoversEveryField: changing any input changes the hash.
func TestChainHashCoversEveryField(t *testing.T) {
	base := ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1000, `{}`)
	assert.Len(t, base, ledger.HashSize)
	for name, h := range map[string][]byte{
		"prev":         ledger.ChainHash([]byte("prev2"), 7, "p", "k", 1, 1000, `{}`),
		"no prev":      ledger.ChainHash(nil, 7, "p", "k", 1, 1000, `{}`),
		"sequence":     ledger.ChainHash([]byte("prev"), 8, "p", "k", 1, 1000, `{}`),
		"project":      ledger.ChainHash([]byte("prev"), 7, "q", "k", 1, 1000, `{}`),
		"kind":         ledger.ChainHash([]byte("prev"), 7, "p", "j", 1, 1000, `{}`),
		"timestamp":    ledger.ChainHash([]byte("prev"), 7, "p", "k", 2, 1000, `{}`),
		"timestamp_ms": ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1001, `{}`),
		"data":         ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1000, `{ }`),
		"boundaries":   ledger.ChainHash([]byte("prev"), 7, "pk", "", 1, 1000, `{}`),
	} {
		assert.NotEqual(t, base, h, name)
	}
	assert.Equal(t, base, ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1000, `{}`), "deterministic")
}

// TestVerifyCatchesAfterCompaction: an edited archived event and an edited
// snapshot (with or without its recorded hash fixed up) are found, by
// sequence.
func TestVerifyCatchesAfterCompaction(t *testing.T) {
	forge := func(state []byte) []byte {
		return bytes.Replace(state, []byte(`"progress":"p"`), []byte(`"progress":"forged"`), 1)
	}
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, db *sqlx.DB)
		what   string
	}{
		{"an edited archived event", func(t *testing.T, db *sqlx.DB) {
			for _, s := range []string{`DROP TRIGGER events_archive_no_update`,
				`UPDATE events_archive SET data = '{"run_id":"x","progress":"forged"}' WHERE sequence = 10`} {
				_, err := db.Exec(s)
				require.NoError(t, err)
			}
		}, "hash does not match"},
		{"an edited snapshot", func(t *testing.T, db *sqlx.DB) {
			var state []byte
			require.NoError(t, db.Get(&state, `SELECT state FROM snapshots`))
			_, err := db.Exec(`UPDATE snapshots SET state = ?`, forge(state))
			require.NoError(t, err)
		}, "recorded state hash"},
		{"an edited snapshot with its hash fixed up", func(t *testing.T, db *sqlx.DB) {
			var state []byte
			require.NoError(t, db.Get(&state, `SELECT state FROM snapshots`))
			forged := forge(state)
			sum := sha256.Sum256(forged)
			_, err := db.Exec(`UPDATE snapshots SET state = ?, state_hash = ?`, forged, sum[:])
			require.NoError(t, err)
		}, "differs from the state the events before it derive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			l := open(t, path, ledger.Options{})
			f := newFixture(t, l, "alpha", t.TempDir())
			for range 30 {
				exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "p"})
			}
			c, err := l.Compact(context.Background(), f.project, 5)
			require.NoError(t, err)
			require.NoError(t, l.Close())
			require.Empty(t, verify(t, path, ledger.VerifyOptions{}).Problems)
			tc.tamper(t, rawDB(t, path))
			pr := firstProblem(t, verify(t, path, ledger.VerifyOptions{}))
			assert.Contains(t, pr.What, tc.what, "%s", pr)
			if tc.name == "an edited archived event" {
				assert.Equal(t, uint64(10), pr.Sequence)
			} else {
				assert.Equal(t, c.Sequence, pr.Sequence)
			}
		})
	}
}
