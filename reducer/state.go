package reducer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/benbjohnson/immutable"
)

// Project is the derived state of one project. A *Project is immutable:
// Evolve returns a new one and never changes the one it was given, so a
// project may be read from any goroutine while the writer goes on.
//
// Its tasks and runs live in persistent collections (a vector for their
// order, a hash map for lookup by ID), which Evolve updates by copying
// only the path to what changed: one event costs O(log n) in the
// project's tasks and runs, never a copy of them all. A Fold copies each
// such path once for all its events. The counts a reply
// carries (tasks by status, running runs) are kept as events arrive, not
// recounted.
type Project struct {
	ID            string
	Name          string
	Workspace     string
	Created       int64
	Updated       int64 // time of the latest event
	LastHeartbeat int64 // 0 when none
	LastSequence  uint64
	ChainHead     []byte // Hash of the newest event
	// Released: the owner released the project, all of whose tasks were
	// done (phase production until new work is added). Archived: the
	// owner archived it (status archived, phase reporting; no more
	// writes).
	Released bool
	Archived bool

	edit       *edit // the Fold that made this version and may change it in place; nil for Evolve
	tasks      vector[*Task]
	taskIdx    *immutable.Map[string, int]
	dependants *immutable.Map[string, *immutable.List[int]] // task ID -> indices of the tasks that depend on it
	runs       vector[*Run]
	runIdx     *immutable.Map[string, int]
	running    *immutable.Map[string, int]                  // run ID -> index, for the runs in RunRunning
	byStatus   [numTaskStatuses]int                         // tasks in each status, indexed by statusIndex
	titles     *immutable.Map[string, *immutable.List[int]] // title -> indices of the tasks of that title
	approvals  vector[*Approval]                            // in the order asked
	approvalIx *immutable.Map[string, int]                  // question ID -> index
	pending    int                                          // approvals pending
	spend      Spend                                        // the sum of the runs' usage (usage.go)
	budget     Budget                                       // the owner's; zero for none
	reachedAt  uint64                                       // the usage event that made spend reach the budget, 0 while not
}

// Approval is a question to the owner that gates a project (and, with
// TaskID, that task's next run) until it is decided. Never changed once a
// project holds it.
type Approval struct {
	ID       string // the question's ID
	TaskID   string // "" for the project as a whole
	Question string
	AskedBy  string
	Asked    int64  // Unix milliseconds
	Deadline int64  // Unix milliseconds
	AskedSeq uint64 // the sequence of its approval_asked event
	Outcome  ApprovalOutcome
	// Decided and DecidedBy are when and by whom (or why) it was decided,
	// DecidedSeq the approval_decided event's sequence; zero while
	// pending.
	Decided    int64
	DecidedBy  string
	DecidedSeq uint64
}

// Task is the derived state of one task. Like a Project, it is never
// changed once a project holds it, but by the Fold that made it, within
// its run of events.
type Task struct {
	ID            string
	Title         string
	Status        TaskStatus
	DependsOn     []string
	Retries       uint32
	MaxRetries    uint32
	RunID         string // the current run while running, else ""
	Progress      *string
	LastHeartbeat int64  // 0 when none
	Attempts      uint32 // runs started
	Since         uint64 // the sequence of the event that set Status
	// Approval is the pending approval that gates the task's next run,
	// or "".
	Approval string
	Spend    Spend // the sum of its runs' usage (usage.go)

	edit *edit // the Fold that made it, nil for Evolve
}

// Run is the derived state of one run, never changed once a project holds
// it (but by the Fold that made it, within its run of events).
type Run struct {
	ID            string
	TaskID        string
	Agent         string
	Status        RunStatus
	Attempt       uint32
	Started       int64
	Updated       int64
	Progress      *string
	LastHeartbeat int64 // 0 when none
	Usage         Usage // what it spent so far, its newest report (usage.go)

	edit *edit // the Fold that made it, nil for Evolve
}

// newProject is a project with no tasks or runs.
func newProject(id, name, workspace string) *Project {
	return &Project{
		ID: id, Name: name, Workspace: workspace,
		taskIdx:    immutable.NewMap[string, int](nil),
		dependants: immutable.NewMap[string, *immutable.List[int]](nil),
		runIdx:     immutable.NewMap[string, int](nil),
		running:    immutable.NewMap[string, int](nil),
		titles:     immutable.NewMap[string, *immutable.List[int]](nil),
		approvalIx: immutable.NewMap[string, int](nil),
	}
}

// TaskCount is the number of tasks.
func (p *Project) TaskCount() int { return p.tasks.Len() }

// RunCount is the number of runs.
func (p *Project) RunCount() int { return p.runs.Len() }

// RunningCount is the number of runs in RunRunning.
func (p *Project) RunningCount() int { return p.running.Len() }

// CountOf is the number of tasks in status s.
func (p *Project) CountOf(s TaskStatus) int { return p.byStatus[statusIndex(s)] }

// DoneCount is the number of tasks in TaskDone.
func (p *Project) DoneCount() int { return p.CountOf(TaskDone) }

// Tasks returns the project's tasks in the order they were added. It
// copies them out, O(n): for the replies that list them all.
func (p *Project) Tasks() []*Task { return p.tasks.Slice() }

// Runs returns the project's runs in the order they started, O(n).
func (p *Project) Runs() []*Run { return p.runs.Slice() }

func listOf[T any](l *immutable.List[T]) []T {
	out := make([]T, 0, l.Len())
	for it := l.Iterator(); !it.Done(); {
		_, v := it.Next()
		out = append(out, v)
	}
	return out
}

// Task returns the task with the given ID.
func (p *Project) Task(id string) (*Task, bool) {
	i, ok := p.taskIdx.Get(id)
	if !ok {
		return nil, false
	}
	return p.tasks.Get(i), true
}

// Run returns the run with the given ID.
func (p *Project) Run(id string) (*Run, bool) {
	i, ok := p.runIdx.Get(id)
	if !ok {
		return nil, false
	}
	return p.runs.Get(i), true
}

// Approvals returns the project's approvals in the order they were asked.
func (p *Project) Approvals() []*Approval { return p.approvals.Slice() }

// Approval returns the approval of question id.
func (p *Project) Approval(id string) (*Approval, bool) {
	i, ok := p.approvalIx.Get(id)
	if !ok {
		return nil, false
	}
	return p.approvals.Get(i), true
}

// PendingApprovals is the number of approvals not decided yet.
func (p *Project) PendingApprovals() int { return p.pending }

// ResolveTask finds the task ref names: its ID, else its title when that
// title is unique in the project. An ambiguous title is refused
// (ErrInvalidArgument) with the IDs it could mean.
func (p *Project) ResolveTask(ref string) (*Task, error) {
	if t, ok := p.Task(ref); ok {
		return t, nil
	}
	l, ok := p.titles.Get(ref)
	switch {
	case !ok || l.Len() == 0:
		return nil, fmt.Errorf("%w: task %q", ErrNotFound, ref)
	case l.Len() > 1:
		ids := make([]string, 0, l.Len())
		for it := l.Iterator(); !it.Done(); {
			_, i := it.Next()
			ids = append(ids, p.tasks.Get(i).ID)
		}
		return nil, fmt.Errorf("%w: %d tasks are titled %q; name one by ID: %s", ErrInvalidArgument, len(ids), ref, strings.Join(ids, ", "))
	}
	return p.tasks.Get(l.Get(0)), nil
}

// Status derives the project status; the first rule that matches wins
// (SPEC section 5): archived; failed; waiting_approval; completed;
// blocked; active.
func (p *Project) Status() ProjectStatus {
	n := p.TaskCount()
	switch {
	case p.Archived:
		return ProjectArchived
	case p.CountOf(TaskFailed) > 0:
		return ProjectFailed
	case p.pending > 0:
		return ProjectWaitingApproval
	case n == 0:
		return ProjectActive
	case p.DoneCount() == n:
		return ProjectCompleted
	case p.CountOf(TaskReady)+p.CountOf(TaskRunning)+p.CountOf(TaskStale) == 0:
		return ProjectBlocked
	}
	return ProjectActive
}

// Phase derives the lifecycle phase; the first rule that matches wins:
// reporting once archived, production once released, discovery without
// tasks, staging when every task is done, implementation while a run
// runs, planning until a run has started, else verification.
func (p *Project) Phase() Phase {
	switch {
	case p.Archived:
		return PhaseReporting
	case p.Released:
		return PhaseProduction
	case p.TaskCount() == 0:
		return PhaseDiscovery
	case p.DoneCount() == p.TaskCount():
		return PhaseStaging
	case p.RunningCount() > 0:
		return PhaseImplementation
	case p.RunCount() == 0:
		return PhasePlanning
	}
	return PhaseVerification
}

// StaleRuns returns the IDs of p's running runs whose last heartbeat (or
// start, when they sent none) is more than window milliseconds before now,
// in the order the runs started. It looks only at running runs.
func StaleRuns(p *Project, now, window int64) []string {
	var idx []int
	for it := p.running.Iterator(); !it.Done(); {
		_, i, _ := it.Next()
		if r := p.runs.Get(i); now-max(r.LastHeartbeat, r.Started) > window {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	slices.Sort(idx)
	ids := make([]string, len(idx))
	for k, i := range idx {
		ids[k] = p.runs.Get(i).ID
	}
	return ids
}

// OverdueApprovals returns the IDs of p's pending approvals whose deadline
// passed more than grace milliseconds before now, in the order asked.
func OverdueApprovals(p *Project, now, grace int64) []string {
	if p.pending == 0 {
		return nil
	}
	var ids []string
	for _, a := range p.Approvals() {
		if a.Outcome == ApprovalPending && now-a.Deadline > grace {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// depsDone reports whether every dependency is done.
func (p *Project) depsDone(deps []string) bool {
	for _, d := range deps {
		if t, ok := p.Task(d); !ok || t.Status != TaskDone {
			return false
		}
	}
	return true
}

// The writers below change p in place: Evolve calls them only on its own
// copy of a project, whose collections are persistent (each Set or Append
// returns a new version and leaves the one the old project holds alone,
// changing in place only the nodes, tasks and runs that p.edit, its Fold,
// made).

// stamped is a *Task or a *Run: an element a Fold may change in place,
// with the token of the Fold that made it.
type stamped[S any] interface {
	*S
	stamp() **edit
}

func (t *Task) stamp() **edit { return &t.edit }
func (r *Run) stamp() **edit  { return &r.edit }

// ownAt returns element i of v to change under e: the element itself when
// e made it, else a copy stamped e (or by none) set in its place.
func ownAt[S any, P stamped[S]](v *vector[P], i int, e *edit) P {
	x := v.Get(i)
	if e != nil && *x.stamp() == e {
		return x
	}
	c := P(new(S))
	*c = *x
	*c.stamp() = e
	*v = v.Set(i, c, e)
	return c
}

// addTask appends t.
func (p *Project) addTask(t *Task) {
	i := p.tasks.Len()
	t.edit = p.edit
	p.tasks = p.tasks.Append(t, p.edit)
	p.taskIdx = p.taskIdx.Set(t.ID, i)
	p.byStatus[statusIndex(t.Status)]++
	titled, ok := p.titles.Get(t.Title)
	if !ok {
		titled = immutable.NewList[int]()
	}
	p.titles = p.titles.Set(t.Title, titled.Append(i))
	for _, d := range t.DependsOn {
		l, ok := p.dependants.Get(d)
		if !ok {
			l = immutable.NewList[int]()
		}
		p.dependants = p.dependants.Set(d, l.Append(i))
	}
}

// updateTask replaces task id by a copy that change has changed, and
// keeps the status counts.
func (p *Project) updateTask(id string, change func(t *Task)) *Task {
	i, ok := p.taskIdx.Get(id)
	if !ok {
		panic(fmt.Sprintf("reducer: event for unknown task %s", id))
	}
	return p.updateTaskAt(i, change)
}

func (p *Project) updateTaskAt(i int, change func(t *Task)) *Task {
	t := ownAt(&p.tasks, i, p.edit)
	was := t.Status
	change(t)
	if t.Status != was {
		p.byStatus[statusIndex(was)]--
		p.byStatus[statusIndex(t.Status)]++
	}
	return t
}

// addRun appends r, which is running.
func (p *Project) addRun(r *Run) {
	i := p.runs.Len()
	r.edit = p.edit
	p.runs = p.runs.Append(r, p.edit)
	p.runIdx = p.runIdx.Set(r.ID, i)
	p.running = p.running.Set(r.ID, i)
}

// updateRun replaces run id by a copy that change has changed, and keeps
// the set of running runs.
func (p *Project) updateRun(id string, change func(r *Run)) *Run {
	i, ok := p.runIdx.Get(id)
	if !ok {
		panic(fmt.Sprintf("reducer: event for unknown run %s", id))
	}
	r := ownAt(&p.runs, i, p.edit)
	was := r.Status
	change(r)
	if was == RunRunning && r.Status != RunRunning {
		p.running = p.running.Delete(r.ID)
	}
	return r
}

// addApproval appends a, which is pending.
func (p *Project) addApproval(a *Approval) {
	p.approvalIx = p.approvalIx.Set(a.ID, p.approvals.Len())
	p.approvals = p.approvals.Append(a, p.edit)
	p.pending++
}

// decideApproval replaces approval id by a copy that change has decided.
func (p *Project) decideApproval(id string, change func(a *Approval)) *Approval {
	i, ok := p.approvalIx.Get(id)
	if !ok {
		panic(fmt.Sprintf("reducer: event for unknown approval %s", id))
	}
	old := p.approvals.Get(i)
	if old.Outcome != ApprovalPending {
		panic(fmt.Sprintf("reducer: approval %s decided twice", id))
	}
	a := *old
	change(&a)
	p.approvals = p.approvals.Set(i, &a, p.edit)
	p.pending--
	return &a
}

// dependantsOf returns the indices of the tasks that depend on id, in the
// order they were added.
func (p *Project) dependantsOf(id string) []int {
	l, ok := p.dependants.Get(id)
	if !ok {
		return nil
	}
	return listOf(l)
}

// numTaskStatuses is the number of task statuses (taskStatuses).
const numTaskStatuses = 7

// statusIndex is s's index in taskStatuses.
func statusIndex(s TaskStatus) int {
	switch s {
	case TaskPending:
		return 0
	case TaskReady:
		return 1
	case TaskRunning:
		return 2
	case TaskBlocked:
		return 3
	case TaskDone:
		return 4
	case TaskFailed:
		return 5
	case TaskStale:
		return 6
	}
	panic(fmt.Sprintf("reducer: unknown task status %q", s))
}
