package control_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
	"scv/control/rpc"
	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// ownerDaemon is a daemon whose owner's chat (local:owner) is connected,
// so that questions are pending until decided.
func ownerDaemon(t *testing.T) (*daemon, *rpc.Client) {
	t.Helper()
	d := startDaemon(t, nil)
	c := d.client(t)
	_, err := c.Call(testCtx(t), api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d.srv.Service.Channels.(*channels.Manager).Connected("local:owner") },
		10*time.Second, 10*time.Millisecond)
	return d, c
}

// TestOwnerDecisionsReachEveryStatusAndPhase drives one project through
// every ProjectStatus and every ProjectPhase of the seed with the owner's
// decisions (approval, retry after the budget is spent, release, archive)
// over the socket, and checks that a client built from the seed parses
// every reply, the extension actions' included, and sees all six statuses
// and seven phases.
func TestOwnerDecisionsReachEveryStatusAndPhase(t *testing.T) {
	d, c := ownerDaemon(t)
	var replies []string
	statuses, phases := map[reducer.ProjectStatus]bool{}, map[reducer.Phase]bool{}
	call := func(cmd api.Command) *api.DaemonStatus {
		t.Helper()
		raw, err := c.CallRaw(testCtx(t), cmd)
		require.NoError(t, err, "%s", encode(t, cmd))
		replies = append(replies, fmt.Sprintf("%s\tstatus\t%s", cmd.Action(), raw))
		var st api.DaemonStatus
		require.NoError(t, json.Unmarshal(raw, &st))
		if st.Project != nil && st.Project.Project != nil {
			statuses[st.Project.Project.Status], phases[st.Project.Project.Phase] = true, true
		}
		return &st
	}
	summary := func() *api.ProjectSummary {
		return call(api.CmdProjectStatus{Project: "life"}).Project.Project
	}

	call(api.CmdProjectCreate{Name: "life", Workspace: d.workspace})
	build := call(api.CmdProjectTaskAdd{Project: "life", Title: "build", DependsOn: []string{}, MaxRetries: 0}).Project.TaskID
	call(api.CmdProjectTaskAdd{Project: "life", Title: "ship", DependsOn: []string{"build"}, MaxRetries: 0}) // by title
	assert.Equal(t, reducer.PhasePlanning, summary().Phase)

	// An approval of build: the project waits, the task starts no run.
	q := call(api.CmdConfirmAsk{Question: "build it?", Project: ptr("life"), Task: ptr("build")}).Confirm
	require.NotNil(t, q)
	assert.Equal(t, api.ConfirmPending, q.State)
	assert.Equal(t, reducer.ProjectWaitingApproval, summary().Status)
	assertCode(t, callErr(t, c, api.CmdProjectRunStart{Project: "life", Task: "build", Agent: "codex"}),
		api.CodeInvalidTransition, api.ReasonInvalidTransition, "a gated task")
	call(api.CmdConfirmAnswer{ID: q.ID, Answer: "yes"})
	assert.Equal(t, reducer.ProjectActive, summary().Status)

	// The run fails with no retry allowed: failed; the owner retries.
	run := call(api.CmdProjectRunStart{Project: "life", Task: "build", Agent: "codex"}).Project.RunID
	assert.Equal(t, reducer.PhaseImplementation, summary().Phase)
	call(api.CmdProjectRunFinish{Project: "life", Run: run, Status: reducer.RunFailed})
	assert.Equal(t, reducer.ProjectFailed, summary().Status)
	assert.Equal(t, reducer.PhaseVerification, summary().Phase)
	call(api.CmdProjectTaskRetry{Project: "life", Task: "build", MaxRetries: ptr(uint32(1))})
	assert.Equal(t, reducer.ProjectActive, summary().Status)

	// Blocked, then done.
	call(api.CmdProjectTaskUpdate{Project: "life", Task: build, Status: reducer.TaskBlocked})
	assert.Equal(t, reducer.ProjectBlocked, summary().Status)
	call(api.CmdProjectTaskUpdate{Project: "life", Task: build, Status: reducer.TaskReady})
	run = call(api.CmdProjectRunStart{Project: "life", Task: build, Agent: "codex"}).Project.RunID
	call(api.CmdProjectRunFinish{Project: "life", Run: run, Status: reducer.RunSucceeded})
	call(api.CmdProjectTaskUpdate{Project: "life", Task: "ship", Status: reducer.TaskDone})
	assert.Equal(t, reducer.ProjectCompleted, summary().Status)
	assert.Equal(t, reducer.PhaseStaging, summary().Phase)
	tasks := call(api.CmdProjectTasks{Project: "life"}).Project.Tasks
	assert.Equal(t, uint32(2), attemptsOf(t, d, "life", build), "the retry kept the attempts")
	assert.Len(t, tasks, 2)

	// Released, then archived: no more writes, reads still work.
	call(api.CmdProjectRelease{Project: "life"})
	assert.Equal(t, reducer.PhaseProduction, summary().Phase)
	call(api.CmdProjectArchive{Project: "life"})
	assert.Equal(t, reducer.ProjectArchived, summary().Status)
	assert.Equal(t, reducer.PhaseReporting, summary().Phase)
	e := callErr(t, c, api.CmdProjectTaskAdd{Project: "life", Title: "more", DependsOn: []string{}})
	assertCode(t, e, api.CodeInvalidTransition, api.ReasonInvalidTransition, "a write to an archived project")
	assert.Contains(t, e.Message, "archived")
	call(api.CmdProjectReport{Project: "life"})
	call(api.CmdProjectEvents{Project: "life"})

	// The list: archived projects only with all.
	call(api.CmdProjectCreate{Name: "other", Workspace: d.workspace})
	some := call(api.CmdProjectList{})
	require.NotNil(t, some.Projects)
	require.Len(t, *some.Projects, 1)
	assert.Equal(t, "other", (*some.Projects)[0].Name)
	all := call(api.CmdProjectList{All: true})
	require.Len(t, *all.Projects, 2)
	assert.Equal(t, "life", (*all.Projects)[0].Name, "in creation order")
	assert.Equal(t, reducer.ProjectArchived, (*all.Projects)[0].Status)
	assert.Equal(t, uint64(2), (*all.Projects)[0].CompletedTasks)
	// By status: the daemon filters, an archived status needing no all.
	archived, active := reducer.ProjectArchived, reducer.ProjectActive
	only := call(api.CmdProjectList{Status: &archived})
	require.Len(t, *only.Projects, 1)
	assert.Equal(t, "life", (*only.Projects)[0].Name)
	only = call(api.CmdProjectList{Status: &active, All: true})
	require.Len(t, *only.Projects, 1)
	assert.Equal(t, "other", (*only.Projects)[0].Name)
	failed := reducer.ProjectFailed
	assert.Empty(t, *call(api.CmdProjectList{Status: &failed}).Projects, "none failed: [], not null")

	for _, st := range []reducer.ProjectStatus{reducer.ProjectActive, reducer.ProjectBlocked, reducer.ProjectWaitingApproval,
		reducer.ProjectCompleted, reducer.ProjectFailed, reducer.ProjectArchived} {
		assert.True(t, statuses[st], "no reply showed status %s", st)
	}
	for _, ph := range []reducer.Phase{reducer.PhaseDiscovery, reducer.PhasePlanning, reducer.PhaseImplementation,
		reducer.PhaseVerification, reducer.PhaseStaging, reducer.PhaseProduction, reducer.PhaseReporting} {
		assert.True(t, phases[ph], "no reply showed phase %s", ph)
	}

	// Every reply parses through the seed's DaemonStatus, and what serde
	// wrote back shows every status and phase.
	bin := seedClient(t)
	var seen strings.Builder
	for _, v := range seedDecode(t, bin, replies) {
		assert.True(t, v.ok, "%s: serde refused: %s", v.name, v.out)
		seen.WriteString(v.out)
	}
	for st := range statuses {
		assert.Contains(t, seen.String(), `"status":"`+string(st)+`"`)
	}
	for ph := range phases {
		assert.Contains(t, seen.String(), `"phase":"`+string(ph)+`"`)
	}
}

func attemptsOf(t *testing.T, d *daemon, project, task string) uint32 {
	t.Helper()
	p, err := d.ledger.Project(context.Background(), project)
	require.NoError(t, err)
	tk, ok := p.Task(task)
	require.True(t, ok)
	return tk.Attempts
}

// TestApprovalsInTheProjectHistory: an approval answered yes, one
// answered no, one that expires, and one pending across a restart each
// leave their asking and outcome as events of the project (who decided,
// when), with the task gated or blocked as they say; and the database
// verifies.
func TestApprovalsInTheProjectHistory(t *testing.T) {
	d, c := ownerDaemon(t)
	call(t, c, api.CmdProjectCreate{Name: "gates", Workspace: d.workspace})
	for _, title := range []string{"yes", "no", "late", "restart"} {
		call(t, c, api.CmdProjectTaskAdd{Project: "gates", Title: title, DependsOn: []string{}})
	}
	ask := func(task string, timeout uint64) string {
		st, err := c.Call(testCtx(t), api.CmdConfirmAsk{Question: "may " + task + "?", Project: ptr("gates"), Task: ptr(task), TimeoutSeconds: ptr(timeout)})
		require.NoError(t, err)
		return st.Confirm.ID
	}
	yes, no, late, pending := ask("yes", 600), ask("no", 600), ask("late", 1), ask("restart", 600)
	_, err := c.Call(testCtx(t), api.CmdConfirmAnswer{ID: yes, Answer: "yes"})
	require.NoError(t, err)
	_, err = c.Call(testCtx(t), api.CmdConfirmAnswer{ID: no, Answer: "no"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := c.Call(testCtx(t), api.CmdConfirmStatus{ID: late})
		return err == nil && st.Confirm.State == api.ConfirmExpired
	}, 10*time.Second, 50*time.Millisecond)
	p, err := d.ledger.Project(context.Background(), "gates")
	require.NoError(t, err)
	assert.Equal(t, reducer.ProjectWaitingApproval, p.Status(), "one approval still pending")

	// Restart: the pending one fails, in the project too.
	dir := d.dir
	d.stop()
	d = startDaemonIn(t, dir, d.d.Config())
	c = d.client(t)
	p, err = d.ledger.Project(context.Background(), "gates")
	require.NoError(t, err)
	assert.Equal(t, reducer.ProjectActive, p.Status(), "no approval pending; yes is ready, the others blocked")
	outcome := map[string]reducer.ApprovalOutcome{}
	for _, a := range p.Approvals() {
		outcome[a.ID] = a.Outcome
		assert.NotEmpty(t, a.DecidedBy, "who or what decided %s", a.ID)
		assert.NotZero(t, a.Decided)
		assert.NotZero(t, a.DecidedSeq)
	}
	assert.Equal(t, map[string]reducer.ApprovalOutcome{yes: reducer.ApprovalYes, no: reducer.ApprovalNo,
		late: reducer.ApprovalExpired, pending: reducer.ApprovalFailed}, outcome)
	for title, want := range map[string]reducer.TaskStatus{"yes": reducer.TaskReady, "no": reducer.TaskBlocked,
		"late": reducer.TaskBlocked, "restart": reducer.TaskBlocked} {
		tk, err := p.ResolveTask(title)
		require.NoError(t, err)
		assert.Equal(t, want, tk.Status, title)
		assert.Empty(t, tk.Approval, "%s is gated no more", title)
	}
	a, _ := p.Approval(no)
	assert.Regexp(t, `^uid \d+ pid \d+$`, a.DecidedBy, "the peer that answered")

	// The history holds each asking and outcome, and verifies.
	ev, err := c.Call(testCtx(t), api.CmdProjectEvents{Project: "gates"})
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, e := range ev.Project.Events {
		kinds[e.Kind]++
	}
	assert.Equal(t, 4, kinds[reducer.KindApprovalAsked])
	assert.Equal(t, 4, kinds[reducer.KindApprovalDecided])
	d.stop()
	ro, err := sqlite.OpenReadOnly(context.Background(), d.d.Config().DB)
	require.NoError(t, err)
	defer ro.Close()
	rep, err := ledger.Verify(context.Background(), ro, ledger.VerifyOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// TestApprovalRefusals: an approval names a project that exists and, if
// any, a task of it; anything else is refused and asks nothing.
func TestApprovalRefusals(t *testing.T) {
	d, c := ownerDaemon(t)
	call(t, c, api.CmdProjectCreate{Name: "gates", Workspace: d.workspace})
	call(t, c, api.CmdProjectTaskAdd{Project: "gates", Title: "build", DependsOn: []string{}})
	for _, tc := range []struct {
		name          string
		project, task *string
		code          int
		reason        string
	}{
		{"empty project", ptr(""), nil, api.CodeInvalidParams, api.ReasonInvalidArgument},
		{"empty task", ptr("gates"), ptr(""), api.CodeInvalidParams, api.ReasonInvalidArgument},
		{"task without a project", nil, ptr("build"), api.CodeInvalidParams, api.ReasonInvalidArgument},
		{"unknown project", ptr("nope"), nil, api.CodeNotFound, api.ReasonNotFound},
		{"unknown task", ptr("gates"), ptr("nope"), api.CodeNotFound, api.ReasonNotFound},
	} {
		e := callErr(t, c, api.CmdConfirmAsk{Question: "may I?", Project: tc.project, Task: tc.task})
		assertCode(t, e, tc.code, tc.reason, tc.name)
	}
	p, err := d.ledger.Project(context.Background(), "gates")
	require.NoError(t, err)
	assert.Empty(t, p.Approvals(), "nothing was asked")
	assert.Equal(t, reducer.ProjectActive, p.Status())
}
