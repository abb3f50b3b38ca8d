package api

import (
	"scv/ledger"
	"scv/reducer"
)

// The views of a project's state that replies carry: the daemon builds
// them from its committed state, `scv project ... --at SEQ` from the state
// derived from the database file.

// ProjectSummaryOf is the wire summary of a project's state.
func ProjectSummaryOf(p *reducer.Project) *ProjectSummary {
	return &ProjectSummary{
		ID:                       p.ID,
		Name:                     p.Name,
		Workspace:                p.Workspace,
		Phase:                    p.Phase(),
		Status:                   p.Status(),
		CreatedUnixSeconds:       seconds(p.Created),
		UpdatedUnixSeconds:       seconds(p.Updated),
		TaskCount:                uint64(p.TaskCount()),
		CompletedTasks:           uint64(p.DoneCount()),
		LastHeartbeatUnixSeconds: unixOrNil(p.LastHeartbeat),
	}
}

// ProjectTasksOf lists a project's tasks as the wire shows them, never nil.
func ProjectTasksOf(p *reducer.Project) []ProjectTask {
	out := make([]ProjectTask, 0, p.TaskCount())
	for _, t := range p.Tasks() {
		var run *string
		if t.RunID != "" {
			run = &t.RunID
		}
		deps := t.DependsOn
		if deps == nil {
			deps = []string{}
		}
		out = append(out, ProjectTask{
			ID: t.ID, Title: t.Title, Status: t.Status, DependsOn: deps,
			Retries: t.Retries, MaxRetries: t.MaxRetries, RunID: run, Progress: t.Progress,
			LastHeartbeatUnixSeconds: unixOrNil(t.LastHeartbeat),
		})
	}
	return out
}

// ProjectReportOf is the report of a project's state, generated at now
// (Unix milliseconds).
func ProjectReportOf(p *reducer.Project, now int64) *ProjectReport {
	runs := make([]ProjectRun, 0, p.RunCount())
	for _, r := range p.Runs() {
		runs = append(runs, ProjectRun{
			ID: r.ID, TaskID: r.TaskID, Agent: r.Agent, Status: r.Status, Attempt: r.Attempt,
			StartedUnixSeconds: seconds(r.Started), UpdatedUnixSeconds: seconds(r.Updated), Progress: r.Progress,
		})
	}
	return &ProjectReport{
		Project: *ProjectSummaryOf(p), Tasks: ProjectTasksOf(p), Runs: runs,
		GeneratedUnixSeconds: seconds(now), Evidence: reducer.Evidence(p),
	}
}

// ProjectListOf is project_list's list of summary rows (never nil).
func ProjectListOf(rows []ledger.Summary) *[]ProjectListItem {
	out := make([]ProjectListItem, len(rows))
	for i, r := range rows {
		out[i] = ProjectListItem{
			ProjectSummary: ProjectSummary{
				ID: r.ID, Name: r.Name, Workspace: r.Workspace,
				Phase: reducer.Phase(r.Phase), Status: reducer.ProjectStatus(r.Status),
				CreatedUnixSeconds: seconds(r.CreatedMs), UpdatedUnixSeconds: seconds(r.UpdatedMs),
				TaskCount: uint64(r.Tasks), CompletedTasks: uint64(r.Done), LastHeartbeatUnixSeconds: unixOrNil(r.HeartbeatMs),
			},
			RunningRuns: uint64(r.Running),
		}
	}
	return &out
}

// seconds turns the reducer's Unix milliseconds into the wire's seconds.
func seconds(ms int64) uint64 { return uint64(ms / 1000) }

// unixOrNil is seconds, with the reducer's zero (never) as null.
func unixOrNil(ms int64) *uint64 {
	if ms == 0 {
		return nil
	}
	u := seconds(ms)
	return &u
}
