package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/confirm"
	"scv/control/metrics"
	"scv/control/web"
	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// env is a web UI on 127.0.0.1:0 over a real ledger (a SQLite file in a
// temporary folder) and a real question manager.
type env struct {
	t         testing.TB
	clock     *clock
	dir       string
	db        *sqlite.DB
	l         *ledger.Ledger
	q         *confirm.Manager
	actions   *fakeActions
	agents    *fakeAgents
	mail      *fakeMail
	rec       *metrics.Recorder
	srv       *web.Server
	base      string // http://127.0.0.1:PORT
	token     string
	tokenFile string
	urlFile   string
}

// clock is the system clock moved forward by what the test advanced it,
// so that a project's runs can take minutes in a test that takes
// milliseconds.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// ledgerOf is the UI's view of an open ledger, as the daemon wires it.
type ledgerOf struct{ *ledger.Ledger }

// chats is one connected chat that takes every question.
type chats struct{}

func (chats) Connected(string) bool                                 { return true }
func (chats) ConnectedChats() []string                              { return []string{"local:owner"} }
func (chats) Deliver(context.Context, string, string, string) error { return nil }

// fakeActions records the retries asked for, as the daemon's Handler
// would take them: project_task_retry, from the UI.
// It answers project_work_status with the work the test sets, as the
// daemon does: not_found without one.
type fakeActions struct {
	mu      sync.Mutex
	retries []string // project/task
	work    map[string]api.WorkInfo
}

func (a *fakeActions) Handle(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	if c, ok := cmd.(api.CmdProjectWorkStatus); ok {
		a.mu.Lock()
		defer a.mu.Unlock()
		w, ok := a.work[c.Project]
		if !ok {
			return nil, api.Errorf(reducer.ErrNotFound, "project %s has no work since the daemon started", c.Project)
		}
		return &api.DaemonStatus{Work: &w}, nil
	}
	c, ok := cmd.(api.CmdProjectTaskRetry)
	if !ok {
		return nil, fmt.Errorf("the UI sent %s", cmd.Action())
	}
	if who := api.Who(ctx); who != web.AnsweredBy {
		return nil, fmt.Errorf("the UI's retry is from %q", who)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.retries = append(a.retries, c.Project+"/"+c.Task)
	return &api.DaemonStatus{}, nil
}

// setWork sets project's work (its ID's), or forgets it (nil).
func (a *fakeActions) setWork(project string, w *api.WorkInfo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.work == nil {
		a.work = map[string]api.WorkInfo{}
	}
	if w == nil {
		delete(a.work, project)
		return
	}
	a.work[project] = *w
}

func (a *fakeActions) asked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.retries...)
}

// fakeAgents is a live agents' listing the test sets.
type fakeAgents struct {
	mu   sync.Mutex
	list []api.AgentInfo
}

func (a *fakeAgents) ListAgents() []api.AgentInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]api.AgentInfo{}, a.list...)
}

// set replaces the listing.
func (a *fakeAgents) set(list ...api.AgentInfo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append([]api.AgentInfo(nil), list...)
}

// fakeMail is an email accounts' listing the test sets.
type fakeMail struct {
	mu   sync.Mutex
	list []api.ComponentHealth
}

func (m *fakeMail) MailAccounts() []api.ComponentHealth {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]api.ComponentHealth{}, m.list...)
}

// set replaces the listing.
func (m *fakeMail) set(list ...api.ComponentHealth) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.list = append([]api.ComponentHealth(nil), list...)
}

func ptr[T any](v T) *T { return &v }

type envOption func(*web.Server)

func withoutActions(s *web.Server) { s.Handler = nil }

func withoutAgents(s *web.Server) { s.Agents = nil }

func withoutMail(s *web.Server) { s.Mail = nil }

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), sqlite.Options{})
	require.NoError(t, err)
	clk := &clock{}
	l, err := ledger.Open(ctx, db, ledger.Options{Clock: clk.now})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	q := &confirm.Manager{Log: db, Chats: chats{}, Notify: "local:owner"}
	require.NoError(t, q.Load(ctx))
	e := &env{t: t, clock: clk, dir: dir, db: db, l: l, q: q, actions: &fakeActions{}, agents: &fakeAgents{}, mail: &fakeMail{}}
	e.rec = metrics.New(metrics.Sources{CacheStats: l.CacheStats})
	e.tokenFile, e.urlFile = web.Files(filepath.Join(dir, "daemon.sock"))
	e.srv = &web.Server{
		Addr: "127.0.0.1:0", TokenFile: e.tokenFile, URLFile: e.urlFile,
		Ledger: ledgerOf{l}, Questions: q, Handler: e.actions, Agents: e.agents, Mail: e.mail, Metrics: e.rec,
		StaleAfter: 5 * time.Minute, DB: filepath.Join(dir, "ledger.db"), Version: "test", Clock: clk.now,
	}
	for _, o := range opts {
		o(e.srv)
	}
	require.NoError(t, e.srv.Start(ctx))
	t.Cleanup(e.srv.Stop)
	e.base = strings.TrimSuffix(e.srv.URL(), "/")
	tok, err := os.ReadFile(e.tokenFile)
	require.NoError(t, err)
	e.token = strings.TrimSpace(string(tok))
	return e
}

// exec runs a command against the ledger.
func (e *env) exec(c reducer.Command) ledger.Result {
	e.t.Helper()
	res, err := e.l.Execute(context.Background(), c)
	require.NoError(e.t, err, "%T", c)
	return res
}

func newID() string { return ulid.Make().String() }

// project creates a project named name with a diamond of tasks (a → b,
// a → c, b+c → d, b titled title) and returns its ID and the task IDs.
// a has run and succeeded, b failed for good (no retries), each in a few
// minutes of the test's clock, with a progress report and heartbeats; c
// is ready.
func (e *env) project(name, title string) (string, map[string]string) {
	e.t.Helper()
	id := newID()
	e.exec(reducer.CreateProject{ProjectID: id, Name: name, Workspace: "/work/" + name})
	tasks := map[string]string{}
	add := func(key, title string, deps ...string) {
		tasks[key] = newID()
		var ids []string
		for _, d := range deps {
			ids = append(ids, tasks[d])
		}
		e.exec(reducer.AddTask{Project: id, TaskID: tasks[key], Title: title, DependsOn: ids})
	}
	add("a", "fetch sources")
	add("b", title, "a")
	add("c", "lint", "a")
	add("d", "package", "b", "c")
	run := func(task string, st reducer.RunStatus) {
		r := newID()
		e.exec(reducer.StartRun{Project: id, TaskID: tasks[task], RunID: r, Agent: "codex"})
		e.clock.advance(time.Minute)
		e.exec(reducer.ProgressRun{Project: id, RunID: r, Progress: "working"})
		e.clock.advance(time.Minute)
		e.exec(reducer.RecordHeartbeat{Project: id, RunID: r})
		e.clock.advance(2 * time.Minute)
		e.exec(reducer.FinishRun{Project: id, RunID: r, Status: st})
		e.clock.advance(30 * time.Second)
	}
	run("a", reducer.RunSucceeded)
	run("b", reducer.RunFailed)
	return id, tasks
}

// ask asks a question and returns its ID.
func (e *env) ask(text string) string {
	e.t.Helper()
	info, err := e.q.Ask(context.Background(), api.CmdConfirmAsk{Question: text})
	require.NoError(e.t, err)
	require.Equal(e.t, api.ConfirmPending, info.State)
	return info.ID
}

// question is question id as the manager has it.
func (e *env) question(id string) api.Question {
	e.t.Helper()
	all, err := e.q.List(context.Background(), api.CmdConfirmList{})
	require.NoError(e.t, err)
	for _, q := range all {
		if q.ID == id {
			return q
		}
	}
	e.t.Fatalf("no question %s", id)
	return api.Question{}
}

// client is an HTTP client that follows no redirect.
var client = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// do sends a request; with auth set it carries the bearer token. It
// returns the response and its body.
func (e *env) do(method, path string, body io.Reader, header http.Header, auth bool) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, body)
	require.NoError(e.t, err)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := client.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp, string(b)
}

func (e *env) get(path string) (*http.Response, string) {
	return e.do(http.MethodGet, path, nil, nil, true)
}
