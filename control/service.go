package control

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"scv/control/api"
	"scv/control/workspace"
	"scv/ledger"
	"scv/reducer"
)

// Service answers decoded commands: it turns each into one call of the
// ledger or of one of the daemon's services, and the result into a
// DaemonStatus.
type Service struct {
	Ledger  Ledger
	Version string
	PID     uint32
	// Clock stamps reports; defaults to the system clock.
	Clock func() time.Time
	// HeartbeatEvery coalesces heartbeats: at most one is journaled per
	// run (or task, or project) per interval. Zero journals every one.
	HeartbeatEvery time.Duration
	// Restarter schedules restart_when_idle; nil answers unimplemented.
	Restarter Restarter
	// Delegations is the registry of delegated runs; nil answers the
	// delegation actions unimplemented.
	Delegations Delegations
	// Channels runs the channel accounts; nil answers channel_set,
	// channel_logout and channel_login unimplemented (and reload as
	// status).
	Channels Channels
	// Questions asks the owner; nil answers the confirm actions
	// unimplemented.
	Questions Questions
	// Agents runs the live agents; nil answers the agent actions
	// unimplemented.
	Agents Agents
	// Work runs the projects' work; nil answers the work actions
	// unimplemented.
	Work Work
	// Metrics counts the requests answered, from every front-end (nil:
	// nothing).
	Metrics Metrics
}

// count records that cmd was answered, with err or not.
func (s *Service) count(cmd api.Command, err error) {
	if s.Metrics == nil {
		return
	}
	if err != nil {
		s.Metrics.Request(cmd.Action(), api.ErrorOf(err).Data.Reason)
	} else {
		s.Metrics.Request(cmd.Action(), "")
	}
}

// Ledger is the project ledger (*ledger.Ledger).
type Ledger interface {
	Execute(ctx context.Context, cmd reducer.Command) (ledger.Result, error)
	Submit(ctx context.Context, cmd reducer.Command, done func(ledger.Result, error))
	SubmitAll(ctx context.Context, cmds []reducer.Command, done func(i int, res ledger.Result, err error))
	Project(ctx context.Context, ref string) (*reducer.Project, error)
	EventsPage(ctx context.Context, projectID string, after uint64, limit int) (ledger.Page, error)
	EventsWhere(ctx context.Context, projectID string, upto uint64, keep func(data []byte) bool) ([]ledger.Row, error)
	Compact(ctx context.Context, project string, opts ledger.CompactOptions) (ledger.Compaction, error)
	Projects(ctx context.Context, all bool) ([]ledger.Summary, error)
}

// Delegations is the registry of delegated runs
// (*delegations.Registry).
type Delegations interface {
	// Active reports whether handle is registered and not finished.
	Active(handle string) bool
	// Summary counts the delegations; List lists them (all: the finished
	// ones kept too).
	Summary() api.DelegationSummary
	List(all bool) api.DelegationSummary
	Register(ctx context.Context, c api.CmdDelegationRegister) (api.DelegationInfo, error)
	// Done forgets a delegation whose command has exited, stopping what
	// is left of its tree (stopped says so).
	Done(ctx context.Context, handle string) (stopped bool, err error)
	Kill(ctx context.Context, handle string) error
	// Sweep stops every orphan's tree and returns their handles.
	Sweep(ctx context.Context) ([]string, error)
	// Update records the background jobs a process of the delegation
	// (the peer of ctx) reports, refusing one that does not own it.
	Update(ctx context.Context, c api.CmdDelegationUpdate) (api.DelegationInfo, error)
}

// Work runs the projects' work (*work.Manager).
type Work interface {
	StartWork(ctx context.Context, c api.CmdProjectWork) (api.WorkInfo, error)
	WorkStatus(ctx context.Context, c api.CmdProjectWorkStatus) (api.WorkInfo, error)
	StopWork(ctx context.Context, c api.CmdProjectWorkStop) (api.WorkInfo, error)
}

// Agents runs the live agents (*agents.Manager).
type Agents interface {
	StartAgent(ctx context.Context, c api.CmdAgentStart) (api.AgentInfo, api.DelegationInfo, error)
	ListAgents() []api.AgentInfo
	StopAgent(ctx context.Context, agent string) (api.AgentInfo, error)
	PromptAgent(ctx context.Context, c api.CmdAgentPrompt) (api.AgentInfo, api.AgentUpdates, error)
	CancelTurn(ctx context.Context, agent string) (api.AgentInfo, error)
	AgentUpdates(ctx context.Context, c api.CmdAgentUpdates) (api.AgentUpdates, error)
}

// Channels runs the daemon's channel accounts: their settings, and one
// component per enabled account.
type Channels interface {
	// Set creates or changes one account (channel_set); Logout stops it
	// and removes its settings, credentials and state. Invalid input is
	// refused (an *Error) and changes nothing.
	Set(ctx context.Context, c api.CmdChannelSet) error
	Logout(ctx context.Context, c api.CmdChannelLogout) error
	// Login sets an email account's IMAP URL, user and password
	// (channel_login), creating and enabling it.
	Login(ctx context.Context, c api.CmdChannelLogin) error
	// Reload rereads the settings file and reconciles the components.
	Reload(ctx context.Context) error
	// Components is every account's health, in ID order.
	Components() []api.ComponentHealth
}

// Questions asks the owner yes/no questions in chat.
type Questions interface {
	// Ask hands a question to a chat (confirm_ask).
	Ask(ctx context.Context, c api.CmdConfirmAsk) (api.ConfirmInfo, error)
	// Status reports where a question stands and keeps it alive
	// (confirm_status).
	Status(ctx context.Context, id string) (api.ConfirmInfo, error)
	// Answer records the owner's answer; by says who gave it.
	Answer(ctx context.Context, id string, yes bool, by string) (api.ConfirmInfo, error)
	// List is the questions that changed after c.After (confirm_list).
	List(ctx context.Context, c api.CmdConfirmList) ([]api.Question, error)
}

// Restarter restarts the daemon into the release installed at its own
// path once it is idle (restart_when_idle).
type Restarter interface {
	// RestartWhenIdle checks the request and schedules the restart, or
	// refuses it (an *Error) with nothing scheduled.
	RestartWhenIdle(c api.CmdRestartWhenIdle) (*api.RestartInfo, error)
	// Pending is the scheduled restart, or nil.
	Pending() *api.RestartInfo
}

// DelegationActive reports whether the delegation handle is registered and
// not finished.
func (s *Service) DelegationActive(handle string) bool {
	return s.Delegations != nil && s.Delegations.Active(handle)
}

func (s *Service) now() time.Time {
	if s.Clock != nil {
		return s.Clock()
	}
	return time.Now()
}

// status is the DaemonStatus every reply starts from.
func (s *Service) status(project *api.ProjectResponse) *api.DaemonStatus {
	st := &api.DaemonStatus{
		Version:    s.Version,
		PID:        s.PID,
		Components: []api.ComponentHealth{},
		Project:    project,
	}
	if s.Restarter != nil {
		st.Restart = s.Restarter.Pending()
	}
	if s.Delegations != nil {
		st.Delegations = s.Delegations.Summary()
	}
	if s.Channels != nil {
		st.Components = s.Channels.Components()
	}
	return st
}

// Handle runs one command: Service is the daemon's api.Handler.
func (s *Service) Handle(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	st, err := s.handle(ctx, cmd)
	s.count(cmd, err)
	return st, err
}

// handle is Handle without the count.
func (s *Service) handle(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	if w, ok, err := s.write(ctx, cmd); ok {
		if err != nil {
			return nil, err
		}
		res, err := s.Ledger.Execute(ctx, w.cmd)
		return w.answer(s, res, err)
	}
	switch c := cmd.(type) {
	case api.CmdStatus:
		return s.status(nil), nil
	case api.CmdReload:
		if s.Channels != nil {
			if err := s.Channels.Reload(ctx); err != nil {
				return nil, err
			}
		}
		return s.status(nil), nil
	case api.CmdChannelSet, api.CmdChannelLogout, api.CmdChannelLogin:
		if s.Channels == nil {
			break
		}
		if err := s.channel(ctx, c); err != nil {
			return nil, err
		}
		return s.status(nil), nil
	case api.CmdConfirmAsk, api.CmdConfirmStatus, api.CmdConfirmAnswer, api.CmdConfirmList:
		if s.Questions == nil {
			break
		}
		return s.confirm(ctx, c)
	case api.CmdProjectStatus:
		return s.read(ctx, c, c.Project)
	case api.CmdProjectTasks:
		return s.read(ctx, c, c.Project)
	case api.CmdProjectReport:
		return s.read(ctx, c, c.Project)
	case api.CmdProjectEvents:
		return s.events(ctx, c)
	case api.CmdProjectTaskShow:
		return s.taskShow(ctx, c)
	case api.CmdProjectReady:
		if err := reducer.ValidLabels("labels", c.Labels); err != nil {
			return nil, err
		}
		p, err := s.project(ctx, c.Project)
		if err != nil {
			return nil, err
		}
		return s.status(&api.ProjectResponse{Kind: api.KindTasks, ProjectID: p.ID, Tasks: api.ReadyTasksOf(p, c.Labels)}), nil
	case api.CmdDelegations, api.CmdDelegationKill, api.CmdDelegationRegister, api.CmdDelegationDone, api.CmdDelegationUpdate:
		if s.Delegations == nil {
			break
		}
		return s.delegations(ctx, c)
	case api.CmdAgentStart, api.CmdAgentList, api.CmdAgentStop, api.CmdAgentPrompt, api.CmdAgentCancel, api.CmdAgentUpdates:
		if s.Agents == nil {
			break
		}
		return s.agents(ctx, c)
	case api.CmdProjectWork, api.CmdProjectWorkStatus, api.CmdProjectWorkStop:
		if s.Work == nil {
			break
		}
		return s.work(ctx, c)
	case api.CmdRestartWhenIdle:
		if s.Restarter == nil {
			break
		}
		info, err := s.Restarter.RestartWhenIdle(c)
		if err != nil {
			return nil, err
		}
		st := s.status(nil)
		st.Restart = info
		return st, nil
	case api.CmdLedgerCompact:
		retain := min(deref(c.Retain), math.MaxInt32)
		if _, err := s.Ledger.Compact(ctx, c.Project, ledger.CompactOptions{Retain: int(retain), Drop: c.Drop}); err != nil {
			return nil, err
		}
		p, err := s.project(ctx, c.Project)
		if err != nil {
			return nil, err
		}
		return s.status(&api.ProjectResponse{Kind: api.KindUpdated, Project: api.ProjectSummaryOf(p)}), nil
	case api.CmdProjectList:
		status := deref(c.Status)
		rows, err := s.Ledger.Projects(ctx, c.All || status == reducer.ProjectArchived)
		if err != nil {
			return nil, err
		}
		if status != "" {
			rows = slices.DeleteFunc(rows, func(r ledger.Summary) bool { return r.Status != status })
		}
		st := s.status(nil)
		st.Projects = projectList(rows)
		return st, nil
	}
	return nil, api.NewError(api.CodeUnimplemented, api.ReasonUnimplemented, "action %s is not implemented by this daemon yet", cmd.Action())
}

// confirm answers the question actions.
func (s *Service) confirm(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	var info api.ConfirmInfo
	var err error
	switch c := cmd.(type) {
	case api.CmdConfirmAsk:
		info, err = s.Questions.Ask(ctx, c)
	case api.CmdConfirmStatus:
		info, err = s.Questions.Status(ctx, c.ID)
	case api.CmdConfirmAnswer:
		var yes bool
		switch c.Answer {
		case "yes":
			yes = true
		case "no":
		default:
			return nil, api.Errorf(api.ErrInvalidArgument, "answer %q: want yes or no", c.Answer)
		}
		info, err = s.Questions.Answer(ctx, c.ID, yes, api.Who(ctx))
	case api.CmdConfirmList:
		qs, err := s.Questions.List(ctx, c)
		if err != nil {
			return nil, err
		}
		st := s.status(nil)
		st.Questions = qs
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	st := s.status(nil)
	st.Confirm = &info
	return st, nil
}

// delegations answers the delegation actions.
func (s *Service) delegations(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	st := s.status(nil)
	switch c := cmd.(type) {
	case api.CmdDelegations:
		st.Delegations = s.Delegations.List(c.All)
	case api.CmdDelegationKill:
		switch {
		case c.Handle != nil && c.Orphans:
			return nil, api.Errorf(api.ErrInvalidArgument, "give a handle or orphans: true, not both")
		case c.Handle != nil:
			if err := s.Delegations.Kill(ctx, *c.Handle); err != nil {
				return nil, err
			}
			st.Delegations = s.Delegations.Summary()
			st.Delegations.Killed = []string{*c.Handle}
		case c.Orphans:
			killed, err := s.Delegations.Sweep(ctx)
			if err != nil {
				return nil, err
			}
			st.Delegations = s.Delegations.Summary()
			st.Delegations.Killed = killed
		default:
			return nil, api.Errorf(api.ErrInvalidArgument, "give a handle, or orphans: true")
		}
	case api.CmdDelegationRegister:
		info, err := s.Delegations.Register(ctx, c)
		if err != nil {
			return nil, err
		}
		st.Delegations = s.Delegations.Summary()
		st.Delegations.Entries = []api.DelegationInfo{info}
	case api.CmdDelegationDone:
		stopped, err := s.Delegations.Done(ctx, c.Handle)
		if err != nil {
			return nil, err
		}
		st.Delegations = s.Delegations.Summary()
		if stopped {
			st.Delegations.Killed = []string{c.Handle}
		}
	case api.CmdDelegationUpdate:
		info, err := s.Delegations.Update(ctx, c)
		if err != nil {
			return nil, err
		}
		st.Delegations = s.Delegations.Summary()
		st.Delegations.Entries = []api.DelegationInfo{info}
	}
	return st, nil
}

// work answers the work's actions: the work in `work`.
func (s *Service) work(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	var (
		info api.WorkInfo
		err  error
	)
	switch c := cmd.(type) {
	case api.CmdProjectWork:
		info, err = s.Work.StartWork(ctx, c)
	case api.CmdProjectWorkStatus:
		info, err = s.Work.WorkStatus(ctx, c)
	case api.CmdProjectWorkStop:
		info, err = s.Work.StopWork(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	st := s.status(nil)
	st.Work = &info
	return st, nil
}

// agents answers the live agents' actions: the agents concerned in
// `agents`, a page of updates in `agent_updates`, a new agent's
// delegation in `delegations.entries`.
func (s *Service) agents(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	var (
		info    api.AgentInfo
		list    []api.AgentInfo
		updates *api.AgentUpdates
		entry   *api.DelegationInfo
		err     error
	)
	switch c := cmd.(type) {
	case api.CmdAgentStart:
		var d api.DelegationInfo
		info, d, err = s.Agents.StartAgent(ctx, c)
		entry = &d
	case api.CmdAgentList:
		list = s.Agents.ListAgents()
	case api.CmdAgentStop:
		info, err = s.Agents.StopAgent(ctx, c.Agent)
	case api.CmdAgentPrompt:
		var u api.AgentUpdates
		info, u, err = s.Agents.PromptAgent(ctx, c)
		updates = &u
	case api.CmdAgentCancel:
		info, err = s.Agents.CancelTurn(ctx, c.Agent)
	case api.CmdAgentUpdates:
		var u api.AgentUpdates
		u, err = s.Agents.AgentUpdates(ctx, c)
		updates = &u
	}
	if err != nil {
		return nil, err
	}
	st := s.status(nil)
	if list == nil && info.Handle != "" {
		list = []api.AgentInfo{info}
	}
	if list != nil {
		st.Agents = &list
	}
	st.AgentUpdates = updates
	if entry != nil {
		st.Delegations.Entries = []api.DelegationInfo{*entry}
	}
	return st, nil
}

// Submit runs cmd as Handle does, but when the ledger's writer executes
// it, it does not wait: it reports true, and done is called with the
// answer by the goroutine that committed it (see ledger.Submit). Any
// other command is not run, and Submit reports false.
func (s *Service) Submit(ctx context.Context, cmd api.Command, done func(*api.DaemonStatus, error)) bool {
	w, ok, err := s.write(ctx, cmd)
	switch {
	case !ok:
		return false
	case err != nil:
		s.count(cmd, err)
		done(nil, err)
	default:
		s.Ledger.Submit(ctx, w.cmd, func(res ledger.Result, err error) {
			st, err := w.answer(s, res, err)
			s.count(cmd, err)
			done(st, err)
		})
	}
	return true
}

// write is a command the ledger's writer executes: the reducer's command,
// and what the reply says of it.
type write struct {
	kind api.ResponseKind
	id   string // the task or run ID the command minted
	cmd  reducer.Command
}

// write translates the commands the ledger's writer executes; ok is false
// for every other command.
func (s *Service) write(ctx context.Context, cmd api.Command) (w write, ok bool, err error) {
	switch c := cmd.(type) {
	case api.CmdProjectCreate:
		ws, err := workspace.Check(c.Workspace)
		return write{kind: api.KindCreated, cmd: reducer.CreateProject{ProjectID: newID(), Name: c.Name, Workspace: ws}}, true, err
	case api.CmdProjectTaskAdd:
		id := newID()
		return write{kind: api.KindTaskAdded, id: id, cmd: reducer.AddTask{
			Project: c.Project, TaskID: id, Title: c.Title, DependsOn: c.DependsOn, MaxRetries: c.MaxRetries,
			Description: deref(c.Description), Acceptance: deref(c.Acceptance), Priority: api.IntOf(c.Priority), Labels: c.Labels,
			Parent: deref(c.Parent), DiscoveredFrom: deref(c.DiscoveredFrom)}}, true, nil
	case api.CmdProjectTaskEdit:
		return write{kind: api.KindUpdated, cmd: reducer.EditTask{
			Project: c.Project, TaskID: c.Task, Title: c.Title, Description: c.Description, Acceptance: c.Acceptance,
			Priority: api.IntOf(c.Priority), Labels: c.Labels, Parent: c.Parent, DiscoveredFrom: c.DiscoveredFrom,
			DependsOn: c.DependsOn, By: api.Who(ctx)}}, true, nil
	case api.CmdProjectTaskNext:
		id := newID()
		return write{kind: api.KindRunStarted, id: id, cmd: reducer.NextTask{
			Project: c.Project, RunID: id, Agent: c.Agent, Labels: c.Labels}}, true, nil
	case api.CmdProjectPlanApply:
		if len(c.Tasks) > reducer.MaxPlanTasks { // before minting an ID for each
			return write{}, true, api.Errorf(api.ErrInvalidArgument, "the plan has %d tasks, more than %d", len(c.Tasks), reducer.MaxPlanTasks)
		}
		ids := make([]string, len(c.Tasks))
		for i := range ids {
			ids[i] = newID()
		}
		return write{kind: api.KindUpdated, cmd: reducer.ApplyPlan{
			Project: c.Project, Items: api.PlanItems(c.Tasks), IDs: ids, By: api.Who(ctx)}}, true, nil
	case api.CmdProjectTaskUpdate:
		return write{kind: api.KindUpdated, cmd: reducer.UpdateTask{
			Project: c.Project, TaskID: c.Task, Status: c.Status, Progress: c.Progress}}, true, nil
	case api.CmdProjectRunStart:
		id := newID()
		return write{kind: api.KindRunStarted, id: id, cmd: reducer.StartRun{
			Project: c.Project, TaskID: c.Task, RunID: id, Agent: c.Agent}}, true, nil
	case api.CmdProjectRunProgress:
		every := int64(0)
		if c.Coalesce {
			every = s.HeartbeatEvery.Milliseconds()
		}
		return write{kind: api.KindUpdated, cmd: reducer.ProgressRun{Project: c.Project, RunID: c.Run, Progress: c.Progress, Usage: c.Usage, Every: every}}, true, nil
	case api.CmdProjectRunFinish:
		return write{kind: api.KindUpdated, cmd: reducer.FinishRun{Project: c.Project, RunID: c.Run, Status: c.Status, Usage: c.Usage}}, true, nil
	case api.CmdProjectHeartbeat:
		return write{kind: api.KindUpdated, cmd: reducer.RecordHeartbeat{
			Project: c.Project, TaskID: deref(c.Task), RunID: deref(c.Run), Usage: c.Usage,
			Every: s.HeartbeatEvery.Milliseconds()}}, true, nil
	case api.CmdProjectBudget:
		cost, err := c.BudgetCost()
		return write{kind: api.KindUpdated, cmd: reducer.SetBudget{Project: c.Project, Tokens: c.Tokens, Cost: cost, By: api.Who(ctx)}}, true, err
	case api.CmdProjectTaskRetry:
		return write{kind: api.KindUpdated, cmd: reducer.RetryTask{Project: c.Project, TaskID: c.Task, MaxRetries: c.MaxRetries, By: api.Who(ctx)}}, true, nil
	case api.CmdProjectRelease:
		return write{kind: api.KindUpdated, cmd: reducer.ReleaseProject{Project: c.Project, By: api.Who(ctx)}}, true, nil
	case api.CmdProjectArchive:
		return write{kind: api.KindUpdated, cmd: reducer.ArchiveProject{Project: c.Project, By: api.Who(ctx)}}, true, nil
	}
	return write{}, false, nil
}

// answer is the reply to w, executed with res or err: the committed
// project summary.
func (w write) answer(s *Service, res ledger.Result, err error) (*api.DaemonStatus, error) {
	if err != nil {
		return nil, err
	}
	if res.Project == nil {
		return nil, fmt.Errorf("%s appended no event", w.kind)
	}
	s.tellBudget(res)
	r := &api.ProjectResponse{Kind: w.kind, Project: api.ProjectSummaryOf(res.Project)}
	switch w.kind {
	case api.KindTaskAdded:
		r.TaskID = w.id
	case api.KindRunStarted:
		r.RunID = w.id
	}
	st := s.status(r)
	switch c := w.cmd.(type) {
	case reducer.NextTask:
		run, _ := res.Project.Run(w.id)
		t, _ := res.Project.Task(run.TaskID)
		st.Task = api.TaskDetailOf(res.Project, t)
	case reducer.ApplyPlan:
		st.Plan = api.PlanAppliedOf(c, res.Events, res.Project)
	}
	return st, nil
}

// taskShow answers project_task_show: the project's status, and the task
// with its runs and the events that shaped it.
func (s *Service) taskShow(ctx context.Context, c api.CmdProjectTaskShow) (*api.DaemonStatus, error) {
	p, err := s.project(ctx, c.Project)
	if err != nil {
		return nil, err
	}
	t, err := p.ResolveTask(c.Task)
	if err != nil {
		return nil, err
	}
	d := api.TaskDetailOf(p, t)
	runs := make(map[string]bool, len(d.Runs))
	for _, r := range d.Runs {
		runs[r.ID] = true
	}
	rows, err := s.Ledger.EventsWhere(ctx, p.ID, p.LastSequence, func(data []byte) bool { return api.Concerns(data, t.ID, runs) })
	if err != nil {
		return nil, err
	}
	d.Events = make([]api.ProjectEvent, len(rows))
	for i, r := range rows {
		d.Events[i] = api.ProjectEvent{Sequence: r.Sequence, ProjectID: r.ProjectID, Kind: r.Kind,
			TimestampUnixSeconds: uint64(r.Timestamp), Data: []byte(r.Data)}
	}
	st := s.status(&api.ProjectResponse{Kind: api.KindStatus, Project: api.ProjectSummaryOf(p)})
	st.Task = d
	return st, nil
}

// read answers cmd, a read of project ref's state.
func (s *Service) read(ctx context.Context, cmd api.Command, ref string) (*api.DaemonStatus, error) {
	p, err := s.project(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.status(api.ProjectReplyOf(cmd, p, s.now().UnixMilli())), nil
}

func (s *Service) project(ctx context.Context, ref string) (*reducer.Project, error) {
	return s.Ledger.Project(ctx, ref)
}

func (s *Service) events(ctx context.Context, c api.CmdProjectEvents) (*api.DaemonStatus, error) {
	p, err := s.project(ctx, c.Project)
	if err != nil {
		return nil, err
	}
	page, err := s.Ledger.EventsPage(ctx, p.ID, deref(c.After), reducer.MaxEventsPage)
	if err != nil {
		return nil, err
	}
	rows := page.Rows
	events := make([]api.ProjectEvent, len(rows))
	for i, r := range rows {
		events[i] = api.ProjectEvent{
			Sequence: r.Sequence, ProjectID: r.ProjectID, Kind: r.Kind,
			TimestampUnixSeconds: uint64(r.Timestamp), Data: []byte(r.Data),
		}
	}
	r := &api.ProjectResponse{Kind: api.KindEvents, ProjectID: p.ID, Events: events}
	if page.CompactedBefore > 0 {
		r.CompactedBefore = &page.CompactedBefore
	}
	return s.status(r), nil
}

// projectList is project_list's list of the ledger's summary rows (never
// nil).
func projectList(rows []ledger.Summary) *[]api.ProjectListItem {
	out := make([]api.ProjectListItem, len(rows))
	for i, r := range rows {
		out[i] = api.ProjectListItem{
			ProjectSummary: api.ProjectSummary{
				ID: r.ID, Name: r.Name, Workspace: r.Workspace, Phase: r.Phase, Status: r.Status,
				CreatedUnixSeconds: api.Seconds(r.CreatedMs), UpdatedUnixSeconds: api.Seconds(r.UpdatedMs),
				TaskCount: uint64(r.Tasks), CompletedTasks: uint64(r.Done), LastHeartbeatUnixSeconds: api.SecondsOrNil(r.HeartbeatMs),
			},
			RunningRuns: uint64(r.Running),
		}
	}
	return &out
}

func newID() string { return ulid.Make().String() }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Teller tells the owner a notice (confirm.Manager.Tell); Questions that
// implement it hear of a project's budget reached.
type Teller interface {
	Tell(ctx context.Context, project, text string) error
}

// tellBudget tells the owner, once, that res's command made its
// project's spend reach the budget (reducer.Project.BudgetReachedAt is
// one of its events): in the background, for the committing goroutine
// must not wait.
func (s *Service) tellBudget(res ledger.Result) {
	p := res.Project
	at := p.BudgetReachedAt()
	t, ok := s.Questions.(Teller)
	if at == 0 || !ok || !slices.ContainsFunc(res.Events, func(e reducer.Event) bool { return e.Sequence == at }) {
		return
	}
	text := fmt.Sprintf("Project %s reached its budget: %s. No new run starts until you raise or remove it (scv project budget %s).",
		p.Name, p.BudgetReached(), p.Name)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := t.Tell(ctx, p.Name, text); err != nil {
			slog.Warn("the owner was not told the budget was reached", "project", p.Name, "err", err)
		}
	}()
}

// channel runs a command that changes one channel account.
func (s *Service) channel(ctx context.Context, cmd api.Command) error {
	switch c := cmd.(type) {
	case api.CmdChannelSet:
		return s.Channels.Set(ctx, c)
	case api.CmdChannelLogout:
		return s.Channels.Logout(ctx, c)
	case api.CmdChannelLogin:
		return s.Channels.Login(ctx, c)
	}
	return fmt.Errorf("not a channel command: %s", cmd.Action())
}
