package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/proc"
	"scv/ledger"
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
			return s.Run(cmd.Context(), mcpStdio(o.c.stdin, o.c.stdout, o.c.stderr))
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
	// mcpMaxID bounds a run's or a question's ID.
	mcpMaxID = 64
	// mcpMaxDeps bounds task_add's depends_on.
	mcpMaxDeps = 100
	// mcpMaxEvents is the most project_events returns, one page of the
	// daemon's; mcpDefaultEvents, what it returns when not told.
	mcpMaxEvents, mcpDefaultEvents = ledger.MaxPage, 100
	// mcpMaxWait bounds owner_ask's wait_seconds.
	mcpMaxWait = 600
)

// argLimit is the bound of an argument: chars for a string (or each
// string of an array), items for an array, max for a number (whose least
// is 0), oneOf for a string that is one of a few words.
type argLimit struct {
	chars, items, max int
	oneOf             []string
}

// argLimits are the bounds of the tools' arguments, by name: an argument
// means the same in every tool that takes it. Each goes into the tool's
// input schema, and checkArgs holds a call to the schema before the tool
// runs.
var argLimits = map[string]argLimit{
	"project":      {chars: reducer.MaxNameLen},
	"task":         {chars: reducer.MaxNameLen},
	"title":        {chars: reducer.MaxNameLen},
	"agent":        {chars: reducer.MaxNameLen},
	"depends_on":   {chars: reducer.MaxNameLen, items: mcpMaxDeps},
	"run":          {chars: mcpMaxID},
	"id":           {chars: mcpMaxID},
	"progress":     {chars: mcpMaxText},
	"reason":       {chars: mcpMaxText},
	"question":     {chars: mcpMaxText},
	"limit":        {max: mcpMaxEvents},
	"wait_seconds": {max: mcpMaxWait},
	"status":       {oneOf: []string{string(reducer.RunSucceeded), string(reducer.RunFailed), string(reducer.RunCancelled)}},
}

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
	// scopeID and scopeName are the scope's project's, once known.
	scopeID, scopeName string
}

// newMCPServer builds the server of a session with scope.
func newMCPServer(c *client, scope mcpScope) *mcp.Server {
	m := &mcpServer{c: c, scope: scope, subs: map[string]bool{}, seen: map[string]uint64{}}
	// The scope's project is known by its ID and its name from the start,
	// so that a refusal of scope sends nothing (a daemon not running: from
	// the first call that needs it).
	m.scoped()
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
		fmt.Fprintf(&b, "This session is confined to project %s. ", m.scopeLabel())
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

// tool adds a tool whose input schema is In's, bounded by argLimits,
// and whose output schema is Out's. A call's arguments are checked
// against the schema by checkArgs, which names the argument and the
// limit it breaks (invalid_argument) and never repeats its value, before
// they are decoded and h runs; h's error is the tool's (toolError). What
// h returns is checked against the output schema, and is the result's
// structured content and, as JSON, its text.
func tool[In, Out any](m *mcpServer, name, title, desc string, ann *mcp.ToolAnnotations,
	h func(ctx context.Context, req *mcp.CallToolRequest, in In) (Out, error)) {
	in, inResolved := schemaOf[In](name, true)
	out, outResolved := schemaOf[Out](name, false)
	a := *ann
	a.Title = title
	m.srv.AddTool(&mcp.Tool{Name: name, Title: title, Description: desc, Annotations: &a, InputSchema: in, OutputSchema: out},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args, err := checkArgs(in, inResolved, req.Params.Arguments)
			if err != nil {
				return errorResult(err), nil
			}
			var v In
			if err := json.Unmarshal(args, &v); err != nil {
				field := "arguments"
				if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) && te.Field != "" {
					field = te.Field
				}
				return errorResult(refused("%s: out of range", field)), nil
			}
			o, err := h(ctx, req, v)
			if err != nil {
				return errorResult(err), nil
			}
			b, err := json.Marshal(o)
			if err != nil {
				return nil, fmt.Errorf("tool %s: output: %w", name, err)
			}
			var check any
			if err := json.Unmarshal(b, &check); err != nil {
				return nil, fmt.Errorf("tool %s: output: %w", name, err)
			}
			if err := outResolved.Validate(&check); err != nil {
				return nil, fmt.Errorf("tool %s: output: %w", name, err)
			}
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		})
}

// schemaOf is T's JSON Schema, with argLimits when it is a tool's input,
// and the schema resolved for checking.
func schemaOf[T any](tool string, input bool) (*jsonschema.Schema, *jsonschema.Resolved) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: %v", tool, err))
	}
	if input {
		for field, p := range s.Properties {
			l, ok := argLimits[field]
			if !ok {
				continue
			}
			switch {
			case typed(p, "string") && l.oneOf != nil:
				for _, w := range l.oneOf {
					p.Enum = append(p.Enum, w)
				}
			case typed(p, "string"):
				p.MaxLength = ptr(l.chars)
			case typed(p, "array"):
				p.MaxItems, p.Items.MaxLength = ptr(l.items), ptr(l.chars)
			case typed(p, "integer"):
				p.Minimum, p.Maximum = ptr(0.0), ptr(float64(l.max))
			}
		}
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: %v", tool, err))
	}
	return s, r
}

// typed says whether schema p allows JSON values of type t.
func typed(p *jsonschema.Schema, t string) bool {
	return p.Type == t || slices.Contains(p.Types, t)
}

// checkArgs checks a call's arguments against its tool's input schema s
// (r resolved), and returns them as a JSON object. What it refuses, it
// refuses naming the argument and what it wants, never repeating the
// value: a required argument missing, one the tool does not take, a
// value of the wrong type, a string, an array or a number beyond its
// limit. Whatever else the schema refuses, it refuses without detail.
func checkArgs(s *jsonschema.Schema, r *jsonschema.Resolved, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var args map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &args) != nil {
		return nil, refused("arguments: want a JSON object")
	}
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			return nil, refused("%s: required", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(args)) {
		p, ok := s.Properties[name]
		if !ok {
			return nil, refused("%s: not an argument of this tool, which takes %s", clip(name, 64),
				strings.Join(slices.Sorted(maps.Keys(s.Properties)), ", "))
		}
		if err := checkValue(name, p, args[name]); err != nil {
			return nil, err
		}
	}
	var v any
	if json.Unmarshal(raw, &v) != nil || r.Validate(&v) != nil {
		return nil, refused("arguments: not what the tool's input schema allows")
	}
	return raw, nil
}

// checkValue checks the value of argument field against its schema p.
func checkValue(field string, p *jsonschema.Schema, raw json.RawMessage) error {
	if bytes.Equal(raw, []byte("null")) && typed(p, "null") {
		return nil
	}
	switch {
	case typed(p, "string"):
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return refused("%s: want a string", field)
		}
		if n := utf8.RuneCountInString(v); p.MaxLength != nil && n > *p.MaxLength {
			return refused("%s: %d characters, more than the %d allowed", field, n, *p.MaxLength)
		}
		if p.Enum != nil && !slices.Contains(p.Enum, any(v)) {
			words := make([]string, len(p.Enum))
			for i, w := range p.Enum {
				words[i] = fmt.Sprint(w)
			}
			return refused("%s: want one of %s", field, strings.Join(words, ", "))
		}
	case typed(p, "integer"):
		var v float64
		if json.Unmarshal(raw, &v) != nil || v != math.Trunc(v) {
			return refused("%s: want a whole number", field)
		}
		if p.Minimum != nil && v < *p.Minimum || p.Maximum != nil && v > *p.Maximum {
			return refused("%s: want %s", field, bounds(p))
		}
	case typed(p, "boolean"):
		var v bool
		if json.Unmarshal(raw, &v) != nil {
			return refused("%s: want true or false", field)
		}
	case typed(p, "array"):
		var v []json.RawMessage
		if json.Unmarshal(raw, &v) != nil {
			return refused("%s: want an array", field)
		}
		if p.MaxItems != nil && len(v) > *p.MaxItems {
			return refused("%s: %d entries, more than the %d allowed", field, len(v), *p.MaxItems)
		}
		for i, e := range v {
			if p.Items == nil {
				break
			}
			if err := checkValue(fmt.Sprintf("%s[%d]", field, i), p.Items, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// bounds says the range of numbers p allows.
func bounds(p *jsonschema.Schema) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	switch {
	case p.Minimum != nil && p.Maximum != nil:
		return f(*p.Minimum) + " to " + f(*p.Maximum)
	case p.Minimum != nil:
		return "at least " + f(*p.Minimum)
	}
	return "at most " + f(*p.Maximum)
}

// clip is s, cut to n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// errorResult is a tool's result for err.
func errorResult(err error) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	res.SetError(toolError(err))
	return res
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

// project is the project a tool (or a resource's URI) names, by its
// name or its ID, within the scope: the session's when it names none.
func (m *mcpServer) project(ref string) (string, error) {
	if err := text("project", ref, reducer.MaxNameLen); err != nil {
		return "", err
	}
	switch {
	case m.scope.project == "" && ref == "":
		return "", refused("project: give the project's name or ID")
	case m.scope.project == "":
		return ref, nil
	case ref == "" || ref == m.scope.project:
		return m.scope.project, nil
	}
	id, name, err := m.scoped()
	if err != nil {
		return "", err
	}
	if ref == id || ref == name {
		return m.scope.project, nil
	}
	return "", outOfScope("project %q is outside this session, which is confined to project %s", ref, name)
}

// scoped is the ID and the name of the scope's project, asked of the
// daemon once (none without a scope).
func (m *mcpServer) scoped() (id, name string, err error) {
	if m.scope.project == "" {
		return "", "", nil
	}
	m.mu.Lock()
	id, name = m.scopeID, m.scopeName
	m.mu.Unlock()
	if id != "" {
		return id, name, nil
	}
	st, err := m.c.do(api.CmdProjectStatus{Project: m.scope.project})
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
func (m *mcpServer) inScope(id, name string) bool {
	if m.scope.project == "" || id == m.scope.project || name == m.scope.project {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return id == m.scopeID
}

// scopeLabel names the scope's project: its name and ID once known.
func (m *mcpServer) scopeLabel() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scopeID == "" {
		return m.scope.project
	}
	return m.scopeName + " (ID " + m.scopeID + ")"
}

// run is the run a tool names, within the scope: the session's when it
// names none.
func (m *mcpServer) run(id string) (string, error) {
	switch {
	case m.scope.run == "" && id == "":
		return "", refused("run: give the run's ID (task_claim returns it)")
	case m.scope.run == "":
		return id, nil
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
		readOnly, func(ctx context.Context, _ *mcp.CallToolRequest, in projectListIn) (projectListOut, error) {
			st, err := m.c.do(api.CmdProjectList{All: in.All})
			if err != nil {
				return projectListOut{}, err
			}
			out := projectListOut{Projects: []api.ProjectListItem{}}
			m.scoped() // the scope's ID, if not known yet
			for _, p := range *st.Projects {
				if m.inScope(p.ID, p.Name) {
					out.Projects = append(out.Projects, p)
				}
			}
			return out, nil
		})
	tool(m, "project_status", "Project status", "A project's summary: phase, status, tasks done, last heartbeat.",
		readOnly, func(ctx context.Context, _ *mcp.CallToolRequest, in projectIn) (projectOut, error) {
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
		readOnly, func(ctx context.Context, _ *mcp.CallToolRequest, in projectIn) (tasksOut, error) {
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
		readOnly, func(ctx context.Context, _ *mcp.CallToolRequest, in projectIn) (reportOut, error) {
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
		readOnly, func(ctx context.Context, _ *mcp.CallToolRequest, in eventsIn) (eventsOut, error) {
			p, err := m.project(in.Project)
			if err != nil {
				return eventsOut{}, err
			}
			limit := in.Limit
			if limit == 0 {
				limit = mcpDefaultEvents
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
			if len(r.Events) >= ledger.MaxPage { // a full page of the daemon's: there may be more
				out.More = true
			}
			return out, nil
		})
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
	DependsOn  []string `json:"depends_on,omitempty" jsonschema:"the tasks of the project that must be done first, each by its ID (or its title when no other task has it)"`
	MaxRetries uint32   `json:"max_retries,omitempty" jsonschema:"failed runs that are retried (default 0: the first failure is final)"`
}

type taskAddOut struct {
	TaskID  string             `json:"task_id"`
	Project api.ProjectSummary `json:"project"`
}

func (m *mcpServer) addWorking() {
	tool(m, "task_claim", "Claim a task", "Start a run of a ready task of the project: the task is yours until you finish the run. Returns the run's ID.",
		writes, func(ctx context.Context, req *mcp.CallToolRequest, in claimIn) (claimOut, error) {
			if m.scope.run != "" {
				return claimOut{}, outOfScope("this session reports on run %s only: it claims no task", m.scope.run)
			}
			p, err := m.project(in.Project)
			if err != nil {
				return claimOut{}, err
			}
			agent := m.agent(req, in.Agent) // the client's name is not an argument: checked here
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
		writes, func(ctx context.Context, _ *mcp.CallToolRequest, in progressIn) (projectOut, error) {
			p, r, err := m.projectRun(in.Project, in.Run)
			if err != nil {
				return projectOut{}, err
			}
			st, err := m.c.do(api.CmdProjectRunProgress{Project: p, Run: r, Progress: in.Progress, Coalesce: true})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "run_heartbeat", "Heartbeat", "Say that a running run is alive, so that it does not go stale while it works silently.",
		idempotent, func(ctx context.Context, _ *mcp.CallToolRequest, in runIn) (projectOut, error) {
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
		ends, func(ctx context.Context, _ *mcp.CallToolRequest, in finishIn) (projectOut, error) {
			p, r, err := m.projectRun(in.Project, in.Run)
			if err != nil {
				return projectOut{}, err
			}
			status := reducer.RunStatus(in.Status) // one of three: the schema says so
			// The wire finishes a run without a reason: the reason goes
			// first, as the run's progress. Whatever refuses the finish
			// refuses it too, but for a run that stops running between the
			// two (docs/mcp.md, run_finish).
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
		writes, func(ctx context.Context, _ *mcp.CallToolRequest, in taskAddIn) (taskAddOut, error) {
			if m.scope.run != "" {
				return taskAddOut{}, outOfScope("this session reports on run %s only: it adds no task", m.scope.run)
			}
			p, err := m.project(in.Project)
			if err != nil {
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
		asks, func(ctx context.Context, _ *mcp.CallToolRequest, in askIn) (askOut, error) {
			c := api.CmdConfirmAsk{Question: in.Question, Parent: delegationParent()}
			if in.Timeout != 0 {
				c.TimeoutSeconds = &in.Timeout
			}
			if in.Project != "" || in.Task != "" {
				p, err := m.project(in.Project)
				if err != nil {
					return askOut{}, err
				}
				c.Project = &p
				if in.Task != "" {
					c.Task = &in.Task
				}
			}
			q, err := m.c.question(c)
			if err != nil {
				return askOut{}, err
			}
			q, err = m.c.followQuestion(ctx, q, time.Now().Add(time.Duration(in.WaitSeconds)*time.Second))
			if err != nil {
				return askOut{}, err
			}
			return askOutOf(q), nil
		})
	tool(m, "owner_answer_status", "Answer of the owner", "Where a question to the owner stands: pending, yes, no, expired, withdrawn or failed. Asking keeps a pending question alive: one nobody asks about for a minute is withdrawn.",
		readOnly, func(ctx context.Context, _ *mcp.CallToolRequest, in askStatusIn) (askOut, error) {
			q, err := m.c.question(api.CmdConfirmStatus{ID: in.ID})
			if err != nil {
				return askOut{}, err
			}
			return askOutOf(q), nil
		})
}

func askOutOf(q *api.ConfirmInfo) askOut {
	return askOut{ID: q.ID, State: string(q.State), Chat: q.Chat, Deadline: q.DeadlineUnixSeconds}
}

// mcpStdio is the MCP transport of standard input and output. A message
// on standard input, one line as MCP's stdio transport has it, is at most
// mcpMaxMessage bytes (its newline not counted): a longer line is read to
// its end without being kept, and a request is answered here with a
// JSON-RPC error (reason too_large), said on log too, so that the session
// lives on. A message spread over several lines is bounded by the SDK's
// frame limit only, twice as much, past which the session ends.
func mcpStdio(in io.Reader, out, log io.Writer) mcp.Transport {
	w := &lockedWriter{w: out}
	r := &lineLimit{r: bufio.NewReaderSize(in, 64<<10), max: mcpMaxMessage, w: w, log: log}
	r.c, _ = in.(io.Closer)
	return &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: 2 * mcpMaxMessage}
}

// lockedWriter is w, written by the SDK and by lineLimit's answers, a
// message at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// lineLimit hands on r's lines of at most max bytes as they are, and
// answers the longer ones itself.
type lineLimit struct {
	r    *bufio.Reader
	c    io.Closer // r's source, if it closes
	max  int
	w    io.Writer // where an answer goes
	log  io.Writer
	line []byte // what is left to hand on of the current line
}

func (l *lineLimit) Read(p []byte) (int, error) {
	for len(l.line) == 0 {
		line, err := l.next()
		if err != nil {
			return 0, err
		}
		l.line = line
	}
	n := copy(p, l.line)
	l.line = l.line[n:]
	return n, nil
}

func (l *lineLimit) Close() error {
	if l.c == nil {
		return nil
	}
	return l.c.Close()
}

// next is the next line of at most max bytes, with its newline (the last
// line may have none); a longer one is answered and passed over.
func (l *lineLimit) next() ([]byte, error) {
	var (
		line []byte
		n    int         // the line's bytes so far, newline excluded
		over *msgScanner // once the line is too long: what is read of it
	)
	for {
		chunk, err := l.r.ReadSlice('\n')
		if err == nil && line == nil && over == nil && len(chunk)-1 <= l.max {
			return chunk, nil // whole in the buffer, and read only once handed on
		}
		n += len(bytes.TrimSuffix(chunk, []byte("\n")))
		switch {
		case over != nil:
			over.feed(chunk)
		case n > l.max:
			over = &msgScanner{}
			over.feed(line)
			over.feed(chunk)
			line = nil
		default:
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if over != nil {
			l.tooLarge(n, over)
			line, n, over = nil, 0, nil
			if err == nil {
				continue
			}
		}
		if len(line) > 0 {
			return line, nil // the error, if any, comes at the next call
		}
		return nil, err
	}
}

// tooLarge answers a line of n bytes, more than max, with a JSON-RPC
// error if it is a request, and says so on log.
func (l *lineLimit) tooLarge(n int, m *msgScanner) {
	msg := fmt.Sprintf("message too large: %d bytes on one line of standard input, more than the %d allowed", n, l.max)
	id, ok := m.requestID()
	if !ok {
		fmt.Fprintf(l.log, "scv mcp: %s: passed over (no request ID found, so no answer)\n", msg)
		return
	}
	fmt.Fprintf(l.log, "scv mcp: %s: answered with an error\n", msg)
	type rpcError struct {
		Code    int           `json:"code"`
		Message string        `json:"message"`
		Data    api.ErrorData `json:"data"`
	}
	b, err := json.Marshal(struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{api.CodeInvalidRequest, msg + " [" + api.ReasonTooLarge + "]", api.ErrorData{Reason: api.ReasonTooLarge}}})
	if err == nil {
		l.w.Write(append(b, '\n'))
	}
}

// msgScanner reads a JSON-RPC message a piece at a time, keeping only
// what its answer needs: whether it has a method, and its ID.
type msgScanner struct {
	depth      int
	inStr, esc bool
	wantKey    bool   // at depth 1, the next string is a key
	inKey      bool   // reading a key of depth 1
	key        []byte // that key, up to 8 bytes
	lastKey    string
	method     bool // the message has a method: a request or a notification
	inID       bool // reading the ID's value
	gotID      bool
	id         []byte // the ID's value, up to 65 bytes
}

func (s *msgScanner) feed(p []byte) {
	for _, b := range p {
		if s.inID {
			if !s.inStr && s.depth == 1 && (b == ',' || b == '}') {
				s.inID = false
			} else if len(s.id) <= mcpMaxID {
				s.id = append(s.id, b)
			}
		}
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case b == '\\':
				s.esc = true
			case b == '"':
				s.inStr = false
				if s.inKey {
					s.inKey, s.lastKey = false, string(s.key)
					s.method = s.method || s.lastKey == "method"
				}
			case s.inKey && len(s.key) < 8:
				s.key = append(s.key, b)
			}
			continue
		}
		switch b {
		case '"':
			s.inStr = true
			if s.depth == 1 && s.wantKey {
				s.wantKey, s.inKey, s.key = false, true, s.key[:0]
			}
		case '{', '[':
			s.depth++
			s.wantKey = s.depth == 1 && b == '{'
		case '}', ']':
			s.depth--
		case ',':
			s.wantKey = s.depth == 1
		case ':':
			if s.depth == 1 && s.lastKey == "id" && !s.gotID {
				s.inID, s.gotID = true, true
			}
		}
	}
}

// requestID is the message's ID, if it is a request with a string or a
// number for an ID.
func (s *msgScanner) requestID() (json.RawMessage, bool) {
	id := bytes.TrimSpace(s.id)
	if !s.method || !s.gotID || len(id) == 0 || len(id) > mcpMaxID || !json.Valid(id) {
		return nil, false
	}
	if c := id[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	return id, true
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
