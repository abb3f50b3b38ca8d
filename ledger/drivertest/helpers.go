package drivertest

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// maxSeq is past every sequence.
const maxSeq = math.MaxInt64

// env is one database of one test.
type env struct {
	t  *testing.T
	h  Harness
	db string

	roOnce sync.Once
	ro     driver.Driver
}

// newEnv creates a fresh database for t.
func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	return &env{t: t, h: h, db: h.Create(t)}
}

// open starts a ledger on a new driver of the database; the test's
// cleanup closes it.
func (e *env) open(opts ledger.Options) *ledger.Ledger {
	e.t.Helper()
	l, err := ledger.Open(context.Background(), e.h.Open(e.t, e.db), opts)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { l.Close() })
	return l
}

// restart closes l and opens the database again: a daemon's restart.
func (e *env) restart(l *ledger.Ledger, opts ledger.Options) *ledger.Ledger {
	e.t.Helper()
	require.NoError(e.t, l.Close())
	return e.open(opts)
}

// readOnly is one read-only driver of the database, as the offline tools
// open it.
func (e *env) readOnly() driver.Driver {
	e.roOnce.Do(func() { e.ro = e.h.OpenReadOnly(e.t, e.db) })
	return e.ro
}

// read runs fn in one read transaction of the read-only driver.
func (e *env) read(fn func(r driver.Reader) error) {
	e.t.Helper()
	require.NoError(e.t, e.readOnly().Read(context.Background(), fn))
}

// tamper changes the database behind the ledger's back, skipping the test
// when the harness cannot.
func (e *env) tamper(xs ...Tampering) {
	e.t.Helper()
	for _, x := range xs {
		err := e.h.Tamper(e.t, e.db, x)
		if errors.Is(err, errors.ErrUnsupported) {
			e.t.Skipf("the harness cannot tamper %T: %v", x, err)
		}
		require.NoError(e.t, err, "tamper %#v", x)
	}
}

// history is every stored event, archive and live tail, in sequence
// order, as what it says: where each is kept (Archived) is left out, so
// that histories compare across a compaction.
func (e *env) history() []driver.Event {
	e.t.Helper()
	var out []driver.Event
	e.read(func(r driver.Reader) error {
		return r.History(context.Background(), "", 0, maxSeq, func(ev driver.Event) error {
			ev.Archived = false
			out = append(out, ev)
			return nil
		})
	})
	return out
}

// live is the project's live tail.
func (e *env) live(project string) []ledger.Row {
	e.t.Helper()
	var out []ledger.Row
	e.read(func(r driver.Reader) error {
		return r.Live(context.Background(), project, 0, maxSeq, 0, func(ev driver.Event) error {
			out = append(out, ledger.Row(ev))
			return nil
		})
	})
	return out
}

// row is the project's row in the projects table.
func (e *env) row(ref string) driver.Project {
	e.t.Helper()
	var p driver.Project
	var ok bool
	e.read(func(r driver.Reader) (err error) {
		p, ok, err = r.Project(context.Background(), ref)
		return err
	})
	require.True(e.t, ok, "no projects row for %s", ref)
	return p
}

// lastSequence is the highest sequence ever appended.
func (e *env) lastSequence() uint64 {
	e.t.Helper()
	var s uint64
	e.read(func(r driver.Reader) (err error) {
		s, _, err = r.LastSequence(context.Background())
		return err
	})
	return s
}

// contents is everything a database holds of the ledger, as the driver
// reads it.
type contents struct {
	Last      uint64
	LastMs    int64
	History   []driver.Event
	Live      map[string][]driver.Event
	Snapshots []driver.Snapshot
	Projects  []driver.Project
}

func (e *env) contents() contents {
	e.t.Helper()
	ctx := context.Background()
	c := contents{Live: map[string][]driver.Event{}}
	e.read(func(r driver.Reader) error {
		var err error
		if c.Last, c.LastMs, err = r.LastSequence(ctx); err != nil {
			return err
		}
		if err := r.History(ctx, "", 0, maxSeq, func(ev driver.Event) error {
			c.History = append(c.History, ev)
			return nil
		}); err != nil {
			return err
		}
		if c.Snapshots, err = r.Snapshots(ctx, ""); err != nil {
			return err
		}
		if c.Projects, err = r.Projects(ctx, driver.ProjectFilter{}); err != nil {
			return err
		}
		for _, p := range c.Projects {
			if err := r.Live(ctx, p.ID, 0, maxSeq, 0, func(ev driver.Event) error {
				c.Live[p.ID] = append(c.Live[p.ID], ev)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return c
}

// eventOf decodes a stored event.
func eventOf(t *testing.T, r driver.Event) reducer.Event {
	t.Helper()
	b, err := reducer.DecodeBody(r.Kind, []byte(r.Data))
	require.NoError(t, err, "event %d", r.Sequence)
	return reducer.Event{Sequence: r.Sequence, ProjectID: r.ProjectID, Time: r.TimestampMs, Body: b, Hash: r.Hash}
}

// foldRows folds stored events, in order, into each project's state.
func foldRows(t *testing.T, rows []driver.Event) map[string]*reducer.Project {
	t.Helper()
	out := map[string]*reducer.Project{}
	for _, r := range rows {
		out[r.ProjectID] = reducer.Evolve(out[r.ProjectID], eventOf(t, r))
	}
	return out
}

// foldEvents folds events into each project's state, in sequence order
// whatever their order in evs.
func foldEvents(evs map[uint64]reducer.Event) map[string]*reducer.Project {
	seqs := make([]uint64, 0, len(evs))
	for s := range evs {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	out := map[string]*reducer.Project{}
	for _, s := range seqs {
		e := evs[s]
		out[e.ProjectID] = reducer.Evolve(out[e.ProjectID], e)
	}
	return out
}

// view is what a client can see of a project: every field the reducer
// keeps (its snapshot encoding, which names each one) and what is derived
// from them.
type view struct {
	State    string
	Status   reducer.ProjectStatus
	Phase    reducer.Phase
	Tasks    int
	Runs     int
	Running  int
	ByStatus map[reducer.TaskStatus]int
	Stale    []string // running runs silent for a minute at the project's last event
}

func viewOf(t *testing.T, p *reducer.Project) view {
	t.Helper()
	require.NotNil(t, p)
	b, err := reducer.Snapshot(p)
	require.NoError(t, err)
	v := view{State: string(b), Status: p.Status(), Phase: p.Phase(), Tasks: p.TaskCount(), Runs: p.RunCount(),
		Running: p.RunningCount(), ByStatus: map[reducer.TaskStatus]int{}, Stale: reducer.StaleRuns(p, p.Updated+60_000, 60_000)}
	for _, s := range []reducer.TaskStatus{reducer.TaskPending, reducer.TaskReady, reducer.TaskRunning, reducer.TaskBlocked,
		reducer.TaskDone, reducer.TaskFailed, reducer.TaskStale} {
		v.ByStatus[s] = p.CountOf(s)
	}
	return v
}

// project is the ledger's committed state of ref, which must exist.
func project(t *testing.T, l *ledger.Ledger, ref string) *reducer.Project {
	t.Helper()
	p, err := l.Project(context.Background(), ref)
	require.NoError(t, err, "project %s", ref)
	return p
}

// assertMatches checks that the ledger serves exactly the projects of want,
// by ID and by name, each as want has it, and that none of refs is known
// to one and not the other.
func assertMatches(t *testing.T, want map[string]*reducer.Project, l *ledger.Ledger, refs ...string) {
	t.Helper()
	names := map[string]bool{}
	for id, wp := range want {
		got, err := l.Project(context.Background(), id)
		if !assert.NoError(t, err, "project %s", id) {
			continue
		}
		assert.Equal(t, viewOf(t, wp), viewOf(t, got), "project %s", id)
		byName, err := l.Project(context.Background(), wp.Name)
		if assert.NoError(t, err, "project %s by name %q", id, wp.Name) {
			assert.Equal(t, id, byName.ID, "name %q", wp.Name)
		}
		names[wp.Name] = true
	}
	for _, ref := range refs {
		_, inWant := want[ref]
		_, err := l.Project(context.Background(), ref)
		if err != nil {
			assert.ErrorIs(t, err, reducer.ErrNotFound, "ref %s", ref)
		}
		assert.Equal(t, inWant || names[ref], err == nil, "project %s known to the fold / to the ledger", ref)
	}
}

func id() string { return ulid.Make().String() }

// exec runs a command that must be accepted.
func exec(t *testing.T, l *ledger.Ledger, c reducer.Command) ledger.Result {
	t.Helper()
	res, err := l.Execute(context.Background(), c)
	require.NoError(t, err, "command %#v", c)
	return res
}

// lastSeq runs a command that must append, and returns its last event's
// sequence.
func lastSeq(t *testing.T, l *ledger.Ledger, c reducer.Command) uint64 {
	t.Helper()
	evs := exec(t, l, c).Events
	require.NotEmpty(t, evs, "command %#v appended nothing", c)
	return evs[len(evs)-1].Sequence
}

// fixture is a project with one task and one running run of it.
type fixture struct {
	project, name, task, run string
	setup                    []reducer.Event
}

func newFixture(t *testing.T, l *ledger.Ledger, name string) fixture {
	t.Helper()
	f := fixture{project: id(), name: name, task: id(), run: id()}
	for _, c := range []reducer.Command{
		reducer.CreateProject{ProjectID: f.project, Name: name, Workspace: t.TempDir()},
		reducer.AddTask{Project: f.project, TaskID: f.task, Title: "work"},
		reducer.StartRun{Project: f.project, TaskID: f.task, RunID: f.run, Agent: "agent"},
	} {
		f.setup = append(f.setup, exec(t, l, c).Events...)
	}
	return f
}

// progress appends n progress events to f's run, from goroutines at once
// when n is large, so that group commit carries them.
func (f fixture) progress(t *testing.T, l *ledger.Ledger, n int, text string) {
	t.Helper()
	const writers = 16
	if n < writers*4 {
		for range n {
			exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: text})
		}
		return
	}
	var wg sync.WaitGroup
	for w := range writers {
		k := n / writers
		if w < n%writers {
			k++
		}
		wg.Go(func() {
			for range k {
				_, err := l.Execute(context.Background(), reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: text})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
}

// clock is a settable Options.Clock, in Unix milliseconds.
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

// verify runs ledger.Verify on the read-only driver.
func (e *env) verify(opts ledger.VerifyOptions) *ledger.VerifyReport {
	e.t.Helper()
	rep, err := ledger.Verify(context.Background(), e.readOnly(), opts)
	require.NoError(e.t, err)
	return rep
}

// problems lists a report's problems, for messages.
func problems(rep *ledger.VerifyReport) []string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, p.String())
	}
	return out
}

func firstProblem(t *testing.T, rep *ledger.VerifyReport) ledger.Problem {
	t.Helper()
	require.NotEmpty(t, rep.Problems, "verify passed a tampered database")
	return rep.Problems[0]
}
