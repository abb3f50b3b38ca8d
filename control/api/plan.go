package api

import (
	"encoding/json"

	"scv/reducer"
)

// The plan's wire (docs/plan.md, docs/protocol.md): a plan's task as
// project_plan_apply takes it, and the extensions of the replies.

// PlanTask is one task of a plan, in a plan file's JSON shape
// (control/plan's Task): Parent and DependsOn name tasks by key.
type PlanTask struct {
	Key         string   `json:"key"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty" serde:"default"`
	Acceptance  string   `json:"acceptance,omitempty" serde:"default"`
	Priority    *uint32  `json:"priority,omitempty"`
	Labels      []string `json:"labels,omitempty" serde:"default"`
	Parent      string   `json:"parent,omitempty" serde:"default"`
	DependsOn   []string `json:"depends_on,omitempty" serde:"default"`
}

// TaskDetail is one task (every field of a ProjectTask), its runs in the
// order they started and, for project_task_show, the events that shaped
// it: those naming the task or one of its runs.
type TaskDetail struct {
	ProjectTask
	Attempts uint32         `json:"attempts"`
	Runs     []ProjectRun   `json:"runs"`
	Events   []ProjectEvent `json:"events,omitempty"`
}

// PlanApplied is what project_plan_apply did: how many of the plan's
// tasks it added, edited and left as they were, and the task ID of each
// key.
type PlanApplied struct {
	Added     int               `json:"added"`
	Edited    int               `json:"edited"`
	Unchanged int               `json:"unchanged"`
	Tasks     map[string]string `json:"tasks"`
}

// PlanItems is tasks as the reducer's ApplyPlan takes them.
func PlanItems(tasks []PlanTask) []reducer.PlanItem {
	items := make([]reducer.PlanItem, len(tasks))
	for i, t := range tasks {
		items[i] = reducer.PlanItem{Key: t.Key, Title: t.Title, Description: t.Description, Acceptance: t.Acceptance,
			Priority: IntOf(t.Priority), Labels: t.Labels, Parent: t.Parent, DependsOn: t.DependsOn}
	}
	return items
}

// IntOf is the wire's unsigned priority as the reducer's.
func IntOf(u *uint32) *int {
	if u == nil {
		return nil
	}
	n := int(*u)
	return &n
}

// ProjectTaskOf is task t as the wire shows it.
func ProjectTaskOf(t *reducer.Task) ProjectTask {
	var run *string
	if t.RunID != "" {
		run = &t.RunID
	}
	deps := t.DependsOn
	if deps == nil {
		deps = []string{}
	}
	var priority *int
	if t.Priority != reducer.DefaultPriority {
		priority = &t.Priority
	}
	return ProjectTask{
		ID: t.ID, Title: t.Title, Status: t.Status, DependsOn: deps,
		Retries: t.Retries, MaxRetries: t.MaxRetries, RunID: run, Progress: t.Progress,
		LastHeartbeatUnixSeconds: SecondsOrNil(t.LastHeartbeat), Spend: spendOrNil(t.Spend),
		Key: t.Key, Description: t.Description, Acceptance: t.Acceptance, Priority: priority,
		Labels: t.Labels, Parent: t.Parent, DiscoveredFrom: t.DiscoveredFrom, Children: t.Children,
	}
}

// ReadyTasksOf is project_ready's list (never nil).
func ReadyTasksOf(p *reducer.Project, labels []string) []ProjectTask {
	ready := reducer.ReadyTasks(p, labels)
	out := make([]ProjectTask, len(ready))
	for i, t := range ready {
		out[i] = ProjectTaskOf(t)
	}
	return out
}

// TaskDetailOf is task t of p with its runs (O(the project's runs)).
func TaskDetailOf(p *reducer.Project, t *reducer.Task) *TaskDetail {
	d := &TaskDetail{ProjectTask: ProjectTaskOf(t), Attempts: t.Attempts, Runs: []ProjectRun{}}
	for _, r := range p.Runs() {
		if r.TaskID == t.ID {
			d.Runs = append(d.Runs, ProjectRunOf(r))
		}
	}
	return d
}

// ProjectRunOf is run r as the wire shows it.
func ProjectRunOf(r *reducer.Run) ProjectRun {
	run := ProjectRun{
		ID: r.ID, TaskID: r.TaskID, Agent: r.Agent, Status: r.Status, Attempt: r.Attempt,
		StartedUnixSeconds: Seconds(r.Started), UpdatedUnixSeconds: Seconds(r.Updated), Progress: r.Progress,
	}
	if r.Usage != (reducer.Usage{}) {
		u := r.Usage
		run.Usage = &u
	}
	return run
}

// Concerns reports whether the stored data of an event names task (as
// task_id, or parent, as an edit or an addition under it does) or one of
// runs (as run_id, or discovered_from).
func Concerns(data []byte, task string, runs map[string]bool) bool {
	var ids struct {
		TaskID         string `json:"task_id"`
		RunID          string `json:"run_id"`
		Parent         string `json:"parent"`
		DiscoveredFrom string `json:"discovered_from"`
	}
	if json.Unmarshal(data, &ids) != nil {
		return false
	}
	return ids.TaskID == task || ids.Parent == task || runs[ids.RunID] || runs[ids.DiscoveredFrom]
}

// PlanAppliedOf is what plan c did, given the events it appended to p:
// its events counted, and the task of each of its keys.
func PlanAppliedOf(c reducer.ApplyPlan, events []reducer.Event, p *reducer.Project) *PlanApplied {
	out := &PlanApplied{Tasks: make(map[string]string, len(c.Items))}
	for _, e := range events {
		switch e.Body.(type) {
		case reducer.TaskAdded:
			out.Added++
		case reducer.TaskEdited:
			out.Edited++
		}
	}
	out.Unchanged = len(c.Items) - out.Added - out.Edited
	for i, it := range c.Items {
		if t, ok := p.TaskByKey(it.Key); ok {
			out.Tasks[it.Key] = t.ID
		} else if t, ok := p.Task(it.Key); ok {
			out.Tasks[it.Key] = t.ID
		} else {
			out.Tasks[it.Key] = c.IDs[i]
		}
	}
	return out
}
