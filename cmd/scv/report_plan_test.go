package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// TestPrintReportPlan: `scv project report` has a Plan section for the
// tasks with a description, an acceptance or found during a run: where
// each was found (the run and its task), then its description a line at
// a time and its acceptance, made safe for the terminal; the epics'
// progress and the work found are in the evidence.
func TestPrintReportPlan(t *testing.T) {
	t.Parallel()
	desc, esc := "Document the flags.\n\nEvery one of them.", "a \x1b[31mred\x1b[0m line"
	rep := &api.ProjectReport{
		Project: api.ProjectSummary{ID: "01J0PROJ", Name: "acme"},
		Tasks: []api.ProjectTask{
			{ID: "01J0A", Title: "build", Status: "done", DependsOn: []string{}},
			{ID: "01J0B", Title: "docs", Status: "ready", DependsOn: []string{}, Description: desc, Acceptance: esc, DiscoveredFrom: "01J0RUN"},
			{ID: "01J0C", Title: "lint", Status: "ready", DependsOn: []string{}},
		},
		Runs:     []api.ProjectRun{{ID: "01J0RUN", TaskID: "01J0A", Agent: "codex", Status: "succeeded", Attempt: 1}},
		Evidence: []string{"task 01J0B (docs) was found during run 01J0RUN of task 01J0A (build)"},
	}
	var out bytes.Buffer
	require.NoError(t, printReportReply(&printer{w: &out, now: time.Unix(0, 0)}, &api.DaemonStatus{Project: &api.ProjectResponse{Kind: api.KindReport, Report: rep}}))
	assert.Contains(t, out.String(), "\nPlan:\n"+
		"  docs: found during run 01J0RUN of build\n"+
		"    Document the flags.\n"+
		"    Every one of them.\n"+
		"    acceptance: a  [31mred [0m line\n"+
		"\nRuns:\n")
	assert.Contains(t, out.String(), "\nEvidence:\n  task 01J0B (docs) was found during run 01J0RUN of task 01J0A (build)\n")
	assert.NotContains(t, out.String(), "lint:", "a task without a plan has no entry")
}
