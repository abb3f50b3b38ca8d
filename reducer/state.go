package reducer

import (
	"fmt"
	"maps"
	"slices"
)

// State is the reducer's state of every project of one ledger instance.
//
// State is copy-on-write by generation: a *Project handed out by Project
// or Seal belongs to a sealed generation and is never modified again, so it
// may be read from any goroutine while Evolve goes on with the next
// generation. Evolve clones a project (and each task or run it changes) at
// most once per generation. A State itself is used by one goroutine.
type State struct {
	projects map[string]*Project
	names    map[string]string // name -> project ID
	gen      uint64
	// undo holds, for each project changed in the current generation, the
	// pointer it had when the generation began (nil for a new project).
	undo map[string]*Project
}

// NewState returns an empty state.
func NewState() *State {
	return &State{
		projects: map[string]*Project{},
		names:    map[string]string{},
		gen:      1,
		undo:     map[string]*Project{},
	}
}

// Project resolves ref as a project ID, then as a name.
func (s *State) Project(ref string) (*Project, bool) {
	if p, ok := s.projects[ref]; ok {
		return p, true
	}
	if id, ok := s.names[ref]; ok {
		return s.projects[id], true
	}
	return nil, false
}

// Projects returns every project, in no particular order.
func (s *State) Projects() []*Project {
	return slices.Collect(maps.Values(s.projects))
}

// Seal ends the current generation and returns the projects it changed.
// From then on they are immutable.
func (s *State) Seal() []*Project {
	changed := make([]*Project, 0, len(s.undo))
	for id := range s.undo {
		changed = append(changed, s.projects[id])
	}
	clear(s.undo)
	s.gen++
	return changed
}

// Rollback discards every change of the current generation.
func (s *State) Rollback() {
	for id, old := range s.undo {
		if old == nil {
			delete(s.names, s.projects[id].Name)
			delete(s.projects, id)
		} else {
			s.projects[id] = old
		}
	}
	clear(s.undo)
	s.gen++
}

// writable returns project id, cloned into the current generation.
func (s *State) writable(id string) *Project {
	p, ok := s.projects[id]
	if !ok {
		panic(fmt.Sprintf("reducer: event for unknown project %s", id))
	}
	if p.gen == s.gen {
		return p
	}
	if _, seen := s.undo[id]; !seen {
		s.undo[id] = p
	}
	c := *p
	c.gen = s.gen
	c.tasks = slices.Clone(p.tasks)
	c.runs = slices.Clone(p.runs)
	c.taskIdx = maps.Clone(p.taskIdx)
	c.runIdx = maps.Clone(p.runIdx)
	s.projects[id] = &c
	return &c
}

// Project is the derived state of one project.
type Project struct {
	ID            string
	Name          string
	Workspace     string
	Created       int64
	Updated       int64 // time of the latest event
	LastHeartbeat int64 // 0 when none
	LastSequence  uint64
	ChainHead     []byte // Hash of the newest event

	tasks   []*Task
	taskIdx map[string]int
	runs    []*Run
	runIdx  map[string]int
	running int // runs in RunRunning
	gen     uint64
}

// Task is the derived state of one task.
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
	gen           uint64
}

// Run is the derived state of one run.
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
	gen           uint64
}

// Tasks returns the project's tasks in the order they were added.
func (p *Project) Tasks() []*Task { return p.tasks }

// Runs returns the project's runs in the order they started.
func (p *Project) Runs() []*Run { return p.runs }

// Task returns the task with the given ID.
func (p *Project) Task(id string) (*Task, bool) {
	i, ok := p.taskIdx[id]
	if !ok {
		return nil, false
	}
	return p.tasks[i], true
}

// Run returns the run with the given ID.
func (p *Project) Run(id string) (*Run, bool) {
	i, ok := p.runIdx[id]
	if !ok {
		return nil, false
	}
	return p.runs[i], true
}

// DoneCount is the number of tasks in TaskDone.
func (p *Project) DoneCount() int {
	n := 0
	for _, t := range p.tasks {
		if t.Status == TaskDone {
			n++
		}
	}
	return n
}

// Status derives the project status; the first rule that matches wins.
func (p *Project) Status() ProjectStatus {
	if len(p.tasks) == 0 {
		return ProjectActive
	}
	done, movable := 0, 0
	for _, t := range p.tasks {
		switch t.Status {
		case TaskFailed:
			return ProjectFailed
		case TaskDone:
			done++
		case TaskReady, TaskRunning, TaskStale:
			movable++
		}
	}
	switch {
	case done == len(p.tasks):
		return ProjectCompleted
	case movable == 0:
		return ProjectBlocked
	}
	return ProjectActive
}

// Phase derives the lifecycle phase; the first rule that matches wins:
// discovery without tasks, staging when every task is done,
// implementation while a run runs, planning until a run has started,
// else verification.
func (p *Project) Phase() Phase {
	switch {
	case len(p.tasks) == 0:
		return PhaseDiscovery
	case p.DoneCount() == len(p.tasks):
		return PhaseStaging
	case p.running > 0:
		return PhaseImplementation
	case len(p.runs) == 0:
		return PhasePlanning
	}
	return PhaseVerification
}

func (p *Project) writableTask(id string) *Task {
	i, ok := p.taskIdx[id]
	if !ok {
		panic(fmt.Sprintf("reducer: event for unknown task %s", id))
	}
	t := p.tasks[i]
	if t.gen != p.gen {
		c := *t
		c.gen = p.gen
		t = &c
		p.tasks[i] = t
	}
	return t
}

func (p *Project) writableRun(id string) *Run {
	i, ok := p.runIdx[id]
	if !ok {
		panic(fmt.Sprintf("reducer: event for unknown run %s", id))
	}
	r := p.runs[i]
	if r.gen != p.gen {
		c := *r
		c.gen = p.gen
		r = &c
		p.runs[i] = r
	}
	return r
}

// depsDone reports whether every dependency of t is done.
func (p *Project) depsDone(deps []string) bool {
	for _, d := range deps {
		if t, ok := p.Task(d); !ok || t.Status != TaskDone {
			return false
		}
	}
	return true
}
