package api

import (
	"encoding/json"
	"fmt"

	"scv/reducer"
)

// The wire types below mirror ../shared/seed/daemon.rs field for field and
// in serde's field order, so that encoding/json writes exactly what serde
// writes. Option<T> without skip_serializing_if is a pointer without
// omitempty (absent is null); with skip_serializing_if it has omitempty.

// ComponentState is where a channel account is in its lifecycle.
type ComponentState string

// The component states.
const (
	ComponentDisabled     ComponentState = "disabled"
	ComponentStarting     ComponentState = "starting"
	ComponentConnected    ComponentState = "connected"
	ComponentDisconnected ComponentState = "disconnected"
	ComponentBackoff      ComponentState = "backoff"
	ComponentStopping     ComponentState = "stopping"
	ComponentStopped      ComponentState = "stopped"
	ComponentFailed       ComponentState = "failed"
)

// Purpose is what a chat account carries.
type Purpose string

// The purposes.
const (
	PurposeChat Purpose = "chat"
	PurposeMail Purpose = "mail"
)

// RemoteTools is who may use tools through a remote bridge account.
type RemoteTools string

// The remote tool grants.
const (
	RemoteToolsNone  RemoteTools = "none"
	RemoteToolsOwner RemoteTools = "owner"
)

// Senders is whose messages a remote bridge account answers.
type Senders string

// The sender policies.
const (
	SendersOwner  Senders = "owner"
	SendersAnyone Senders = "anyone"
)

// ConfirmState is where a question to the owner stands.
type ConfirmState string

// The confirm states.
const (
	ConfirmPending   ConfirmState = "pending"
	ConfirmYes       ConfirmState = "yes"
	ConfirmNo        ConfirmState = "no"
	ConfirmExpired   ConfirmState = "expired"
	ConfirmWithdrawn ConfirmState = "withdrawn"
	ConfirmFailed    ConfirmState = "failed"
	ConfirmUnknown   ConfirmState = "unknown"
	// ConfirmNotice is an extension (confirm_list): a notice to the
	// owner, not a question (a project's budget reached,
	// docs/usage.md); it is never pending and takes no answer.
	ConfirmNotice ConfirmState = "notice"
)

// UnmarshalText accepts only the seed's variants.
func (s *ComponentState) UnmarshalText(b []byte) error {
	return parseEnum(s, b, ComponentDisabled, ComponentStarting, ComponentConnected, ComponentDisconnected,
		ComponentBackoff, ComponentStopping, ComponentStopped, ComponentFailed)
}

// UnmarshalText accepts only the seed's variants.
func (p *Purpose) UnmarshalText(b []byte) error { return parseEnum(p, b, PurposeChat, PurposeMail) }

// UnmarshalText accepts only the seed's variants.
func (r *RemoteTools) UnmarshalText(b []byte) error {
	return parseEnum(r, b, RemoteToolsNone, RemoteToolsOwner)
}

// UnmarshalText accepts only the seed's variants.
func (s *Senders) UnmarshalText(b []byte) error { return parseEnum(s, b, SendersOwner, SendersAnyone) }

// UnmarshalText maps states this build does not know to ConfirmUnknown,
// as the seed's #[serde(other)] does.
func (s *ConfirmState) UnmarshalText(b []byte) error {
	if parseEnum(s, b, ConfirmPending, ConfirmYes, ConfirmNo, ConfirmExpired, ConfirmWithdrawn, ConfirmFailed, ConfirmNotice) != nil {
		*s = ConfirmUnknown
	}
	return nil
}

func parseEnum[T ~string](dst *T, b []byte, variants ...T) error {
	for _, v := range variants {
		if string(v) == string(b) {
			*dst = v
			return nil
		}
	}
	list := ""
	for i, v := range variants {
		if i > 0 {
			list += ", "
		}
		list += "`" + string(v) + "`"
	}
	return fmt.Errorf("unknown variant `%s`, expected one of %s", b, list)
}

// ComponentHealth is the health of one channel account.
type ComponentHealth struct {
	ID                     string         `json:"id"`
	Channel                string         `json:"channel"`
	Account                string         `json:"account"`
	BotID                  *string        `json:"bot_id"`
	UserID                 *string        `json:"user_id"`
	Enabled                bool           `json:"enabled"`
	State                  ComponentState `json:"state"`
	LastSuccessUnixSeconds *uint64        `json:"last_success_unix_seconds"`
	Error                  *string        `json:"error"`
	Restarts               uint64         `json:"restarts"`
	RemoteTools            RemoteTools    `json:"remote_tools"`
	Senders                *Senders       `json:"senders,omitempty"`
	Purpose                *Purpose       `json:"purpose,omitempty"`
	Mail                   *MailCounts    `json:"mail,omitempty"`
	// Email is an extension: an email account's IMAP URL, user and mail
	// chat; absent for every other account.
	Email *EmailAccount `json:"email,omitempty"`
}

// MailCounts is an email account's activity, as counts only.
type MailCounts struct {
	Claimed              uint64  `json:"claimed"`
	Queued               uint64  `json:"queued"`
	SeenToday            uint64  `json:"seen_today"`
	TriagedToday         uint64  `json:"triaged_today"`
	ReportedToday        uint64  `json:"reported_today"`
	TokensToday          uint64  `json:"tokens_today"`
	TokenBudget          uint64  `json:"token_budget"`
	Messages24h          uint64  `json:"messages_24h"`
	LastCheckUnixSeconds *uint64 `json:"last_check_unix_seconds"`
}

// DaemonStatus is the result of every daemon.control request.
type DaemonStatus struct {
	Version     string            `json:"version"`
	PID         uint32            `json:"pid"`
	Components  []ComponentHealth `json:"components"`
	Delegations DelegationSummary `json:"delegations"`
	Restart     *RestartInfo      `json:"restart,omitempty"`
	Confirm     *ConfirmInfo      `json:"confirm,omitempty"`
	Project     *ProjectResponse  `json:"project,omitempty"`
	// Questions is an extension (confirm_list): not in the seed, whose
	// DaemonStatus ignores it.
	Questions []Question `json:"questions,omitempty"`
	// Projects is an extension (project_list): set, also empty, on its
	// replies only.
	Projects *[]ProjectListItem `json:"projects,omitempty"`
	// Agents is an extension (agent_list and the other agent actions):
	// the live agents the request is about.
	Agents *[]AgentInfo `json:"agents,omitempty"`
	// AgentUpdates is an extension (agent_updates, agent_prompt): a page
	// of one agent's updates.
	AgentUpdates *AgentUpdates `json:"agent_updates,omitempty"`
	// Task is an extension (project_task_show, project_task_next): one
	// task with its runs.
	Task *TaskDetail `json:"task,omitempty"`
	// Plan is an extension (project_plan_apply): what the plan did.
	Plan *PlanApplied `json:"plan,omitempty"`
	// Work is an extension (project_work and its kin): a project's work.
	Work *WorkInfo `json:"work,omitempty"`
}

// ProjectListItem is one project of project_list: the seed's
// ProjectSummary (a seed client reads it as one, ignoring the rest) and
// its running runs.
type ProjectListItem struct {
	ProjectSummary
	RunningRuns uint64 `json:"running_runs"`
}

// Question is one question to the owner with its text and outcome, as
// confirm_list lists it. An extension of the seed's ConfirmInfo.
type Question struct {
	// Seq is the question's latest step in the question log: a client
	// that has seen it asks with after: Seq for what changed since.
	Seq                 uint64       `json:"seq"`
	ID                  string       `json:"id"`
	Chat                string       `json:"chat"`
	Question            string       `json:"question"`
	State               ConfirmState `json:"state"`
	AskedUnixSeconds    uint64       `json:"asked_unix_seconds"`
	DeadlineUnixSeconds uint64       `json:"deadline_unix_seconds"`
	// DecidedUnixSeconds is when it left pending, DecidedBy who answered
	// or why it ended.
	DecidedUnixSeconds *uint64 `json:"decided_unix_seconds,omitempty"`
	DecidedBy          *string `json:"decided_by,omitempty"`
	// Requester is the delegation that asked (the last of its parent
	// chain), if any.
	Requester *string `json:"requester,omitempty"`
}

// DelegationSummary counts the instance's delegated agent runs.
type DelegationSummary struct {
	Active  uint64           `json:"active"`
	Idle    *uint64          `json:"idle,omitempty"`
	Reaped  uint64           `json:"reaped"`
	Entries []DelegationInfo `json:"entries,omitempty"`
	Killed  []string         `json:"killed,omitempty"`
}

// DelegationInfo is one running delegated agent.
type DelegationInfo struct {
	Handle               string  `json:"handle"`
	Agent                string  `json:"agent"`
	Session              string  `json:"session"`
	Depth                uint32  `json:"depth"`
	PID                  uint32  `json:"pid"`
	OwnerPID             uint32  `json:"owner_pid"`
	Processes            uint32  `json:"processes"`
	Cwd                  string  `json:"cwd"`
	StartedUnixSeconds   uint64  `json:"started_unix_seconds"`
	Orphaned             bool    `json:"orphaned"`
	Conversation         *string `json:"conversation,omitempty"`
	Turn                 *uint32 `json:"turn,omitempty"`
	IdleSinceUnixSeconds *uint64 `json:"idle_since_unix_seconds,omitempty"`
	BackgroundJobs       *uint32 `json:"background_jobs,omitempty"`
}

// RestartInfo is a restart waiting for owner work to end.
type RestartInfo struct {
	ToVersion           string  `json:"to_version"`
	WaitingFor          *string `json:"waiting_for,omitempty"`
	Requester           *string `json:"requester,omitempty"`
	Origin              *string `json:"origin,omitempty"`
	DeadlineUnixSeconds uint64  `json:"deadline_unix_seconds"`
}

// ConfirmInfo is a yes/no question to the owner.
type ConfirmInfo struct {
	ID                  string       `json:"id"`
	State               ConfirmState `json:"state"`
	Chat                string       `json:"chat"`
	DeadlineUnixSeconds uint64       `json:"deadline_unix_seconds"`
}

// ProjectSummary is a compact project record.
type ProjectSummary struct {
	ID                       string                `json:"id"`
	Name                     string                `json:"name"`
	Workspace                string                `json:"workspace"`
	Phase                    reducer.Phase         `json:"phase"`
	Status                   reducer.ProjectStatus `json:"status"`
	CreatedUnixSeconds       uint64                `json:"created_unix_seconds"`
	UpdatedUnixSeconds       uint64                `json:"updated_unix_seconds"`
	TaskCount                uint64                `json:"task_count"`
	CompletedTasks           uint64                `json:"completed_tasks"`
	LastHeartbeatUnixSeconds *uint64               `json:"last_heartbeat_unix_seconds"`
}

// ProjectTask is a task and its dependency and progress evidence.
type ProjectTask struct {
	ID                       string             `json:"id"`
	Title                    string             `json:"title"`
	Status                   reducer.TaskStatus `json:"status"`
	DependsOn                []string           `json:"depends_on"`
	Retries                  uint32             `json:"retries"`
	MaxRetries               uint32             `json:"max_retries"`
	RunID                    *string            `json:"run_id"`
	Progress                 *string            `json:"progress"`
	LastHeartbeatUnixSeconds *uint64            `json:"last_heartbeat_unix_seconds"`
	// The plan's fields, extensions (docs/protocol.md), each absent when
	// empty: priority when it is the default, 2; children is the number
	// of the tasks of an epic.
	Key            string   `json:"key,omitempty"`
	Description    string   `json:"description,omitempty"`
	Acceptance     string   `json:"acceptance,omitempty"`
	Priority       *int     `json:"priority,omitempty"`
	Labels         []string `json:"labels,omitempty"`
	Parent         string   `json:"parent,omitempty"`
	DiscoveredFrom string   `json:"discovered_from,omitempty"`
	Children       int      `json:"children,omitempty"`
	// Spend is an extension (docs/usage.md): what the task's runs spent,
	// when they reported any.
	Spend *reducer.Spend `json:"spend,omitempty"`
}

// ProjectRun is a run tracked by the ledger.
type ProjectRun struct {
	ID                 string            `json:"id"`
	TaskID             string            `json:"task_id"`
	Agent              string            `json:"agent"`
	Status             reducer.RunStatus `json:"status"`
	Attempt            uint32            `json:"attempt"`
	StartedUnixSeconds uint64            `json:"started_unix_seconds"`
	UpdatedUnixSeconds uint64            `json:"updated_unix_seconds"`
	Progress           *string           `json:"progress"`
	// Usage is an extension (docs/usage.md): what the run spent, when it
	// reported any.
	Usage *reducer.Usage `json:"usage,omitempty"`
}

// ProjectSpend is what a project spent against its budget: an extension
// (docs/usage.md) of the replies of project_status, project_tasks and
// project_report. BudgetReached says why the spend reached the budget,
// "" while it has not.
type ProjectSpend struct {
	Spend         reducer.Spend   `json:"spend"`
	Budget        *reducer.Budget `json:"budget,omitempty"`
	BudgetReached string          `json:"budget_reached,omitempty"`
}

// ProjectEvent is one durable event.
type ProjectEvent struct {
	Sequence             uint64          `json:"sequence"`
	ProjectID            string          `json:"project_id"`
	Kind                 string          `json:"kind"`
	TimestampUnixSeconds uint64          `json:"timestamp_unix_seconds"`
	Data                 json.RawMessage `json:"data"`
}

// ProjectReport is a report built from ledger state.
type ProjectReport struct {
	Project              ProjectSummary `json:"project"`
	Tasks                []ProjectTask  `json:"tasks"`
	Runs                 []ProjectRun   `json:"runs"`
	GeneratedUnixSeconds uint64         `json:"generated_unix_seconds"`
	Evidence             []string       `json:"evidence"`
	// Spend is an extension (docs/usage.md).
	Spend *ProjectSpend `json:"spend,omitempty"`
}

// ResponseKind tags a ProjectResponse.
type ResponseKind string

// The response kinds.
const (
	KindCreated    ResponseKind = "created"
	KindStatus     ResponseKind = "status"
	KindEvents     ResponseKind = "events"
	KindTasks      ResponseKind = "tasks"
	KindReport     ResponseKind = "report"
	KindUpdated    ResponseKind = "updated"
	KindTaskAdded  ResponseKind = "task_added"
	KindRunStarted ResponseKind = "run_started"
)

// ProjectResponse is the payload of a project command, tagged by Kind.
// Which other fields are set depends on Kind, as in the seed's enum:
//
//	created, updated:         Project
//	status:                   Project, Spend (an extension)
//	events:                   ProjectID, CompactedBefore (optional), Events
//	tasks:                    ProjectID, Tasks, Spend (an extension)
//	report:                   Report
//	task_added:               Project, TaskID
//	run_started:              Project, RunID
type ProjectResponse struct {
	Kind            ResponseKind
	Project         *ProjectSummary
	ProjectID       string
	CompactedBefore *uint64
	Events          []ProjectEvent
	Tasks           []ProjectTask
	Report          *ProjectReport
	TaskID          string
	RunID           string
	Spend           *ProjectSpend
}

// MarshalJSON writes the variant's fields in serde's order.
func (r ProjectResponse) MarshalJSON() ([]byte, error) {
	switch r.Kind {
	case KindCreated, KindStatus, KindUpdated:
		return marshal(struct {
			Kind    ResponseKind    `json:"kind"`
			Project *ProjectSummary `json:"project"`
			Spend   *ProjectSpend   `json:"spend,omitempty"`
		}{r.Kind, r.Project, r.Spend})
	case KindEvents:
		events := r.Events
		if events == nil {
			events = []ProjectEvent{}
		}
		return marshal(struct {
			Kind            ResponseKind   `json:"kind"`
			ProjectID       string         `json:"project_id"`
			CompactedBefore *uint64        `json:"compacted_before,omitempty"`
			Events          []ProjectEvent `json:"events"`
		}{r.Kind, r.ProjectID, r.CompactedBefore, events})
	case KindTasks:
		tasks := r.Tasks
		if tasks == nil {
			tasks = []ProjectTask{}
		}
		return marshal(struct {
			Kind      ResponseKind  `json:"kind"`
			ProjectID string        `json:"project_id"`
			Tasks     []ProjectTask `json:"tasks"`
			Spend     *ProjectSpend `json:"spend,omitempty"`
		}{r.Kind, r.ProjectID, tasks, r.Spend})
	case KindReport:
		return marshal(struct {
			Kind   ResponseKind   `json:"kind"`
			Report *ProjectReport `json:"report"`
		}{r.Kind, r.Report})
	case KindTaskAdded:
		return marshal(struct {
			Kind    ResponseKind    `json:"kind"`
			Project *ProjectSummary `json:"project"`
			TaskID  string          `json:"task_id"`
		}{r.Kind, r.Project, r.TaskID})
	case KindRunStarted:
		return marshal(struct {
			Kind    ResponseKind    `json:"kind"`
			Project *ProjectSummary `json:"project"`
			RunID   string          `json:"run_id"`
		}{r.Kind, r.Project, r.RunID})
	}
	return nil, fmt.Errorf("project response: unknown kind %q", r.Kind)
}

// UnmarshalJSON reads any variant.
func (r *ProjectResponse) UnmarshalJSON(b []byte) error {
	var v struct {
		Kind            ResponseKind    `json:"kind"`
		Project         *ProjectSummary `json:"project"`
		ProjectID       string          `json:"project_id"`
		CompactedBefore *uint64         `json:"compacted_before"`
		Events          []ProjectEvent  `json:"events"`
		Tasks           []ProjectTask   `json:"tasks"`
		Report          *ProjectReport  `json:"report"`
		TaskID          string          `json:"task_id"`
		RunID           string          `json:"run_id"`
		Spend           *ProjectSpend   `json:"spend"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = ProjectResponse(v)
	return nil
}
