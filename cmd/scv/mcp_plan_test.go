package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// TestMCPPlanSession: an agent works from the ledger alone, through a
// real `scv mcp --project P` against a real daemon: it takes the next
// task with task_next (the most urgent), reads its description with
// task_get, adds the work it found (discovered_from its run, by default)
// and finishes its run; the ledger shows the claim, the new task with
// its link to the run, and the finish. With nothing left ready,
// task_next says why.
func TestMCPPlanSession(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := shortDir(t)
	bin := buildScv(t, dir, "mcp-test")
	d := startTestDaemon(t, bin, filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock"), "")
	d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: dir})
	later := uint32(3)
	d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "polish", DependsOn: []string{}, Priority: &later})
	urgent, desc, acc := uint32(0), "Passwords with a `#` are rejected: fix the form's encoding.", "login_test passes"
	fix := d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "fix login", DependsOn: []string{},
		Priority: &urgent, Description: &desc, Acceptance: &acc}).Project.TaskID

	s := startMCP(t, bin, d.sock, "--project", "acme")
	var next struct {
		RunID string `json:"run_id"`
		Agent string `json:"agent"`
		Task  struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	s.call("task_next", nil, &next)
	assert.Equal(t, fix, next.Task.ID, "the most urgent ready task")
	assert.Equal(t, "test-agent", next.Agent, "the MCP client's name")

	var got struct {
		Task struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			Acceptance  string `json:"acceptance"`
			Status      string `json:"status"`
			Runs        []struct {
				ID string `json:"id"`
			} `json:"runs"`
		} `json:"task"`
	}
	s.call("task_get", map[string]any{"task": next.Task.ID}, &got)
	assert.Equal(t, "fix login", got.Task.Title)
	assert.Equal(t, desc, got.Task.Description)
	assert.Equal(t, acc, got.Task.Acceptance)
	assert.Equal(t, "running", got.Task.Status)
	require.Len(t, got.Task.Runs, 1)
	assert.Equal(t, next.RunID, got.Task.Runs[0].ID)

	var found struct {
		TaskID string `json:"task_id"`
	}
	s.call("task_add", map[string]any{"title": "encode the signup form too", "priority": 1,
		"description": "The signup form has the same bug.", "labels": []string{"frontend"}}, &found)
	s.call("run_finish", map[string]any{"run": next.RunID, "status": "succeeded", "reason": "fixed, login_test passes"}, nil)

	tasks := d.must(t, api.CmdProjectTasks{Project: "acme"}).Project.Tasks
	require.Len(t, tasks, 3)
	assert.Equal(t, "done", string(tasks[1].Status), "the task taken is done")
	added := tasks[2]
	assert.Equal(t, found.TaskID, added.ID)
	assert.Equal(t, next.RunID, added.DiscoveredFrom, "found during the agent's run")
	assert.Equal(t, "The signup form has the same bug.", added.Description)
	assert.Equal(t, []string{"frontend"}, added.Labels)
	after := uint64(0)
	var kinds []string
	for _, e := range d.must(t, api.CmdProjectEvents{Project: "acme", After: &after}).Project.Events {
		kinds = append(kinds, e.Kind)
		if e.Kind == "task_added" {
			var data struct {
				TaskID         string `json:"task_id"`
				DiscoveredFrom string `json:"discovered_from"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &data))
			if data.TaskID == found.TaskID {
				assert.Equal(t, next.RunID, data.DiscoveredFrom, "the event records the link")
			}
		}
	}
	assert.Equal(t, []string{"project_created", "task_added", "task_added", "run_started", "task_added", "run_progress", "run_finished"}, kinds)

	// The rest, then nothing: task_next says why.
	s.call("task_next", nil, &next)
	s.call("run_finish", map[string]any{"run": next.RunID, "status": "succeeded"}, nil)
	s.call("task_next", nil, &next)
	s.call("run_finish", map[string]any{"run": next.RunID, "status": "succeeded"}, nil)
	s.id++
	s.send(toolCall(t, s.id, "task_next", nil))
	assert.Equal(t, "nothing ready: all 3 tasks of project acme are done [nothing_ready]", s.answer(s.id).text())
}
