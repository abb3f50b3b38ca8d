package reducer

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
)

// Decide returns the events that command c causes in project p, or the
// reason it is refused. p is the project c names (the caller resolves
// c.ProjectRef by ID or name), or nil when there is none; CreateProject
// is decided with p nil. The texts, lists and references of c are
// checked first (limits.go), whether or not p exists. Decide does not
// change p: a refused command appends nothing. A command that would start
// a run, whichever, is refused once p's budget is reached (usage.go).
func Decide(p *Project, c Command) ([]Event, error) {
	evs, err := decide(p, c)
	if err == nil {
		err = checkBudget(p, evs)
	}
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// decide is Decide but for the budget.
func decide(p *Project, c Command) ([]Event, error) {
	if err := checkShape(c); err != nil {
		return nil, err
	}
	if _, create := c.(CreateProject); !create && p == nil {
		return nil, fmt.Errorf("%w: project %q", ErrNotFound, c.ProjectRef())
	}
	if _, sweep := c.(MarkStale); p != nil && p.Archived && !sweep {
		return nil, fmt.Errorf("%w: project %s is archived: it takes no more writes", ErrInvalidTransition, p.Name)
	}
	switch c := c.(type) {
	case CreateProject:
		return decideCreate(p, c)
	case AddTask:
		return one(p, c.Now)(decideAddTask(p, c))
	case UpdateTask:
		return one(p, c.Now)(decideUpdateTask(p, c))
	case StartRun:
		return one(p, c.Now)(decideStartRun(p, c))
	case ProgressRun:
		return one(p, c.Now)(decideProgress(p, c))
	case FinishRun:
		return one(p, c.Now)(decideFinishRun(p, c))
	case RecordHeartbeat:
		return one(p, c.Now)(decideHeartbeat(p, c))
	case EditTask:
		return one(p, c.Now)(decideEditTask(p, c))
	case NextTask:
		return one(p, c.Now)(decideNextTask(p, c))
	case ApplyPlan:
		return decideApplyPlan(p, c)
	case MarkStale:
		var evs []Event
		for _, r := range StaleRuns(p, c.Now, c.Window) {
			evs = append(evs, Event{ProjectID: p.ID, Time: c.Now, Body: RunStaleMarked{RunID: r}})
		}
		return evs, nil
	case ExpireApprovals:
		var evs []Event
		for _, id := range OverdueApprovals(p, c.Now, c.Grace) {
			evs = append(evs, Event{ProjectID: p.ID, Time: c.Now, Body: ApprovalDecided{QuestionID: id, Outcome: ApprovalExpired, By: ExpiredBy}})
		}
		return evs, nil
	case RetryTask:
		return one(p, c.Now)(decideRetry(p, c))
	case AskApproval:
		return one(p, c.Now)(decideAsk(p, c))
	case DecideApproval:
		return one(p, c.Now)(decideApproval(p, c))
	case ReleaseProject:
		return one(p, c.Now)(decideRelease(p, c))
	case ArchiveProject:
		return one(p, c.Now)(decideArchive(p, c))
	case SetBudget:
		return one(p, c.Now)(decideBudget(c))
	}
	panic(fmt.Sprintf("reducer: unknown command %T", c))
}

// one turns a decision into p's one event at now, or none when the body
// is nil without an error (a coalesced heartbeat).
func one(p *Project, now int64) func(Body, error) ([]Event, error) {
	return func(b Body, err error) ([]Event, error) {
		if err != nil || b == nil {
			return nil, err
		}
		return []Event{{ProjectID: p.ID, Time: now, Body: b}}, nil
	}
}

// decideCreate checks a new project. That its name is not taken is the
// ledger's to check: it holds every project, the reducer only the one a
// command names. p is the project already holding c's ID, if any.
func decideCreate(p *Project, c CreateProject) ([]Event, error) {
	if ws, err := CleanWorkspace(c.Workspace); err != nil {
		return nil, err
	} else if ws != c.Workspace {
		return nil, fmt.Errorf("%w: workspace %q is not a clean path (%q)", ErrInvalidArgument, c.Workspace, ws)
	}
	if c.ProjectID == "" {
		panic("reducer: CreateProject without an ID")
	}
	if p != nil {
		return nil, fmt.Errorf("%w: project ID %s exists", ErrConflict, c.ProjectID)
	}
	return []Event{{ProjectID: c.ProjectID, Time: c.Now, Body: ProjectCreated{Name: c.Name, Workspace: c.Workspace}}}, nil
}

func decideUpdateTask(p *Project, c UpdateTask) (Body, error) {
	t, err := p.ResolveTask(c.TaskID)
	if err != nil {
		return nil, err
	}
	to := c.Status
	refuse := func(why string) (Body, error) {
		return nil, fmt.Errorf("%w: task %s cannot go from %s to %s: %s", ErrInvalidTransition, t.ID, t.Status, to, why)
	}
	if parseEnum(&to, taskStatuses, []byte(to)) != nil {
		return nil, fmt.Errorf("%w: unknown task status %q", ErrInvalidArgument, to)
	}
	switch {
	case t.Epic():
		return refuse("it is an epic: its status comes from its children's")
	case t.Status.Final():
		return refuse("it is final")
	case t.Status == TaskRunning:
		return refuse("a running task changes only through its run")
	case to == t.Status:
		// Only progress changes.
	case to == TaskRunning || to == TaskStale:
		return refuse("running and stale come from runs")
	case to == TaskBlocked && (t.Status == TaskPending || t.Status == TaskReady || t.Status == TaskStale):
	case to == TaskReady && t.Status == TaskBlocked:
		to = p.startable(t)
	case to == TaskDone || to == TaskFailed:
		// From pending, ready, blocked or stale: everything non-final
		// and not running is left.
	default:
		return refuse("not an allowed update")
	}
	var progress *string
	if c.Progress != nil {
		p := *c.Progress // the event owns its data, not the caller
		progress = &p
	}
	return TaskUpdated{TaskID: t.ID, Status: to, Progress: progress}, nil
}

func decideStartRun(p *Project, c StartRun) (Body, error) {
	t, err := p.ResolveTask(c.TaskID)
	if err != nil {
		return nil, err
	}
	if t.Epic() {
		return nil, epicNotRun(t)
	}
	if t.Status != TaskReady && t.Status != TaskStale {
		return nil, fmt.Errorf("%w: task %s is %s; a run starts only from ready or stale", ErrInvalidTransition, t.ID, t.Status)
	}
	if t.Approval != "" {
		a, _ := p.Approval(t.Approval)
		return nil, fmt.Errorf("%w: task %s waits for the owner's approval %s (%q)", ErrInvalidTransition, t.ID, a.ID, a.Question)
	}
	if _, taken := p.Run(c.RunID); taken {
		return nil, fmt.Errorf("%w: run ID %s exists", ErrConflict, c.RunID)
	}
	return RunStarted{RunID: c.RunID, TaskID: t.ID, Agent: c.Agent}, nil
}

// epicNotRun refuses to run epic t, or to gate its run.
func epicNotRun(t *Task) error {
	return fmt.Errorf("%w: task %s is an epic: its children are run", ErrInvalidTransition, t.ID)
}

func decideFinishRun(p *Project, c FinishRun) (Body, error) {
	switch c.Status {
	case RunSucceeded, RunFailed, RunCancelled:
	default:
		return nil, fmt.Errorf("%w: a run finishes succeeded, failed or cancelled, not %s", ErrInvalidArgument, c.Status)
	}
	r, err := runningRun(p, c.RunID)
	if err != nil {
		return nil, err
	}
	u, err := decideUsage(r, c.Usage)
	if err != nil {
		return nil, err
	}
	return RunFinished{RunID: c.RunID, Status: c.Status, Usage: u}, nil
}

func decideProgress(p *Project, c ProgressRun) (Body, error) {
	r, err := runningRun(p, c.RunID)
	if err != nil {
		return nil, err
	}
	u, err := decideUsage(r, c.Usage)
	if err != nil {
		return nil, err
	}
	if coalesced(r.LastHeartbeat, c.Every, c.Now) {
		return nil, nil
	}
	return RunProgress{RunID: c.RunID, Progress: c.Progress, Usage: u}, nil
}

func decideHeartbeat(p *Project, c RecordHeartbeat) (Body, error) {
	if c.RunID != "" {
		r, err := runningRun(p, c.RunID)
		if err != nil {
			return nil, err
		}
		if c.TaskID != "" {
			if t, err := p.ResolveTask(c.TaskID); err != nil || t.ID != r.TaskID {
				return nil, fmt.Errorf("%w: run %s belongs to task %s, not %s", ErrInvalidArgument, r.ID, r.TaskID, c.TaskID)
			}
		}
		u, err := decideUsage(r, c.Usage)
		if err != nil {
			return nil, err
		}
		if coalesced(r.LastHeartbeat, c.Every, c.Now) {
			return nil, nil
		}
		return Heartbeat{TaskID: r.TaskID, RunID: r.ID, Usage: u}, nil
	}
	if c.Usage != nil {
		return nil, fmt.Errorf("%w: usage is a run's: name the run", ErrInvalidArgument)
	}
	last, task := p.LastHeartbeat, ""
	if c.TaskID != "" {
		t, err := p.ResolveTask(c.TaskID)
		if err != nil {
			return nil, err
		}
		if t.Status.Final() {
			return nil, fmt.Errorf("%w: task %s is %s", ErrInvalidTransition, t.ID, t.Status)
		}
		last, task = t.LastHeartbeat, t.ID
	}
	if coalesced(last, c.Every, c.Now) {
		return nil, nil
	}
	return Heartbeat{TaskID: task}, nil
}

func decideRetry(p *Project, c RetryTask) (Body, error) {
	t, err := p.ResolveTask(c.TaskID)
	if err != nil {
		return nil, err
	}
	if t.Epic() {
		return nil, fmt.Errorf("%w: task %s is an epic: retry its failed children", ErrInvalidTransition, t.ID)
	}
	if t.Status != TaskFailed {
		return nil, fmt.Errorf("%w: task %s is %s; only a failed task is retried", ErrInvalidTransition, t.ID, t.Status)
	}
	var budget *uint32
	if c.MaxRetries != nil {
		m := *c.MaxRetries
		budget = &m
	}
	return TaskRetried{TaskID: t.ID, MaxRetries: budget, By: c.By}, nil
}

func decideAsk(p *Project, c AskApproval) (Body, error) {
	if c.QuestionID == "" {
		panic("reducer: AskApproval without a question ID")
	}
	if _, taken := p.Approval(c.QuestionID); taken {
		return nil, fmt.Errorf("%w: question %s was asked already", ErrConflict, c.QuestionID)
	}
	if c.Deadline <= c.Now {
		return nil, fmt.Errorf("%w: the question's deadline is not after now", ErrInvalidArgument)
	}
	task := ""
	if c.TaskID != "" {
		t, err := p.ResolveTask(c.TaskID)
		if err != nil {
			return nil, err
		}
		switch {
		case t.Epic():
			return nil, epicNotRun(t)
		case t.Status.Final():
			return nil, fmt.Errorf("%w: task %s is %s: there is nothing left to approve", ErrInvalidTransition, t.ID, t.Status)
		case t.Status == TaskRunning:
			return nil, fmt.Errorf("%w: task %s is running: ask before its run starts", ErrInvalidTransition, t.ID)
		case t.Approval != "":
			return nil, fmt.Errorf("%w: task %s waits for approval %s already", ErrConflict, t.ID, t.Approval)
		}
		task = t.ID
	}
	return ApprovalAsked{QuestionID: c.QuestionID, TaskID: task, Question: c.Question, Deadline: c.Deadline, By: c.By}, nil
}

func decideApproval(p *Project, c DecideApproval) (Body, error) {
	a, ok := p.Approval(c.QuestionID)
	if !ok {
		return nil, fmt.Errorf("%w: approval %q", ErrNotFound, c.QuestionID)
	}
	if a.Outcome != ApprovalPending {
		return nil, fmt.Errorf("%w: approval %s is %s already", ErrConflict, a.ID, a.Outcome)
	}
	if parseEnum(&c.Outcome, approvalOutcomes, []byte(c.Outcome)) != nil || c.Outcome == ApprovalPending {
		return nil, fmt.Errorf("%w: an approval ends yes, no, expired, withdrawn or failed, not %q", ErrInvalidArgument, c.Outcome)
	}
	return ApprovalDecided{QuestionID: a.ID, Outcome: c.Outcome, By: c.By}, nil
}

func decideRelease(p *Project, c ReleaseProject) (Body, error) {
	switch n := p.TaskCount(); {
	case p.Released:
		return nil, fmt.Errorf("%w: project %s is released already", ErrInvalidTransition, p.Name)
	case n == 0:
		return nil, fmt.Errorf("%w: project %s has no tasks: there is nothing to release", ErrInvalidTransition, p.Name)
	case p.DoneCount() < n:
		return nil, fmt.Errorf("%w: project %s has %d of %s done: release takes every task done", ErrInvalidTransition, p.Name, p.DoneCount(), plural(n, "task"))
	}
	return Released{By: c.By}, nil
}

func decideArchive(p *Project, c ArchiveProject) (Body, error) {
	switch {
	case p.RunningCount() > 0:
		return nil, fmt.Errorf("%w: project %s has %s: finish or cancel them first", ErrInvalidTransition, p.Name, plural(p.RunningCount(), "running run"))
	case p.pending > 0:
		return nil, fmt.Errorf("%w: project %s waits for %s: decide first", ErrInvalidTransition, p.Name, plural(p.pending, "approval"))
	}
	return Archived{By: c.By}, nil
}

// coalesced reports whether a heartbeat (or progress) at now comes within
// every of the last journaled one, last, so that journaling it would add
// nothing an observer needs.
func coalesced(last, every, now int64) bool {
	return every > 0 && last != 0 && now-last < every
}

func runningRun(p *Project, id string) (*Run, error) {
	r, ok := p.Run(id)
	if !ok {
		return nil, fmt.Errorf("%w: run %q", ErrNotFound, id)
	}
	if r.Status != RunRunning {
		return nil, fmt.Errorf("%w: run %s is %s", ErrRunNotRunning, r.ID, r.Status)
	}
	return r, nil
}

// CleanWorkspace checks the form of a project's workspace, an absolute
// path without control characters, and returns it cleaned
// (filepath.Clean). That the directory exists is the caller's to check:
// the reducer does no I/O.
func CleanWorkspace(dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%w: workspace %q is not an absolute path", ErrInvalidArgument, dir)
	}
	if strings.IndexFunc(dir, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("%w: workspace %q contains a control character", ErrInvalidArgument, dir)
	}
	return filepath.Clean(dir), nil
}

// Evolve returns the project that event e makes of p (nil before the
// project's first event, ProjectCreated). p itself is not changed. An
// event that contradicts the state is a bug in Decide or a corrupt
// history, and panics.
func Evolve(p *Project, e Event) *Project { return evolve(p, e, nil) }

// A Fold evolves projects through a run of events, as one write
// transaction or one replay does, for less than Evolve event by event:
// what it copies of a project (the project itself, the paths to the
// tasks and runs that change) it copies once and then changes in place.
// So a project a Fold returned is changed by the Fold's later calls, and
// only the newest version of each is to be kept; once the run is over,
// the Fold is dropped and what it returned never changes again. A project
// the Fold did not make, such as one readers hold, is never changed.
type Fold struct{ edit *edit }

// NewFold starts a run of events.
func NewFold() *Fold { return &Fold{edit: new(edit)} }

// Evolve is reducer.Evolve within f.
func (f *Fold) Evolve(p *Project, e Event) *Project { return evolve(p, e, f.edit) }

// evolve is Evolve, changing in place what ed (nil for nothing) owns.
func evolve(p *Project, e Event, ed *edit) *Project {
	if c, ok := e.Body.(ProjectCreated); ok {
		if p != nil {
			panic(fmt.Sprintf("reducer: project %s created twice", e.ProjectID))
		}
		q := newProject(e.ProjectID, c.Name, c.Workspace)
		q.Created, q.Updated, q.LastSequence, q.ChainHead = e.Time, e.Time, e.Sequence, e.Hash
		q.edit = ed
		return q
	}
	if p == nil || p.ID != e.ProjectID {
		panic(fmt.Sprintf("reducer: event %d of project %s evolved into another project", e.Sequence, e.ProjectID))
	}
	q := p
	if ed == nil || p.edit != ed {
		c := *p
		c.edit = ed
		q = &c
	}
	q.Updated = e.Time
	q.LastSequence = e.Sequence
	q.ChainHead = e.Hash
	switch b := e.Body.(type) {
	case TaskAdded:
		q.Released = false // new work
		t := &Task{ID: b.TaskID, Title: b.Title, DependsOn: b.DependsOn, MaxRetries: b.MaxRetries, Since: e.Sequence,
			Key: b.Key, Description: b.Description, Acceptance: b.Acceptance, Priority: DefaultPriority,
			Labels: b.Labels, Parent: b.Parent, DiscoveredFrom: b.DiscoveredFrom}
		if b.Priority != nil {
			t.Priority = *b.Priority
		}
		t.Status = q.startable(t)
		q.addTask(t)
	case TaskEdited:
		q.editTask(b)
	case TaskUpdated:
		q.updateTask(b.TaskID, func(t *Task) {
			if t.Status != b.Status {
				t.Status, t.Since = b.Status, e.Sequence
			}
			if b.Progress != nil {
				t.Progress = b.Progress
			}
		})
	case RunStarted:
		t := q.updateTask(b.TaskID, func(t *Task) {
			t.Attempts++
			t.Status, t.Since = TaskRunning, e.Sequence
			t.RunID = b.RunID
		})
		q.addRun(&Run{ID: b.RunID, TaskID: b.TaskID, Agent: b.Agent, Status: RunRunning,
			Attempt: t.Attempts, Started: e.Time, Updated: e.Time})
	case RunProgress:
		progress := b.Progress
		q.spendUsage(b.RunID, b.Usage, e.Sequence)
		r := q.updateRun(b.RunID, func(r *Run) { r.Progress, r.LastHeartbeat, r.Updated = &progress, e.Time, e.Time })
		q.updateTask(r.TaskID, func(t *Task) { t.Progress, t.LastHeartbeat = &progress, e.Time })
		q.LastHeartbeat = e.Time
	case RunFinished:
		q.spendUsage(b.RunID, b.Usage, e.Sequence)
		r := q.endRun(b.RunID, b.Status, e.Time)
		q.updateTask(r.TaskID, func(t *Task) {
			t.RunID = ""
			t.Since = e.Sequence
			switch b.Status {
			case RunSucceeded:
				t.Status = TaskDone
			case RunFailed:
				t.spendRetry(TaskReady)
			case RunCancelled:
				t.Status = TaskReady
			default:
				panic(fmt.Sprintf("reducer: run finished %s", b.Status))
			}
		})
	case RunStaleMarked:
		r := q.endRun(b.RunID, RunStale, e.Time)
		q.updateTask(r.TaskID, func(t *Task) {
			t.RunID = ""
			t.Since = e.Sequence
			t.spendRetry(TaskStale)
		})
	case Heartbeat:
		q.spendUsage(b.RunID, b.Usage, e.Sequence)
		q.beat(b.RunID, b.TaskID, e.Time)
	case TaskRetried:
		q.Released = false
		q.updateTask(b.TaskID, func(t *Task) {
			if t.Status != TaskFailed {
				panic(fmt.Sprintf("reducer: task %s retried from %s", t.ID, t.Status))
			}
			t.Status, t.Since, t.Retries = q.startable(t), e.Sequence, 0
			if b.MaxRetries != nil {
				t.MaxRetries = *b.MaxRetries
			}
		})
	case ApprovalAsked:
		q.addApproval(&Approval{ID: b.QuestionID, TaskID: b.TaskID, Question: b.Question, AskedBy: b.By,
			Asked: e.Time, Deadline: b.Deadline, AskedSeq: e.Sequence, Outcome: ApprovalPending})
		if b.TaskID != "" {
			q.updateTask(b.TaskID, func(t *Task) { t.Approval = b.QuestionID })
		}
	case ApprovalDecided:
		a := q.decideApproval(b.QuestionID, func(a *Approval) {
			a.Outcome, a.Decided, a.DecidedBy, a.DecidedSeq = b.Outcome, e.Time, b.By, e.Sequence
		})
		if a.TaskID != "" {
			q.updateTask(a.TaskID, func(t *Task) {
				t.Approval = ""
				if b.Outcome == ApprovalYes || t.Status.Final() || t.Status == TaskRunning {
					return
				}
				refusal := fmt.Sprintf("approval %s (%s): %q", b.Outcome, b.By, a.Question)
				t.Status, t.Since, t.Progress = TaskBlocked, e.Sequence, &refusal
			})
		}
	case Released:
		q.Released = true
	case Archived:
		q.Archived = true
	case BudgetSet:
		q.budget, q.reachedAt = Budget{Tokens: b.Tokens, Cost: b.Cost}, 0
	default:
		panic(fmt.Sprintf("reducer: unknown event %T", e.Body))
	}
	return q
}

// beat records a heartbeat at now of run and task (either may be "") and
// of the project.
func (p *Project) beat(run, task string, now int64) {
	if run != "" {
		p.updateRun(run, func(r *Run) { r.LastHeartbeat, r.Updated = now, now })
	}
	if task != "" {
		p.updateTask(task, func(t *Task) { t.LastHeartbeat = now })
	}
	p.LastHeartbeat = now
}

func (p *Project) endRun(id string, to RunStatus, now int64) *Run {
	return p.updateRun(id, func(r *Run) {
		if r.Status != RunRunning {
			panic(fmt.Sprintf("reducer: run %s ends %s from %s", id, to, r.Status))
		}
		r.Status = to
		r.Updated = now
	})
}

// spendRetry counts a failed attempt: the task fails for good once its
// retries exceed its budget, else it lands on next.
func (t *Task) spendRetry(next TaskStatus) {
	t.Retries++
	if t.Retries > t.MaxRetries {
		t.Status = TaskFailed
	} else {
		t.Status = next
	}
}

// editTask folds a task_edited event: each field it carries replaces
// the task's, and what follows from a new parent or new dependencies
// (the epics' children and status, ready or pending) is kept.
func (p *Project) editTask(b TaskEdited) {
	i, ok := p.taskIdx.Get(b.TaskID)
	if !ok {
		panic(fmt.Sprintf("reducer: event for unknown task %s", b.TaskID))
	}
	old := p.tasks.Get(i)
	if b.Parent != nil && *b.Parent != old.Parent {
		if old.Parent != "" {
			p.disown(old.Parent, i)
		}
		p.updateTaskAt(i, func(t *Task) { t.Parent = *b.Parent })
		if *b.Parent != "" {
			p.adopt(*b.Parent, i)
		}
	}
	if b.DependsOn != nil {
		for _, d := range old.DependsOn {
			p.dependants = removed(p.dependants, d, i)
		}
		for _, d := range *b.DependsOn {
			p.dependants = p.dependants.Set(d, appended(p.dependants, d, i))
		}
	}
	if b.Title != nil && *b.Title != old.Title {
		p.titles = removed(p.titles, old.Title, i)
		p.titles = p.titles.Set(*b.Title, appended(p.titles, *b.Title, i))
	}
	p.updateTaskAt(i, func(t *Task) {
		set(&t.Title, b.Title)
		set(&t.Description, b.Description)
		set(&t.Acceptance, b.Acceptance)
		set(&t.Priority, b.Priority)
		set(&t.Labels, b.Labels)
		set(&t.DiscoveredFrom, b.DiscoveredFrom)
		set(&t.DependsOn, b.DependsOn)
	})
	if b.Parent != nil || b.DependsOn != nil {
		p.rederive(i)
	}
}

// set sets *dst to *v when v is not nil.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
