package reducer

import (
	"encoding/json"
	"fmt"
)

// SnapshotVersion is the format of Snapshot's encoding. A change of the
// format bumps it; a ledger refuses a snapshot of a version it does not
// know rather than guess.
const SnapshotVersion = 1

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
}

// Snapshot encodes p: the reducer's whole state of one project, enough to
// go on from without the events before p.LastSequence. Equal states give
// equal bytes.
func Snapshot(p *Project) ([]byte, error) {
	s := snapshot{
		ID: p.ID, Name: p.Name, Workspace: p.Workspace, Created: p.Created, Updated: p.Updated,
		LastHeartbeat: p.LastHeartbeat, LastSequence: p.LastSequence, ChainHead: p.ChainHead,
		Tasks: make([]taskSnap, len(p.tasks)), Runs: make([]runSnap, len(p.runs)),
	}
	for i, t := range p.tasks {
		s.Tasks[i] = taskSnap{t.ID, t.Title, t.Status, t.DependsOn, t.Retries, t.MaxRetries, t.RunID, t.Progress, t.LastHeartbeat, t.Attempts, t.Since}
	}
	for i, r := range p.runs {
		s.Runs[i] = runSnap{r.ID, r.TaskID, r.Agent, r.Status, r.Attempt, r.Started, r.Updated, r.Progress, r.LastHeartbeat}
	}
	return json.Marshal(s)
}

// Restore adds the project a Snapshot encoded to s, as the current
// generation's change. It fails on a project s already holds.
func Restore(s *State, data []byte) (*Project, error) {
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("restore snapshot: %w", err)
	}
	if _, dup := s.projects[snap.ID]; dup {
		return nil, fmt.Errorf("restore snapshot: project %s already in the state", snap.ID)
	}
	p := &Project{
		ID: snap.ID, Name: snap.Name, Workspace: snap.Workspace, Created: snap.Created, Updated: snap.Updated,
		LastHeartbeat: snap.LastHeartbeat, LastSequence: snap.LastSequence, ChainHead: snap.ChainHead,
		taskIdx: map[string]int{}, runIdx: map[string]int{}, gen: s.gen,
	}
	for _, t := range snap.Tasks {
		deps := t.DependsOn
		if deps == nil {
			deps = []string{}
		}
		p.taskIdx[t.ID] = len(p.tasks)
		p.tasks = append(p.tasks, &Task{ID: t.ID, Title: t.Title, Status: t.Status, DependsOn: deps, Retries: t.Retries,
			MaxRetries: t.MaxRetries, RunID: t.RunID, Progress: t.Progress, LastHeartbeat: t.LastHeartbeat, Attempts: t.Attempts,
			Since: t.Since, gen: s.gen})
	}
	for _, r := range snap.Runs {
		p.runIdx[r.ID] = len(p.runs)
		p.runs = append(p.runs, &Run{ID: r.ID, TaskID: r.TaskID, Agent: r.Agent, Status: r.Status, Attempt: r.Attempt,
			Started: r.Started, Updated: r.Updated, Progress: r.Progress, LastHeartbeat: r.LastHeartbeat, gen: s.gen})
		if r.Status == RunRunning {
			p.running++
		}
	}
	s.projects[p.ID] = p
	s.names[p.Name] = p.ID
	s.undo[p.ID] = nil
	return p, nil
}
