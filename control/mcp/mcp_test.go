package mcp_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
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

// TestMCP: the server says who it is and what it offers at initialize;
// its tools: listed with schemas, descriptions and truthful annotations;
// a task's whole life through them, checked in the ledger over the
// socket; progress coalesced; a finished run fenced; questions the owner
// answers, later and while the tool waits; resources read and a
// subscription notified.
func TestMCP(t *testing.T) {
	e := newEnv(t, daemon.Config{HeartbeatEvery: 10 * time.Minute, StaleAfter: time.Hour})
	acme := e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws}).Project.Project.ID
	e.must(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	updated := make(chan string, 16)
	s := connect(t, e.h, "test-agent", mcp.Options{Project: "acme", Version: "v-test"}, updated)

	init := s.InitializeResult()
	require.NotNil(t, init)
	assert.Equal(t, "scv", init.ServerInfo.Name)
	assert.Equal(t, "v-test", init.ServerInfo.Version, "the version it is given")
	require.NotNil(t, init.Capabilities.Tools, "it offers tools")
	require.NotNil(t, init.Capabilities.Resources, "it offers resources")
	assert.True(t, init.Capabilities.Resources.Subscribe, "to which a client may subscribe")
	assert.Contains(t, init.Instructions, "confined to project acme (ID "+acme+")")

	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	ann := map[string]*sdk.ToolAnnotations{}
	for _, tl := range res.Tools {
		assert.NotEmpty(t, tl.Description, "%s has a description", tl.Name)
		schema, ok := tl.InputSchema.(map[string]any)
		require.True(t, ok, "%s has an input schema", tl.Name)
		assert.Equal(t, "object", schema["type"], tl.Name)
		assert.NotNil(t, tl.OutputSchema, "%s has an output schema", tl.Name)
		require.NotNil(t, tl.Annotations, tl.Name)
		ann[tl.Name] = tl.Annotations
	}
	assert.Equal(t, []string{"owner_answer_status", "owner_ask", "project_events", "project_list", "project_report",
		"project_status", "project_tasks", "run_finish", "run_heartbeat", "run_progress", "task_add", "task_claim", "task_get", "task_next"}, toolNames(t, s))
	for _, name := range []string{"project_list", "project_status", "project_tasks", "project_report", "project_events", "owner_answer_status", "task_get"} {
		assert.True(t, ann[name].ReadOnlyHint, "%s only reads", name)
	}
	for _, name := range []string{"task_claim", "task_next", "run_progress", "run_heartbeat", "run_finish", "task_add", "owner_ask"} {
		assert.False(t, ann[name].ReadOnlyHint, "%s writes", name)
		require.NotNil(t, ann[name].DestructiveHint, name)
	}
	assert.True(t, *ann["run_finish"].DestructiveHint, "a finished run is final")
	assert.False(t, *ann["task_claim"].DestructiveHint)
	assert.True(t, ann["run_heartbeat"].IdempotentHint)
	assert.False(t, ann["task_claim"].IdempotentHint)

	// A task's life.
	var added struct {
		TaskID string `json:"task_id"`
	}
	mustCall(t, s, "task_add", map[string]any{"title": "build", "max_retries": 1}, &added)
	var claimed struct {
		RunID string `json:"run_id"`
		Agent string `json:"agent"`
	}
	mustCall(t, s, "task_claim", map[string]any{"task": "build"}, &claimed)
	assert.Equal(t, "test-agent", claimed.Agent, "the MCP client's name")
	require.Regexp(t, ulid, claimed.RunID)
	before := len(e.events("acme"))
	mustCall(t, s, "run_progress", map[string]any{"run": claimed.RunID, "progress": "compiling"}, nil)
	mustCall(t, s, "run_progress", map[string]any{"run": claimed.RunID, "progress": "linking"}, nil)
	mustCall(t, s, "run_heartbeat", map[string]any{"run": claimed.RunID}, nil)
	assert.Equal(t, []string{"run_progress"}, e.events("acme")[before:], "coalesced: one progress journaled in the interval, the rest accepted")
	var finished struct {
		Project api.ProjectSummary `json:"project"`
	}
	mustCall(t, s, "run_finish", map[string]any{"run": claimed.RunID, "status": "succeeded", "reason": "built and tested"}, &finished)
	assert.Equal(t, uint64(1), finished.Project.CompletedTasks)
	report := e.must(api.CmdProjectReport{Project: "acme"}).Project.Report
	require.Len(t, report.Runs, 1)
	assert.Equal(t, reducer.RunSucceeded, report.Runs[0].Status)
	assert.Equal(t, "test-agent", report.Runs[0].Agent)
	assert.Equal(t, "built and tested", *report.Runs[0].Progress)
	assert.Equal(t, reducer.TaskDone, report.Tasks[0].Status)

	// The finished run is fenced: a zombie's report is refused, and
	// nothing is written.
	n := len(e.events("acme"))
	msg := call(t, s, "run_progress", map[string]any{"run": claimed.RunID, "progress": "zombie"}, nil)
	assert.Contains(t, msg, "[run_not_running]")
	assert.Len(t, e.events("acme"), n)
	msg = call(t, s, "task_claim", map[string]any{"task": "nope"}, nil)
	assert.Contains(t, msg, "[not_found]")
	msg = call(t, s, "run_finish", map[string]any{"run": claimed.RunID, "status": "running"}, nil)
	assert.Equal(t, "status: want one of succeeded, failed, cancelled [invalid_argument]", msg)
	assert.Len(t, e.events("acme"), n)

	// The events, bounded and paged.
	var page struct {
		Events []struct {
			Sequence uint64 `json:"sequence"`
			Kind     string `json:"kind"`
		} `json:"events"`
		Next uint64 `json:"next"`
		More bool   `json:"more"`
	}
	mustCall(t, s, "project_events", map[string]any{"limit": 2}, &page)
	require.Len(t, page.Events, 2)
	assert.Equal(t, "project_created", page.Events[0].Kind)
	assert.True(t, page.More)
	mustCall(t, s, "project_events", map[string]any{"after": page.Next, "limit": 1000}, &page)
	assert.Len(t, page.Events, n-2)
	assert.False(t, page.More)

	// A question the owner answers later: pending, with its ID, until he
	// does.
	type answer struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	var later, status answer
	mustCall(t, s, "owner_ask", map[string]any{"question": "Ship acme?"}, &later)
	assert.Equal(t, "pending", later.State)
	require.Regexp(t, ulid, later.ID)
	mustCall(t, s, "owner_answer_status", map[string]any{"id": later.ID}, &status)
	assert.Equal(t, answer{ID: later.ID, State: "pending"}, status)
	e.must(api.CmdConfirmAnswer{ID: later.ID, Answer: "no"})
	mustCall(t, s, "owner_answer_status", map[string]any{"id": later.ID}, &status)
	assert.Equal(t, answer{ID: later.ID, State: "no"}, status)

	// A question the owner answers in the local chat while the tool waits.
	asked := make(chan answer, 1)
	go func() {
		var a answer
		if msg := call(t, s, "owner_ask", map[string]any{"question": "Deploy acme?", "wait_seconds": 20}, &a); msg != "" {
			a.State = msg
		}
		asked <- a
	}()
	var q api.Question
	require.Eventually(t, func() bool {
		for _, x := range e.must(api.CmdConfirmList{}).Questions {
			if x.State == api.ConfirmPending {
				q = x
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, "Deploy acme?", q.Question)
	assert.Equal(t, "local:owner", q.Chat)
	e.must(api.CmdConfirmAnswer{ID: q.ID, Answer: "yes"})
	select {
	case a := <-asked:
		assert.Equal(t, answer{ID: q.ID, State: "yes"}, a)
	case <-time.After(20 * time.Second):
		t.Fatal("owner_ask did not return the answer")
	}
	mustCall(t, s, "owner_answer_status", map[string]any{"id": q.ID}, &status)
	assert.Equal(t, "yes", status.State)

	// Resources: the report and the graph, and a subscription notified
	// when the project changes.
	lr, err := s.ListResources(context.Background(), nil)
	require.NoError(t, err)
	var uris []string
	for _, r := range lr.Resources {
		uris = append(uris, r.URI)
	}
	assert.Subset(t, uris, []string{"scv://project/acme/report", "scv://project/acme/graph"})
	rr, err := s.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "scv://project/acme/report"})
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, "text/markdown", rr.Contents[0].MIMEType)
	assert.Contains(t, rr.Contents[0].Text, "# Project acme")
	assert.Contains(t, rr.Contents[0].Text, "| build | done | 0/1 |")
	assert.Contains(t, rr.Contents[0].Text, "built and tested")
	rr, err = s.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "scv://project/acme/graph"})
	require.NoError(t, err)
	assert.Contains(t, rr.Contents[0].Text, "acme (")
	assert.Contains(t, rr.Contents[0].Text, "build")
	require.NoError(t, s.Subscribe(context.Background(), &sdk.SubscribeParams{URI: "scv://project/acme/report"}))
	e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "deploy", DependsOn: []string{}})
	select {
	case uri := <-updated:
		assert.Equal(t, "scv://project/acme/report", uri)
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription was not notified")
	}
}

// TestMCPScope: a session confined to a project (named by its name or by
// its ID), or bound to a run, is refused the rest (forbidden), and
// nothing is written; within it, the project is known by its name and by
// its ID, in tools and resources alike; a read-only session offers only
// the reading tools.
func TestMCPScope(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	for _, p := range []string{"acme", "other"} {
		e.must(api.CmdProjectCreate{Name: p, Workspace: e.ws})
		for _, task := range []string{"build", "test"} {
			e.must(api.CmdProjectTaskAdd{Project: p, Title: task, DependsOn: []string{}})
		}
	}
	mine := e.must(api.CmdProjectRunStart{Project: "acme", Task: "build", Agent: "supervisor"}).Project.RunID
	theirs := e.must(api.CmdProjectRunStart{Project: "acme", Task: "test", Agent: "supervisor"}).Project.RunID
	eventsBefore := map[string]int{"acme": len(e.events("acme")), "other": len(e.events("other"))}

	s := e.session(mcp.Options{Project: "acme"})
	var list struct {
		Projects []api.ProjectListItem `json:"projects"`
	}
	mustCall(t, s, "project_list", nil, &list)
	require.Len(t, list.Projects, 1)
	assert.Equal(t, "acme", list.Projects[0].Name)
	msg := call(t, s, "project_status", map[string]any{"project": "other"}, nil)
	assert.Contains(t, msg, "[forbidden]")
	assert.Contains(t, msg, "confined to project acme")
	msg = call(t, s, "task_add", map[string]any{"project": "other", "title": "sneaky"}, nil)
	assert.Contains(t, msg, "[forbidden]")

	// Confined by the project's ID: the project is still known by its
	// name, in tools and in the resources it lists, and the other is
	// still refused, by name or by ID.
	ids := map[string]string{}
	for _, p := range []string{"acme", "other"} {
		ids[p] = e.must(api.CmdProjectStatus{Project: p}).Project.Project.ID
	}
	byID := e.session(mcp.Options{Project: ids["acme"]})
	for _, ref := range []string{"acme", ids["acme"], ""} {
		var st struct {
			Project api.ProjectSummary `json:"project"`
		}
		mustCall(t, byID, "project_status", map[string]any{"project": ref}, &st)
		assert.Equal(t, ids["acme"], st.Project.ID, "project %q", ref)
		mustCall(t, byID, "project_tasks", map[string]any{"project": ref}, nil)
	}
	mustCall(t, byID, "project_list", nil, &list)
	require.Len(t, list.Projects, 1)
	assert.Equal(t, "acme", list.Projects[0].Name)
	lr, err := byID.ListResources(context.Background(), nil)
	require.NoError(t, err)
	var uris []string
	for _, r := range lr.Resources {
		uris = append(uris, r.URI)
	}
	assert.ElementsMatch(t, []string{"scv://project/acme/report", "scv://project/acme/graph"}, uris)
	for _, uri := range append(uris, "scv://project/"+ids["acme"]+"/report") {
		rr, err := byID.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
		if assert.NoError(t, err, uri) {
			assert.Contains(t, rr.Contents[0].Text, "acme", uri)
		}
	}
	for _, ref := range []string{"other", ids["other"]} {
		msg = call(t, byID, "project_status", map[string]any{"project": ref}, nil)
		assert.Equal(t, `project "`+ref+`" is outside this session, which is confined to project acme [forbidden]`, msg)
		msg = call(t, byID, "task_add", map[string]any{"project": ref, "title": "sneaky"}, nil)
		assert.Contains(t, msg, "[forbidden]")
		_, err := byID.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "scv://project/" + ref + "/report"})
		assert.ErrorContains(t, err, "[forbidden]")
	}

	bound := e.session(mcp.Options{Project: "acme", Run: mine})
	mustCall(t, bound, "run_progress", map[string]any{"progress": "on my own run"}, nil)
	msg = call(t, bound, "run_progress", map[string]any{"run": theirs, "progress": "on theirs"}, nil)
	assert.Contains(t, msg, "[forbidden]")
	assert.Contains(t, msg, "reports on run "+mine+" only")
	msg = call(t, bound, "task_claim", map[string]any{"task": "test"}, nil)
	assert.Contains(t, msg, "[forbidden]")
	msg = call(t, bound, "run_finish", map[string]any{"run": theirs, "status": "failed"}, nil)
	assert.Contains(t, msg, "[forbidden]")
	assert.Len(t, e.events("acme"), eventsBefore["acme"]+1, "only the bound run's progress")
	assert.Len(t, e.events("other"), eventsBefore["other"])

	ro := e.session(mcp.Options{ReadOnly: true})
	assert.Equal(t, []string{"project_events", "project_list", "project_report", "project_status", "project_tasks", "task_get"},
		toolNames(t, ro))
	_, err = ro.CallTool(context.Background(), &sdk.CallToolParams{Name: "task_add", Arguments: map[string]any{"project": "acme", "title": "x"}})
	require.Error(t, err, "a read-only session has no task_add")
	mustCall(t, ro, "project_tasks", map[string]any{"project": "other"}, nil)
	assert.Len(t, e.events("acme"), eventsBefore["acme"]+1)
}

// TestMCPInADelegation: a run an agent claims inside a delegation names
// the delegation's chain after the agent.
func TestMCPInADelegation(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}})
	s := e.session(mcp.Options{Project: "acme", Parent: "01JOUTER,01JINNER"})
	var claimed struct {
		RunID string `json:"run_id"`
		Agent string `json:"agent"`
	}
	mustCall(t, s, "task_claim", map[string]any{"task": "build", "agent": "codex"}, &claimed)
	assert.Equal(t, "codex [01JOUTER,01JINNER]", claimed.Agent)
	runs := e.must(api.CmdProjectReport{Project: "acme"}).Project.Report.Runs
	require.Len(t, runs, 1)
	assert.Equal(t, "codex [01JOUTER,01JINNER]", runs[0].Agent, "the ledger records the delegation")
}

// TestMCPStaleRun: a run gone stale is fenced as a finished one is: its
// progress, heartbeat and finish (with a reason) are refused with the
// daemon's run_not_running, and nothing is written.
func TestMCPStaleRun(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, daemon.Config{StaleAfter: time.Minute, Clock: clock})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	task := e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 1}).Project.TaskID
	s := e.session(mcp.Options{Project: "acme"})
	var claimed struct {
		RunID string `json:"run_id"`
	}
	mustCall(t, s, "task_claim", map[string]any{"task": "build"}, &claimed)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	e.d.Sweep(context.Background())
	require.Equal(t, reducer.TaskStale, e.task("acme", task).Status, "the silent run went stale")
	n := len(e.events("acme"))
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"run_progress", map[string]any{"run": claimed.RunID, "progress": "still here"}},
		{"run_heartbeat", map[string]any{"run": claimed.RunID}},
		{"run_finish", map[string]any{"run": claimed.RunID, "status": "succeeded", "reason": "done after all"}},
	} {
		assert.Equal(t, "run is not running: run "+claimed.RunID+" is stale [run_not_running]", call(t, s, c.tool, c.args, nil), c.tool)
	}
	docShows(t, `run is not running: run \w+ is stale \[run_not_running\]`)
	assert.Len(t, e.events("acme"), n, "nothing written, the finish's reason neither")
	report := e.must(api.CmdProjectReport{Project: "acme"}).Project.Report
	require.Len(t, report.Runs, 1)
	assert.Equal(t, reducer.RunStale, report.Runs[0].Status)
	assert.Nil(t, report.Runs[0].Progress)
}

// TestMCPTasks: task_add with dependencies, by ID and by title; the
// daemon's refusals of task_add (an unknown or repeated dependency, an
// archived project) with nothing written; run_finish failed (a retry
// spent) and cancelled (none), as the socket sees the task; and
// project_report with the evidence notes the daemon's report has.
func TestMCPTasks(t *testing.T) {
	e := newEnv(t, daemon.Config{HeartbeatEvery: 10 * time.Minute, StaleAfter: time.Hour})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	s := e.session(mcp.Options{Project: "acme"})
	type added struct {
		TaskID string `json:"task_id"`
	}
	var build, test, deploy added
	mustCall(t, s, "task_add", map[string]any{"title": "build", "max_retries": 1}, &build)
	mustCall(t, s, "task_add", map[string]any{"title": "test", "depends_on": []string{build.TaskID}}, &test)
	mustCall(t, s, "task_add", map[string]any{"title": "deploy", "depends_on": []string{build.TaskID, "test"}}, &deploy)
	assert.Equal(t, []string{build.TaskID}, e.task("acme", test.TaskID).DependsOn)
	assert.Equal(t, []string{build.TaskID, test.TaskID}, e.task("acme", deploy.TaskID).DependsOn, "by ID and by title")
	assert.Equal(t, reducer.TaskPending, e.task("acme", test.TaskID).Status)

	n := len(e.events("acme"))
	msg := call(t, s, "task_add", map[string]any{"title": "lint", "depends_on": []string{"nope"}}, nil)
	assert.Equal(t, `depends_on: not found: task "nope" [not_found]`, msg)
	msg = call(t, s, "task_add", map[string]any{"title": "lint", "depends_on": []string{build.TaskID, "build"}}, nil)
	assert.Equal(t, "invalid argument: depends_on names task "+build.TaskID+" twice [invalid_argument]", msg)
	assert.Len(t, e.events("acme"), n, "nothing written")

	// build fails once (its one retry spent), is cancelled (none spent),
	// and fails again: the task fails.
	type claim struct {
		RunID string `json:"run_id"`
	}
	for i, c := range []struct {
		status  string
		retries uint32
		task    reducer.TaskStatus
	}{
		{"failed", 1, reducer.TaskReady},
		{"cancelled", 1, reducer.TaskReady},
		{"failed", 2, reducer.TaskFailed},
	} {
		var r claim
		mustCall(t, s, "task_claim", map[string]any{"task": "build"}, &r)
		mustCall(t, s, "run_finish", map[string]any{"run": r.RunID, "status": c.status, "reason": fmt.Sprintf("try %d", i+1)}, nil)
		tk := e.task("acme", build.TaskID)
		assert.Equal(t, c.retries, tk.Retries, "after run %d, %s", i+1, c.status)
		assert.Equal(t, c.task, tk.Status, "after run %d, %s", i+1, c.status)
	}
	var report struct {
		Report api.ProjectReport `json:"report"`
	}
	mustCall(t, s, "project_report", nil, &report)
	want := e.must(api.CmdProjectReport{Project: "acme"}).Project.Report
	assert.Equal(t, want.Evidence, report.Report.Evidence)
	assert.Contains(t, report.Report.Evidence, "3 runs: 0 running, 0 succeeded, 2 failed, 1 cancelled, 0 stale")
	require.Len(t, report.Report.Runs, 3)
	for i, run := range report.Report.Runs {
		assert.Equal(t, fmt.Sprintf("try %d", i+1), *run.Progress, "the reason is the run's last progress")
	}
	var held int
	for _, note := range report.Report.Evidence {
		if strings.HasPrefix(note, "task "+build.TaskID+" (build) cannot progress") ||
			strings.HasPrefix(note, "task "+test.TaskID+" (test) cannot progress") {
			held++
		}
	}
	assert.Equal(t, 2, held, "build fails, and holds up test: %q", report.Report.Evidence)

	// An archived project takes no more tasks.
	e.must(api.CmdProjectArchive{Project: "acme"})
	n = len(e.events("acme"))
	msg = call(t, s, "task_add", map[string]any{"title": "late"}, nil)
	assert.Equal(t, "invalid transition: project acme is archived: it takes no more writes [invalid_transition]", msg)
	assert.Len(t, e.events("acme"), n)
}

// TestMCPCallerOverHTTP: HTTPHandler's sessions name their requests
// mcp.HTTPCaller (api.Who), and reach the daemon through the handler
// they are given.
func TestMCPCallerOverHTTP(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	var mu sync.Mutex
	who := map[string]string{} // action: who sent it
	h := api.HandlerFunc(func(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
		mu.Lock()
		who[cmd.Action()] = api.Who(ctx)
		mu.Unlock()
		return e.h.Handle(ctx, cmd)
	})
	srv := httptestServer(t, mcp.HTTPHandler(h, mcp.Options{Version: "v-http"}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "http-agent", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "v-http", s.InitializeResult().ServerInfo.Version)
	mustCall(t, s, "task_add", map[string]any{"project": "acme", "title": "build"}, nil)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, mcp.HTTPCaller, who["project_task_add"])
	docShows(t, regexp.QuoteMeta("`"+mcp.HTTPCaller+"`"))
}
