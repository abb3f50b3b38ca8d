package ledger_test

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// dbPath returns a fresh database path in the test's temporary folder.
func dbPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "ledger.db")
}

// open opens the ledger at path and closes it when the test ends.
func open(t *testing.T, path string, opts ledger.Options) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// rawDB opens an independent connection to the database at path, as a
// careless hand (or another process) would.
func rawDB(t *testing.T, path string) *sqlx.DB {
	t.Helper()
	// A plain file name, not a "file:" URI: the path is taken literally.
	db, err := sqlx.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.Ping())
	return db
}

// rows reads the whole events table in sequence order.
func rows(t *testing.T, db *sqlx.DB) []ledger.Row {
	t.Helper()
	var rs []ledger.Row
	require.NoError(t, db.Select(&rs, `SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM events ORDER BY sequence`))
	return rs
}

func count(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM events`))
	return n
}

// fold replays rows into a fresh reducer state.
func fold(t *testing.T, rs []ledger.Row) *reducer.State {
	t.Helper()
	s := reducer.NewState()
	for _, r := range rs {
		e, err := r.Event()
		require.NoError(t, err)
		s = reducer.Evolve(s, e)
	}
	s.Seal()
	return s
}

func id() string { return ulid.Make().String() }

// exec runs a command that must be accepted and returns its result.
func exec(t *testing.T, l *ledger.Ledger, c reducer.Command) ledger.Result {
	t.Helper()
	res, err := l.Execute(context.Background(), c)
	require.NoError(t, err, "command %#v", c)
	return res
}

// fixture is a project with one task and one running run.
type fixture struct {
	project, name, task, run string
	setup                    []reducer.Event
}

// newFixture creates a project named name with one task and a running run
// of it, through l.
func newFixture(t *testing.T, l *ledger.Ledger, name, workspace string) fixture {
	t.Helper()
	f := fixture{project: id(), name: name, task: id(), run: id()}
	for _, c := range []reducer.Command{
		reducer.CreateProject{ProjectID: f.project, Name: name, Workspace: workspace},
		reducer.AddTask{Project: f.project, TaskID: f.task, Title: "work"},
		reducer.StartRun{Project: f.project, TaskID: f.task, RunID: f.run, Agent: "agent"},
	} {
		f.setup = append(f.setup, exec(t, l, c).Events...)
	}
	return f
}

// observed is every exported field of a project, its tasks and its runs,
// plus its derived phase and status: what a client can see.
type observed struct {
	Project map[string]any
	Phase   reducer.Phase
	Status  reducer.ProjectStatus
	Tasks   []map[string]any
	Runs    []map[string]any
}

func observe(p *reducer.Project) observed {
	o := observed{Project: exported(p), Phase: p.Phase(), Status: p.Status()}
	for _, tk := range p.Tasks() {
		o.Tasks = append(o.Tasks, exported(tk))
	}
	for _, r := range p.Runs() {
		o.Runs = append(o.Runs, exported(r))
	}
	return o
}

// exported maps the exported fields of the struct *v to their values,
// so that a new field is compared without updating the test.
func exported(v any) map[string]any {
	rv := reflect.ValueOf(v).Elem()
	m := map[string]any{}
	for i := range rv.NumField() {
		if f := rv.Type().Field(i); f.IsExported() {
			m[f.Name] = rv.Field(i).Interface()
		}
	}
	return m
}

// assertMatches checks that the ledger's view holds exactly the projects of
// want, and that each looks the same.
func assertMatches(t *testing.T, want *reducer.State, l *ledger.Ledger, ids []string) {
	t.Helper()
	for _, wp := range want.Projects() {
		gp, ok := l.Project(wp.ID)
		if !assert.True(t, ok, "project %s missing from the ledger", wp.ID) {
			continue
		}
		assert.Equal(t, observe(wp), observe(gp), "project %s", wp.ID)
		byName, ok := l.Project(wp.Name)
		if assert.True(t, ok, "project %s not found by name %q", wp.ID, wp.Name) {
			assert.Equal(t, wp.ID, byName.ID)
		}
	}
	for _, ref := range ids {
		_, inWant := want.Project(ref)
		_, inLedger := l.Project(ref)
		assert.Equal(t, inWant, inLedger, "project %s known to the fold / to the ledger", ref)
	}
}

// clock is a settable Options.Clock; its settings are Unix milliseconds,
// the reducer's unit.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(ms int64) *clock { return &clock{now: time.UnixMilli(ms)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = time.UnixMilli(ms)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
