package control_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// TestUsageOverTheSocket: usage sent on progress, heartbeats and the
// finish, as raw JSON, is totalled per run, task and project in the
// replies; bad usage is refused with nothing written; a budget reached
// refuses project_run_start (budget_reached) until it is raised.
func TestUsageOverTheSocket(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	call := func(params string) reply {
		t.Helper()
		return rc.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":` + params + `}`)
	}
	ok := func(params string) api.DaemonStatus {
		t.Helper()
		r := call(params)
		require.Nil(t, r.err, "%s", params)
		var st api.DaemonStatus
		require.NoError(t, json.Unmarshal(r.result, &st))
		return st
	}
	ok(fmt.Sprintf(`{"action":"project_create","name":"acme","workspace":%q}`, d.workspace))
	task := ok(`{"action":"project_task_add","project":"acme","title":"build","depends_on":[],"max_retries":1}`).Project.TaskID
	ok(`{"action":"project_task_add","project":"acme","title":"test","depends_on":[],"max_retries":0}`)
	ok(`{"action":"project_task_add","project":"acme","title":"ship","depends_on":[],"max_retries":0}`)
	ok(`{"action":"project_budget","project":"acme","tokens":1000,"amount":"0.50","currency":"USD"}`)
	run := ok(`{"action":"project_run_start","project":"acme","task":"build","agent":"a"}`).Project.RunID
	ok(`{"action":"project_run_progress","project":"acme","run":"` + run + `","progress":"half","usage":{"tokens":{"input":100,"output":20},"cost":{"amount":"0.10","currency":"USD"},"model":"m1"}}`)
	ok(`{"action":"project_heartbeat","project":"acme","task":null,"run":"` + run + `","usage":{"tokens":{"input":150,"output":20,"cached_read":30}}}`)

	for params, reason := range map[string]string{
		`{"action":"project_run_progress","project":"acme","run":"` + run + `","progress":"x","usage":{"tokens":{"input":10}}}`:                                                                        api.ReasonInvalidArgument,
		`{"action":"project_run_progress","project":"acme","run":"` + run + `","progress":"x","usage":{"tokens":{"input":-1}}}`:                                                                        api.ReasonInvalidParams,
		`{"action":"project_run_progress","project":"acme","run":"` + run + `","progress":"x","usage":{"tokens":{"input":1.5}}}`:                                                                       api.ReasonInvalidParams,
		`{"action":"project_run_progress","project":"acme","run":"` + run + `","progress":"x","usage":{"tokens":{"input":200,"output":20,"cached_read":30},"cost":{"amount":"1e3","currency":"USD"}}}`: api.ReasonInvalidArgument,
		`{"action":"project_run_progress","project":"acme","run":"` + run + `","progress":"x","usage":{"cost":{"amount":"1"}}}`:                                                                        api.ReasonInvalidParams,
		`{"action":"project_run_progress","project":"acme","run":"` + run + `","progress":"x","usage":7}`:                                                                                              api.ReasonInvalidParams,
		`{"action":"project_budget","project":"acme","cost":"5 dollars"}`:                                                                                                                              api.ReasonInvalidArgument,
		`{"action":"project_budget","project":"acme","tokens":-5}`:                                                                                                                                     api.ReasonInvalidParams,
	} {
		r := call(params)
		require.NotNil(t, r.err, params)
		assert.Equal(t, reason, r.err.Data.Reason, "%s: %s", params, r.err.Message)
	}

	fin := `{"action":"project_run_finish","project":"acme","run":"` + run + `","status":"failed","usage":{"tokens":{"input":400,"output":60,"cached_read":30},"cost":{"amount":"0.3","currency":"USD"}}}`
	ok(fin)
	r := call(fin)
	require.NotNil(t, r.err)
	assert.Equal(t, api.ReasonRunNotRunning, r.err.Data.Reason, "usage for a finished run")

	run2 := ok(`{"action":"project_run_start","project":"acme","task":"build","agent":"a"}`).Project.RunID
	ok(`{"action":"project_run_finish","project":"acme","run":"` + run2 + `","status":"succeeded","usage":{"tokens":{"input":500,"output":100},"cost":{"amount":"0.25","currency":"USD"}}}`)

	// The budget (1000 tokens; 0.50USD) is reached: 1090 tokens, 0.55USD.
	st := ok(`{"action":"project_status","project":"acme"}`)
	require.NotNil(t, st.Project.Spend)
	assert.Equal(t, reducer.Tokens{Input: 900, Output: 160, CachedRead: 30}, st.Project.Spend.Spend.Tokens)
	assert.Equal(t, []reducer.Cost{{Amount: "0.55", Currency: "USD"}}, st.Project.Spend.Spend.Cost)
	assert.Equal(t, "1090 tokens spent of a budget of 1000", st.Project.Spend.BudgetReached)
	tasks := ok(`{"action":"project_tasks","project":"acme"}`).Project.Tasks
	require.NotNil(t, tasks[0].Spend)
	assert.Equal(t, task, tasks[0].ID)
	assert.Equal(t, uint64(1090), tasks[0].Spend.Tokens.Total())
	assert.Nil(t, tasks[1].Spend)
	report := ok(`{"action":"project_report","project":"acme"}`).Project.Report
	require.Len(t, report.Runs, 2)
	assert.Equal(t, &reducer.Usage{Tokens: reducer.Tokens{Input: 400, Output: 60, CachedRead: 30}, Cost: &reducer.Cost{Amount: "0.3", Currency: "USD"}, Model: "m1"}, report.Runs[0].Usage)
	assert.Equal(t, st.Project.Spend, report.Spend)

	r = call(`{"action":"project_run_start","project":"acme","task":"test","agent":"a"}`)
	require.NotNil(t, r.err)
	assert.Equal(t, api.ReasonBudgetReached, r.err.Data.Reason)
	assert.Equal(t, api.CodeInvalidTransition, r.err.Code)
	assert.Contains(t, r.err.Message, "budget reached: project acme: 1090 tokens spent of a budget of 1000")

	// Raised: the cost (0.55USD of 0.60USD) and the tokens are under it.
	ok(`{"action":"project_budget","project":"acme","tokens":5000,"cost":"0.60USD"}`)
	ok(`{"action":"project_run_start","project":"acme","task":"test","agent":"a"}`)
	// Removed.
	ok(`{"action":"project_budget","project":"acme","tokens":0}`)
	r = call(`{"action":"project_run_start","project":"acme","task":"ship","agent":"a"}`)
	require.NotNil(t, r.err)
	assert.Equal(t, api.ReasonBudgetReached, r.err.Data.Reason)
	ok(`{"action":"project_budget","project":"acme"}`)
	ok(`{"action":"project_run_start","project":"acme","task":"ship","agent":"a"}`)
	st = ok(`{"action":"project_status","project":"acme"}`)
	assert.Nil(t, st.Project.Spend.Budget)

	// Compaction leaves the totals as they were.
	ok(`{"action":"ledger_compact","project":"acme"}`)
	again := ok(`{"action":"project_status","project":"acme"}`)
	assert.Equal(t, st.Project.Spend, again.Project.Spend)
	_ = context.Background
}

// TestBudgetNotice: the owner is told in the owner's chat, once, when a
// run's usage makes the project's spend reach its budget, as a notice of
// the question log (confirm_list's state notice); again only after the
// budget was set again and reached again.
func TestBudgetNotice(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	ctx := context.Background()
	call := func(cmd api.Command) *api.DaemonStatus {
		t.Helper()
		st, err := c.Call(ctx, cmd)
		require.NoError(t, err, "%s", cmd.Action())
		return st
	}
	call(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	call(api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	call(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}})
	hundred := uint64(100)
	call(api.CmdProjectBudget{Project: "acme", Tokens: &hundred})
	run := call(api.CmdProjectRunStart{Project: "acme", Task: "build", Agent: "a"}).Project.RunID
	spend := func(n uint64) {
		t.Helper()
		call(api.CmdProjectHeartbeat{Project: "acme", Run: &run, Usage: &reducer.Usage{Tokens: reducer.Tokens{Input: n}}})
	}
	wait := uint64(10)
	notices := func(after uint64) []api.Question {
		t.Helper()
		st := call(api.CmdConfirmList{After: &after, WaitSeconds: &wait})
		return st.Questions
	}
	spend(50)
	spend(100) // reached
	spend(150)
	got := notices(0)
	require.Len(t, got, 1)
	assert.Equal(t, api.ConfirmNotice, got[0].State)
	assert.Equal(t, "local:owner", got[0].Chat)
	assert.Equal(t, "Project acme reached its budget: 100 tokens spent of a budget of 100. No new run starts until you raise or remove it (scv project budget acme).", got[0].Question)

	thousand := uint64(1000)
	call(api.CmdProjectBudget{Project: "acme", Tokens: &thousand})
	spend(999)
	call(api.CmdProjectRunFinish{Project: "acme", Run: run, Status: reducer.RunSucceeded, Usage: &reducer.Usage{Tokens: reducer.Tokens{Input: 1000}}})
	second := notices(got[0].Seq)
	require.Len(t, second, 1)
	assert.Contains(t, second[0].Question, "1000 tokens spent of a budget of 1000")
	assert.Len(t, notices(0), 2, "told twice in all: once per budget reached")
}
