package control

import "scv/reducer"

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
		TaskCount:                uint64(len(p.Tasks())),
		CompletedTasks:           uint64(p.DoneCount()),
		LastHeartbeatUnixSeconds: unixOrNil(p.LastHeartbeat),
	}
}

// ProjectTasksOf lists a project's tasks as the wire shows them, never nil.
func ProjectTasksOf(p *reducer.Project) []ProjectTask {
	out := make([]ProjectTask, 0, len(p.Tasks()))
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
	runs := make([]ProjectRun, 0, len(p.Runs()))
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
