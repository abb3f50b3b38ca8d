package sqlite_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// dbPath is a fresh database path in the test's temporary folder.
func dbPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "ledger.db")
}

// openDB opens the database at path; the test's cleanup closes it.
func openDB(t *testing.T, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// open starts a ledger on a new driver of the database at path.
func open(t *testing.T, path string, opts ledger.Options) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), openDB(t, path), opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// rawDB is an independent connection to the database at path, as a
// careless hand (or another process) would open it.
func rawDB(t *testing.T, path string) *sqlx.DB {
	t.Helper()
	// A plain file name, not a "file:" URI: the path is taken literally.
	db, err := sqlx.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.Ping())
	return db
}

// contents reads the whole file as the driver does.
func contents(t *testing.T, path string) sqlitetest.Contents {
	t.Helper()
	c, err := sqlitetest.ReadAll(context.Background(), path)
	require.NoError(t, err)
	return c
}

// rows is every stored event, archive and live tail, in sequence order.
func rows(t *testing.T, path string) []driver.Event { return contents(t, path).Events }

func id() string { return ulid.Make().String() }

func exec(t *testing.T, l *ledger.Ledger, c reducer.Command) ledger.Result {
	t.Helper()
	res, err := l.Execute(context.Background(), c)
	require.NoError(t, err, "command %#v", c)
	return res
}

func project(t *testing.T, l *ledger.Ledger, ref string) *reducer.Project {
	t.Helper()
	p, err := l.Project(context.Background(), ref)
	require.NoError(t, err, "project %s", ref)
	return p
}

// eventOf decodes a stored event.
func eventOf(t *testing.T, r driver.Event) reducer.Event {
	t.Helper()
	b, err := reducer.DecodeBody(r.Kind, []byte(r.Data))
	require.NoError(t, err, "event %d", r.Sequence)
	return reducer.Event{Sequence: r.Sequence, ProjectID: r.ProjectID, Time: r.TimestampMs, Body: b, Hash: r.Hash}
}

// fold folds stored events into each project's state.
func fold(t *testing.T, rs []driver.Event) map[string]*reducer.Project {
	t.Helper()
	out := map[string]*reducer.Project{}
	for _, r := range rs {
		out[r.ProjectID] = reducer.Evolve(out[r.ProjectID], eventOf(t, r))
	}
	return out
}

// state is everything the reducer keeps of p, for comparisons.
func state(t *testing.T, p *reducer.Project) string {
	t.Helper()
	require.NotNil(t, p)
	b, err := reducer.Snapshot(p)
	require.NoError(t, err)
	return fmt.Sprintf("%s %s %s", b, p.Status(), p.Phase())
}

// fixture is a project with one task and one running run.
type fixture struct{ project, name, task, run string }

func newFixture(t *testing.T, l *ledger.Ledger, name string) fixture {
	t.Helper()
	f := fixture{project: id(), name: name, task: id(), run: id()}
	exec(t, l, reducer.CreateProject{ProjectID: f.project, Name: name, Workspace: t.TempDir()})
	exec(t, l, reducer.AddTask{Project: f.project, TaskID: f.task, Title: "work"})
	exec(t, l, reducer.StartRun{Project: f.project, TaskID: f.task, RunID: f.run, Agent: "agent"})
	return f
}

func verify(t *testing.T, path string) *ledger.VerifyReport {
	t.Helper()
	db, err := sqlite.OpenReadOnly(context.Background(), path)
	require.NoError(t, err)
	defer db.Close()
	rep, err := ledger.Verify(context.Background(), db, ledger.VerifyOptions{})
	require.NoError(t, err)
	return rep
}

func problems(rep *ledger.VerifyReport) []string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, p.String())
	}
	return out
}

// snapshotRow writes, through db, a genuine snapshot of project at seq,
// as compaction would: its latest snapshot before seq, if any, and its
// events up to seq after it, folded.
func snapshotRow(t *testing.T, db *sqlx.DB, project string, seq uint64) {
	t.Helper()
	var p *reducer.Project
	var base uint64
	var prev []byte
	if err := db.Get(&prev, `SELECT state FROM snapshots WHERE project_id = ? AND sequence <= ? ORDER BY sequence DESC LIMIT 1`, project, seq); err == nil {
		var err error
		p, err = reducer.Restore(prev)
		require.NoError(t, err)
		base = p.LastSequence
	}
	var rs []driver.Event
	require.NoError(t, db.Select(&rs, `SELECT sequence, project_id AS projectid, kind, timestamp, timestamp_ms AS timestampms, data, hash FROM events
		WHERE project_id = ? AND sequence > ? AND sequence <= ? ORDER BY sequence`, project, base, seq))
	for _, r := range rs {
		p = reducer.Evolve(p, eventOf(t, r))
	}
	require.NotNil(t, p)
	b, err := reducer.Snapshot(p)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	_, err = db.Exec(`INSERT INTO snapshots (project_id, sequence, version, state, chain_head, state_hash) VALUES (?, ?, ?, ?, ?, ?)`,
		project, seq, reducer.SnapshotVersion, b, p.ChainHead, sum[:])
	require.NoError(t, err)
}

// dirState maps each entry of dir to its mode and the digest of its
// contents.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		var content []byte
		if fi.Mode().IsRegular() {
			content, err = os.ReadFile(p)
			require.NoError(t, err)
		}
		out[e.Name()] = fmt.Sprintf("%s %x", fi.Mode(), sha256.Sum256(content))
	}
	return out
}
