package mcp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/control/api"
)

// Options are a session's scope, and what the server says of itself.
type Options struct {
	// Project confines the session to one project, named by its name or
	// its ID ("": every project).
	Project string
	// ReadOnly offers only the tools that read.
	ReadOnly bool
	// Run binds the session to one run of Project: its tools report on
	// it only ("": any run).
	Run string
	// Version is the release the server reports.
	Version string
	// Parent is the chain of delegations the session's agent runs in
	// (SCV_PARENT; "": none). A run it claims names the chain after the
	// agent, and a question it asks goes to the chat that started the
	// work.
	Parent string
}

// HTTPCaller names the requests of HTTPHandler's sessions (api.WithCaller)
// in the events that record who decided.
const HTTPCaller = "MCP at /mcp"

// callTimeout bounds one request to the daemon: it answers in
// milliseconds, and one that does not answer within this is stuck.
const callTimeout = 30 * time.Second

// server is one session's MCP server: its tools, its resources, and what
// they may do.
type server struct {
	h    api.Handler
	opts Options
	srv  *sdk.Server

	mu        sync.Mutex
	subs      map[string]bool   // subscribed resource URIs
	seen      map[string]uint64 // a subscribed project's newest event seen
	following map[string]bool   // projects a follower watches

	// scopeID and scopeName are the scope's project's, once known.
	scopeID, scopeName string
	// lastRun is the run the session claimed last (task_claim,
	// task_next): its run when it is bound to none.
	lastRun string
}

// NewServer is the MCP server of one session with opts, its tools
// reaching the daemon through h.
func NewServer(h api.Handler, opts Options) *sdk.Server {
	m := &server{h: h, opts: opts, subs: map[string]bool{}, seen: map[string]uint64{}, following: map[string]bool{}}
	ctx := context.Background()
	// The scope's project is known by its ID and its name from the start,
	// so that a refusal of scope sends nothing (a daemon not running: from
	// the first call that needs it).
	m.scoped(ctx)
	m.srv = sdk.NewServer(&sdk.Implementation{Name: "scv", Title: "scv project ledger", Version: opts.Version}, &sdk.ServerOptions{
		Instructions:       m.instructions(),
		SubscribeHandler:   m.subscribe,
		UnsubscribeHandler: m.unsubscribe,
	})
	m.addReading()
	m.addPlanReading()
	if !opts.ReadOnly {
		m.addWorking()
		m.addOwner()
	}
	m.addResources(ctx)
	return m.srv
}

// HTTPHandler serves MCP over streamable HTTP, a server with opts for
// each session, its requests to h named HTTPCaller. It checks no token,
// Host or Origin: the daemon's web listener guards it.
func HTTPHandler(h api.Handler, opts Options) http.Handler {
	named := api.HandlerFunc(func(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
		return h.Handle(api.WithCaller(ctx, HTTPCaller), cmd)
	})
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		return NewServer(named, opts)
	}, &sdk.StreamableHTTPOptions{})
}

// do sends cmd to the daemon.
func (m *server) do(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return m.h.Handle(ctx, cmd)
}

func (m *server) instructions() string {
	var b strings.Builder
	b.WriteString("The scv project ledger: projects of tasks with dependencies; each task is done in runs. ")
	b.WriteString("Take the next ready task with task_next (or a given one with task_claim), read it with task_get, report with run_progress and run_heartbeat while you work, add the work you find with task_add, and end with run_finish. ")
	if m.opts.Project != "" {
		fmt.Fprintf(&b, "This session is confined to project %s. ", m.scopeLabel())
	}
	if m.opts.Run != "" {
		fmt.Fprintf(&b, "It reports on run %s only. ", m.opts.Run)
	}
	if m.opts.ReadOnly {
		b.WriteString("It only reads.")
	}
	return strings.TrimSpace(b.String())
}

// toolError is err as a tool's error: the daemon's message and its reason
// word in brackets, as the CLI prints them. The message and the reason
// are the socket's too: the one mapping of api.ErrorOf.
func toolError(err error) error {
	e := api.ErrorOf(err)
	return fmt.Errorf("%s [%s]", e.Message, e.Data.Reason)
}

// refused is a refusal the server makes itself, before sending anything.
func refused(format string, args ...any) error {
	return api.NewError(api.CodeInvalidParams, api.ReasonInvalidArgument, format, args...)
}

// outOfScope refuses what the session's scope does not allow.
func outOfScope(format string, args ...any) error {
	return api.NewError(api.CodeForbidden, api.ReasonForbidden, format, args...)
}

// project is the project a tool (or a resource's URI) names, by its
// name or its ID, within the scope: the session's when it names none.
func (m *server) project(ctx context.Context, ref string) (string, error) {
	scope := m.opts.Project
	switch {
	case scope == "" && ref == "":
		return "", refused("project: give the project's name or ID")
	case scope == "":
		return ref, nil
	case ref == "" || ref == scope:
		return scope, nil
	}
	id, name, err := m.scoped(ctx)
	if err != nil {
		return "", err
	}
	if ref == id || ref == name {
		return scope, nil
	}
	return "", outOfScope("project %q is outside this session, which is confined to project %s", ref, name)
}

// scoped is the ID and the name of the scope's project, asked of the
// daemon once (none without a scope).
func (m *server) scoped(ctx context.Context) (id, name string, err error) {
	if m.opts.Project == "" {
		return "", "", nil
	}
	m.mu.Lock()
	id, name = m.scopeID, m.scopeName
	m.mu.Unlock()
	if id != "" {
		return id, name, nil
	}
	st, err := m.do(ctx, api.CmdProjectStatus{Project: m.opts.Project})
	if err != nil {
		return "", "", err
	}
	p := st.Project.Project
	m.mu.Lock()
	m.scopeID, m.scopeName = p.ID, p.Name
	m.mu.Unlock()
	return p.ID, p.Name, nil
}

// inScope says whether the project of id and name is within the scope,
// as far as it is known.
func (m *server) inScope(id, name string) bool {
	if m.opts.Project == "" || id == m.opts.Project || name == m.opts.Project {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return id == m.scopeID
}

// scopeLabel names the scope's project: its name and ID once known.
func (m *server) scopeLabel() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scopeID == "" {
		return m.opts.Project
	}
	return m.scopeName + " (ID " + m.scopeID + ")"
}

// run is the run a tool names, within the scope: the session's when it
// names none.
func (m *server) run(id string) (string, error) {
	scope := m.opts.Run
	switch {
	case scope == "" && id == "":
		return "", refused("run: give the run's ID (task_claim returns it)")
	case scope == "":
		return id, nil
	case id == "" || id == scope:
		return scope, nil
	}
	return "", outOfScope("run %s is not this session's: it reports on run %s only", id, scope)
}

// projectRun is the project and run a run's tool names, within scope.
func (m *server) projectRun(ctx context.Context, project, run string) (string, string, error) {
	p, err := m.project(ctx, project)
	if err != nil {
		return "", "", err
	}
	r, err := m.run(run)
	return p, r, err
}

// claimed records run as the session's last claimed.
func (m *server) claimed(run string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastRun = run
}

// sessionRun is the session's run: the one it is bound to, else the last
// it claimed; nil if none.
func (m *server) sessionRun() *string {
	if m.opts.Run != "" {
		return &m.opts.Run
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastRun == "" {
		return nil
	}
	r := m.lastRun
	return &r
}

// sessionTask is the task of the session's run, in project p.
func (m *server) sessionTask(ctx context.Context, p string) (string, error) {
	r := m.sessionRun()
	if r == nil {
		return "", refused("task: give the task's ID or title (this session has no run whose task it would be)")
	}
	st, err := m.do(ctx, api.CmdProjectReport{Project: p})
	if err != nil {
		return "", err
	}
	for _, run := range st.Project.Report.Runs {
		if run.ID == *r {
			return run.TaskID, nil
		}
	}
	return "", api.NewError(api.CodeNotFound, api.ReasonNotFound, "not found: run %s of the session in project %s", *r, p)
}
