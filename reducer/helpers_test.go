package reducer_test

import (
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// The project every table test starts from.
const (
	projID   = "P1"
	projName = "proj"
	projWS   = "/work/proj"

	// cmdNow is when the command under test is decided. Setup commands run
	// earlier, ten seconds apart from setupStart, unless they carry a time.
	cmdNow     = int64(10_000)
	setupStart = int64(1_000)
)

var baseProject = reducer.CreateProject{ProjectID: projID, Name: projName, Workspace: projWS}

// world plays the ledger's part for several projects: it resolves the
// project a command names (ID first, then name), holds names unique, and
// keeps the newest version of each project.
type world struct {
	projects map[string]*reducer.Project
	names    map[string]string // name -> project ID
	fold     *reducer.Fold     // when set, evolve folds with it instead of Evolve
}

func newWorld() *world {
	return &world{projects: map[string]*reducer.Project{}, names: map[string]string{}}
}

// project resolves ref as a project ID, then as a name.
func (w *world) project(ref string) (*reducer.Project, bool) {
	if p, ok := w.projects[ref]; ok {
		return p, true
	}
	if id, ok := w.names[ref]; ok {
		return w.projects[id], true
	}
	return nil, false
}

// all is every project, in no particular order.
func (w *world) all() []*reducer.Project {
	ps := make([]*reducer.Project, 0, len(w.projects))
	for _, p := range w.projects {
		ps = append(ps, p)
	}
	return ps
}

// clone is a world that starts as w and goes on alone, without w's Fold;
// the projects are shared, being immutable.
func (w *world) clone() *world {
	return &world{projects: maps.Clone(w.projects), names: maps.Clone(w.names)}
}

// decide decides c against the project it names, as the ledger does:
// besides what the reducer checks, a new project's name must not name a
// project already, by name or by ID.
func (w *world) decide(c reducer.Command) ([]reducer.Event, error) {
	if cp, ok := c.(reducer.CreateProject); ok {
		evs, err := reducer.Decide(w.projects[cp.ProjectID], c)
		if err == nil {
			if _, taken := w.project(cp.Name); taken {
				return nil, fmt.Errorf("%w: a project named %q exists", reducer.ErrConflict, cp.Name)
			}
		}
		return evs, err
	}
	p, _ := w.project(c.ProjectRef())
	return reducer.Decide(p, c)
}

// evolve folds e into its project.
func (w *world) evolve(e reducer.Event) *reducer.Project {
	old := w.projects[e.ProjectID]
	var p *reducer.Project
	if w.fold != nil {
		p = w.fold.Evolve(old, e)
	} else {
		p = reducer.Evolve(old, e)
	}
	w.projects[p.ID] = p
	if old == nil {
		w.names[p.Name] = p.ID
	}
	return p
}

// ledger plays the caller's part: it stamps commands with a clock, decides
// them, numbers the events and evolves them.
type ledger struct {
	t      testing.TB
	s      *world
	now    int64
	seq    uint64
	events []reducer.Event // every event evolved, in order
}

func newLedger(t testing.TB) *ledger {
	return &ledger{t: t, s: newWorld(), now: setupStart}
}

// do decides each command and evolves its events; every command must be
// accepted. A command with Now zero is stamped ten seconds after the last.
func (l *ledger) do(cmds ...reducer.Command) {
	l.t.Helper()
	for _, c := range cmds {
		l.now += 10
		c = withNow(c, l.now)
		evs, err := l.s.decide(c)
		require.NoError(l.t, err, "setup command %#v", c)
		l.evolve(evs...)
	}
}

func (l *ledger) evolve(evs ...reducer.Event) {
	for _, e := range evs {
		l.seq++
		e.Sequence = l.seq
		l.s.evolve(e)
		l.events = append(l.events, e)
	}
}

// project returns the base project.
func (l *ledger) project() *reducer.Project {
	l.t.Helper()
	p, ok := l.s.project(projID)
	require.True(l.t, ok, "base project missing")
	return p
}

// withNow returns c with Now set to now, unless c already carries a time.
func withNow(c reducer.Command, now int64) reducer.Command {
	v := reflect.New(reflect.TypeOf(c)).Elem()
	v.Set(reflect.ValueOf(c))
	if f := v.FieldByName("Now"); f.Int() == 0 {
		f.SetInt(now)
	}
	return v.Interface().(reducer.Command)
}

// Shorthands for the commands of the table tests, on the base project.
// add names the project by name, the others by ID, so both are exercised.

func add(id string, maxRetries uint32, deps ...string) reducer.AddTask {
	return reducer.AddTask{Project: projName, TaskID: id, Title: "task " + id, DependsOn: deps, MaxRetries: maxRetries}
}

func upd(id string, to reducer.TaskStatus) reducer.UpdateTask {
	return reducer.UpdateTask{Project: projID, TaskID: id, Status: to}
}

func updP(id string, to reducer.TaskStatus, progress string) reducer.UpdateTask {
	return reducer.UpdateTask{Project: projID, TaskID: id, Status: to, Progress: &progress}
}

func start(task, run string) reducer.StartRun {
	return reducer.StartRun{Project: projID, TaskID: task, RunID: run, Agent: "agent"}
}

func finish(run string, st reducer.RunStatus) reducer.FinishRun {
	return reducer.FinishRun{Project: projID, RunID: run, Status: st}
}

func progress(run, text string) reducer.ProgressRun {
	return reducer.ProgressRun{Project: projID, RunID: run, Progress: text}
}

func beat(task, run string) reducer.RecordHeartbeat {
	return reducer.RecordHeartbeat{Project: projID, TaskID: task, RunID: run}
}

// markStale uses a window shorter than the setup's step, so every running
// run is silent by the time it is decided.
func markStale() reducer.MarkStale {
	return reducer.MarkStale{Project: projID, Window: 5}
}

func cmds(c ...reducer.Command) []reducer.Command { return c }

// taskIn returns setup commands that leave task "a" of the base project in
// status st. The pending fixture adds "z" first, which "a" depends on; the
// running one starts run "r1"; the stale one (max_retries 1) leaves run
// "r1" stale and a retry spent.
func taskIn(st reducer.TaskStatus) []reducer.Command {
	switch st {
	case reducer.TaskPending:
		return cmds(add("z", 0), add("a", 0, "z"))
	case reducer.TaskReady:
		return cmds(add("a", 0))
	case reducer.TaskRunning:
		return cmds(add("a", 0), start("a", "r1"))
	case reducer.TaskBlocked:
		return cmds(add("a", 0), upd("a", reducer.TaskBlocked))
	case reducer.TaskDone:
		return cmds(add("a", 0), upd("a", reducer.TaskDone))
	case reducer.TaskFailed:
		return cmds(add("a", 0), upd("a", reducer.TaskFailed))
	case reducer.TaskStale:
		return cmds(add("a", 1), start("a", "r1"), markStale())
	}
	panic("taskIn: " + st)
}

// runIn returns setup commands that leave run "r1" of task "a"
// (max_retries 2) in status st.
func runIn(st reducer.RunStatus) []reducer.Command {
	c := cmds(add("a", 2), start("a", "r1"))
	switch st {
	case reducer.RunRunning:
		return c
	case reducer.RunStale:
		return append(c, markStale())
	default:
		return append(c, finish("r1", st))
	}
}

// render is a compact picture of a project for table expectations: each
// task as id:status, with @run while it has a run and /retries once it
// spent any; then, after " | ", each run as id:status#attempt.
func render(p *reducer.Project) string {
	var b strings.Builder
	for i, t := range p.Tasks() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%s", t.ID, t.Status)
		if t.RunID != "" {
			b.WriteString("@" + t.RunID)
		}
		if t.Retries > 0 {
			fmt.Fprintf(&b, "/%d", t.Retries)
		}
	}
	for i, r := range p.Runs() {
		if i == 0 {
			b.WriteString(" | ")
		} else {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%s#%d", r.ID, r.Status, r.Attempt)
	}
	return b.String()
}

// Dumps are deep copies of everything a caller can observe of the state,
// so that two states (or one state at two times) compare with Equal.

type taskDump struct {
	ID            string
	Title         string
	Status        reducer.TaskStatus
	DependsOn     []string
	Retries       uint32
	MaxRetries    uint32
	RunID         string
	Progress      string
	LastHeartbeat int64
	Attempts      uint32
	Approval      string
	// The plan's.
	Key            string
	Description    string
	Acceptance     string
	Priority       int
	Labels         []string
	Parent         string
	DiscoveredFrom string
	Children       int
}

type runDump struct {
	ID            string
	TaskID        string
	Agent         string
	Status        reducer.RunStatus
	Attempt       uint32
	Started       int64
	Updated       int64
	Progress      string
	LastHeartbeat int64
}

type projectDump struct {
	ID            string
	Name          string
	Workspace     string
	Created       int64
	Updated       int64
	LastHeartbeat int64
	LastSequence  uint64
	Phase         reducer.Phase
	Status        reducer.ProjectStatus
	DoneCount     int
	Evidence      []string
	Tasks         []taskDump
	Runs          []runDump
	Released      bool
	Archived      bool
	Approvals     []reducer.Approval
	Ready         []string // ReadyTasks' IDs
}

type stateDump struct {
	Projects map[string]projectDump
	// Resolve maps each project name, and each extra ref asked for, to the
	// ID the world resolves it to ("" when it resolves to none).
	Resolve map[string]string
}

func optString(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return strconv.Quote(*p)
}

func dumpProject(p *reducer.Project) projectDump {
	d := projectDump{
		ID: p.ID, Name: p.Name, Workspace: p.Workspace,
		Created: p.Created, Updated: p.Updated, LastHeartbeat: p.LastHeartbeat, LastSequence: p.LastSequence,
		Phase: p.Phase(), Status: p.Status(), DoneCount: p.DoneCount(), Evidence: reducer.Evidence(p),
		Released: p.Released, Archived: p.Archived,
	}
	for _, a := range p.Approvals() {
		d.Approvals = append(d.Approvals, *a)
	}
	for _, t := range p.Tasks() {
		d.Tasks = append(d.Tasks, taskDump{
			ID: t.ID, Title: t.Title, Status: t.Status, DependsOn: append([]string(nil), t.DependsOn...),
			Retries: t.Retries, MaxRetries: t.MaxRetries, RunID: t.RunID, Progress: optString(t.Progress),
			LastHeartbeat: t.LastHeartbeat, Attempts: t.Attempts, Approval: t.Approval,
			Key: t.Key, Description: t.Description, Acceptance: t.Acceptance, Priority: t.Priority,
			Labels: append([]string(nil), t.Labels...), Parent: t.Parent, DiscoveredFrom: t.DiscoveredFrom, Children: t.Children,
		})
	}
	for _, t := range reducer.ReadyTasks(p, nil) {
		d.Ready = append(d.Ready, t.ID)
	}
	for _, r := range p.Runs() {
		d.Runs = append(d.Runs, runDump{
			ID: r.ID, TaskID: r.TaskID, Agent: r.Agent, Status: r.Status, Attempt: r.Attempt,
			Started: r.Started, Updated: r.Updated, Progress: optString(r.Progress), LastHeartbeat: r.LastHeartbeat,
		})
	}
	return d
}

func dumpState(s *world, refs ...string) stateDump {
	d := stateDump{Projects: map[string]projectDump{}, Resolve: map[string]string{}}
	resolve := func(ref string) {
		if p, ok := s.project(ref); ok {
			d.Resolve[ref] = p.ID
		} else {
			d.Resolve[ref] = ""
		}
	}
	for _, p := range s.all() {
		d.Projects[p.ID] = dumpProject(p)
		resolve(p.Name)
	}
	for _, r := range refs {
		resolve(r)
	}
	return d
}

// pointers maps each project ID to the *Project the world holds for it.
func pointers(s *world) map[string]*reducer.Project { return maps.Clone(s.projects) }

func bodies(evs []reducer.Event) []reducer.Body {
	out := []reducer.Body{}
	for _, e := range evs {
		out = append(out, e.Body)
	}
	return out
}

func ptr(s string) *string { return &s }
