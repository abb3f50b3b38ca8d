package reducer

import (
	"encoding/json"
	"fmt"

	"github.com/benbjohnson/immutable"
)

// SnapshotVersion is the format of Snapshot's encoding. A change of the
// format bumps it; a ledger refuses a snapshot of a version it does not
// know rather than guess. Version 2 added the owner's decisions
// (released, archived, approvals, a task's pending approval), each left
// out when empty, so that a state without them encodes as version 1 did:
// a version 1 snapshot is read as it is, and re-derives to the same
// bytes. Version 3 added the plan's fields of a task (docs/plan.md),
// each left out when empty (a priority when it is DefaultPriority), and
// what the work costs (a run's usage, the project's budget), left out
// when empty likewise, so that a state without them encodes as version
// 2 did; a task's and the project's spend are the sums of the runs',
// summed again on Restore.
const SnapshotVersion = 3

// ReadsSnapshot reports whether this build reads snapshots of format
// version v.
func ReadsSnapshot(v int) bool { return v >= 1 && v <= SnapshotVersion }

// snapshot is the stored form of one project's state: every field Evolve
// keeps, in a fixed order, so that the same state always encodes to the
// same bytes.
type snapshot struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Workspace     string     `json:"workspace"`
	Created       int64      `json:"created"`
	Updated       int64      `json:"updated"`
	LastHeartbeat int64      `json:"last_heartbeat"`
	LastSequence  uint64     `json:"last_sequence"`
	ChainHead     []byte     `json:"chain_head"`
	Tasks         []taskSnap `json:"tasks"`
	Runs          []runSnap  `json:"runs"`
	// Version 2.
	Released  bool           `json:"released,omitempty"`
	Archived  bool           `json:"archived,omitempty"`
	Approvals []approvalSnap `json:"approvals,omitempty"`
	// Version 3.
	Budget    *Budget `json:"budget,omitempty"`
	ReachedAt uint64  `json:"budget_reached_at,omitempty"`
}

type approvalSnap struct {
	ID         string          `json:"id"`
	TaskID     string          `json:"task_id"`
	Question   string          `json:"question"`
	AskedBy    string          `json:"asked_by"`
	Asked      int64           `json:"asked"`
	Deadline   int64           `json:"deadline"`
	AskedSeq   uint64          `json:"asked_seq"`
	Outcome    ApprovalOutcome `json:"outcome"`
	Decided    int64           `json:"decided"`
	DecidedBy  string          `json:"decided_by"`
	DecidedSeq uint64          `json:"decided_seq"`
}

type taskSnap struct {
	ID            string     `json:"id"`
	Title         string     `json:"title"`
	Status        TaskStatus `json:"status"`
	DependsOn     []string   `json:"depends_on"`
	Retries       uint32     `json:"retries"`
	MaxRetries    uint32     `json:"max_retries"`
	RunID         string     `json:"run_id"`
	Progress      *string    `json:"progress"`
	LastHeartbeat int64      `json:"last_heartbeat"`
	Attempts      uint32     `json:"attempts"`
	Since         uint64     `json:"since"`
	Approval      string     `json:"approval,omitempty"` // version 2
	// Version 3.
	Key            string   `json:"key,omitempty"`
	Description    string   `json:"description,omitempty"`
	Acceptance     string   `json:"acceptance,omitempty"`
	Priority       *int     `json:"priority,omitempty"` // nil: DefaultPriority
	Labels         []string `json:"labels,omitempty"`
	Parent         string   `json:"parent,omitempty"`
	DiscoveredFrom string   `json:"discovered_from,omitempty"`
}

type runSnap struct {
	ID            string    `json:"id"`
	TaskID        string    `json:"task_id"`
	Agent         string    `json:"agent"`
	Status        RunStatus `json:"status"`
	Attempt       uint32    `json:"attempt"`
	Started       int64     `json:"started"`
	Updated       int64     `json:"updated"`
	Progress      *string   `json:"progress"`
	LastHeartbeat int64     `json:"last_heartbeat"`
	Usage         *Usage    `json:"usage,omitempty"` // version 3
}

// Snapshot encodes p: the reducer's whole state of one project, enough to
// go on from without the events before p.LastSequence. Equal states give
// equal bytes.
func Snapshot(p *Project) ([]byte, error) {
	s := snapshot{
		ID: p.ID, Name: p.Name, Workspace: p.Workspace, Created: p.Created, Updated: p.Updated,
		LastHeartbeat: p.LastHeartbeat, LastSequence: p.LastSequence, ChainHead: p.ChainHead,
		Tasks: make([]taskSnap, 0, p.TaskCount()), Runs: make([]runSnap, 0, p.RunCount()),
		Released: p.Released, Archived: p.Archived,
	}
	for _, t := range p.Tasks() {
		s.Tasks = append(s.Tasks, taskSnap{t.ID, t.Title, t.Status, t.DependsOn, t.Retries, t.MaxRetries, t.RunID, t.Progress, t.LastHeartbeat, t.Attempts, t.Since, t.Approval,
			t.Key, t.Description, t.Acceptance, changed(&t.Priority, DefaultPriority), t.Labels, t.Parent, t.DiscoveredFrom})
	}
	for _, a := range p.Approvals() {
		s.Approvals = append(s.Approvals, approvalSnap{a.ID, a.TaskID, a.Question, a.AskedBy, a.Asked, a.Deadline, a.AskedSeq, a.Outcome, a.Decided, a.DecidedBy, a.DecidedSeq})
	}
	for _, r := range p.Runs() {
		s.Runs = append(s.Runs, runSnap{r.ID, r.TaskID, r.Agent, r.Status, r.Attempt, r.Started, r.Updated, r.Progress, r.LastHeartbeat, nil})
		if r.Usage != (Usage{}) {
			u := r.Usage
			s.Runs[len(s.Runs)-1].Usage = &u
		}
	}
	if p.budget.Set() {
		b := p.budget
		s.Budget, s.ReachedAt = &b, p.reachedAt
	}
	return json.Marshal(s)
}

// Restore decodes a project that Snapshot encoded.
func Restore(data []byte) (*Project, error) {
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("restore snapshot: %w", err)
	}
	p := newProject(snap.ID, snap.Name, snap.Workspace)
	p.Created, p.Updated, p.LastHeartbeat, p.LastSequence, p.ChainHead = snap.Created, snap.Updated, snap.LastHeartbeat, snap.LastSequence, snap.ChainHead
	p.Released, p.Archived = snap.Released, snap.Archived
	tasks, taskIdx, keys := make([]*Task, 0, len(snap.Tasks)), immutable.NewMapBuilder[string, int](nil), immutable.NewMapBuilder[string, int](nil)
	deps, titles := map[string][]int{}, map[string][]int{}
	var depOrder, titleOrder []string
	for i, t := range snap.Tasks {
		if t.DependsOn == nil {
			t.DependsOn = []string{}
		}
		tasks = append(tasks, &Task{ID: t.ID, Title: t.Title, Status: t.Status, DependsOn: t.DependsOn, Retries: t.Retries,
			MaxRetries: t.MaxRetries, RunID: t.RunID, Progress: t.Progress, LastHeartbeat: t.LastHeartbeat, Attempts: t.Attempts,
			Since: t.Since, Approval: t.Approval, Key: t.Key, Description: t.Description, Acceptance: t.Acceptance,
			Priority: cmpOr(t.Priority, DefaultPriority), Labels: t.Labels, Parent: t.Parent, DiscoveredFrom: t.DiscoveredFrom})
		taskIdx.Set(t.ID, i)
		if t.Key != "" {
			keys.Set(t.Key, i)
		}
		p.byStatus[statusIndex(t.Status)]++
		if titles[t.Title] == nil {
			titleOrder = append(titleOrder, t.Title)
		}
		titles[t.Title] = append(titles[t.Title], i)
		for _, d := range t.DependsOn {
			if deps[d] == nil {
				depOrder = append(depOrder, d)
			}
			deps[d] = append(deps[d], i)
		}
	}
	dependants := immutable.NewMapBuilder[string, *immutable.List[int]](nil)
	for _, d := range depOrder {
		dependants.Set(d, immutable.NewList(deps[d]...))
	}
	runs, runIdx, running := make([]*Run, 0, len(snap.Runs)), immutable.NewMapBuilder[string, int](nil), immutable.NewMapBuilder[string, int](nil)
	for i, r := range snap.Runs {
		runs = append(runs, &Run{ID: r.ID, TaskID: r.TaskID, Agent: r.Agent, Status: r.Status, Attempt: r.Attempt,
			Started: r.Started, Updated: r.Updated, Progress: r.Progress, LastHeartbeat: r.LastHeartbeat})
		if r.Usage != nil {
			runs[i].Usage = *r.Usage
		}
		runIdx.Set(r.ID, i)
		if r.Status == RunRunning {
			running.Set(r.ID, i)
		}
	}
	titleIdx := immutable.NewMapBuilder[string, *immutable.List[int]](nil)
	for _, title := range titleOrder {
		titleIdx.Set(title, immutable.NewList(titles[title]...))
	}
	approvals, approvalIx := make([]*Approval, 0, len(snap.Approvals)), immutable.NewMapBuilder[string, int](nil)
	for i, a := range snap.Approvals {
		approvals = append(approvals, &Approval{ID: a.ID, TaskID: a.TaskID, Question: a.Question, AskedBy: a.AskedBy, Asked: a.Asked,
			Deadline: a.Deadline, AskedSeq: a.AskedSeq, Outcome: a.Outcome, Decided: a.Decided, DecidedBy: a.DecidedBy, DecidedSeq: a.DecidedSeq})
		approvalIx.Set(a.ID, i)
		if a.Outcome == ApprovalPending {
			p.pending++
		}
	}
	p.taskIdx = taskIdx.Map()
	p.restoreEpics(tasks, p.taskIdx)
	p.tasks, p.dependants, p.titles, p.keys = vectorOf(tasks), dependants.Map(), titleIdx.Map(), keys.Map()
	p.runs, p.runIdx, p.running = vectorOf(runs), runIdx.Map(), running.Map()
	p.approvals, p.approvalIx = vectorOf(approvals), approvalIx.Map()
	if snap.Budget != nil {
		p.budget, p.reachedAt = *snap.Budget, snap.ReachedAt
	}
	p.restoreSpend()
	return p, nil
}

// restoreEpics derives from tasks, which it changes in place (they are
// new), what a snapshot leaves out: each epic's children and their
// counts, and the ready index.
func (p *Project) restoreEpics(tasks []*Task, idx *immutable.Map[string, int]) {
	kids := map[string][]int{}
	var order []string
	for i, t := range tasks {
		if t.Parent == "" {
			continue
		}
		e := tasks[mustGet(idx, t.Parent)]
		e.Children++
		e.kids[statusIndex(t.Status)]++
		if kids[t.Parent] == nil {
			order = append(order, t.Parent)
		}
		kids[t.Parent] = append(kids[t.Parent], i)
	}
	children := immutable.NewMapBuilder[string, *immutable.List[int]](nil)
	for _, e := range order {
		children.Set(e, immutable.NewList(kids[e]...))
	}
	ready := immutable.NewSortedMapBuilder[int, struct{}](nil)
	for i, t := range tasks {
		if listedReady(t) {
			ready.Set(readyKey(t.Priority, i), struct{}{})
		}
	}
	p.children, p.ready = children.Map(), ready.Map()
}

func mustGet(m *immutable.Map[string, int], k string) int {
	i, ok := m.Get(k)
	if !ok {
		panic(fmt.Sprintf("reducer: snapshot of a task under unknown epic %s", k))
	}
	return i
}
