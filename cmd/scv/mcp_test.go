package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// These tests drive the real `scv mcp` over its standard input and output
// with the MCP SDK's client (mcp.CommandTransport), against a real daemon
// on a real socket, and check the ledger over the socket afterwards.

// mcpEnv is a daemon, and the scv binary that serves MCP for it.
type mcpEnv struct {
	t   *testing.T
	d   *testDaemon
	bin string
	ws  string
	// client is the name the sessions' client gives (default test-agent).
	client string
	// stderr, when set, takes the servers' standard error.
	stderr *os.File
}

func newMCPEnv(t *testing.T, args ...string) *mcpEnv {
	t.Helper()
	dir := shortDir(t)
	bin := buildScv(t, dir, "mcp-test")
	e := &mcpEnv{t: t, bin: bin, ws: filepath.Join(dir, "ws")}
	require.NoError(t, os.MkdirAll(e.ws, 0o755))
	e.d = startTestDaemon(t, bin, filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock"), "", args...)
	return e
}

// session starts `scv mcp ARGS` and connects to it as a client named
// test-agent; updated receives the URIs of resource update notifications.
func (e *mcpEnv) session(updated chan<- string, args ...string) *mcp.ClientSession {
	e.t.Helper()
	return e.sessionIn(nil, updated, args...)
}

// sessionIn is session with env added to the server's environment.
func (e *mcpEnv) sessionIn(env []string, updated chan<- string, args ...string) *mcp.ClientSession {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"--socket", e.d.sock, "mcp"}, args...)...)
	cmd.Env = append(append(os.Environ(), "SCV_PARENT=", "SCV_DELEGATION="), env...)
	if e.stderr != nil {
		cmd.Stderr = e.stderr
	}
	name := e.client
	if name == "" {
		name = "test-agent"
	}
	opts := &mcp.ClientOptions{}
	if updated != nil {
		opts.ResourceUpdatedHandler = func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { s.Close() })
	return s
}

// call calls a tool and decodes its structured result into out (nil: not
// decoded); it returns the result's error text, "" when it succeeded.
func call(t *testing.T, s *mcp.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s: a protocol error", name)
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		require.NotEmpty(t, b.String(), "%s: an error says why", name)
		return b.String()
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, out), "%s: %s", name, b)
	}
	return ""
}

// mustCall is call of a tool that must succeed.
func mustCall(t *testing.T, s *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	msg := call(t, s, name, args, out)
	require.Empty(t, msg, "%s refused", name)
}

// toolNames is the names of the session's tools.
func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// events is the kinds of project's events, in order.
func (e *mcpEnv) events(project string) []string {
	e.t.Helper()
	var kinds []string
	after := uint64(0)
	st := e.d.must(e.t, api.CmdProjectEvents{Project: project, After: &after})
	for _, ev := range st.Project.Events {
		kinds = append(kinds, ev.Kind)
	}
	return kinds
}

// TestMCP: the server says who it is and what it offers at initialize;
// the tools of `scv mcp`: listed with schemas, descriptions and truthful
// annotations; a task's whole life through them, checked in the ledger
// over the socket; progress coalesced; a finished run fenced; questions
// the owner answers, later and while the tool waits; oversized arguments
// refused before the daemon; resources read and a subscription notified.
func TestMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newMCPEnv(t, "--heartbeat-every", "10m", "--stale-after", "1h")
	acme := e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws}).Project.Project.ID
	e.d.must(t, api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	updated := make(chan string, 16)
	s := e.session(updated, "--project", "acme")

	init := s.InitializeResult()
	require.NotNil(t, init)
	assert.Equal(t, "scv", init.ServerInfo.Name)
	assert.Equal(t, "mcp-test", init.ServerInfo.Version, "the binary's version")
	require.NotNil(t, init.Capabilities.Tools, "it offers tools")
	require.NotNil(t, init.Capabilities.Resources, "it offers resources")
	assert.True(t, init.Capabilities.Resources.Subscribe, "to which a client may subscribe")
	assert.Contains(t, init.Instructions, "confined to project acme (ID "+acme+")")

	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	ann := map[string]*mcp.ToolAnnotations{}
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
		"project_status", "project_tasks", "run_finish", "run_heartbeat", "run_progress", "task_add", "task_claim"}, toolNames(t, s))
	for _, name := range []string{"project_list", "project_status", "project_tasks", "project_report", "project_events", "owner_answer_status"} {
		assert.True(t, ann[name].ReadOnlyHint, "%s only reads", name)
	}
	for _, name := range []string{"task_claim", "run_progress", "run_heartbeat", "run_finish", "task_add", "owner_ask"} {
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
	require.Regexp(t, cliULID, claimed.RunID)
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
	report := e.d.must(t, api.CmdProjectReport{Project: "acme"}).Project.Report
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

	// Oversized: refused before the daemon, naming the field and the
	// limit, as docs/mcp.md shows it.
	msg = call(t, s, "task_add", map[string]any{"title": strings.Repeat("t", 300)}, nil)
	assert.Equal(t, "title: 300 characters, more than the 200 allowed [invalid_argument]", msg)
	assert.Contains(t, mcpDoc(t), msg)
	assert.Len(t, e.events("acme"), n, "nothing written")

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
	require.Regexp(t, cliULID, later.ID)
	mustCall(t, s, "owner_answer_status", map[string]any{"id": later.ID}, &status)
	assert.Equal(t, answer{ID: later.ID, State: "pending"}, status)
	e.d.must(t, api.CmdConfirmAnswer{ID: later.ID, Answer: "no"})
	mustCall(t, s, "owner_answer_status", map[string]any{"id": later.ID}, &status)
	assert.Equal(t, answer{ID: later.ID, State: "no"}, status)

	// A question the owner answers in the local chat while the tool waits.
	asked := make(chan answer, 1)
	go func() {
		var a answer
		mustCall(t, s, "owner_ask", map[string]any{"question": "Deploy acme?", "wait_seconds": 20}, &a)
		asked <- a
	}()
	var q api.Question
	require.Eventually(t, func() bool {
		st := e.d.must(t, api.CmdConfirmList{})
		for _, x := range st.Questions {
			if x.State == api.ConfirmPending {
				q = x
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, "Deploy acme?", q.Question)
	assert.Equal(t, "local:owner", q.Chat)
	e.d.must(t, api.CmdConfirmAnswer{ID: q.ID, Answer: "yes"})
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
	rr, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "scv://project/acme/report"})
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, "text/markdown", rr.Contents[0].MIMEType)
	assert.Contains(t, rr.Contents[0].Text, "# Project acme")
	assert.Contains(t, rr.Contents[0].Text, "| build | done | 0/1 |")
	assert.Contains(t, rr.Contents[0].Text, "built and tested")
	rr, err = s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "scv://project/acme/graph"})
	require.NoError(t, err)
	assert.Contains(t, rr.Contents[0].Text, "acme (")
	assert.Contains(t, rr.Contents[0].Text, "build")
	require.NoError(t, s.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "scv://project/acme/report"}))
	e.d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "deploy", DependsOn: []string{}})
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
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newMCPEnv(t)
	for _, p := range []string{"acme", "other"} {
		e.d.must(t, api.CmdProjectCreate{Name: p, Workspace: e.ws})
		for _, task := range []string{"build", "test"} {
			e.d.must(t, api.CmdProjectTaskAdd{Project: p, Title: task, DependsOn: []string{}})
		}
	}
	mine := e.d.must(t, api.CmdProjectRunStart{Project: "acme", Task: "build", Agent: "supervisor"}).Project.RunID
	theirs := e.d.must(t, api.CmdProjectRunStart{Project: "acme", Task: "test", Agent: "supervisor"}).Project.RunID
	eventsBefore := map[string]int{"acme": len(e.events("acme")), "other": len(e.events("other"))}

	s := e.session(nil, "--project", "acme")
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
		ids[p] = e.d.must(t, api.CmdProjectStatus{Project: p}).Project.Project.ID
	}
	byID := e.session(nil, "--project", ids["acme"])
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
		rr, err := byID.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if assert.NoError(t, err, uri) {
			assert.Contains(t, rr.Contents[0].Text, "acme", uri)
		}
	}
	for _, ref := range []string{"other", ids["other"]} {
		msg = call(t, byID, "project_status", map[string]any{"project": ref}, nil)
		assert.Equal(t, `project "`+ref+`" is outside this session, which is confined to project acme [forbidden]`, msg)
		msg = call(t, byID, "task_add", map[string]any{"project": ref, "title": "sneaky"}, nil)
		assert.Contains(t, msg, "[forbidden]")
		_, err := byID.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "scv://project/" + ref + "/report"})
		assert.ErrorContains(t, err, "[forbidden]")
	}

	bound := e.session(nil, "--project", "acme", "--run", mine)
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

	ro := e.session(nil, "--read-only")
	assert.Equal(t, []string{"project_events", "project_list", "project_report", "project_status", "project_tasks"},
		toolNames(t, ro))
	_, err = ro.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_add", Arguments: map[string]any{"project": "acme", "title": "x"}})
	require.Error(t, err, "a read-only session has no task_add")
	mustCall(t, ro, "project_tasks", map[string]any{"project": "other"}, nil)
	assert.Len(t, e.events("acme"), eventsBefore["acme"]+1)
}

// TestMCPInADelegation: a run an agent claims inside a delegation names
// the delegation's chain after the agent.
func TestMCPInADelegation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newMCPEnv(t)
	e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	e.d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}})
	s := e.sessionIn([]string{"SCV_PARENT=01JOUTER,01JINNER", "SCV_DELEGATION=01JINNER"}, nil, "--project", "acme")
	var claimed struct {
		RunID string `json:"run_id"`
		Agent string `json:"agent"`
	}
	mustCall(t, s, "task_claim", map[string]any{"task": "build", "agent": "codex"}, &claimed)
	assert.Equal(t, "codex [01JOUTER,01JINNER]", claimed.Agent)
	runs := e.d.must(t, api.CmdProjectReport{Project: "acme"}).Project.Report.Runs
	require.Len(t, runs, 1)
	assert.Equal(t, "codex [01JOUTER,01JINNER]", runs[0].Agent, "the ledger records the delegation")
}

// TestMCPNoDaemon: with no daemon on the socket, a tool call fails at
// once, naming the socket.
func TestMCPNoDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := shortDir(t)
	e := &mcpEnv{t: t, bin: buildScv(t, dir, "mcp-test"), d: &testDaemon{sock: filepath.Join(dir, "none.sock")}}
	s := e.session(nil)
	began := time.Now()
	msg := call(t, s, "project_list", nil, nil)
	assert.Contains(t, msg, e.d.sock)
	assert.Contains(t, msg, "[unreachable]")
	assert.Less(t, time.Since(began), 10*time.Second)
}

// TestMCPOverHTTP: the daemon serves MCP at /mcp of its web listener,
// behind the UI's token and its Host and Origin checks: a request without
// the token is refused (401), one from a page of another site too (403);
// an MCP client with the token in its Authorization header works.
func TestMCPOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newMCPEnv(t, "--http", "127.0.0.1:0")
	e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	base, token := webAddress(t, e.d.sock)
	endpoint := base + "/mcp"

	post := func(headers map[string]string) int {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, post(nil), "no token")
	assert.Equal(t, http.StatusUnauthorized, post(map[string]string{"Authorization": "Bearer wrong"}), "a wrong token")
	assert.Equal(t, http.StatusForbidden, post(map[string]string{"Authorization": "Bearer " + token, "Origin": "http://evil.example"}), "a page of another site")
	assert.Equal(t, http.StatusMisdirectedRequest, func() int {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{}`))
		req.Host = "evil.example"
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}(), "another Host (DNS rebinding)")

	hc := &http.Client{Transport: bearer{token: token}}
	c := mcp.NewClient(&mcp.Implementation{Name: "http-agent", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer s.Close()
	assert.Contains(t, toolNames(t, s), "task_claim")
	var st struct {
		Project api.ProjectSummary `json:"project"`
	}
	mustCall(t, s, "project_status", map[string]any{"project": "acme"}, &st)
	assert.Equal(t, "acme", st.Project.Name)
}

// bearer adds the UI's token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPDocListsTools: docs/mcp.md's table of tools names every tool
// tools/list gives, each with the description it has there; its table of
// limits gives each argument's.
func TestMCPDocListsTools(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mcp.md")
	require.NoError(t, err)
	c := &client{socket: filepath.Join(t.TempDir(), "none.sock"), now: time.Now}
	t1, t2 := mcp.NewInMemoryTransports()
	ctx := context.Background()
	_, err = newMCPServer(c, mcpScope{}).Connect(ctx, t1, nil)
	require.NoError(t, err)
	s, err := mcp.NewClient(&mcp.Implementation{Name: "doc"}, nil).Connect(ctx, t2, nil)
	require.NoError(t, err)
	defer s.Close()
	res, err := s.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, res.Tools, 12)
	for _, tl := range res.Tools {
		var row string
		for line := range strings.SplitSeq(string(doc), "\n") {
			if strings.HasPrefix(line, "| `"+tl.Name+"` |") {
				row = line
			}
		}
		if assert.NotEmpty(t, row, "docs/mcp.md lists %s", tl.Name) {
			// The doc's text may quote field names: compare without backquotes.
			plain := strings.ReplaceAll(row, "`", "")
			first, _, _ := strings.Cut(tl.Description, ":")
			assert.Contains(t, plain, strings.ReplaceAll(first, "`", ""), "%s: the doc says what tools/list says", tl.Name)
		}
	}
	_, limits, ok := strings.Cut(string(doc), "| argument | limit |\n|---|---|\n")
	require.True(t, ok, "docs/mcp.md has a table of limits")
	limits, _, _ = strings.Cut(limits, "\n\n")
	for field, l := range argLimits {
		var row string
		for line := range strings.SplitSeq(limits, "\n") {
			if args, _, _ := strings.Cut(line, " | "); strings.Contains(args, "`"+field+"`") {
				row = line
			}
		}
		if assert.NotEmpty(t, row, "docs/mcp.md gives the limit of %s", field) {
			_, limit, _ := strings.Cut(row, " | ")
			for _, n := range []int{l.chars, l.items, l.max} {
				if n != 0 {
					assert.Contains(t, limit, thousands(n), "%s: %s", field, row)
				}
			}
			for _, w := range l.oneOf {
				assert.Contains(t, limit, "`"+w+"`", "%s: %s", field, row)
			}
		}
	}
}

// thousands is n as the docs write it: 2,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// mcpDoc is docs/mcp.md.
func mcpDoc(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/mcp.md")
	require.NoError(t, err)
	return string(doc)
}

// TestMCPArguments: arguments the input schema refuses come back as a
// tool error that names the argument and the limit or the type it
// wants, with reason invalid_argument, never repeating the value; the
// schemas tools/list gives carry the limits; nothing reaches the ledger.
func TestMCPArguments(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newMCPEnv(t)
	e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	build := e.d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}}).Project.TaskID
	s := e.session(nil, "--project", "acme")
	before := len(e.events("acme"))

	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	schemas := map[string]map[string]any{}
	for _, tl := range res.Tools {
		schemas[tl.Name] = tl.InputSchema.(map[string]any)["properties"].(map[string]any)
	}
	prop := func(tool, name string) map[string]any { return schemas[tool][name].(map[string]any) }
	deps := prop("task_add", "depends_on")
	assert.EqualValues(t, mcpMaxDeps, deps["maxItems"])
	assert.EqualValues(t, reducer.MaxNameLen, deps["items"].(map[string]any)["maxLength"])
	assert.EqualValues(t, reducer.MaxNameLen, prop("task_add", "title")["maxLength"])
	assert.EqualValues(t, reducer.MaxNameLen, prop("project_status", "project")["maxLength"])
	assert.EqualValues(t, mcpMaxText, prop("run_finish", "reason")["maxLength"])
	assert.EqualValues(t, mcpMaxEvents, prop("project_events", "limit")["maximum"])
	assert.EqualValues(t, mcpMaxWait, prop("owner_ask", "wait_seconds")["maximum"])
	assert.Equal(t, []any{"succeeded", "failed", "cancelled"}, prop("run_finish", "status")["enum"])

	long := strings.Repeat("y", 100_000)
	many := make([]string, mcpMaxDeps+1)
	for i := range many {
		many[i] = build
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"task_add", map[string]any{"title": "t", "depends_on": []string{build, long}}, "depends_on[1]: 100000 characters, more than the 200 allowed"},
		{"task_add", map[string]any{"title": "t", "depends_on": many}, "depends_on: 101 entries, more than the 100 allowed"},
		{"task_add", map[string]any{"title": "t", "depends_on": []any{build, 7}}, "depends_on[1]: want a string"},
		{"task_add", map[string]any{"title": long}, "title: 100000 characters, more than the 200 allowed"},
		{"task_add", map[string]any{"depends_on": []string{build}}, "title: required"},
		{"task_add", map[string]any{"title": "t", "max_retries": -1}, "max_retries: want 0 to 4294967295"},
		{"task_add", map[string]any{"title": "t", "max_retries": 1.5}, "max_retries: want a whole number"},
		{"task_add", map[string]any{"title": "t", long: 1}, strings.Repeat("y", 64) + "…: not an argument of this tool, which takes depends_on, max_retries, project, title"},
		{"task_claim", map[string]any{}, "task: required"},
		{"task_claim", map[string]any{"task": "build", "agent": long}, "agent: 100000 characters, more than the 200 allowed"},
		{"project_status", map[string]any{"project": long}, "project: 100000 characters, more than the 200 allowed"},
		{"project_status", map[string]any{"project": 1}, "project: want a string"},
		{"project_events", map[string]any{"limit": 1001}, "limit: want 0 to 1000"},
		{"project_events", map[string]any{"limit": "ten"}, "limit: want a whole number"},
		{"project_list", map[string]any{"all": "yes"}, "all: want true or false"},
		{"run_progress", map[string]any{"run": long, "progress": "x"}, "run: 100000 characters, more than the 64 allowed"},
		{"run_finish", map[string]any{"run": build, "status": "failed", "reason": long}, "reason: 100000 characters, more than the 2000 allowed"},
		{"run_finish", map[string]any{"run": build, "status": long}, "status: want one of succeeded, failed, cancelled"},
		{"owner_ask", map[string]any{"question": "ok?", "wait_seconds": 601}, "wait_seconds: want 0 to 600"},
		{"owner_ask", map[string]any{"question": long}, "question: 100000 characters, more than the 2000 allowed"},
		{"owner_answer_status", map[string]any{}, "id: required"},
	} {
		assert.Equal(t, c.want+" [invalid_argument]", call(t, s, c.tool, c.args, nil), "%s %v", c.tool, c.args)
	}
	for _, msg := range []string{"depends_on: 101 entries, more than the 100 allowed [invalid_argument]", "title: required [invalid_argument]"} {
		assert.Contains(t, mcpDoc(t), msg, "docs/mcp.md shows it as it is")
	}
	assert.Len(t, e.events("acme"), before, "nothing written")
	assert.Empty(t, e.d.must(t, api.CmdConfirmList{}).Questions, "nobody asked")
}

// TestMCPOversizedMessage: a message on standard input over 1 MiB is
// answered with a JSON-RPC error (too_large) that says the limit, said on
// standard error too, and the session lives on.
func TestMCPOversizedMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newMCPEnv(t)
	e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer stderr.Close()
	e.stderr = stderr
	s := e.session(nil, "--project", "acme")
	before := len(e.events("acme"))

	_, err = s.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_add",
		Arguments: map[string]any{"title": strings.Repeat("t", mcpMaxMessage)}})
	require.Error(t, err)
	assert.Regexp(t, `message too large: \d+ bytes on one line of standard input, more than the 1048576 allowed \[too_large\]`, err.Error())
	logged, err := os.ReadFile(stderr.Name())
	require.NoError(t, err)
	assert.Regexp(t, `scv mcp: message too large: \d+ bytes on one line of standard input, more than the 1048576 allowed: answered with an error`, string(logged))
	assert.Regexp(t, `message too large: \d+ bytes on one line\s+of standard input, more than the 1048576 allowed \[too_large\]`, mcpDoc(t), "docs/mcp.md shows it as it is")

	var st struct {
		Project api.ProjectSummary `json:"project"`
	}
	mustCall(t, s, "project_status", nil, &st)
	assert.Equal(t, "acme", st.Project.Name, "the session lives on")
	mustCall(t, s, "task_add", map[string]any{"title": strings.Repeat("t", reducer.MaxNameLen)}, nil)
	assert.Len(t, e.events("acme"), before+1, "only the task that fits")
}

// TestMCPStaleRun: a run gone stale is fenced as a finished one is: its
// progress, heartbeat and finish (with a reason) are refused with the
// daemon's run_not_running, and nothing is written.
func TestMCPStaleRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and waits for the stale window")
	}
	e := newMCPEnv(t, "--stale-after", "1s")
	e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	task := e.d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 1}).Project.TaskID
	s := e.session(nil, "--project", "acme")
	var claimed struct {
		RunID string `json:"run_id"`
	}
	mustCall(t, s, "task_claim", map[string]any{"task": "build"}, &claimed)
	require.Eventually(t, func() bool {
		return mcpTask(t, e, "acme", task).Status == reducer.TaskStale
	}, 30*time.Second, 20*time.Millisecond, "the silent run goes stale")
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
	assert.Regexp(t, `run is not running: run \w+ is stale \[run_not_running\]`, mcpDoc(t), "docs/mcp.md shows it as it is")
	assert.Len(t, e.events("acme"), n, "nothing written, the finish's reason neither")
	report := e.d.must(t, api.CmdProjectReport{Project: "acme"}).Project.Report
	require.Len(t, report.Runs, 1)
	assert.Equal(t, reducer.RunStale, report.Runs[0].Status)
	assert.Nil(t, report.Runs[0].Progress)
}

// mcpTask is task id of project, over the socket.
func mcpTask(t *testing.T, e *mcpEnv, project, id string) api.ProjectTask {
	t.Helper()
	for _, tk := range e.d.must(t, api.CmdProjectTasks{Project: project}).Project.Tasks {
		if tk.ID == id {
			return tk
		}
	}
	t.Fatalf("task %s not found", id)
	return api.ProjectTask{}
}

// TestMCPTasks: task_add with dependencies, by ID and by title; the
// daemon's refusals of task_add (an unknown or repeated dependency, an
// archived project) with nothing written; run_finish failed (a retry
// spent) and cancelled (none), as the socket sees the task; and
// project_report with the evidence notes the daemon's report has.
func TestMCPTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newMCPEnv(t, "--heartbeat-every", "10m", "--stale-after", "1h")
	e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	s := e.session(nil, "--project", "acme")
	type added struct {
		TaskID string `json:"task_id"`
	}
	var build, test, deploy added
	mustCall(t, s, "task_add", map[string]any{"title": "build", "max_retries": 1}, &build)
	mustCall(t, s, "task_add", map[string]any{"title": "test", "depends_on": []string{build.TaskID}}, &test)
	mustCall(t, s, "task_add", map[string]any{"title": "deploy", "depends_on": []string{build.TaskID, "test"}}, &deploy)
	assert.Equal(t, []string{build.TaskID}, mcpTask(t, e, "acme", test.TaskID).DependsOn)
	assert.Equal(t, []string{build.TaskID, test.TaskID}, mcpTask(t, e, "acme", deploy.TaskID).DependsOn, "by ID and by title")
	assert.Equal(t, reducer.TaskPending, mcpTask(t, e, "acme", test.TaskID).Status)

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
		tk := mcpTask(t, e, "acme", build.TaskID)
		assert.Equal(t, c.retries, tk.Retries, "after run %d, %s", i+1, c.status)
		assert.Equal(t, c.task, tk.Status, "after run %d, %s", i+1, c.status)
	}
	var report struct {
		Report api.ProjectReport `json:"report"`
	}
	mustCall(t, s, "project_report", nil, &report)
	want := e.d.must(t, api.CmdProjectReport{Project: "acme"}).Project.Report
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
	e.d.must(t, api.CmdProjectArchive{Project: "acme"})
	n = len(e.events("acme"))
	msg = call(t, s, "task_add", map[string]any{"title": "late"}, nil)
	assert.Equal(t, "invalid transition: project acme is archived: it takes no more writes [invalid_transition]", msg)
	assert.Len(t, e.events("acme"), n)
}

// TestMCPDocSession runs docs/mcp.md's worked session: each call as the
// doc gives it, each error as it says, each field it shows in a result
// (but times) and each piece of the report it quotes; IDs are the
// session's own.
func TestMCPDocSession(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	doc := mcpDoc(t)
	_, session, ok := strings.Cut(doc, "\n## A session\n")
	require.True(t, ok)
	_, session, _ = strings.Cut(session, "```\n")
	session, _, _ = strings.Cut(session, "```")
	lines := strings.Split(strings.TrimSpace(session), "\n")

	e := newMCPEnv(t, "--heartbeat-every", "10m", "--stale-after", "1h")
	e.client = "claude-code"
	e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	build := e.d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 1}).Project.TaskID
	e.d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "test", DependsOn: []string{build}})
	s := e.session(nil, "--project", "acme")

	// The doc's IDs stand for the session's: the task's in the report it
	// quotes, the run's in task_claim's result.
	ids := map[string]string{}
	ulid := regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`)
	if m := regexp.MustCompile(`\| ([0-9A-HJKMNP-TV-Z]{26}) \| build \|`).FindStringSubmatch(session); assert.NotNil(t, m) {
		ids[m[1]] = build
	}
	docRun := regexp.MustCompile(`"run_id":"([0-9A-HJKMNP-TV-Z]{26})"`).FindStringSubmatch(session)
	require.NotNil(t, docRun, "the doc claims a run")
	ours := func(s string) string {
		return ulid.ReplaceAllStringFunc(s, func(id string) string {
			if v, ok := ids[id]; ok {
				return v
			}
			return id
		})
	}
	field := regexp.MustCompile(`"(\w+)":("[^"]*"|-?\d+)`)
	var got any         // the last call's structured result
	var resource string // the last resource read
	var errText string
	calls := 0
	for _, line := range lines {
		line = ours(line)
		switch {
		case strings.HasPrefix(line, "tools/call "):
			name, args, _ := strings.Cut(strings.TrimPrefix(line, "tools/call "), " ")
			var in map[string]any
			require.NoError(t, json.Unmarshal([]byte(args), &in), line)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: in})
			cancel()
			require.NoError(t, err, line)
			got, errText = res.StructuredContent, ""
			if res.IsError {
				errText = res.Content[0].(*mcp.TextContent).Text
			}
			calls++
		case strings.HasPrefix(line, "resources/read "):
			rr, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: strings.TrimPrefix(line, "resources/read ")})
			require.NoError(t, err, line)
			resource = rr.Contents[0].Text
			calls++
		case strings.HasPrefix(line, "  → isError: "):
			assert.Equal(t, strings.TrimPrefix(line, "  → isError: "), errText)
		case strings.HasPrefix(line, "  → {"):
			require.Empty(t, errText, line)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			if _, ok := ids[docRun[1]]; !ok {
				var claimed struct {
					RunID string `json:"run_id"`
				}
				require.NoError(t, json.Unmarshal(b, &claimed))
				require.NotEmpty(t, claimed.RunID)
				ids[docRun[1]] = claimed.RunID
				line = ours(line)
			}
			for _, f := range field.FindAllStringSubmatch(line, -1) {
				if !strings.HasSuffix(f[1], "_unix_seconds") {
					assert.Contains(t, string(b), f[0], "%s: in %s", line, b)
				}
			}
		case strings.HasPrefix(line, "  → "):
			for piece := range strings.SplitSeq(strings.TrimPrefix(line, "  → "), "…") {
				assert.Contains(t, resource, strings.TrimSpace(piece), line)
			}
		default:
			t.Fatalf("a line of the doc's session this test does not know: %q", line)
		}
	}
	assert.Equal(t, 7, calls, "the session's calls")
}
