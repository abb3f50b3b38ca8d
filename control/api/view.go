package api

import "scv/reducer"

// The views of a project's state that replies carry: the daemon builds
// them from its committed state, `scv project ... --at SEQ` from the state
// derived from the database file.

// ProjectReplyOf is the reply to a read of project p's state, cmd one of
// project_status, project_tasks and project_report, at now (Unix
// milliseconds): the daemon's of its committed state, `scv project ...
// --at SEQ`'s of a past one. A report is never older than the state it
// reports. Any other command has no such reply (nil).
func ProjectReplyOf(cmd Command, p *reducer.Project, now int64) *ProjectResponse {
	switch cmd.(type) {
	case CmdProjectStatus:
		return &ProjectResponse{Kind: KindStatus, Project: ProjectSummaryOf(p), Spend: ProjectSpendOf(p)}
	case CmdProjectTasks:
		return &ProjectResponse{Kind: KindTasks, ProjectID: p.ID, Tasks: ProjectTasksOf(p), Spend: ProjectSpendOf(p)}
	case CmdProjectReport:
		return &ProjectResponse{Kind: KindReport, Report: ProjectReportOf(p, max(now, p.Updated))}
	}
	return nil
}

// ProjectSummaryOf is the wire summary of a project's state.
func ProjectSummaryOf(p *reducer.Project) *ProjectSummary {
	return &ProjectSummary{
		ID:                       p.ID,
		Name:                     p.Name,
		Workspace:                p.Workspace,
		Phase:                    p.Phase(),
		Status:                   p.Status(),
		CreatedUnixSeconds:       Seconds(p.Created),
		UpdatedUnixSeconds:       Seconds(p.Updated),
		TaskCount:                uint64(p.TaskCount()),
		CompletedTasks:           uint64(p.DoneCount()),
		LastHeartbeatUnixSeconds: SecondsOrNil(p.LastHeartbeat),
	}
}

// ProjectTasksOf lists a project's tasks as the wire shows them, never nil.
func ProjectTasksOf(p *reducer.Project) []ProjectTask {
	out := make([]ProjectTask, 0, p.TaskCount())
	for _, t := range p.Tasks() {
		out = append(out, ProjectTaskOf(t))
	}
	return out
}

// ProjectSpendOf is what p spent against its budget; nil when its runs
// reported nothing and it has no budget, so that a seed client's replies
// stay the seed's.
func ProjectSpendOf(p *reducer.Project) *ProjectSpend {
	if spendOrNil(p.Spend()) == nil && !p.Budget().Set() {
		return nil
	}
	s := &ProjectSpend{Spend: p.Spend(), BudgetReached: p.BudgetReached()}
	if s.Spend.Cost == nil {
		s.Spend.Cost = []reducer.Cost{}
	}
	if b := p.Budget(); b.Set() {
		s.Budget = &b
	}
	return s
}

// spendOrNil is s, nil when nothing was spent.
func spendOrNil(s reducer.Spend) *reducer.Spend {
	if s.Tokens == (reducer.Tokens{}) && len(s.Cost) == 0 {
		return nil
	}
	return &s
}

// ProjectReportOf is the report of a project's state, generated at now
// (Unix milliseconds).
func ProjectReportOf(p *reducer.Project, now int64) *ProjectReport {
	runs := make([]ProjectRun, 0, p.RunCount())
	for _, r := range p.Runs() {
		runs = append(runs, ProjectRunOf(r))
	}
	return &ProjectReport{
		Project: *ProjectSummaryOf(p), Tasks: ProjectTasksOf(p), Runs: runs,
		GeneratedUnixSeconds: Seconds(now), Evidence: reducer.Evidence(p), Spend: ProjectSpendOf(p),
	}
}

// Seconds turns the reducer's Unix milliseconds into the wire's seconds.
func Seconds(ms int64) uint64 { return uint64(ms / 1000) }

// SecondsOrNil is Seconds, with the reducer's zero (never) as null.
func SecondsOrNil(ms int64) *uint64 {
	if ms == 0 {
		return nil
	}
	u := Seconds(ms)
	return &u
}
