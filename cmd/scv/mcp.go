package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/proc"
	"scv/reducer"
)

// The ledger as tools for agents (docs/mcp.md): an MCP server whose tools
// are the daemon's actions, sent with the client every command of the CLI
// uses, so that every rule stays the daemon's. `scv mcp` serves it on
// standard input and output; the daemon serves it at /mcp of its web
// listener (mcpHandler).

// MCPOptions is `scv mcp`.
type MCPOptions struct {
	c        *client
	Project  string
	ReadOnly bool
	Run      string
}

func newMCPCmd(c *client) *cobra.Command {
	o := &MCPOptions{c: c}
	cmd := &cobra.Command{
		Use:   "mcp [--project P] [--read-only] [--run RUN]",
		Short: "Serve the ledger as MCP tools on standard input and output, for an agent",
		Long: `Serve the project ledger to an agent as a Model Context Protocol server on
standard input and output, the way agents start their tools: tools that
read projects, claim a task's run and report on it, add tasks, and ask
the owner; and each project's report and task graph as resources. Every
tool is a request to the running daemon on its socket, so every rule of
the daemon holds for it. --project confines the session to one project,
--read-only offers only the reading tools, and --run binds it to one run
of that project, so that an agent reports on its own work only.

Configure an agent with {"command": "scv", "args": ["mcp", "--project", "P"]}
(docs/mcp.md has the snippet for each agent, and a worked session).`,
		Example: `  scv mcp --project acme
  scv mcp --project acme --run $SCV_RUN
  scv mcp --read-only`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Run != "" && o.Project == "" {
				return usagef("--run needs --project: the project of the run")
			}
			o.c.keep = true // one connection for the session's calls
			s := newMCPServer(o.c, mcpScope{project: o.Project, readOnly: o.ReadOnly, run: o.Run})
			return s.Run(cmd.Context(), &mcp.StdioTransport{MaxLineLength: mcpMaxMessage})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Project, "project", "", "confine every tool to this project `P` (ID or name)")
	f.BoolVar(&o.ReadOnly, "read-only", false, "offer only the tools that read")
	f.StringVar(&o.Run, "run", "", "bind the session to this `RUN` of --project: its tools report on it only")
	cmd.RegisterFlagCompletionFunc("project", c.completeProjects)
	return cmd
}

// Limits of what a tool takes, checked before anything is sent.
const (
	// mcpMaxMessage bounds one MCP message on standard input.
	mcpMaxMessage = 1 << 20
	// mcpMaxText bounds a progress text, a reason, a question.
	mcpMaxText = 2000
	// mcpMaxEvents is the default and the most project_events returns.
	mcpMaxEvents, mcpDefaultEvents = 1000, 100
	// mcpMaxWait bounds owner_ask's wait_seconds.
	mcpMaxWait = 600
)

// mcpScope is what a session may do.
type mcpScope struct {
	project  string // "": every project
	readOnly bool
	run      string // "": any run
}

// mcpServer is one MCP server: its tools, resources, and what they may do.
type mcpServer struct {
	c     *client
	scope mcpScope
	srv   *mcp.Server

	mu      sync.Mutex
	subs    map[string]bool   // subscribed resource URIs
	seen    map[string]uint64 // a subscribed project's newest event seen
	polling bool
	// projectID is the scope's project, once resolved.
	projectID string
}

// newMCPServer builds the server of a session with scope.
func newMCPServer(c *client, scope mcpScope) *mcp.Server {
	m := &mcpServer{c: c, scope: scope, subs: map[string]bool{}, seen: map[string]uint64{}}
	m.srv = mcp.NewServer(&mcp.Implementation{Name: "scv", Title: "scv project ledger", Version: version}, &mcp.ServerOptions{
		Instructions:       m.instructions(),
		SubscribeHandler:   m.subscribe,
		UnsubscribeHandler: m.unsubscribe,
	})
	m.addReading()
	if !scope.readOnly {
		m.addWorking()
		m.addOwner()
	}
	m.addResources()
	return m.srv
}

func (m *mcpServer) instructions() string {
	var b strings.Builder
	b.WriteString("The scv project ledger: projects of tasks with dependencies; each task is done in runs. ")
	b.WriteString("Claim a ready task with task_claim, report with run_progress and run_heartbeat while you work, and end with run_finish. ")
	if m.scope.project != "" {
		fmt.Fprintf(&b, "This session is confined to project %s. ", m.scope.project)
	}
	if m.scope.run != "" {
		fmt.Fprintf(&b, "It reports on run %s only. ", m.scope.run)
	}
	if m.scope.readOnly {
		b.WriteString("It only reads.")
	}
	return strings.TrimSpace(b.String())
}

// Tool annotations: what each kind of tool does to the ledger.
var (
	readOnly   = &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
	writes     = &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	idempotent = &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)}
	ends       = &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}
	// asks goes to the owner, out of the ledger's world.
	asks = &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)}
)

func ptr[T any](v T) *T { return &v }

// tool adds a tool whose input schema is In's, with maxLength on the
// string fields limits names.
func tool[In, Out any](m *mcpServer, name, title, desc string, ann *mcp.ToolAnnotations, limits map[string]int,
	h func(ctx context.Context, req *mcp.CallToolRequest, in In) (Out, error)) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: %v", name, err))
	}
	for field, n := range limits {
		if p := schema.Properties[field]; p != nil {
			p.MaxLength = ptr(n)
		}
	}
	a := *ann
	a.Title = title
	mcp.AddTool(m.srv, &mcp.Tool{Name: name, Title: title, Description: desc, Annotations: &a, InputSchema: schema},
		func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
			out, err := h(ctx, req, in)
			if err != nil {
				var zero Out
				return nil, zero, toolError(err)
			}
			return nil, out, nil
		})
}

// toolError is err as a tool's error: the daemon's message and its reason
// word, as the CLI reports them.
func toolError(err error) error {
	f := classify(err)
	return fmt.Errorf("%s [%s]", f.Message, f.Reason)
}

// refused is a refusal scv makes itself, before sending anything.
func refused(format string, args ...any) error {
	return daemonError{&api.Error{Code: api.CodeInvalidParams, Message: fmt.Sprintf(format, args...),
		Data: api.ErrorData{Reason: api.ReasonInvalidArgument}}}
}

// outOfScope refuses what the session's scope does not allow.
func outOfScope(format string, args ...any) error {
	return daemonError{&api.Error{Code: api.CodeForbidden, Message: fmt.Sprintf(format, args...),
		Data: api.ErrorData{Reason: api.ReasonForbidden}}}
}

// text checks a string argument: at most max characters (the schema says
// so too, but a client need not check).
func text(field, v string, max int) error {
	if n := utf8.RuneCountInString(v); n > max {
		return refused("%s: %d characters, more than the %d allowed", field, n, max)
	}
	return nil
}

// project is the project a tool names, within the scope: the session's
// when the tool names none.
func (m *mcpServer) project(name string) (string, error) {
	if m.scope.project == "" {
		if name == "" {
			return "", refused("project: give the project's name or ID")
		}
		return name, text("project", name, reducer.MaxNameLen)
	}
	if name == "" || name == m.scope.project {
		return m.scope.project, nil
	}
	id, err := m.scopeID()
	if err != nil {
		return "", err
	}
	if name == id {
		return m.scope.project, nil
	}
	return "", outOfScope("project %q is outside this session, which is confined to project %s", name, m.scope.project)
}

// scopeID is the ID of the scope's project.
func (m *mcpServer) scopeID() (string, error) {
	m.mu.Lock()
	id := m.projectID
	m.mu.Unlock()
	if id != "" {
		return id, nil
	}
	st, err := m.c.do(api.CmdProjectStatus{Project: m.scope.project})
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.projectID = st.Project.Project.ID
	m.mu.Unlock()
	return st.Project.Project.ID, nil
}

// run is the run a tool names, within the scope: the session's when it
// names none.
func (m *mcpServer) run(id string) (string, error) {
	switch {
	case m.scope.run == "" && id == "":
		return "", refused("run: give the run's ID (task_claim returns it)")
	case m.scope.run == "":
		return id, text("run", id, 64)
	case id == "" || id == m.scope.run:
		return m.scope.run, nil
	}
	return "", outOfScope("run %s is not this session's: it reports on run %s only", id, m.scope.run)
}

// The reading tools.

type projectIn struct {
	Project string `json:"project,omitempty" jsonschema:"the project's name or ID (default: the session's project)"`
}

type projectListIn struct {
	All bool `json:"all,omitempty" jsonschema:"include archived projects"`
}

type projectListOut struct {
	Projects []api.ProjectListItem `json:"projects" jsonschema:"every project, oldest first, with its running runs"`
}

type projectOut struct {
	Project api.ProjectSummary `json:"project" jsonschema:"the project's summary after the call"`
}

type tasksOut struct {
	ProjectID string            `json:"project_id"`
	Tasks     []api.ProjectTask `json:"tasks" jsonschema:"the project's tasks, in the order they were added"`
}

type reportOut struct {
	Report api.ProjectReport `json:"report" jsonschema:"the project, its tasks, its runs and the evidence notes"`
}

type eventsIn struct {
	Project string `json:"project,omitempty" jsonschema:"the project's name or ID (default: the session's project)"`
	After   uint64 `json:"after,omitempty" jsonschema:"return events after this sequence (default 0: from the first kept)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many events (1 to 1000; default 100)"`
}

// event is one event of project_events, its data as JSON.
type event struct {
	Sequence             uint64 `json:"sequence"`
	Kind                 string `json:"kind"`
	TimestampUnixSeconds uint64 `json:"timestamp_unix_seconds"`
	Data                 any    `json:"data"`
}

type eventsOut struct {
	ProjectID       string  `json:"project_id"`
	CompactedBefore *uint64 `json:"compacted_before,omitempty" jsonschema:"events up to this sequence were compacted into a snapshot"`
	Events          []event `json:"events"`
	Next            uint64  `json:"next" jsonschema:"the after of the next call"`
	More            bool    `json:"more" jsonschema:"more events follow"`
}

func (m *mcpServer) addReading() {
	tool(m, "project_list", "List projects", "Every project (in a session with --project, that one) with its status, phase, tasks done and runs running.",
		readOnly, nil, func(ctx context.Context, _ *mcp.CallToolRequest, in projectListIn) (projectListOut, error) {
			st, err := m.c.do(api.CmdProjectList{All: in.All})
			if err != nil {
				return projectListOut{}, err
			}
			out := projectListOut{Projects: []api.ProjectListItem{}}
			id, _ := m.scopeIDIf()
			for _, p := range *st.Projects {
				if m.scope.project == "" || p.Name == m.scope.project || p.ID == m.scope.project || p.ID == id {
					out.Projects = append(out.Projects, p)
				}
			}
			return out, nil
		})
	tool(m, "project_status", "Project status", "A project's summary: phase, status, tasks done, last heartbeat.",
		readOnly, nil, func(ctx context.Context, _ *mcp.CallToolRequest, in projectIn) (projectOut, error) {
			p, err := m.project(in.Project)
			if err != nil {
				return projectOut{}, err
			}
			st, err := m.c.do(api.CmdProjectStatus{Project: p})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "project_tasks", "Project tasks", "A project's tasks: status, dependencies, retries, running run, progress.",
		readOnly, nil, func(ctx context.Context, _ *mcp.CallToolRequest, in projectIn) (tasksOut, error) {
			p, err := m.project(in.Project)
			if err != nil {
				return tasksOut{}, err
			}
			st, err := m.c.do(api.CmdProjectTasks{Project: p})
			if err != nil {
				return tasksOut{}, err
			}
			return tasksOut{ProjectID: st.Project.ProjectID, Tasks: st.Project.Tasks}, nil
		})
	tool(m, "project_report", "Project report", "A project's report: its summary, tasks, runs with their attempts, and the evidence notes that say what holds it up.",
		readOnly, nil, func(ctx context.Context, _ *mcp.CallToolRequest, in projectIn) (reportOut, error) {
			p, err := m.project(in.Project)
			if err != nil {
				return reportOut{}, err
			}
			st, err := m.c.do(api.CmdProjectReport{Project: p})
			if err != nil {
				return reportOut{}, err
			}
			return reportOut{Report: *st.Project.Report}, nil
		})
	tool(m, "project_events", "Project events", "A project's history, the events after a sequence, oldest first, at most limit of them (1 to 1,000, default 100): page with after = next while more is true.",
		readOnly, nil, func(ctx context.Context, _ *mcp.CallToolRequest, in eventsIn) (eventsOut, error) {
			p, err := m.project(in.Project)
			if err != nil {
				return eventsOut{}, err
			}
			limit := in.Limit
			switch {
			case limit == 0:
				limit = mcpDefaultEvents
			case limit < 0 || limit > mcpMaxEvents:
				return eventsOut{}, refused("limit: want 1 to %d", mcpMaxEvents)
			}
			after := in.After
			st, err := m.c.do(api.CmdProjectEvents{Project: p, After: &after})
			if err != nil {
				return eventsOut{}, err
			}
			r := st.Project
			out := eventsOut{ProjectID: r.ProjectID, CompactedBefore: r.CompactedBefore, Events: []event{}, Next: after}
			for i, e := range r.Events {
				if i == limit {
					out.More = true
					break
				}
				var data any
				if err := json.Unmarshal(e.Data, &data); err != nil {
					return eventsOut{}, err
				}
				out.Events = append(out.Events, event{Sequence: e.Sequence, Kind: e.Kind, TimestampUnixSeconds: e.TimestampUnixSeconds, Data: data})
				out.Next = e.Sequence
			}
			if len(r.Events) == 1000 { // a full page of the daemon's: there may be more
				out.More = true
			}
			return out, nil
		})
}

// scopeIDIf is the scope's project's ID, when there is a scope.
func (m *mcpServer) scopeIDIf() (string, error) {
	if m.scope.project == "" {
		return "", nil
	}
	return m.scopeID()
}

// The working tools.

type claimIn struct {
	Project string `json:"project,omitempty" jsonschema:"the project's name or ID (default: the session's project)"`
	Task    string `json:"task" jsonschema:"the task's ID, or its title when no other task of the project has it"`
	Agent   string `json:"agent,omitempty" jsonschema:"who works on it (default: the MCP client's name)"`
}

type claimOut struct {
	RunID   string             `json:"run_id" jsonschema:"the run: give it to run_progress, run_heartbeat and run_finish"`
	Agent   string             `json:"agent" jsonschema:"the run's agent, as the ledger records it"`
	Project api.ProjectSummary `json:"project"`
}

type progressIn struct {
	Project  string `json:"project,omitempty" jsonschema:"the run's project (default: the session's project)"`
	Run      string `json:"run,omitempty" jsonschema:"the run's ID (default: the session's run)"`
	Progress string `json:"progress" jsonschema:"what the run is doing now, one line"`
}

type runIn struct {
	Project string `json:"project,omitempty" jsonschema:"the run's project (default: the session's project)"`
	Run     string `json:"run,omitempty" jsonschema:"the run's ID (default: the session's run)"`
}

type finishIn struct {
	Project string `json:"project,omitempty" jsonschema:"the run's project (default: the session's project)"`
	Run     string `json:"run,omitempty" jsonschema:"the run's ID (default: the session's run)"`
	Status  string `json:"status" jsonschema:"how the run ended: succeeded, failed or cancelled"`
	Reason  string `json:"reason,omitempty" jsonschema:"why, in a line: recorded as the run's last progress"`
}

type taskAddIn struct {
	Project    string   `json:"project,omitempty" jsonschema:"the project's name or ID (default: the session's project)"`
	Title      string   `json:"title" jsonschema:"the task's title"`
	DependsOn  []string `json:"depends_on,omitempty" jsonschema:"IDs of the tasks of the project that must be done first"`
	MaxRetries uint32   `json:"max_retries,omitempty" jsonschema:"failed runs that are retried (default 0: the first failure is final)"`
}

type taskAddOut struct {
	TaskID  string             `json:"task_id"`
	Project api.ProjectSummary `json:"project"`
}

func (m *mcpServer) addWorking() {
	limits := map[string]int{"progress": mcpMaxText, "reason": mcpMaxText, "title": reducer.MaxNameLen, "task": reducer.MaxNameLen,
		"agent": reducer.MaxNameLen}
	tool(m, "task_claim", "Claim a task", "Start a run of a ready task of the project: the task is yours until you finish the run. Returns the run's ID.",
		writes, limits, func(ctx context.Context, req *mcp.CallToolRequest, in claimIn) (claimOut, error) {
			if m.scope.run != "" {
				return claimOut{}, outOfScope("this session reports on run %s only: it claims no task", m.scope.run)
			}
			p, err := m.project(in.Project)
			if err != nil {
				return claimOut{}, err
			}
			if err := text("task", in.Task, reducer.MaxNameLen); err != nil {
				return claimOut{}, err
			}
			agent := m.agent(req, in.Agent)
			if err := text("agent", agent, reducer.MaxNameLen); err != nil {
				return claimOut{}, err
			}
			st, err := m.c.do(api.CmdProjectRunStart{Project: p, Task: in.Task, Agent: agent})
			if err != nil {
				return claimOut{}, err
			}
			return claimOut{RunID: st.Project.RunID, Agent: agent, Project: *st.Project.Project}, nil
		})
	tool(m, "run_progress", "Report progress", "Record what a running run is doing. Progress is journaled at most once per the daemon's heartbeat interval; one sent sooner is accepted and not journaled (send it again later, or give it as run_finish's reason). Counts as a heartbeat.",
		writes, limits, func(ctx context.Context, _ *mcp.CallToolRequest, in progressIn) (projectOut, error) {
			p, r, err := m.projectRun(in.Project, in.Run)
			if err != nil {
				return projectOut{}, err
			}
			if err := text("progress", in.Progress, mcpMaxText); err != nil {
				return projectOut{}, err
			}
			st, err := m.c.do(api.CmdProjectRunProgress{Project: p, Run: r, Progress: in.Progress, Coalesce: true})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "run_heartbeat", "Heartbeat", "Say that a running run is alive, so that it does not go stale while it works silently.",
		idempotent, limits, func(ctx context.Context, _ *mcp.CallToolRequest, in runIn) (projectOut, error) {
			p, r, err := m.projectRun(in.Project, in.Run)
			if err != nil {
				return projectOut{}, err
			}
			st, err := m.c.do(api.CmdProjectHeartbeat{Project: p, Run: &r})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "run_finish", "Finish a run", "End a running run: succeeded (the task is done), failed (a retry of the task is spent) or cancelled (no retry spent), with a reason. A finished run takes no more reports.",
		ends, limits, func(ctx context.Context, _ *mcp.CallToolRequest, in finishIn) (projectOut, error) {
			p, r, err := m.projectRun(in.Project, in.Run)
			if err != nil {
				return projectOut{}, err
			}
			status := reducer.RunStatus(in.Status)
			switch status {
			case reducer.RunSucceeded, reducer.RunFailed, reducer.RunCancelled:
			default:
				return projectOut{}, refused("status: want succeeded, failed or cancelled, not %q", in.Status)
			}
			if err := text("reason", in.Reason, mcpMaxText); err != nil {
				return projectOut{}, err
			}
			if in.Reason != "" {
				if _, err := m.c.do(api.CmdProjectRunProgress{Project: p, Run: r, Progress: in.Reason}); err != nil {
					return projectOut{}, err
				}
			}
			st, err := m.c.do(api.CmdProjectRunFinish{Project: p, Run: r, Status: status})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "task_add", "Add a task", "Add a task to the project, after the tasks it depends on.",
		writes, limits, func(ctx context.Context, _ *mcp.CallToolRequest, in taskAddIn) (taskAddOut, error) {
			if m.scope.run != "" {
				return taskAddOut{}, outOfScope("this session reports on run %s only: it adds no task", m.scope.run)
			}
			p, err := m.project(in.Project)
			if err != nil {
				return taskAddOut{}, err
			}
			if err := text("title", in.Title, reducer.MaxNameLen); err != nil {
				return taskAddOut{}, err
			}
			deps := in.DependsOn
			if deps == nil {
				deps = []string{}
			}
			st, err := m.c.do(api.CmdProjectTaskAdd{Project: p, Title: in.Title, DependsOn: deps, MaxRetries: in.MaxRetries})
			if err != nil {
				return taskAddOut{}, err
			}
			return taskAddOut{TaskID: st.Project.TaskID, Project: *st.Project.Project}, nil
		})
}

// projectRun is the project and run a run's tool names, within scope.
func (m *mcpServer) projectRun(project, run string) (string, string, error) {
	p, err := m.project(project)
	if err != nil {
		return "", "", err
	}
	r, err := m.run(run)
	return p, r, err
}

// agent is the agent a run claimed in this session is recorded with:
// want, else the MCP client's name, else "mcp"; in a delegation, its
// SCV_PARENT chain after it.
func (m *mcpServer) agent(req *mcp.CallToolRequest, want string) string {
	a := want
	if a == "" && req != nil && req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
			a = p.ClientInfo.Name
		}
	}
	if a == "" {
		a = "mcp"
	}
	if chain := os.Getenv(proc.ParentEnv); chain != "" && os.Getenv(proc.TagEnv) != "" {
		a += " [" + chain + "]"
	}
	return a
}

// The owner's tools.

type askIn struct {
	Question    string `json:"question" jsonschema:"a yes/no question, as the owner reads it"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"wait up to this long for the answer (0 to 600; default 0: return at once, pending)"`
	Timeout     uint64 `json:"timeout_seconds,omitempty" jsonschema:"how long the question waits before no answer counts as no (default 1800)"`
	Project     string `json:"project,omitempty" jsonschema:"with task: an approval of the task's next run, recorded in the project's history"`
	Task        string `json:"task,omitempty" jsonschema:"the task the approval is about (ID or title)"`
}

type askOut struct {
	ID       string `json:"id" jsonschema:"the question's ID, for owner_answer_status"`
	State    string `json:"state" jsonschema:"pending, yes, no, expired, withdrawn or failed"`
	Chat     string `json:"chat" jsonschema:"where the owner was asked"`
	Deadline uint64 `json:"deadline_unix_seconds" jsonschema:"when no answer counts as no"`
}

type askStatusIn struct {
	ID string `json:"id" jsonschema:"the ID owner_ask returned"`
}

func (m *mcpServer) addOwner() {
	tool(m, "owner_ask", "Ask the owner", "Ask the owner a yes/no question, in the chat that started the work (or the owner's notify chat). With wait_seconds (at most 600), wait that long for the answer; the result is the answer, or pending with the question's ID for owner_answer_status. Only yes means yes.",
		asks, map[string]int{"question": mcpMaxText, "project": reducer.MaxNameLen, "task": reducer.MaxNameLen},
		func(ctx context.Context, _ *mcp.CallToolRequest, in askIn) (askOut, error) {
			if err := text("question", in.Question, mcpMaxText); err != nil {
				return askOut{}, err
			}
			if in.WaitSeconds < 0 || in.WaitSeconds > mcpMaxWait {
				return askOut{}, refused("wait_seconds: want 0 to %d", mcpMaxWait)
			}
			c := api.CmdConfirmAsk{Question: in.Question}
			if chain := os.Getenv(proc.ParentEnv); chain != "" {
				c.Parent = &chain
			}
			if in.Timeout != 0 {
				c.TimeoutSeconds = &in.Timeout
			}
			if in.Project != "" || in.Task != "" || m.scope.project != "" && in.Task != "" {
				p, err := m.project(in.Project)
				if err != nil {
					return askOut{}, err
				}
				c.Project = &p
				if in.Task != "" {
					c.Task = &in.Task
				}
			}
			st, err := m.c.do(c)
			if err != nil {
				return askOut{}, err
			}
			info := *st.Confirm
			deadline := time.Now().Add(time.Duration(in.WaitSeconds) * time.Second)
			for info.State == api.ConfirmPending && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return askOut{}, ctx.Err()
				case <-time.After(200 * time.Millisecond):
				}
				st, err := m.c.do(api.CmdConfirmStatus{ID: info.ID})
				if err != nil {
					return askOut{}, err
				}
				info = *st.Confirm
			}
			return askOut{ID: info.ID, State: string(info.State), Chat: info.Chat, Deadline: info.DeadlineUnixSeconds}, nil
		})
	tool(m, "owner_answer_status", "Answer of the owner", "Where a question to the owner stands: pending, yes, no, expired, withdrawn or failed. Asking keeps a pending question alive: one nobody asks about for a minute is withdrawn.",
		readOnly, nil, func(ctx context.Context, _ *mcp.CallToolRequest, in askStatusIn) (askOut, error) {
			if err := text("id", in.ID, 64); err != nil {
				return askOut{}, err
			}
			st, err := m.c.do(api.CmdConfirmStatus{ID: in.ID})
			if err != nil {
				return askOut{}, err
			}
			info := *st.Confirm
			return askOut{ID: info.ID, State: string(info.State), Chat: info.Chat, Deadline: info.DeadlineUnixSeconds}, nil
		})
}

// mcpHandler is the MCP server over streamable HTTP, every tool and no
// scope, for the daemon's web listener at /mcp (which guards it): its
// tools reach the daemon on socket.
func mcpHandler(socket string) http.Handler {
	c := &client{socket: socket, now: time.Now, keep: true}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return newMCPServer(c, mcpScope{})
	}, &mcp.StreamableHTTPOptions{})
}
