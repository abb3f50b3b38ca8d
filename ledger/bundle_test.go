package ledger_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// bundleDB builds a database with two projects, the first compacted twice
// (so that its history is split between archive and live tail and it has
// two snapshots), and returns its path, the first project's fixture and its
// chain head.
func bundleDB(t *testing.T) (string, fixture, []byte) {
	t.Helper()
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	f := bigProject(t, l, 30)
	other := newFixture(t, l, "beta", t.TempDir())
	exec(t, l, reducer.ProgressRun{Project: other.project, RunID: other.run, Progress: `with "quotes" & <tags>`})
	_, err := l.Compact(ctx, f.project, 10)
	require.NoError(t, err)
	for range 20 {
		exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "more <steps> & \"more\""})
	}
	_, err = l.Compact(ctx, f.project, 5)
	require.NoError(t, err)
	exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "last"})
	p, ok := l.Project(f.project)
	require.True(t, ok)
	head := p.ChainHead
	require.NoError(t, l.Close())
	return path, f, head
}

func export(t *testing.T, path, project string) ([]byte, ledger.Manifest) {
	t.Helper()
	var buf bytes.Buffer
	m, err := ledger.Export(context.Background(), path, project, &buf)
	require.NoError(t, err)
	return buf.Bytes(), m
}

// TestExportBundle: an exported bundle holds every event of the project
// (archive and live tail) in order, its snapshots and a manifest, and
// VerifyBundle finds it intact without the database, also against the
// saved head; by ID or by name gives the same bytes.
func TestExportBundle(t *testing.T) {
	path, f, head := bundleDB(t)
	b, m := export(t, path, f.name)
	byID, _ := export(t, path, f.project)
	assert.Equal(t, b, byID)

	db := rawDB(t, path)
	var n, archived, snaps int
	require.NoError(t, db.Get(&n, `SELECT (SELECT count(*) FROM events WHERE project_id = ?) + (SELECT count(*) FROM events_archive WHERE project_id = ?)`, f.project, f.project))
	require.NoError(t, db.Get(&archived, `SELECT count(*) FROM events_archive WHERE project_id = ?`, f.project))
	require.NoError(t, db.Get(&snaps, `SELECT count(*) FROM snapshots WHERE project_id = ?`, f.project))
	require.Greater(t, archived, 0)
	require.Equal(t, 2, snaps)

	assert.Equal(t, ledger.BundleFormat, m.Format)
	assert.Equal(t, f.project, m.ProjectID)
	assert.Equal(t, f.name, m.Name)
	assert.Equal(t, n, m.Events)
	assert.Equal(t, 2, m.Snapshots)
	assert.Equal(t, hex.EncodeToString(head), m.ChainHead)

	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, n+2+1)
	var prev uint64
	for i, line := range lines {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &v))
		switch {
		case i < n:
			assert.Equal(t, "event", v["type"])
			assert.Equal(t, f.project, v["project_id"])
			seq := uint64(v["sequence"].(float64))
			assert.Greater(t, seq, prev)
			prev = seq
		case i < n+2:
			assert.Equal(t, "snapshot", v["type"])
		default:
			assert.Equal(t, "manifest", v["type"])
			assert.Equal(t, float64(prev), v["last_sequence"])
		}
	}
	// The data is the stored text, byte for byte.
	var stored string
	require.NoError(t, db.Get(&stored, `SELECT data FROM events WHERE project_id = ? ORDER BY sequence DESC LIMIT 1`, f.project))
	var last struct{ Data string }
	require.NoError(t, json.Unmarshal([]byte(lines[n-1]), &last))
	assert.Equal(t, stored, last.Data)

	rep, err := ledger.VerifyBundle(bytes.NewReader(b), nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
	assert.Equal(t, n, rep.Events)
	assert.Equal(t, 2, rep.Snapshots)
	require.Len(t, rep.Chains, 1)
	assert.Equal(t, head, rep.Chains[0].Head)
	assert.Equal(t, f.name, rep.Chains[0].Name)

	rep, err = ledger.VerifyBundle(bytes.NewReader(b), map[string][]byte{f.project: head})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
	wrong := bytes.Repeat([]byte{1}, ledger.HashSize)
	rep, err = ledger.VerifyBundle(bytes.NewReader(b), map[string][]byte{f.project: wrong})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Problems)
	assert.Contains(t, rep.Problems[0].What, "saved head")

	_, err = ledger.Export(context.Background(), path, "nope", &bytes.Buffer{})
	assert.ErrorIs(t, err, reducer.ErrNotFound)
}

// TestVerifyBundleTampered: every change to a bundle is found: an edited
// event at its own sequence, a removed line, a missing manifest, an edited
// snapshot, a manifest that does not match.
func TestVerifyBundleTampered(t *testing.T) {
	path, f, _ := bundleDB(t)
	b, m := export(t, path, f.project)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	n := m.Events
	field := func(line, key string) any {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &v))
		return v[key]
	}
	edit := func(line, key string, val any) string {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &v))
		v[key] = val
		out, err := json.Marshal(v)
		require.NoError(t, err)
		return string(out)
	}
	without := func(i int) []string {
		return append(append([]string{}, lines[:i]...), lines[i+1:]...)
	}
	with := func(i int, line string) []string {
		out := append([]string{}, lines...)
		out[i] = line
		return out
	}
	seqOf := func(i int) uint64 { return uint64(field(lines[i], "sequence").(float64)) }

	mid := n / 2
	data := field(lines[mid], "data").(string)
	require.Contains(t, data, "step")
	state := field(lines[n], "state").(string)

	for _, tc := range []struct {
		name  string
		lines []string
		seq   uint64 // the sequence the first problem names; 0: any
		what  string
	}{
		{"edited data", with(mid, edit(lines[mid], "data", strings.Replace(data, "step", "stop", 1))), seqOf(mid), "hash does not match"},
		{"edited timestamp", with(1, edit(lines[1], "timestamp_ms", field(lines[1], "timestamp_ms").(float64)+1)), seqOf(1), "hash does not match"},
		{"removed event", without(mid), seqOf(mid + 1), "hash does not match"},
		{"removed first event", without(0), seqOf(1), ""},
		{"removed last event", without(n - 1), 0, "manifest"},
		{"swapped events", with(mid+1, lines[mid]), 0, ""},
		{"no manifest", lines[:len(lines)-1], 0, "truncated"},
		{"removed snapshot", without(n), 0, "snapshots"},
		{"edited snapshot state", with(n, edit(lines[n], "state", strings.Replace(state, f.name, "gamma", 1))), seqOf(n), "state hash"},
		{"edited snapshot chain head", with(n, edit(lines[n], "chain_head", hex.EncodeToString(make([]byte, 32)))), seqOf(n), "chain head"},
		{"edited manifest", with(len(lines)-1, edit(lines[len(lines)-1], "events", n+1)), 0, "manifest"},
		{"line after manifest", append(append([]string{}, lines...), lines[0]), 0, "after the manifest"},
		{"not JSON", with(2, "{nope"), 0, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := ledger.VerifyBundle(strings.NewReader(strings.Join(tc.lines, "\n")+"\n"), nil)
			require.NoError(t, err)
			require.NotEmpty(t, rep.Problems, "tampering went unnoticed")
			p := rep.Problems[0]
			if tc.seq != 0 {
				assert.Equal(t, tc.seq, p.Sequence, "%s", p)
			}
			assert.Contains(t, p.What, tc.what)
		})
	}
}
