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
	children   *immutable.Map[string, *immutable.List[int]] // epic ID -> indices of its children, in the order they came
	keys       *immutable.Map[string, int]                  // plan key -> index of the task of that key
	ready      *immutable.SortedMap[int, struct{}]          // readyKey of each task ReadyTasks lists
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
	// The plan's fields (docs/plan.md). Parent is the ID of the task's
	// epic, DiscoveredFrom the ID of the run its work was found in, Key
	// its plan file's key; Labels are sorted, without duplicates.
	Key            string
	Description    string
	Acceptance     string
	Priority       int
	Labels         []string
	Parent         string
	DiscoveredFrom string
	// Children is the number of tasks whose Parent is this one: a task
	// with children is an epic, never run itself, its Status derived
	// from theirs (epicStatus).
	Children int
	Spend    Spend // the sum of its runs' usage (usage.go)

	kids [numTaskStatuses]int // the children in each status, by statusIndex
	edit *edit                // the Fold that made it, nil for Evolve
}

// Epic reports whether t is an epic: a task with children.
func (t *Task) Epic() bool { return t.Children > 0 }

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
		children:   immutable.NewMap[string, *immutable.List[int]](nil),
		keys:       immutable.NewMap[string, int](nil),
		ready:      immutable.NewSortedMap[int, struct{}](nil),
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

// ResolveTask finds the task ref names: its ID, else its plan key
// (docs/plan.md), else its title when that title is unique in the
// project. An ambiguous title is refused (ErrInvalidArgument) with the
// IDs it could mean.
func (p *Project) ResolveTask(ref string) (*Task, error) {
	if t, ok := p.Task(ref); ok {
		return t, nil
	}
	if t, ok := p.TaskByKey(ref); ok {
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

// addTask appends t, and adds it to its epic's children.
func (p *Project) addTask(t *Task) {
	i := p.tasks.Len()
	t.edit = p.edit
	p.tasks = p.tasks.Append(t, p.edit)
	p.taskIdx = p.taskIdx.Set(t.ID, i)
	p.byStatus[statusIndex(t.Status)]++
	p.titles = p.titles.Set(t.Title, appended(p.titles, t.Title, i))
	for _, d := range t.DependsOn {
		p.dependants = p.dependants.Set(d, appended(p.dependants, d, i))
	}
	if t.Key != "" {
		p.keys = p.keys.Set(t.Key, i)
	}
	if listedReady(t) {
		p.ready = p.ready.Set(readyKey(t.Priority, i), struct{}{})
	}
	if t.Parent != "" {
		p.adopt(t.Parent, i)
	}
}

// appended is the list m holds at k (none: empty) with i after it.
func appended(m *immutable.Map[string, *immutable.List[int]], k string, i int) *immutable.List[int] {
	l, ok := m.Get(k)
	if !ok {
		l = immutable.NewList[int]()
	}
	return l.Append(i)
}

// removed sets m's list at k to the one without i (deleting k when none
// is left): O(its length).
func removed(m *immutable.Map[string, *immutable.List[int]], k string, i int) *immutable.Map[string, *immutable.List[int]] {
	l, ok := m.Get(k)
	if !ok {
		return m
	}
	kept := make([]int, 0, l.Len())
	for _, j := range listOf(l) {
		if j != i {
			kept = append(kept, j)
		}
	}
	if len(kept) == 0 {
		return m.Delete(k)
	}
	return m.Set(k, immutable.NewList(kept...))
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

// updateTaskAt replaces task i by a copy that change has changed, and
// keeps what follows from it: the status counts, the ready index, its
// epic's status (and theirs up the chain: O(depth)) and, once it is
// done, its dependants'.
func (p *Project) updateTaskAt(i int, change func(t *Task)) *Task {
	t := ownAt(&p.tasks, i, p.edit)
	was, wasListed, wasKey := t.Status, listedReady(t), readyKey(t.Priority, i)
	change(t)
	listed, key := listedReady(t), readyKey(t.Priority, i)
	if wasListed && (!listed || key != wasKey) {
		p.ready = p.ready.Delete(wasKey)
	}
	if listed && (!wasListed || key != wasKey) {
		p.ready = p.ready.Set(key, struct{}{})
	}
	if t.Status == was {
		return t
	}
	p.byStatus[statusIndex(was)]--
	p.byStatus[statusIndex(t.Status)]++
	if t.Parent != "" {
		to := t.Status
		p.updateTask(t.Parent, func(e *Task) {
			e.kids[statusIndex(was)]--
			e.kids[statusIndex(to)]++
			e.derive(p.LastSequence)
		})
	}
	if t.Status == TaskDone {
		for _, d := range p.dependantsOf(t.ID) {
			p.rederive(d)
		}
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

// adopt makes task i a child of epic parent.
func (p *Project) adopt(parent string, i int) {
	p.children = p.children.Set(parent, appended(p.children, parent, i))
	status := p.tasks.Get(i).Status
	p.updateTask(parent, func(e *Task) {
		e.Children++
		e.kids[statusIndex(status)]++
		e.derive(p.LastSequence)
	})
}

// disown takes task i from the children of its epic parent. An epic
// left without children is a task again: done if it was, else ready or
// pending as its dependencies say.
func (p *Project) disown(parent string, i int) {
	p.children = removed(p.children, parent, i)
	status := p.tasks.Get(i).Status
	p.updateTask(parent, func(e *Task) {
		e.Children--
		e.kids[statusIndex(status)]--
		if e.Children > 0 {
			e.derive(p.LastSequence)
			return
		}
		if e.Status != TaskDone {
			e.Status, e.Since = p.startable(e), p.LastSequence
		}
	})
}

// derive sets an epic's status from its children's (epicStatus), seq
// being the event that changed it.
func (e *Task) derive(seq uint64) {
	if e.Children == 0 {
		return
	}
	if s := epicStatus(e.kids, e.Children); s != e.Status {
		e.Status, e.Since = s, seq
	}
}

// epicStatus is the status of an epic of n children, kids of them in
// each status (docs/plan.md, "Epics"): done when all are done; failed
// when one failed for good; else the most advanced of theirs: running,
// stale, ready, blocked, pending.
func epicStatus(kids [numTaskStatuses]int, n int) TaskStatus {
	if kids[statusIndex(TaskDone)] == n {
		return TaskDone
	}
	for _, s := range []TaskStatus{TaskFailed, TaskRunning, TaskStale, TaskReady, TaskBlocked} {
		if kids[statusIndex(s)] > 0 {
			return s
		}
	}
	return TaskPending
}

// canStart reports whether the dependencies of a task of deps under
// epic parent are done, and those of each of its epics (a task waits for
// what its epics wait for): O(depth).
func (p *Project) canStart(deps []string, parent string) bool {
	if !p.depsDone(deps) {
		return false
	}
	for parent != "" {
		e, ok := p.Task(parent)
		if !ok || !p.depsDone(e.DependsOn) {
			return false
		}
		parent = e.Parent
	}
	return true
}

// startable is the status a task that waits for nothing else takes:
// ready when it can start, else pending.
func (p *Project) startable(t *Task) TaskStatus {
	if p.canStart(t.DependsOn, t.Parent) {
		return TaskReady
	}
	return TaskPending
}

// rederive moves task i, when pending or ready, to the one of the two
// its dependencies (and its epics') say; for an epic, each task under
// it. A dependency done, an edit of dependencies or parent call it.
func (p *Project) rederive(i int) {
	t := p.tasks.Get(i)
	if t.Epic() {
		if l, ok := p.children.Get(t.ID); ok {
			for _, c := range listOf(l) {
				p.rederive(c)
			}
		}
		return
	}
	if t.Status != TaskPending && t.Status != TaskReady {
		return
	}
	if s := p.startable(t); s != t.Status {
		seq := p.LastSequence
		p.updateTaskAt(i, func(t *Task) { t.Status, t.Since = s, seq })
	}
}

// childrenOf returns the indices of the children of epic id, in the
// order they came.
func (p *Project) childrenOf(id string) []int {
	l, ok := p.children.Get(id)
	if !ok {
		return nil
	}
	return listOf(l)
}

// listedReady reports whether ReadyTasks lists t: ready, not an epic, no
// approval pending.
func listedReady(t *Task) bool { return t.Status == TaskReady && t.Children == 0 && t.Approval == "" }

// readyKey orders the ready index: priority, then the order added.
func readyKey(priority, i int) int { return priority<<40 | i }

// ReadyTasks returns the tasks ready to run, most urgent first, then the
// oldest (the order added): not epics, no approval pending, and with
// every label of labels. Without labels it costs O(log n) and the tasks
// it returns.
func ReadyTasks(p *Project, labels []string) []*Task {
	var out []*Task
	p.eachReady(labels, func(t *Task) bool {
		out = append(out, t)
		return true
	})
	return out
}

// eachReady calls f with ReadyTasks' tasks in order until f says stop.
func (p *Project) eachReady(labels []string, f func(t *Task) bool) {
	for it := p.ready.Iterator(); !it.Done(); {
		k, _, _ := it.Next()
		t := p.tasks.Get(k & (1<<40 - 1))
		if hasLabels(t, labels) && !f(t) {
			return
		}
	}
}

// hasLabels reports whether t has every one of labels.
func hasLabels(t *Task, labels []string) bool {
	for _, l := range labels {
		if _, found := slices.BinarySearch(t.Labels, l); !found {
			return false
		}
	}
	return true
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
