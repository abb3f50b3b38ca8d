package mcp_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/mcp"
	"scv/reducer"
)

// taskGot is task_get's and task_next's task, as a test reads it.
type taskGot struct {
	api.ProjectTask
	Attempts uint32           `json:"attempts"`
	Runs     []api.ProjectRun `json:"runs"`
}

// TestMCPPlanSchemas: the plan's arguments of task_add and task_next
// carry the reducer's limits (description, acceptance, labels, parent,
// discovered_from: the daemon's; priority: the server's own, 0 to
// MaxPriority), and a priority past them is refused before anything is
// sent.
func TestMCPPlanSchemas(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	s := e.session(mcp.Options{Project: "acme"})
	schemas := inputSchemas(t, s)
	add := schemas["task_add"]
	prop := func(name string) map[string]any { return add[name].(map[string]any) }
	assert.Equal(t, float64(reducer.MaxDescriptionLen), prop("description")["maxLength"])
	assert.Equal(t, float64(reducer.MaxAcceptanceLen), prop("acceptance")["maxLength"])
	assert.Equal(t, float64(reducer.MaxRefLen), prop("parent")["maxLength"])
	assert.Equal(t, float64(reducer.MaxRefLen), prop("discovered_from")["maxLength"])
	assert.Equal(t, float64(reducer.MaxLabels), prop("labels")["maxItems"])
	assert.Equal(t, float64(reducer.MaxLabelLen), prop("labels")["items"].(map[string]any)["maxLength"])
	assert.Equal(t, float64(reducer.MinPriority), prop("priority")["minimum"])
	assert.Equal(t, float64(reducer.MaxPriority), prop("priority")["maximum"])
	next := schemas["task_next"]
	assert.Equal(t, float64(reducer.MaxLabels), next["labels"].(map[string]any)["maxItems"])
	assert.Equal(t, float64(reducer.MaxNameLen), next["agent"].(map[string]any)["maxLength"])
	assert.Equal(t, float64(reducer.MaxRefLen), schemas["task_get"]["task"].(map[string]any)["maxLength"])

	before := len(e.events("acme"))
	assert.Equal(t, "priority: want 0 to 4 [invalid_argument]", call(t, s, "task_add", map[string]any{"title": "x", "priority": 5}, nil))
	assert.Equal(t, "priority: want a whole number [invalid_argument]", call(t, s, "task_add", map[string]any{"title": "x", "priority": "high"}, nil))
	assert.Equal(t, "labels[0]: want a string [invalid_argument]", call(t, s, "task_next", map[string]any{"labels": []any{1}}, nil))
	long := make([]string, reducer.MaxLabels+1)
	for i := range long {
		long[i] = "l"
	}
	assert.Equal(t, e.refusal(api.CmdProjectTaskAdd{Project: "acme", Title: "x", DependsOn: []string{}, Labels: long}),
		call(t, s, "task_add", map[string]any{"title": "x", "labels": long}, nil), "the daemon's limit, its refusal")
	assert.Len(t, e.events("acme"), before, "nothing written")
}

// TestMCPPlan: an agent's work from the ledger alone: task_next on an
// empty project says why nothing is ready; it claims the most urgent
// ready task, never an epic; task_get (without a task: its run's) gives
// every field and the run; task_add records the work found during the
// run (discovered_from the session's run by default, none when told "");
// a session bound to a run adds work found in it, reads its task, and
// claims nothing.
func TestMCPPlan(t *testing.T) {
	e := newEnv(t, daemon.Config{HeartbeatEvery: 10 * time.Minute, StaleAfter: time.Hour})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	s := e.session(mcp.Options{Project: "acme"})

	msg := call(t, s, "task_next", nil, nil)
	assert.Equal(t, "nothing ready: project acme has no tasks [nothing_ready]", msg)
	docShows(t, regexp.QuoteMeta(msg))
	assert.Equal(t, "task: give the task's ID or title (this session has no run whose task it would be) [invalid_argument]", call(t, s, "task_get", nil, nil))

	epic := e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "release", DependsOn: []string{}, Priority: ptr(uint32(0))}).Project.TaskID
	e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "docs", DependsOn: []string{}, Parent: &epic})
	fix := e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "fix login", DependsOn: []string{}, Parent: &epic,
		Priority: ptr(uint32(1)), Description: ptr("The login form rejects **valid** passwords."),
		Acceptance: ptr("login_test passes"), Labels: []string{"backend"}}).Project.TaskID

	var next struct {
		RunID string  `json:"run_id"`
		Agent string  `json:"agent"`
		Task  taskGot `json:"task"`
	}
	mustCall(t, s, "task_next", nil, &next)
	assert.Equal(t, fix, next.Task.ID, "the most urgent ready task; the epic is never claimed")
	assert.Equal(t, "test-agent", next.Agent, "the session's agent")
	assert.Equal(t, "The login form rejects **valid** passwords.", next.Task.Description)
	assert.Equal(t, "login_test passes", next.Task.Acceptance)
	require.Len(t, next.Task.Runs, 1)
	assert.Equal(t, next.RunID, next.Task.Runs[0].ID)

	var got struct {
		Task taskGot `json:"task"`
	}
	mustCall(t, s, "task_get", nil, &got)
	want := e.task("acme", fix)
	assert.Equal(t, taskGot{ProjectTask: want, Attempts: 1, Runs: next.Task.Runs}, got.Task, "every field")
	assert.Equal(t, reducer.TaskRunning, want.Status)
	assert.Equal(t, []any{"fix login", ptr(1), []string{"backend"}, epic}, []any{want.Title, want.Priority, want.Labels, want.Parent})
	mustCall(t, s, "task_get", map[string]any{"task": "release"}, &got)
	assert.Equal(t, 2, got.Task.Children)
	assert.Equal(t, ptr(0), got.Task.Priority)
	assert.Empty(t, got.Task.Runs)
	assert.Equal(t, `not found: task "nope" [not_found]`, call(t, s, "task_get", map[string]any{"task": "nope"}, nil))

	var found, plain struct {
		TaskID string `json:"task_id"`
	}
	mustCall(t, s, "task_add", map[string]any{"title": "session expiry", "description": "Sessions never expire.",
		"priority": 0, "labels": []string{"backend", "security"}, "parent": "release"}, &found)
	tk := e.task("acme", found.TaskID)
	assert.Equal(t, next.RunID, tk.DiscoveredFrom, "the session's run, by default")
	assert.Equal(t, epic, tk.Parent)
	assert.Equal(t, ptr(0), tk.Priority)
	assert.Equal(t, "Sessions never expire.", tk.Description)
	mustCall(t, s, "task_add", map[string]any{"title": "unrelated", "discovered_from": ""}, &plain)
	assert.Empty(t, e.task("acme", plain.TaskID).DiscoveredFrom, "none, when told")
	mustCall(t, s, "run_finish", map[string]any{"run": next.RunID, "status": "succeeded", "reason": "fixed"}, nil)

	// A session bound to a run: its run is the default of discovered_from
	// and of task_get; it claims nothing.
	run := e.must(api.CmdProjectRunStart{Project: "acme", Task: "docs", Agent: "codex"}).Project.RunID
	bound := e.session(mcp.Options{Project: "acme", Run: run})
	mustCall(t, bound, "task_get", nil, &got)
	assert.Equal(t, "docs", got.Task.Title)
	mustCall(t, bound, "task_add", map[string]any{"title": "docs: screenshots"}, &found)
	assert.Equal(t, run, e.task("acme", found.TaskID).DiscoveredFrom)
	n := len(e.events("acme"))
	assert.Contains(t, call(t, bound, "task_next", nil, nil), "[forbidden]")
	assert.Len(t, e.events("acme"), n, "nothing written")

	// The report resource has the plan: priorities, the epic's progress,
	// where work was found, and the descriptions.
	rr, err := s.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "scv://project/acme/report"})
	require.NoError(t, err)
	report := rr.Contents[0].Text
	assert.Regexp(t, `(?m)\| release \| running \|.*\| P0 \| epic: 1/3 done \|  \|$`, report)
	assert.Contains(t, report, "| P0 | release | run "+next.RunID+" of fix login |")
	assert.Contains(t, report, "### fix login ("+fix+")\n\nThe login form rejects **valid** passwords.\n\nAcceptance: login_test passes\n")
	assert.Contains(t, report, "epic "+epic+" (release): 1/3 children done, 1 running")

	msg = call(t, s, "task_next", map[string]any{"labels": []string{"frontend"}}, nil)
	assert.Regexp(t, `^nothing ready: no ready task of project acme has the labels frontend \(\d+ tasks? ready without them\) \[nothing_ready\]$`, msg)
	assert.Len(t, e.events("acme"), n, "nothing written")
}
