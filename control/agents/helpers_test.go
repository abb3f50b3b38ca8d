package agents_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/agents"
	"scv/control/agents/acpagenttest"
	"scv/control/api"
	"scv/control/delegations"
	"scv/control/proc"
	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// The tests drive a real ACP agent process, cmd/internal/acpagent, built
// once, against a Manager on a real ledger file.

// acpagent is the path of the test agent, built on first use.
func acpagent(t *testing.T) string {
	t.Helper()
	return acpagenttest.Binary(t)
}

// env is a Manager on a fresh ledger, with a project "acme" whose
// workspace is ws and whose tasks are named by title in tasks.
type env struct {
	t     *testing.T
	ctx   context.Context
	path  string
	db    *sqlite.DB
	l     *ledger.Ledger
	m     *agents.Manager
	dels  agents.Delegations
	ws    string
	state string // the test agent's --state
	tasks map[string]string
	asked *questions
	logs  *logBuffer // the Managers' log
}

func newEnv(t *testing.T, titles ...string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, path: filepath.Join(t.TempDir(), "ledger.db"), ws: t.TempDir(), state: t.TempDir(),
		tasks: map[string]string{}, asked: &questions{}, logs: &logBuffer{}}
	e.open()
	res, err := e.l.Execute(ctx, reducer.CreateProject{ProjectID: "01JPROJECT0000000000000000", Name: "acme", Workspace: e.ws})
	require.NoError(t, err)
	_ = res
	for i, title := range titles {
		id := "01JTASK" + strings.Repeat("0", 18) + string(rune('A'+i))
		_, err := e.l.Execute(ctx, reducer.AddTask{Project: "acme", TaskID: id, Title: title, MaxRetries: 1})
		require.NoError(t, err)
		e.tasks[title] = id
	}
	e.start()
	return e
}

// open opens the ledger file.
func (e *env) open() {
	var err error
	e.db, err = sqlite.Open(e.ctx, e.path, sqlite.Options{})
	require.NoError(e.t, err)
	e.l, err = ledger.Open(e.ctx, e.db, ledger.Options{})
	require.NoError(e.t, err)
}

// start starts a new Manager on the ledger, as a daemon's start does.
func (e *env) start() {
	// The daemon's own Handler on the test's ledger: the turns' runs are
	// requests, as in a daemon.
	h := &control.Service{Ledger: e.l, HeartbeatEvery: 20 * time.Millisecond}
	e.m = &agents.Manager{Store: e.db, Handler: h, Projects: e.l, Questions: e.asked, Grace: 500 * time.Millisecond,
		Every: 20 * time.Millisecond, Beat: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	e.dels = agents.Delegations{Registry: &delegations.Registry{Store: e.db}, Agents: e.m}
	require.NoError(e.t, e.dels.Registry.Load(e.ctx))
	require.NoError(e.t, e.m.Start(e.ctx))
	m := e.m
	e.t.Cleanup(m.Stop)
}

// agent starts the test agent with flags, in the project's task title
// when it is not "".
func (e *env) agent(name, task string, flags ...string) api.AgentInfo {
	e.t.Helper()
	info, _, err := e.m.StartAgent(e.ctx, e.startCmd(name, task, flags...))
	require.NoError(e.t, err)
	return info
}

func (e *env) startCmd(name, task string, flags ...string) api.CmdAgentStart {
	c := api.CmdAgentStart{Name: name, Command: append([]string{acpagent(e.t), "--state", e.state}, flags...),
		Workspace: e.ws, Env: os.Environ()}
	if task != "" {
		p := "acme"
		c.Project, c.Task = &p, &task
	}
	return c
}

// prompt sends text and follows the turn to its end, returning its
// updates, turn_started and turn_ended included.
func (e *env) prompt(name, text string) []api.AgentUpdate {
	e.t.Helper()
	info, page, err := e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: name, Text: text})
	require.NoError(e.t, err)
	return e.follow(name, info.Turn, page.Next)
}

// follow reads name's updates after after until turn ends.
func (e *env) follow(name string, turn uint32, after uint64) []api.AgentUpdate {
	e.t.Helper()
	var got []api.AgentUpdate
	wait := uint64(5)
	for {
		page, err := e.m.AgentUpdates(e.ctx, api.CmdAgentUpdates{Agent: name, After: &after, WaitSeconds: &wait})
		require.NoError(e.t, err)
		for _, u := range page.Updates {
			got = append(got, u)
			if u.Kind == "turn_ended" && u.Turn == turn {
				return got
			}
		}
		after = page.Next
		require.NoError(e.t, e.ctx.Err(), "turn %d did not end; updates: %+v", turn, got)
	}
}

// project is the project's state now.
func (e *env) project() *reducer.Project {
	e.t.Helper()
	p, err := e.l.Project(e.ctx, "acme")
	require.NoError(e.t, err)
	return p
}

// runs is the runs of the task titled title, oldest first.
func (e *env) runs(title string) []*reducer.Run {
	var out []*reducer.Run
	for _, r := range e.project().Runs() {
		if r.TaskID == e.tasks[title] {
			out = append(out, r)
		}
	}
	return out
}

func (e *env) info(name string) api.AgentInfo {
	e.t.Helper()
	for _, a := range e.m.ListAgents() {
		if a.Name == name {
			return a
		}
	}
	e.t.Fatalf("no live agent %s", name)
	return api.AgentInfo{}
}

// kinds is the kinds of ups, in order.
func kinds(ups []api.AgentUpdate) []string {
	out := make([]string, len(ups))
	for i, u := range ups {
		out[i] = u.Kind
	}
	return out
}

// said is the agent's message text of ups, joined.
func said(ups []api.AgentUpdate) string {
	var b strings.Builder
	for _, u := range ups {
		if u.Kind == "agent_message_chunk" {
			b.WriteString(u.Text)
		}
	}
	return b.String()
}

// last is the last update of ups of kind.
func last(t *testing.T, ups []api.AgentUpdate, kind string) api.AgentUpdate {
	t.Helper()
	for i := len(ups) - 1; i >= 0; i-- {
		if ups[i].Kind == kind {
			return ups[i]
		}
	}
	t.Fatalf("no %s update in %v", kind, kinds(ups))
	return api.AgentUpdate{}
}

// gone waits until no process is tagged with handle or runs the agent
// with the state folder state.
func gone(t *testing.T, handle, state string) {
	t.Helper()
	assert.Eventually(t, func() bool {
		if handle != "" && (proc.Tree{Handle: handle}).Count() > 0 {
			return false
		}
		return state == "" || len(withArg(state)) == 0
	}, 10*time.Second, 20*time.Millisecond, "processes of agent %s left", handle)
}

// withArg is the PIDs of the live processes whose command line has arg.
func withArg(arg string) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), arg) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat")); err == nil && strings.Contains(string(st), ") Z ") {
			continue
		}
		out = append(out, d.Name())
	}
	return out
}

// logBuffer is a log's text, written by many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is the whole log.
func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines is the log's lines that have msg="msg".
func (l *logBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, " msg="+strconv.Quote(msg)+" ") || strings.Contains(line, " msg="+msg+" ") {
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
	}
	return out
}

// questions is a Questions whose owner answers answer (yes by default)
// once asked.
type questions struct {
	mu     sync.Mutex
	answer api.ConfirmState
	asked  []api.CmdConfirmAsk
}

func (q *questions) Ask(_ context.Context, c api.CmdConfirmAsk) (api.ConfirmInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.asked = append(q.asked, c)
	return api.ConfirmInfo{ID: "q" + string(rune('0'+len(q.asked))), State: api.ConfirmPending, Chat: "local:owner"}, nil
}

func (q *questions) Status(_ context.Context, id string) (api.ConfirmInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.answer
	if st == "" {
		st = api.ConfirmYes
	}
	return api.ConfirmInfo{ID: id, State: st, Chat: "local:owner"}, nil
}
