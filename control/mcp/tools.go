package mcp

import (
	"context"
	"encoding/json"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/control/api"
	"scv/control/follow"
	"scv/reducer"
)

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

func (m *server) addReading() {
	tool(m, "project_list", "List projects", "Every project (in a session with --project, that one) with its status, phase, tasks done and runs running.",
		readOnly, func(ctx context.Context, _ *sdk.CallToolRequest, in projectListIn) (projectListOut, error) {
			st, err := m.do(ctx, api.CmdProjectList{All: in.All})
			if err != nil {
				return projectListOut{}, err
			}
			out := projectListOut{Projects: []api.ProjectListItem{}}
			m.scoped(ctx) // the scope's ID, if not known yet
			for _, p := range *st.Projects {
				if m.inScope(p.ID, p.Name) {
					out.Projects = append(out.Projects, p)
				}
			}
			return out, nil
		})
	tool(m, "project_status", "Project status", "A project's summary: phase, status, tasks done, last heartbeat.",
		readOnly, func(ctx context.Context, _ *sdk.CallToolRequest, in projectIn) (projectOut, error) {
			p, err := m.project(ctx, in.Project)
			if err != nil {
				return projectOut{}, err
			}
			st, err := m.do(ctx, api.CmdProjectStatus{Project: p})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "project_tasks", "Project tasks", "A project's tasks: status, dependencies, retries, running run, progress.",
		readOnly, func(ctx context.Context, _ *sdk.CallToolRequest, in projectIn) (tasksOut, error) {
			p, err := m.project(ctx, in.Project)
			if err != nil {
				return tasksOut{}, err
			}
			st, err := m.do(ctx, api.CmdProjectTasks{Project: p})
			if err != nil {
				return tasksOut{}, err
			}
			return tasksOut{ProjectID: st.Project.ProjectID, Tasks: st.Project.Tasks}, nil
		})
	tool(m, "project_report", "Project report", "A project's report: its summary, tasks, runs with their attempts, and the evidence notes that say what holds it up.",
		readOnly, func(ctx context.Context, _ *sdk.CallToolRequest, in projectIn) (reportOut, error) {
			p, err := m.project(ctx, in.Project)
			if err != nil {
				return reportOut{}, err
			}
			st, err := m.do(ctx, api.CmdProjectReport{Project: p})
			if err != nil {
				return reportOut{}, err
			}
			return reportOut{Report: *st.Project.Report}, nil
		})
	tool(m, "project_events", "Project events", "A project's history, the events after a sequence, oldest first, at most limit of them (1 to 1,000, default 100): page with after = next while more is true.",
		readOnly, func(ctx context.Context, _ *sdk.CallToolRequest, in eventsIn) (eventsOut, error) {
			p, err := m.project(ctx, in.Project)
			if err != nil {
				return eventsOut{}, err
			}
			limit := in.Limit
			if limit == 0 {
				limit = defaultEvents
			}
			after := in.After
			st, err := m.do(ctx, api.CmdProjectEvents{Project: p, After: &after})
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
			if len(r.Events) >= reducer.MaxEventsPage { // a full page of the daemon's: there may be more
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
	Project  string         `json:"project,omitempty" jsonschema:"the run's project (default: the session's project)"`
	Run      string         `json:"run,omitempty" jsonschema:"the run's ID (default: the session's run)"`
	Progress string         `json:"progress" jsonschema:"what the run is doing now, one line"`
	Usage    *reducer.Usage `json:"usage,omitempty" jsonschema:"what the run has spent so far: tokens by kind, cost (amount as a decimal string, currency code), model; each report replaces the last and may not be lower"`
}

type runIn struct {
	Project string         `json:"project,omitempty" jsonschema:"the run's project (default: the session's project)"`
	Run     string         `json:"run,omitempty" jsonschema:"the run's ID (default: the session's run)"`
	Usage   *reducer.Usage `json:"usage,omitempty" jsonschema:"what the run has spent so far: tokens by kind, cost (amount as a decimal string, currency code), model; each report replaces the last and may not be lower"`
}

type finishIn struct {
	Project string         `json:"project,omitempty" jsonschema:"the run's project (default: the session's project)"`
	Run     string         `json:"run,omitempty" jsonschema:"the run's ID (default: the session's run)"`
	Status  string         `json:"status" jsonschema:"how the run ended: succeeded, failed or cancelled"`
	Reason  string         `json:"reason,omitempty" jsonschema:"why, in a line: recorded as the run's last progress"`
	Usage   *reducer.Usage `json:"usage,omitempty" jsonschema:"what the run spent in all: tokens by kind, cost (amount as a decimal string, currency code), model"`
}

type taskAddIn struct {
	Project        string   `json:"project,omitempty" jsonschema:"the project's name or ID (default: the session's project)"`
	Title          string   `json:"title" jsonschema:"the task's title"`
	DependsOn      []string `json:"depends_on,omitempty" jsonschema:"the tasks of the project that must be done first, each by its ID (or its title when no other task has it)"`
	MaxRetries     uint32   `json:"max_retries,omitempty" jsonschema:"failed runs that are retried (default 0: the first failure is final)"`
	Description    string   `json:"description,omitempty" jsonschema:"the statement of the work, markdown"`
	Acceptance     string   `json:"acceptance,omitempty" jsonschema:"how to tell the work is done"`
	Priority       *uint32  `json:"priority,omitempty" jsonschema:"0 the most urgent to 4 the least (default 2)"`
	Labels         []string `json:"labels,omitempty" jsonschema:"short names to pick tasks by (task_next's labels)"`
	Parent         string   `json:"parent,omitempty" jsonschema:"the task's epic, a task of the project by its ID (or its title when no other task has it)"`
	DiscoveredFrom *string  `json:"discovered_from,omitempty" jsonschema:"the run during which the work was found (default: the session's run, the one it is bound to or the last it claimed; an empty string for none)"`
}

type taskGetIn struct {
	Project string `json:"project,omitempty" jsonschema:"the project's name or ID (default: the session's project)"`
	Task    string `json:"task,omitempty" jsonschema:"the task's ID, or its title when no other task of the project has it (default: the task of the session's run)"`
}

type taskGetOut struct {
	Task taskOut `json:"task" jsonschema:"the task with every field (description, acceptance, priority, labels, parent, discovered_from, children), its attempts and its runs in the order they started"`
}

type taskNextIn struct {
	Project string   `json:"project,omitempty" jsonschema:"the project's name or ID (default: the session's project)"`
	Agent   string   `json:"agent,omitempty" jsonschema:"who works on it (default: the MCP client's name)"`
	Labels  []string `json:"labels,omitempty" jsonschema:"claim only a task with every one of these labels"`
}

type taskNextOut struct {
	RunID   string             `json:"run_id" jsonschema:"the run: give it to run_progress, run_heartbeat and run_finish"`
	Agent   string             `json:"agent" jsonschema:"the run's agent, as the ledger records it"`
	Task    taskOut            `json:"task" jsonschema:"the task claimed, with every field: read its description and acceptance"`
	Project api.ProjectSummary `json:"project"`
}

type taskAddOut struct {
	TaskID  string             `json:"task_id"`
	Project api.ProjectSummary `json:"project"`
}

func (m *server) addWorking() {
	tool(m, "task_claim", "Claim a task", "Start a run of a ready task of the project: the task is yours until you finish the run. Returns the run's ID.",
		writes, func(ctx context.Context, req *sdk.CallToolRequest, in claimIn) (claimOut, error) {
			if m.opts.Run != "" {
				return claimOut{}, outOfScope("this session reports on run %s only: it claims no task", m.opts.Run)
			}
			p, err := m.project(ctx, in.Project)
			if err != nil {
				return claimOut{}, err
			}
			agent := m.agent(req, in.Agent)
			st, err := m.do(ctx, api.CmdProjectRunStart{Project: p, Task: in.Task, Agent: agent})
			if err != nil {
				return claimOut{}, err
			}
			m.claimed(st.Project.RunID)
			return claimOut{RunID: st.Project.RunID, Agent: agent, Project: *st.Project.Project}, nil
		})
	tool(m, "task_next", "Take the next task", "Claim the project's next ready task (the most urgent, then the oldest; epics are never claimed) and start its run, in one write: no other claimer gets it. Returns the run's ID and the task with its description and acceptance. Nothing ready is an error that says why (nothing_ready).",
		writes, func(ctx context.Context, req *sdk.CallToolRequest, in taskNextIn) (taskNextOut, error) {
			if m.opts.Run != "" {
				return taskNextOut{}, outOfScope("this session reports on run %s only: it claims no task", m.opts.Run)
			}
			p, err := m.project(ctx, in.Project)
			if err != nil {
				return taskNextOut{}, err
			}
			agent := m.agent(req, in.Agent)
			st, err := m.do(ctx, api.CmdProjectTaskNext{Project: p, Agent: agent, Labels: in.Labels})
			if err != nil {
				return taskNextOut{}, err
			}
			m.claimed(st.Project.RunID)
			return taskNextOut{RunID: st.Project.RunID, Agent: agent, Task: taskOf(st.Task), Project: *st.Project.Project}, nil
		})
	tool(m, "run_progress", "Report progress", "Record what a running run is doing. Progress is journaled at most once per the daemon's heartbeat interval; one sent sooner is accepted and not journaled (send it again later, or give it as run_finish's reason). Counts as a heartbeat.",
		writes, func(ctx context.Context, _ *sdk.CallToolRequest, in progressIn) (projectOut, error) {
			p, r, err := m.projectRun(ctx, in.Project, in.Run)
			if err != nil {
				return projectOut{}, err
			}
			st, err := m.do(ctx, api.CmdProjectRunProgress{Project: p, Run: r, Progress: in.Progress, Coalesce: true, Usage: in.Usage})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "run_heartbeat", "Heartbeat", "Say that a running run is alive, so that it does not go stale while it works silently.",
		idempotent, func(ctx context.Context, _ *sdk.CallToolRequest, in runIn) (projectOut, error) {
			p, r, err := m.projectRun(ctx, in.Project, in.Run)
			if err != nil {
				return projectOut{}, err
			}
			st, err := m.do(ctx, api.CmdProjectHeartbeat{Project: p, Run: &r, Usage: in.Usage})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "run_finish", "Finish a run", "End a running run: succeeded (the task is done), failed (a retry of the task is spent) or cancelled (no retry spent), with a reason. A finished run takes no more reports.",
		ends, func(ctx context.Context, _ *sdk.CallToolRequest, in finishIn) (projectOut, error) {
			p, r, err := m.projectRun(ctx, in.Project, in.Run)
			if err != nil {
				return projectOut{}, err
			}
			status := reducer.RunStatus(in.Status) // one of three: the schema says so
			// The wire finishes a run without a reason: the reason goes
			// first, as the run's progress. Whatever refuses the finish
			// refuses it too, but for a run that stops running between the
			// two (docs/mcp.md, run_finish).
			if in.Reason != "" {
				if _, err := m.do(ctx, api.CmdProjectRunProgress{Project: p, Run: r, Progress: in.Reason}); err != nil {
					return projectOut{}, err
				}
			}
			st, err := m.do(ctx, api.CmdProjectRunFinish{Project: p, Run: r, Status: status, Usage: in.Usage})
			if err != nil {
				return projectOut{}, err
			}
			return projectOut{Project: *st.Project.Project}, nil
		})
	tool(m, "task_add", "Add a task", "Add a task to the project, after the tasks it depends on, with what it asks (description, acceptance), its priority, labels and epic (parent). Work found while doing a run records it: discovered_from is the session's run unless given.",
		writes, func(ctx context.Context, _ *sdk.CallToolRequest, in taskAddIn) (taskAddOut, error) {
			p, err := m.project(ctx, in.Project)
			if err != nil {
				return taskAddOut{}, err
			}
			deps := in.DependsOn
			if deps == nil {
				deps = []string{}
			}
			from := in.DiscoveredFrom
			if from == nil {
				from = m.sessionRun()
			}
			c := api.CmdProjectTaskAdd{Project: p, Title: in.Title, DependsOn: deps, MaxRetries: in.MaxRetries,
				Priority: in.Priority, Labels: in.Labels, Description: nonEmpty(in.Description),
				Acceptance: nonEmpty(in.Acceptance), Parent: nonEmpty(in.Parent)}
			if from != nil && *from != "" {
				c.DiscoveredFrom = from
			}
			st, err := m.do(ctx, c)
			if err != nil {
				return taskAddOut{}, err
			}
			return taskAddOut{TaskID: st.Project.TaskID, Project: *st.Project.Project}, nil
		})
}

// addPlanReading adds the tools that read the plan: one task with every
// field.
func (m *server) addPlanReading() {
	tool(m, "task_get", "Read a task", "One task with every field, for an agent to read its work: title, description, acceptance, priority, labels, epic (parent) and children, discovered_from, status, and its runs with their attempts. Without task, the task of the session's run.",
		readOnly, func(ctx context.Context, _ *sdk.CallToolRequest, in taskGetIn) (taskGetOut, error) {
			p, err := m.project(ctx, in.Project)
			if err != nil {
				return taskGetOut{}, err
			}
			task := in.Task
			if task == "" {
				if task, err = m.sessionTask(ctx, p); err != nil {
					return taskGetOut{}, err
				}
			}
			st, err := m.do(ctx, api.CmdProjectTaskShow{Project: p, Task: task})
			if err != nil {
				return taskGetOut{}, err
			}
			return taskGetOut{Task: taskOf(st.Task)}, nil
		})
}

// taskOut is a task as task_get and task_next give it: every field and
// its runs, without the events that shaped it (project_events has them).
type taskOut struct {
	api.ProjectTask
	Attempts uint32           `json:"attempts" jsonschema:"the runs the task has had"`
	Runs     []api.ProjectRun `json:"runs" jsonschema:"the task's runs, in the order they started"`
}

// taskOf is d as taskOut.
func taskOf(d *api.TaskDetail) taskOut {
	t := taskOut{ProjectTask: d.ProjectTask, Attempts: d.Attempts, Runs: d.Runs}
	if t.Runs == nil {
		t.Runs = []api.ProjectRun{}
	}
	return t
}

// nonEmpty is s, or nil when it is empty: an argument left out.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// agent is the agent a run claimed in this session is recorded with:
// want, else the MCP client's name, else "mcp"; in a delegation, its
// chain after it (Options.Parent).
func (m *server) agent(req *sdk.CallToolRequest, want string) string {
	a := want
	if a == "" && req != nil && req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
			a = p.ClientInfo.Name
		}
	}
	if a == "" {
		a = "mcp"
	}
	if m.opts.Parent != "" {
		a += " [" + m.opts.Parent + "]"
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

func (m *server) addOwner() {
	tool(m, "owner_ask", "Ask the owner", "Ask the owner a yes/no question, in the chat that started the work (or the owner's notify chat). With wait_seconds (at most 600), wait that long for the answer; the result is the answer, or pending with the question's ID for owner_answer_status. Only yes means yes.",
		asks, func(ctx context.Context, _ *sdk.CallToolRequest, in askIn) (askOut, error) {
			c := api.CmdConfirmAsk{Question: in.Question}
			if m.opts.Parent != "" {
				c.Parent = &m.opts.Parent
			}
			if in.Timeout != 0 {
				c.TimeoutSeconds = &in.Timeout
			}
			if in.Project != "" || in.Task != "" {
				p, err := m.project(ctx, in.Project)
				if err != nil {
					return askOut{}, err
				}
				c.Project = &p
				if in.Task != "" {
					c.Task = &in.Task
				}
			}
			q, err := follow.Question(ctx, api.HandlerFunc(m.do), c)
			if err != nil {
				return askOut{}, err
			}
			q, err = follow.Answer(ctx, api.HandlerFunc(m.do), q, time.Now().Add(time.Duration(in.WaitSeconds)*time.Second))
			if err != nil {
				return askOut{}, err
			}
			return askOutOf(q), nil
		})
	tool(m, "owner_answer_status", "Answer of the owner", "Where a question to the owner stands: pending, yes, no, expired, withdrawn or failed. Asking keeps a pending question alive: one nobody asks about for a minute is withdrawn.",
		readOnly, func(ctx context.Context, _ *sdk.CallToolRequest, in askStatusIn) (askOut, error) {
			q, err := follow.Question(ctx, api.HandlerFunc(m.do), api.CmdConfirmStatus{ID: in.ID})
			if err != nil {
				return askOut{}, err
			}
			return askOutOf(q), nil
		})
}

func askOutOf(q *api.ConfirmInfo) askOut {
	return askOut{ID: q.ID, State: string(q.State), Chat: q.Chat, Deadline: q.DeadlineUnixSeconds}
}
