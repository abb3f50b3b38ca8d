package daemon

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/rpc"
	"scv/control/web"
	"scv/reducer"
)

// TestHTTPRefusesNonLoopback: a daemon configured with a web UI address
// that is not loopback is refused by Check and by Open, before Open
// touches anything: no socket, no lock, no database.
func TestHTTPRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":8080", "[::]:0", "192.168.1.10:80", "example.com:80"} {
		dir := shortDir(t)
		cfg := Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), HTTP: addr}
		assert.ErrorContains(t, cfg.Check(), "loopback", addr)
		d := New(cfg)
		err := d.Open(context.Background())
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "loopback", addr)
		entries, _ := os.ReadDir(dir)
		assert.Empty(t, entries, "%s: nothing was created", addr)
	}
	cfg := Config{DB: "/x/l.db", Socket: "/x/d.sock", HTTP: "127.0.0.1:0"}
	assert.NoError(t, cfg.Check())
}

// TestHTTPServes: with Config.HTTP the daemon serves the UI: the token
// and URL files are beside the socket, 0600; a project created on the
// socket is on the projects page for the token and only for it; /metrics
// parses and its head sequence is the ledger's; Close removes the files.
func TestHTTPServes(t *testing.T) {
	dir := shortDir(t)
	d := New(Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), HTTP: "127.0.0.1:0", Version: version})
	require.NoError(t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	closed := false
	t.Cleanup(func() {
		if !closed {
			d.Close()
			<-served
		}
	})
	tokenFile, urlFile := web.Files(d.cfg.Socket)
	for _, f := range []string{tokenFile, urlFile} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	b, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	token := strings.TrimSpace(string(b))
	u, err := os.ReadFile(urlFile)
	require.NoError(t, err)
	assert.Equal(t, d.Web().TokenURL()+"\n", string(u))
	assert.Equal(t, "scv --socket "+d.cfg.Socket+" ui", d.Web().Open, "the command the log names")

	st := inCall(t, d, api.CmdProjectCreate{Name: "via-socket", Workspace: dir})
	require.NotNil(t, st.Project)
	get := func(path string, auth bool) (int, string) {
		req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(d.Web().URL(), "/")+path, nil)
		require.NoError(t, err)
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("/", false)
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.NotContains(t, body, "via-socket")
	code, body = get("/", true)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "via-socket")

	// What the runs spent (docs/usage.md).
	inCall(t, d, api.CmdProjectTaskAdd{Project: "via-socket", Title: "build", DependsOn: []string{}})
	run := inCall(t, d, api.CmdProjectRunStart{Project: "via-socket", Task: "build", Agent: "a"}).Project.RunID
	inCall(t, d, api.CmdProjectRunFinish{Project: "via-socket", Run: run, Status: reducer.RunSucceeded,
		Usage: &reducer.Usage{Tokens: reducer.Tokens{Input: 1200, Output: 34}, Cost: &reducer.Cost{Amount: "0.25", Currency: "EUR"}}})

	code, body = get("/metrics", true)
	require.Equal(t, http.StatusOK, code)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	labelled := func(family string, labels map[string]string) float64 {
		t.Helper()
		for _, m := range fams[family].GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if assert.ObjectsAreEqual(labels, got) {
				return m.GetCounter().GetValue()
			}
		}
		t.Errorf("no %s%v", family, labels)
		return 0
	}
	assert.Equal(t, 1200.0, labelled("scv_tokens_total", map[string]string{"project": "via-socket", "kind": "input"}))
	assert.Equal(t, 34.0, labelled("scv_tokens_total", map[string]string{"project": "via-socket", "kind": "output"}))
	assert.Equal(t, 0.0, labelled("scv_tokens_total", map[string]string{"project": "via-socket", "kind": "thought"}))
	assert.Equal(t, 0.25, labelled("scv_cost_total", map[string]string{"project": "via-socket", "currency": "EUR"}))
	assert.Len(t, fams["scv_cost_total"].GetMetric(), 1, "one currency")
	p, err := d.Ledger().Project(context.Background(), "via-socket")
	require.NoError(t, err)
	head := fams["scv_ledger_head_sequence"].GetMetric()
	require.Len(t, head, 1)
	assert.Equal(t, strconv.FormatUint(p.LastSequence, 10), strconv.FormatFloat(head[0].GetGauge().GetValue(), 'f', -1, 64))
	running := fams["scv_runs_running"].GetMetric()
	require.Len(t, running, 1)
	assert.Zero(t, running[0].GetGauge().GetValue())

	require.NoError(t, d.Close())
	require.NoError(t, <-served)
	closed = true
	for _, f := range []string{tokenFile, urlFile} {
		_, err := os.Stat(f)
		assert.ErrorIs(t, err, os.ErrNotExist, f)
	}
}

// TestMetricsCount: what the daemon does is what /metrics counts, each
// hook once: requests by action and by refusal, connections, events by
// kind, write batches, a coalesced heartbeat, a run marked stale, a
// compaction.
func TestMetricsCount(t *testing.T) {
	dir := shortDir(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	d := New(Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), HTTP: "127.0.0.1:0",
		Version: version, Clock: clock, StaleAfter: time.Minute, HeartbeatEvery: 30 * time.Second})
	require.NoError(t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	defer func() { require.NoError(t, d.Close()); require.NoError(t, <-served) }()

	ctx := context.Background()
	c, err := rpc.Dial(ctx, d.cfg.Socket)
	require.NoError(t, err)
	defer c.Close()
	call := func(cmd api.Command) *api.DaemonStatus {
		st, err := c.Call(ctx, cmd)
		require.NoError(t, err, cmd.Action())
		return st
	}
	call(api.CmdProjectCreate{Name: "m", Workspace: dir})
	task := call(api.CmdProjectTaskAdd{Project: "m", Title: "t", DependsOn: []string{}}).Project.TaskID
	run := call(api.CmdProjectRunStart{Project: "m", Task: task, Agent: "a"}).Project.RunID
	call(api.CmdProjectHeartbeat{Project: "m", Run: &run}) // journaled
	call(api.CmdProjectHeartbeat{Project: "m", Run: &run}) // coalesced: inside 30 s
	_, err = c.Call(ctx, api.CmdProjectStatus{Project: "nope"})
	require.Error(t, err)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	d.Sweep(ctx)
	zero := uint64(0)
	call(api.CmdLedgerCompact{Project: "m", Retain: &zero})

	fams := scrape(t, d)
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		fam, ok := fams[name]
		require.True(t, ok, "metric %s", name)
	next:
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
		t.Fatalf("metric %s has no series %v", name, labels)
		return 0
	}
	for kind, n := range map[string]float64{"project_created": 1, "task_added": 1, "run_started": 1, "heartbeat": 1, "run_stale": 1} {
		assert.Equal(t, n, value("scv_ledger_events_appended_total", map[string]string{"kind": kind}), kind)
	}
	for action, n := range map[string]float64{"project_create": 1, "project_task_add": 1, "project_run_start": 1,
		"project_heartbeat": 2, "project_status": 1, "ledger_compact": 1} {
		assert.Equal(t, n, value("scv_control_requests_total", map[string]string{"action": action}), action)
	}
	assert.Equal(t, 1.0, value("scv_control_request_errors_total", map[string]string{"action": "project_status", "reason": "not_found"}))
	assert.Equal(t, 1.0, value("scv_control_connections_opened_total", nil))
	assert.Equal(t, 1.0, value("scv_control_connections", nil), "the test's connection is open")
	assert.Equal(t, 1.0, value("scv_heartbeats_coalesced_total", nil))
	assert.Equal(t, 1.0, value("scv_runs_marked_stale_total", nil))
	assert.Equal(t, 1.0, value("scv_ledger_compactions_total", nil))
	batches := fams["scv_ledger_append_batch_commands"].GetMetric()[0].GetHistogram()
	assert.Equal(t, uint64(6), batches.GetSampleCount(), "create, add, start, heartbeat, heartbeat, stale mark: one batch each")
	assert.Equal(t, 6.0, batches.GetSampleSum())
}

// scrape reads the daemon's /metrics with its token.
func scrape(t *testing.T, d *Daemon) map[string]*dto.MetricFamily {
	t.Helper()
	tokenFile, _ := web.Files(d.cfg.Socket)
	b, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(d.Web().URL(), "/")+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// TestWebRetryGoesThroughTheService: the web UI's retry is a request like
// any other: the daemon's Service decides it, the event names the UI as
// who retried, and /metrics counts it with the socket's requests.
func TestWebRetryGoesThroughTheService(t *testing.T) {
	dir := shortDir(t)
	d := New(Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), HTTP: "127.0.0.1:0", Version: version})
	require.NoError(t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	defer func() { require.NoError(t, d.Close()); require.NoError(t, <-served) }()

	pid := inCall(t, d, api.CmdProjectCreate{Name: "r", Workspace: dir}).Project.Project.ID
	task := inCall(t, d, api.CmdProjectTaskAdd{Project: "r", Title: "t", DependsOn: []string{}, MaxRetries: 0}).Project.TaskID
	run := inCall(t, d, api.CmdProjectRunStart{Project: "r", Task: task, Agent: "a"}).Project.RunID
	inCall(t, d, api.CmdProjectRunFinish{Project: "r", Run: run, Status: "failed"})

	tokenFile, _ := web.Files(d.cfg.Socket)
	token, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	base := strings.TrimSuffix(d.Web().URL(), "/")
	req, err := http.NewRequest(http.MethodPost, base+"/p/"+pid+"/tasks/"+task+"/retry", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Origin", base)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	p, err := d.Ledger().Project(context.Background(), "r")
	require.NoError(t, err)
	tk, ok := p.Task(task)
	require.True(t, ok)
	assert.Equal(t, "ready", string(tk.Status), "the task was retried")
	evs := inCall(t, d, api.CmdProjectEvents{Project: "r"}).Project.Events
	last := evs[len(evs)-1]
	assert.Equal(t, "task_retried", last.Kind)
	assert.Contains(t, string(last.Data), `"by":"`+web.AnsweredBy+`"`, "the event names the UI")

	fams := scrape(t, d)
	found := false
	for _, m := range fams["scv_control_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "action" && l.GetValue() == "project_task_retry" {
				found = true
				assert.Equal(t, 1.0, m.GetCounter().GetValue())
			}
		}
	}
	assert.True(t, found, "the UI's retry is counted as a request")
}

// TestMCPThroughTheService: /mcp of the web listener is behind the UI's
// guard (no token or a wrong one: 401; another site's page: 403; another
// Host: 421), and an MCP client with the token reaches the daemon's own
// Service in process: its task_add is written and counted with the
// socket's requests, and no connection is opened on the socket.
func TestMCPThroughTheService(t *testing.T) {
	dir := shortDir(t)
	d := New(Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), HTTP: "127.0.0.1:0", Version: version})
	require.NoError(t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	defer func() { require.NoError(t, d.Close()); require.NoError(t, <-served) }()
	inCall(t, d, api.CmdProjectCreate{Name: "acme", Workspace: dir})

	tokenFile, _ := web.Files(d.cfg.Socket)
	b, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	token := strings.TrimSpace(string(b))
	endpoint := strings.TrimSuffix(d.Web().URL(), "/") + "/mcp"
	post := func(host string, headers map[string]string) int {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
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
	assert.Equal(t, http.StatusUnauthorized, post("", nil), "no token")
	assert.Equal(t, http.StatusUnauthorized, post("", map[string]string{"Authorization": "Bearer wrong"}), "a wrong token")
	assert.Equal(t, http.StatusForbidden, post("", map[string]string{"Authorization": "Bearer " + token, "Origin": "http://evil.example"}), "a page of another site")
	assert.Equal(t, http.StatusMisdirectedRequest, post("evil.example", map[string]string{"Authorization": "Bearer " + token}), "another Host (DNS rebinding)")

	// counter is the value of a counter of the daemon's metrics, of the
	// series whose label is value (label "": its only series).
	counter := func(name, label, value string) float64 {
		for _, m := range scrape(t, d)[name].GetMetric() {
			if label == "" {
				return m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	conns := counter("scv_control_connections_opened_total", "", "")
	require.Equal(t, 1.0, conns, "the test's own connection")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: bearer{token: token}}
	s, err := sdk.NewClient(&sdk.Implementation{Name: "http-agent", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, version, s.InitializeResult().ServerInfo.Version, "the daemon's")
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "task_add", Arguments: map[string]any{"project": "acme", "title": "build"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)

	tasks := inCall(t, d, api.CmdProjectTasks{Project: "acme"}).Project.Tasks
	require.Len(t, tasks, 1)
	assert.Equal(t, "build", tasks[0].Title)
	assert.Equal(t, 1.0, counter("scv_control_requests_total", "action", "project_task_add"), "counted by the Service")
	assert.Equal(t, conns+1, counter("scv_control_connections_opened_total", "", ""), "only inCall's connection since: none of /mcp's")
}

// bearer adds the UI's token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
