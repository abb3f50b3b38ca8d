package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/web"
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
	opts := &mcp.ClientOptions{}
	if updated != nil {
		opts.ResourceUpdatedHandler = func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
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

// TestMCP: the tools of `scv mcp`: listed with schemas, descriptions and
// truthful annotations; a task's whole life through them, checked in the
// ledger over the socket; progress coalesced; a finished run fenced; a
// question the owner answers; oversized arguments refused before the
// daemon; resources read and a subscription notified.
func TestMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	e := newMCPEnv(t, "--heartbeat-every", "10m", "--stale-after", "1h")
	e.d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	e.d.must(t, api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	updated := make(chan string, 16)
	s := e.session(updated, "--project", "acme")

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
	assert.Contains(t, msg, "[invalid_argument]")

	// Oversized: refused before the daemon, naming the field.
	msg = call(t, s, "task_add", map[string]any{"title": strings.Repeat("t", 300)}, nil)
	assert.Contains(t, msg, "title")
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

	// A question the owner answers in the local chat.
	type answer struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
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
	var status answer
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

// TestMCPScope: a session confined to a project, or bound to a run, is
// refused the rest (forbidden), and nothing is written; a read-only
// session offers only the reading tools.
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
	_, err := ro.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_add", Arguments: map[string]any{"project": "acme", "title": "x"}})
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
	tokenFile, urlFile := web.Files(e.d.sock)
	var token, base string
	require.Eventually(t, func() bool {
		tb, err1 := os.ReadFile(tokenFile)
		ub, err2 := os.ReadFile(urlFile)
		token, base = strings.TrimSpace(string(tb)), strings.TrimSpace(string(ub))
		return err1 == nil && err2 == nil && token != "" && base != ""
	}, 10*time.Second, 20*time.Millisecond)
	u, err := url.Parse(base)
	require.NoError(t, err)
	endpoint := "http://" + u.Host + "/mcp"

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
// tools/list gives, each with the description it has there.
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
}
