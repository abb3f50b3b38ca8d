package reducer

import (
	"fmt"
	"path/filepath"
	"slices"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest project name or task title, in characters.
const MaxNameLen = 200

// Decide returns the events that command c causes in state s, or the
// reason it is refused. It does not change s: a refused command appends
// nothing.
func Decide(s *State, c Command) ([]Event, error) {
	switch c := c.(type) {
	case CreateProject:
		return decideCreate(s, c)
	case AddTask:
		return withProject(s, c.Project, c.Now, func(p *Project) (Body, error) { return decideAddTask(p, c) })
	case UpdateTask:
		return withProject(s, c.Project, c.Now, func(p *Project) (Body, error) { return decideUpdateTask(p, c) })
	case StartRun:
		return withProject(s, c.Project, c.Now, func(p *Project) (Body, error) { return decideStartRun(p, c) })
	case ProgressRun:
		return withProject(s, c.Project, c.Now, func(p *Project) (Body, error) {
			if _, err := runningRun(p, c.RunID); err != nil {
				return nil, err
			}
			return RunProgress{RunID: c.RunID, Progress: c.Progress}, nil
		})
	case FinishRun:
		return withProject(s, c.Project, c.Now, func(p *Project) (Body, error) { return decideFinishRun(p, c) })
	case RecordHeartbeat:
		return withProject(s, c.Project, c.Now, func(p *Project) (Body, error) { return decideHeartbeat(p, c) })
	case MarkStale:
		p, ok := s.Project(c.Project)
		if !ok {
			return nil, fmt.Errorf("%w: project %q", ErrNotFound, c.Project)
		}
		var evs []Event
		for _, r := range StaleRuns(p, c.Now, c.Window) {
			evs = append(evs, Event{ProjectID: p.ID, Time: c.Now, Body: RunStaleMarked{RunID: r}})
		}
		return evs, nil
	}
	panic(fmt.Sprintf("reducer: unknown command %T", c))
}

// StaleRuns returns the IDs of p's running runs whose last heartbeat (or
// start, when they sent none) is more than window milliseconds before now.
func StaleRuns(p *Project, now, window int64) []string {
	var ids []string
	if p.running == 0 {
		return nil
	}
	for _, r := range p.runs {
		if r.Status == RunRunning && now-max(r.LastHeartbeat, r.Started) > window {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// withProject resolves the project and decides one event, or none when
// decide returns a nil body without an error (a coalesced heartbeat).
func withProject(s *State, ref string, now int64, decide func(*Project) (Body, error)) ([]Event, error) {
	p, ok := s.Project(ref)
	if !ok {
		return nil, fmt.Errorf("%w: project %q", ErrNotFound, ref)
	}
	b, err := decide(p)
	if err != nil || b == nil {
		return nil, err
	}
	return []Event{{ProjectID: p.ID, Time: now, Body: b}}, nil
}

func decideCreate(s *State, c CreateProject) ([]Event, error) {
	if err := ValidName("name", c.Name); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(c.Workspace) || filepath.Clean(c.Workspace) != c.Workspace {
		return nil, fmt.Errorf("%w: workspace %q is not an absolute, clean path", ErrInvalidArgument, c.Workspace)
	}
	if c.ProjectID == "" {
		panic("reducer: CreateProject without an ID")
	}
	if _, taken := s.Project(c.Name); taken {
		return nil, fmt.Errorf("%w: a project named %q exists", ErrConflict, c.Name)
	}
	if _, taken := s.Project(c.ProjectID); taken {
		return nil, fmt.Errorf("%w: project ID %s exists", ErrConflict, c.ProjectID)
	}
	return []Event{{ProjectID: c.ProjectID, Time: c.Now, Body: ProjectCreated{Name: c.Name, Workspace: c.Workspace}}}, nil
}

func decideAddTask(p *Project, c AddTask) (Body, error) {
	if err := ValidName("title", c.Title); err != nil {
		return nil, err
	}
	if _, taken := p.Task(c.TaskID); taken {
		return nil, fmt.Errorf("%w: task ID %s exists", ErrConflict, c.TaskID)
	}
	seen := map[string]bool{}
	for _, d := range c.DependsOn {
		if _, ok := p.Task(d); !ok {
			return nil, fmt.Errorf("%w: depends_on names unknown task %q", ErrNotFound, d)
		}
		if seen[d] {
			return nil, fmt.Errorf("%w: depends_on names task %s twice", ErrInvalidArgument, d)
		}
		seen[d] = true
	}
	deps := append([]string{}, c.DependsOn...) // the event owns its data
	return TaskAdded{TaskID: c.TaskID, Title: c.Title, DependsOn: deps, MaxRetries: c.MaxRetries}, nil
}

func decideUpdateTask(p *Project, c UpdateTask) (Body, error) {
	t, ok := p.Task(c.TaskID)
	if !ok {
		return nil, fmt.Errorf("%w: task %q", ErrNotFound, c.TaskID)
	}
	to := c.Status
	refuse := func(why string) (Body, error) {
		return nil, fmt.Errorf("%w: task %s cannot go from %s to %s: %s", ErrInvalidTransition, t.ID, t.Status, to, why)
	}
	if parseEnum(&to, taskStatuses, []byte(to)) != nil {
		return nil, fmt.Errorf("%w: unknown task status %q", ErrInvalidArgument, to)
	}
	switch {
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
		if !p.depsDone(t.DependsOn) {
			to = TaskPending
		}
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
	t, ok := p.Task(c.TaskID)
	if !ok {
		return nil, fmt.Errorf("%w: task %q", ErrNotFound, c.TaskID)
	}
	if err := ValidName("agent", c.Agent); err != nil {
		return nil, err
	}
	if t.Status != TaskReady && t.Status != TaskStale {
		return nil, fmt.Errorf("%w: task %s is %s; a run starts only from ready or stale", ErrInvalidTransition, t.ID, t.Status)
	}
	if _, taken := p.Run(c.RunID); taken {
		return nil, fmt.Errorf("%w: run ID %s exists", ErrConflict, c.RunID)
	}
	return RunStarted{RunID: c.RunID, TaskID: t.ID, Agent: c.Agent}, nil
}

func decideFinishRun(p *Project, c FinishRun) (Body, error) {
	switch c.Status {
	case RunSucceeded, RunFailed, RunCancelled:
	default:
		return nil, fmt.Errorf("%w: a run finishes succeeded, failed or cancelled, not %s", ErrInvalidArgument, c.Status)
	}
	if _, err := runningRun(p, c.RunID); err != nil {
		return nil, err
	}
	return RunFinished{RunID: c.RunID, Status: c.Status}, nil
}

func decideHeartbeat(p *Project, c RecordHeartbeat) (Body, error) {
	if c.RunID != "" {
		r, err := runningRun(p, c.RunID)
		if err != nil {
			return nil, err
		}
		if c.TaskID != "" && c.TaskID != r.TaskID {
			return nil, fmt.Errorf("%w: run %s belongs to task %s, not %s", ErrInvalidArgument, r.ID, r.TaskID, c.TaskID)
		}
		if coalesced(r.LastHeartbeat, c) {
			return nil, nil
		}
		return Heartbeat{TaskID: r.TaskID, RunID: r.ID}, nil
	}
	last := p.LastHeartbeat
	if c.TaskID != "" {
		t, ok := p.Task(c.TaskID)
		if !ok {
			return nil, fmt.Errorf("%w: task %q", ErrNotFound, c.TaskID)
		}
		if t.Status.Final() {
			return nil, fmt.Errorf("%w: task %s is %s", ErrInvalidTransition, t.ID, t.Status)
		}
		last = t.LastHeartbeat
	}
	if coalesced(last, c) {
		return nil, nil
	}
	return Heartbeat{TaskID: c.TaskID}, nil
}

// coalesced reports whether a heartbeat at c.Now comes within c.Every of
// the last journaled one, so that journaling it would add nothing an
// observer needs.
func coalesced(last int64, c RecordHeartbeat) bool {
	return c.Every > 0 && last != 0 && c.Now-last < c.Every
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

// ValidName checks a project name, task title or agent name: 1 to
// MaxNameLen characters of valid UTF-8 with no control characters.
func ValidName(field, v string) error {
	n := utf8.RuneCountInString(v)
	switch {
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, field)
	case n == 0:
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, field)
	case n > MaxNameLen:
		return fmt.Errorf("%w: %s is %d characters, more than %d", ErrInvalidArgument, field, n, MaxNameLen)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s contains control character %U", ErrInvalidArgument, field, r)
		}
	}
	return nil
}

// Evolve applies event e to s and returns s. It changes only projects of
// the current generation (see State), cloning sealed ones first. An event
// that contradicts the state is a bug in Decide or a corrupt history, and
// panics.
func Evolve(s *State, e Event) *State {
	if c, ok := e.Body.(ProjectCreated); ok {
		if _, dup := s.projects[e.ProjectID]; dup {
			panic(fmt.Sprintf("reducer: project %s created twice", e.ProjectID))
		}
		s.projects[e.ProjectID] = &Project{
			ID: e.ProjectID, Name: c.Name, Workspace: c.Workspace,
			Created: e.Time, Updated: e.Time, LastSequence: e.Sequence, ChainHead: e.Hash,
			taskIdx: map[string]int{}, runIdx: map[string]int{}, gen: s.gen,
		}
		s.names[c.Name] = e.ProjectID
		s.undo[e.ProjectID] = nil
		return s
	}
	p := s.writable(e.ProjectID)
	p.Updated = e.Time
	p.LastSequence = e.Sequence
	p.ChainHead = e.Hash
	switch b := e.Body.(type) {
	case TaskAdded:
		status := TaskPending
		if p.depsDone(b.DependsOn) {
			status = TaskReady
		}
		p.taskIdx[b.TaskID] = len(p.tasks)
		p.tasks = append(p.tasks, &Task{
			ID: b.TaskID, Title: b.Title, Status: status, DependsOn: b.DependsOn,
			MaxRetries: b.MaxRetries, Since: e.Sequence, gen: p.gen,
		})
	case TaskUpdated:
		t := p.writableTask(b.TaskID)
		if t.Status != b.Status {
			t.Status, t.Since = b.Status, e.Sequence
		}
		if b.Progress != nil {
			t.Progress = b.Progress
		}
		if t.Status == TaskDone {
			p.unblockDependants(t.ID, e.Sequence)
		}
	case RunStarted:
		t := p.writableTask(b.TaskID)
		t.Attempts++
		t.Status, t.Since = TaskRunning, e.Sequence
		t.RunID = b.RunID
		p.runIdx[b.RunID] = len(p.runs)
		p.runs = append(p.runs, &Run{
			ID: b.RunID, TaskID: b.TaskID, Agent: b.Agent, Status: RunRunning,
			Attempt: t.Attempts, Started: e.Time, Updated: e.Time, gen: p.gen,
		})
		p.running++
	case RunProgress:
		r := p.writableRun(b.RunID)
		progress := b.Progress
		r.Progress = &progress
		t := p.writableTask(r.TaskID)
		t.Progress = &progress
		p.beat(r, t, e.Time)
	case RunFinished:
		r := p.endRun(b.RunID, b.Status, e.Time)
		t := p.writableTask(r.TaskID)
		t.RunID = ""
		t.Since = e.Sequence
		switch b.Status {
		case RunSucceeded:
			t.Status = TaskDone
			p.unblockDependants(t.ID, e.Sequence)
		case RunFailed:
			t.spendRetry(TaskReady)
		case RunCancelled:
			t.Status = TaskReady
		default:
			panic(fmt.Sprintf("reducer: run finished %s", b.Status))
		}
	case RunStaleMarked:
		r := p.endRun(b.RunID, RunStale, e.Time)
		t := p.writableTask(r.TaskID)
		t.RunID = ""
		t.Since = e.Sequence
		t.spendRetry(TaskStale)
	case Heartbeat:
		var r *Run
		var t *Task
		if b.RunID != "" {
			r = p.writableRun(b.RunID)
		}
		if b.TaskID != "" {
			t = p.writableTask(b.TaskID)
		}
		p.beat(r, t, e.Time)
	default:
		panic(fmt.Sprintf("reducer: unknown event %T", e.Body))
	}
	return s
}

func (p *Project) beat(r *Run, t *Task, now int64) {
	if r != nil {
		r.LastHeartbeat = now
		r.Updated = now
	}
	if t != nil {
		t.LastHeartbeat = now
	}
	p.LastHeartbeat = now
}

func (p *Project) endRun(id string, to RunStatus, now int64) *Run {
	r := p.writableRun(id)
	if r.Status != RunRunning {
		panic(fmt.Sprintf("reducer: run %s ends %s from %s", id, to, r.Status))
	}
	r.Status = to
	r.Updated = now
	p.running--
	return r
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

// unblockDependants moves pending tasks whose last dependency is done to
// ready.
func (p *Project) unblockDependants(done string, seq uint64) {
	for _, t := range p.tasks {
		if t.Status != TaskPending || !slices.Contains(t.DependsOn, done) || !p.depsDone(t.DependsOn) {
			continue
		}
		w := p.writableTask(t.ID)
		w.Status, w.Since = TaskReady, seq
	}
}
