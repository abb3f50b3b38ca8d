package api

import (
	"bytes"
	"fmt"
	"slices"

	"scv/reducer"
)

// Command is one DaemonCommand of the seed: the params of daemon.control,
// tagged by Action. Field tags mirror the seed; a field tagged
// `serde:"default"` may be missing, as the seed's #[serde(default)] allows;
// pointer fields are Option<T>, which serde lets be missing or null.
type Command interface {
	Action() string
}

// CmdStatus reports DaemonStatus.
type CmdStatus struct{}

// CmdReload rereads channel settings.
type CmdReload struct{}

// CmdChannelSet enables or disables one channel account.
type CmdChannelSet struct {
	Channel     string       `json:"channel"`
	Account     string       `json:"account"`
	Enabled     bool         `json:"enabled"`
	Workspace   *string      `json:"workspace"`
	RemoteTools *RemoteTools `json:"remote_tools,omitempty"`
	Senders     *Senders     `json:"senders,omitempty"`
	Purpose     *Purpose     `json:"purpose,omitempty"`
}

// CmdChannelLogout stops one channel account and removes its state.
type CmdChannelLogout struct {
	Channel string `json:"channel"`
	Account string `json:"account"`
}

// CmdDelegations lists running delegations.
type CmdDelegations struct {
	All bool `json:"all" serde:"default"`
}

// CmdDelegationKill stops one delegation or every orphan.
type CmdDelegationKill struct {
	Handle  *string `json:"handle,omitempty"`
	Orphans bool    `json:"orphans" serde:"default"`
}

// CmdRestartWhenIdle restarts into a newly installed release when idle.
type CmdRestartWhenIdle struct {
	Version        *string `json:"version,omitempty"`
	Commit         *string `json:"commit,omitempty"`
	Parent         *string `json:"parent,omitempty"`
	MaxWaitSeconds *uint64 `json:"max_wait_seconds,omitempty"`
}

// CmdConfirmAsk asks the owner a yes/no question. Project and Task are
// extensions (SPEC section 5): with Project, the question is an approval
// of that project (and of Task's next run, an ID or unique title), whose
// asking and outcome are events of the project.
type CmdConfirmAsk struct {
	Question       string  `json:"question"`
	Parent         *string `json:"parent,omitempty"`
	TimeoutSeconds *uint64 `json:"timeout_seconds,omitempty"`
	Project        *string `json:"project,omitempty"`
	Task           *string `json:"task,omitempty"`
}

// CmdConfirmStatus reports where a question stands.
type CmdConfirmStatus struct {
	ID string `json:"id"`
}

// CmdProjectCreate creates a project.
type CmdProjectCreate struct {
	Name      string `json:"name"`
	Workspace string `json:"workspace"`
}

// CmdProjectStatus reads a project's summary.
type CmdProjectStatus struct {
	Project string `json:"project"`
}

// CmdProjectEvents reads a project's events after a sequence: at most
// reducer.MaxEventsPage of them.
type CmdProjectEvents struct {
	Project string  `json:"project"`
	After   *uint64 `json:"after"`
}

// CmdProjectTasks reads a project's tasks.
type CmdProjectTasks struct {
	Project string `json:"project"`
}

// CmdProjectReport builds a project report.
type CmdProjectReport struct {
	Project string `json:"project"`
}

// CmdProjectTaskAdd adds a task. The fields after MaxRetries are
// extensions (docs/protocol.md, docs/plan.md): the plan's fields of the
// task, each optional; a seed client never sends them.
type CmdProjectTaskAdd struct {
	Project        string   `json:"project"`
	Title          string   `json:"title"`
	DependsOn      []string `json:"depends_on"`
	MaxRetries     uint32   `json:"max_retries"`
	Description    *string  `json:"description,omitempty"`
	Acceptance     *string  `json:"acceptance,omitempty"`
	Priority       *uint32  `json:"priority,omitempty"`
	Labels         []string `json:"labels,omitempty" serde:"default"`
	Parent         *string  `json:"parent,omitempty"`
	DiscoveredFrom *string  `json:"discovered_from,omitempty"`
}

// CmdProjectTaskEdit is an extension (action `project_task_edit`): it
// changes the plan's fields of a task; a field absent (or null) is kept,
// labels and depends_on replace the task's, an empty parent or
// discovered_from clears it. It answers `updated`; an edit that changes
// nothing appends nothing.
type CmdProjectTaskEdit struct {
	Project        string    `json:"project"`
	Task           string    `json:"task"`
	Title          *string   `json:"title,omitempty"`
	Description    *string   `json:"description,omitempty"`
	Acceptance     *string   `json:"acceptance,omitempty"`
	Priority       *uint32   `json:"priority,omitempty"`
	Labels         *[]string `json:"labels,omitempty"`
	Parent         *string   `json:"parent,omitempty"`
	DiscoveredFrom *string   `json:"discovered_from,omitempty"`
	DependsOn      *[]string `json:"depends_on,omitempty"`
}

// CmdProjectTaskShow is an extension (action `project_task_show`): one
// task with every field, its runs and the events that shaped it, in the
// reply's extension field `task`, after the project's `status`.
type CmdProjectTaskShow struct {
	Project string `json:"project"`
	Task    string `json:"task"`
}

// CmdProjectReady is an extension (action `project_ready`): the tasks
// ready to run, most urgent first, then the oldest, epics and tasks
// waiting for an approval left out, only those with every one of Labels.
// It answers `tasks`.
type CmdProjectReady struct {
	Project string   `json:"project"`
	Labels  []string `json:"labels,omitempty" serde:"default"`
}

// CmdProjectTaskNext is an extension (action `project_task_next`): it
// claims the first task project_ready lists (of Labels) and starts its
// run for Agent, in one write. It answers `run_started`, with the task
// in the extension field `task`; nothing ready is refused with reason
// nothing_ready.
type CmdProjectTaskNext struct {
	Project string   `json:"project"`
	Agent   string   `json:"agent"`
	Labels  []string `json:"labels,omitempty" serde:"default"`
}

// CmdProjectPlanApply is an extension (action `project_plan_apply`): it
// applies a plan's tasks (a plan file's `tasks`, docs/plan.md) all or
// nothing. It answers `updated`, with what it did in the extension field
// `plan`.
type CmdProjectPlanApply struct {
	Project string     `json:"project"`
	Tasks   []PlanTask `json:"tasks"`
}

// CmdProjectTaskUpdate records an observed task status.
type CmdProjectTaskUpdate struct {
	Project  string             `json:"project"`
	Task     string             `json:"task"`
	Status   reducer.TaskStatus `json:"status"`
	Progress *string            `json:"progress"`
}

// CmdProjectRunStart records a run starting.
type CmdProjectRunStart struct {
	Project string `json:"project"`
	Task    string `json:"task"`
	Agent   string `json:"agent"`
}

// CmdProjectRunProgress records a run's progress. Coalesce is an
// extension (docs/protocol.md): the progress is journaled at most once per
// the daemon's heartbeat interval, as heartbeats are; one that comes
// sooner after the run's last journaled progress or heartbeat is
// accepted and appends nothing. A seed client never sends it.
//
// Usage, an extension too (docs/usage.md), is what the run has spent so
// far, each report replacing the last.
type CmdProjectRunProgress struct {
	Project  string         `json:"project"`
	Run      string         `json:"run"`
	Progress string         `json:"progress"`
	Coalesce bool           `json:"coalesce,omitempty" serde:"default"`
	Usage    *reducer.Usage `json:"usage,omitempty"`
}

// CmdProjectRunFinish records a run's terminal status. Usage is an
// extension: what the run spent in all.
type CmdProjectRunFinish struct {
	Project string            `json:"project"`
	Run     string            `json:"run"`
	Status  reducer.RunStatus `json:"status"`
	Usage   *reducer.Usage    `json:"usage,omitempty"`
}

// CmdLedgerCompact is an extension of the seed's command set (action
// `ledger_compact`, docs/protocol.md): fold a project's live events into a
// snapshot, keeping its Retain newest (default 0) live, and move the rest
// to the archive (or, with Drop, deletes it). It answers `updated` with
// the project's summary.
type CmdLedgerCompact struct {
	Project string  `json:"project"`
	Retain  *uint64 `json:"retain,omitempty"`
	// Drop deletes the compacted events instead of archiving them.
	Drop bool `json:"drop,omitempty" serde:"default"`
}

// CmdDelegationRegister is an extension (action `delegation_register`,
// docs/protocol.md): an `scv delegate` process (the owner) registers the
// command it started. Parent is the SCV_PARENT chain the command runs
// with, ending with Handle; its length is the delegation's depth.
type CmdDelegationRegister struct {
	Handle   string `json:"handle"`
	Agent    string `json:"agent"`
	Session  string `json:"session" serde:"default"`
	Parent   string `json:"parent"`
	PID      uint32 `json:"pid"`
	OwnerPID uint32 `json:"owner_pid"`
	Cwd      string `json:"cwd"`
	// Chat is the chat that started the work (`<channel>:<account>`,
	// from SCV_CHAT), where the delegation's questions go.
	Chat string `json:"chat,omitempty" serde:"default"`
}

// CmdDelegationDone is an extension (action `delegation_done`): the owner
// reports that its command has exited. The daemon stops whatever is left
// of the tree and forgets the delegation.
type CmdDelegationDone struct {
	Handle string `json:"handle"`
}

// CmdConfirmList is an extension (action `confirm_list`): the questions to
// the owner, of one chat or of all, that changed after the question-log
// sequence After; with WaitSeconds (at most MaxListWait), it waits that
// long for one when there is none yet. `scv chat` follows a chat with it.
type CmdConfirmList struct {
	Chat        *string `json:"chat,omitempty"`
	After       *uint64 `json:"after,omitempty"`
	WaitSeconds *uint64 `json:"wait_seconds,omitempty"`
}

// MaxListWait bounds confirm_list's wait_seconds.
const MaxListWait = 30

// CmdConfirmAnswer is an extension (action `confirm_answer`): the owner's
// answer, `yes` or `no`, to a pending question.
type CmdConfirmAnswer struct {
	ID     string `json:"id"`
	Answer string `json:"answer"`
}

// CmdProjectList is an extension (action `project_list`): one summary per
// project in creation order, archived ones only with All (or a Status of
// archived), only those of Status when it is set. The reply's
// DaemonStatus carries them in its extension field `projects`.
type CmdProjectList struct {
	All    bool                   `json:"all,omitempty" serde:"default"`
	Status *reducer.ProjectStatus `json:"status,omitempty"`
}

// CmdProjectTaskRetry is an extension (action `project_task_retry`): the
// owner puts a failed task back to work, its retry budget started again
// (MaxRetries, when set, is the new budget). It answers `updated`.
type CmdProjectTaskRetry struct {
	Project    string  `json:"project"`
	Task       string  `json:"task"`
	MaxRetries *uint32 `json:"max_retries,omitempty"`
}

// CmdProjectRelease is an extension (action `project_release`): a project
// whose tasks are all done goes to phase production. It answers
// `updated`.
type CmdProjectRelease struct {
	Project string `json:"project"`
}

// CmdProjectArchive is an extension (action `project_archive`): the
// project goes to status archived and phase reporting, and takes no more
// writes. It answers `updated`.
type CmdProjectArchive struct {
	Project string `json:"project"`
}

// CmdProjectBudget is an extension (action `project_budget`,
// docs/usage.md): the owner sets the project's budget to the limits it
// names, tokens and cost (as "0.42USD", or Amount and Currency); a limit
// missing or null is none, and with neither the budget is removed. It
// answers `updated`.
type CmdProjectBudget struct {
	Project  string  `json:"project"`
	Tokens   *uint64 `json:"tokens,omitempty"`
	Cost     *string `json:"cost,omitempty"`
	Amount   *string `json:"amount,omitempty"`
	Currency *string `json:"currency,omitempty"`
}

// CmdProjectHeartbeat records a heartbeat. Usage is an extension, with
// Run: what the run has spent so far.
type CmdProjectHeartbeat struct {
	Project string         `json:"project"`
	Task    *string        `json:"task"`
	Run     *string        `json:"run"`
	Usage   *reducer.Usage `json:"usage,omitempty"`
}

func (CmdStatus) Action() string             { return "status" }
func (CmdReload) Action() string             { return "reload" }
func (CmdChannelSet) Action() string         { return "channel_set" }
func (CmdChannelLogout) Action() string      { return "channel_logout" }
func (CmdDelegations) Action() string        { return "delegations" }
func (CmdDelegationKill) Action() string     { return "delegation_kill" }
func (CmdRestartWhenIdle) Action() string    { return "restart_when_idle" }
func (CmdConfirmAsk) Action() string         { return "confirm_ask" }
func (CmdConfirmStatus) Action() string      { return "confirm_status" }
func (CmdProjectCreate) Action() string      { return "project_create" }
func (CmdProjectStatus) Action() string      { return "project_status" }
func (CmdProjectEvents) Action() string      { return "project_events" }
func (CmdProjectTasks) Action() string       { return "project_tasks" }
func (CmdProjectReport) Action() string      { return "project_report" }
func (CmdProjectTaskAdd) Action() string     { return "project_task_add" }
func (CmdProjectTaskUpdate) Action() string  { return "project_task_update" }
func (CmdProjectRunStart) Action() string    { return "project_run_start" }
func (CmdProjectRunProgress) Action() string { return "project_run_progress" }
func (CmdProjectRunFinish) Action() string   { return "project_run_finish" }
func (CmdProjectHeartbeat) Action() string   { return "project_heartbeat" }
func (CmdLedgerCompact) Action() string      { return "ledger_compact" }
func (CmdDelegationRegister) Action() string { return "delegation_register" }
func (CmdDelegationDone) Action() string     { return "delegation_done" }
func (CmdConfirmList) Action() string        { return "confirm_list" }
func (CmdConfirmAnswer) Action() string      { return "confirm_answer" }
func (CmdProjectList) Action() string        { return "project_list" }
func (CmdProjectTaskRetry) Action() string   { return "project_task_retry" }
func (CmdProjectRelease) Action() string     { return "project_release" }
func (CmdProjectArchive) Action() string     { return "project_archive" }
func (CmdProjectTaskEdit) Action() string    { return "project_task_edit" }
func (CmdProjectTaskShow) Action() string    { return "project_task_show" }
func (CmdProjectReady) Action() string       { return "project_ready" }
func (CmdProjectTaskNext) Action() string    { return "project_task_next" }
func (CmdProjectPlanApply) Action() string   { return "project_plan_apply" }
func (CmdProjectBudget) Action() string      { return "project_budget" }

// Commands lists a zero value of every command: the seed's, in the
// seed's order, then the extensions. The decoder builds a new value of
// the matching type for each request.
func Commands() []Command { return slices.Clone(commands) }

var commands = []Command{
	CmdStatus{}, CmdReload{}, CmdChannelSet{}, CmdChannelLogout{},
	CmdDelegations{}, CmdDelegationKill{}, CmdRestartWhenIdle{},
	CmdConfirmAsk{}, CmdConfirmStatus{},
	CmdProjectCreate{}, CmdProjectStatus{}, CmdProjectEvents{},
	CmdProjectTasks{}, CmdProjectReport{}, CmdProjectTaskAdd{},
	CmdProjectTaskUpdate{}, CmdProjectRunStart{}, CmdProjectRunProgress{},
	CmdProjectRunFinish{}, CmdProjectHeartbeat{},
	// Extensions, after the seed's own.
	CmdLedgerCompact{}, CmdDelegationRegister{}, CmdDelegationDone{},
	CmdConfirmList{}, CmdConfirmAnswer{},
	CmdProjectList{}, CmdProjectTaskRetry{}, CmdProjectRelease{}, CmdProjectArchive{},
	CmdAgentStart{}, CmdAgentList{}, CmdAgentStop{}, CmdAgentPrompt{}, CmdAgentCancel{}, CmdAgentUpdates{},
	CmdDelegationUpdate{},
	CmdProjectTaskEdit{}, CmdProjectTaskShow{}, CmdProjectReady{}, CmdProjectTaskNext{}, CmdProjectPlanApply{},
	CmdProjectBudget{},
	CmdProjectWork{}, CmdProjectWorkStatus{}, CmdProjectWorkStop{},
	CmdChannelLogin{},
}

// EncodeCommand writes c as serde writes the seed's DaemonCommand: the
// `action` tag first, then the variant's fields in order.
func EncodeCommand(c Command) ([]byte, error) {
	body, err := marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.Action(), err)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"action":`)
	tag, _ := marshal(c.Action())
	buf.Write(tag)
	if len(body) > 2 { // more than "{}"
		buf.WriteByte(',')
		buf.Write(body[1:])
	} else {
		buf.WriteByte('}')
	}
	return buf.Bytes(), nil
}

// BudgetCost is the cost limit c names, nil for none: its Cost, or its
// Amount and Currency, never both.
func (c CmdProjectBudget) BudgetCost() (*reducer.Cost, error) {
	switch {
	case c.Cost != nil && (c.Amount != nil || c.Currency != nil):
		return nil, Errorf(ErrInvalidArgument, "project_budget: name the cost as cost, or as amount and currency, not both")
	case c.Cost != nil:
		k, err := reducer.ParseCost(*c.Cost)
		return &k, err
	case c.Amount == nil && c.Currency == nil:
		return nil, nil
	case c.Amount == nil || c.Currency == nil:
		return nil, Errorf(ErrInvalidArgument, "project_budget: a cost's amount and currency go together")
	}
	k, err := reducer.ParseCost(*c.Amount + *c.Currency)
	return &k, err
}
