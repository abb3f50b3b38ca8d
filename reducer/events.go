package reducer

import (
	"encoding/json"
	"fmt"
)

// Event is one fact in a project's history. The ledger assigns Sequence at
// append; Decide leaves it zero.
type Event struct {
	Sequence  uint64
	ProjectID string
	Time      int64 // Unix milliseconds, the daemon's clock at append
	Body      Body
	// Hash is the event's link in its project's hash chain, set by the
	// ledger at append; the reducer only keeps the newest as the
	// project's ChainHead.
	Hash []byte
}

// Body is the kind-specific evidence of an event. Its JSON encoding is the
// event's stored `data`; Kind is its stored `kind`.
type Body interface{ Kind() string }

// The event kinds, as stored in the events table.
const (
	KindProjectCreated = "project_created"
	KindTaskAdded      = "task_added"
	KindTaskUpdated    = "task_updated"
	KindTaskEdited     = "task_edited"
	KindRunStarted     = "run_started"
	KindRunProgress    = "run_progress"
	KindRunFinished    = "run_finished"
	KindRunStale       = "run_stale"
	KindHeartbeat      = "heartbeat"
	// The owner's decisions (SPEC section 5).
	KindTaskRetried     = "task_retried"
	KindApprovalAsked   = "approval_asked"
	KindApprovalDecided = "approval_decided"
	KindProjectReleased = "project_released"
	KindProjectArchived = "project_archived"
)

// ProjectCreated opens a project's history.
type ProjectCreated struct {
	Name      string `json:"name"`
	Workspace string `json:"workspace"`
}

// TaskAdded adds a task; its first status is derived from its dependencies.
type TaskAdded struct {
	TaskID     string   `json:"task_id"`
	Title      string   `json:"title"`
	DependsOn  []string `json:"depends_on"`
	MaxRetries uint32   `json:"max_retries"`
	// The plan's fields (docs/plan.md), absent from histories older
	// than the plan: Key is a plan file's key for the task; Priority nil
	// is DefaultPriority; Parent is the epic's task ID; DiscoveredFrom
	// the ID of the run during which the work was found.
	Key            string   `json:"key,omitempty"`
	Description    string   `json:"description,omitempty"`
	Acceptance     string   `json:"acceptance,omitempty"`
	Priority       *int     `json:"priority,omitempty"`
	Labels         []string `json:"labels,omitempty"`
	Parent         string   `json:"parent,omitempty"`
	DiscoveredFrom string   `json:"discovered_from,omitempty"`
	By             string   `json:"by,omitempty"`
}

// TaskEdited changes the plan's fields of a task; a field absent is
// kept. Parent, DiscoveredFrom and DependsOn hold task and run IDs. By is
// who edited it.
type TaskEdited struct {
	TaskID         string    `json:"task_id"`
	Title          *string   `json:"title,omitempty"`
	Description    *string   `json:"description,omitempty"`
	Acceptance     *string   `json:"acceptance,omitempty"`
	Priority       *int      `json:"priority,omitempty"`
	Labels         *[]string `json:"labels,omitempty"`
	Parent         *string   `json:"parent,omitempty"`
	DiscoveredFrom *string   `json:"discovered_from,omitempty"`
	DependsOn      *[]string `json:"depends_on,omitempty"`
	By             string    `json:"by"`
}

// TaskUpdated records an observed task status; Status is the status the
// task lands on (a requested `ready` with unfinished dependencies is
// recorded as `pending`).
type TaskUpdated struct {
	TaskID   string     `json:"task_id"`
	Status   TaskStatus `json:"status"`
	Progress *string    `json:"progress,omitempty"`
}

// RunStarted starts a run of a task.
type RunStarted struct {
	RunID  string `json:"run_id"`
	TaskID string `json:"task_id"`
	Agent  string `json:"agent"`
}

// RunProgress records a run's progress text; it counts as a heartbeat.
type RunProgress struct {
	RunID    string `json:"run_id"`
	Progress string `json:"progress"`
	Usage    *Usage `json:"usage,omitempty"` // the run's so far (usage.go)
}

// RunFinished records a run's terminal status as its agent reported it.
type RunFinished struct {
	RunID  string    `json:"run_id"`
	Status RunStatus `json:"status"`
	Usage  *Usage    `json:"usage,omitempty"` // the run's in all (usage.go)
}

// RunStaleMarked records the daemon's observation that a run went silent.
type RunStaleMarked struct {
	RunID string `json:"run_id"`
}

// Heartbeat records that a project, task or run is alive.
type Heartbeat struct {
	TaskID string `json:"task_id,omitempty"`
	RunID  string `json:"run_id,omitempty"`
	Usage  *Usage `json:"usage,omitempty"` // the run's so far, with RunID (usage.go)
}

// TaskRetried puts a failed task back to work: its retry budget starts
// again (with a new max_retries when MaxRetries is set), its attempts go
// on counting. By is who retried it.
type TaskRetried struct {
	TaskID     string  `json:"task_id"`
	MaxRetries *uint32 `json:"max_retries,omitempty"`
	By         string  `json:"by"`
}

// ApprovalAsked records a question to the owner that gates the project
// (and, when TaskID is set, that task's next run) until it is decided.
type ApprovalAsked struct {
	QuestionID string `json:"question_id"`
	TaskID     string `json:"task_id,omitempty"`
	Question   string `json:"question"`
	// Deadline is when the question expires, Unix milliseconds.
	Deadline int64  `json:"deadline_ms"`
	By       string `json:"by,omitempty"`
}

// ApprovalDecided records an approval's outcome: yes lifts the gate;
// any other leaves its task blocked, with the refusal as its progress.
// By is who answered, or why it ended (expired, the daemon restarted).
type ApprovalDecided struct {
	QuestionID string          `json:"question_id"`
	Outcome    ApprovalOutcome `json:"outcome"`
	By         string          `json:"by"`
}

// Released records the owner's release of a project whose tasks are all
// done: its phase is production.
type Released struct {
	By string `json:"by"`
}

// Archived records the owner retiring a project: status archived, phase
// reporting, and no write is taken any more.
type Archived struct {
	By string `json:"by"`
}

func (ProjectCreated) Kind() string  { return KindProjectCreated }
func (TaskAdded) Kind() string       { return KindTaskAdded }
func (TaskUpdated) Kind() string     { return KindTaskUpdated }
func (TaskEdited) Kind() string      { return KindTaskEdited }
func (RunStarted) Kind() string      { return KindRunStarted }
func (RunProgress) Kind() string     { return KindRunProgress }
func (RunFinished) Kind() string     { return KindRunFinished }
func (RunStaleMarked) Kind() string  { return KindRunStale }
func (Heartbeat) Kind() string       { return KindHeartbeat }
func (TaskRetried) Kind() string     { return KindTaskRetried }
func (ApprovalAsked) Kind() string   { return KindApprovalAsked }
func (ApprovalDecided) Kind() string { return KindApprovalDecided }
func (Released) Kind() string        { return KindProjectReleased }
func (Archived) Kind() string        { return KindProjectArchived }

// EncodeBody returns the stored `data` of b, as Marshal writes it.
func EncodeBody(b Body) ([]byte, error) { return Marshal(b) }

// DecodeBody parses stored `data` of the given kind.
func DecodeBody(kind string, data []byte) (Body, error) {
	var b Body
	switch kind {
	case KindProjectCreated:
		b = &ProjectCreated{}
	case KindTaskAdded:
		b = &TaskAdded{}
	case KindTaskUpdated:
		b = &TaskUpdated{}
	case KindTaskEdited:
		b = &TaskEdited{}
	case KindRunStarted:
		b = &RunStarted{}
	case KindRunProgress:
		b = &RunProgress{}
	case KindRunFinished:
		b = &RunFinished{}
	case KindRunStale:
		b = &RunStaleMarked{}
	case KindHeartbeat:
		b = &Heartbeat{}
	case KindTaskRetried:
		b = &TaskRetried{}
	case KindApprovalAsked:
		b = &ApprovalAsked{}
	case KindApprovalDecided:
		b = &ApprovalDecided{}
	case KindProjectReleased:
		b = &Released{}
	case KindProjectArchived:
		b = &Archived{}
	case KindBudgetSet:
		b = &BudgetSet{}
	default:
		return nil, fmt.Errorf("unknown event kind %q", kind)
	}
	if err := json.Unmarshal(data, b); err != nil {
		return nil, fmt.Errorf("decode %s: %w", kind, err)
	}
	return deref(b), nil
}

func deref(b Body) Body {
	switch v := b.(type) {
	case *ProjectCreated:
		return *v
	case *TaskAdded:
		return *v
	case *TaskUpdated:
		return *v
	case *TaskEdited:
		return *v
	case *RunStarted:
		return *v
	case *RunProgress:
		return *v
	case *RunFinished:
		return *v
	case *RunStaleMarked:
		return *v
	case *Heartbeat:
		return *v
	case *TaskRetried:
		return *v
	case *ApprovalAsked:
		return *v
	case *ApprovalDecided:
		return *v
	case *Released:
		return *v
	case *Archived:
		return *v
	case *BudgetSet:
		return *v
	}
	panic(fmt.Sprintf("reducer: unknown body %T", b))
}
