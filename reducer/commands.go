package reducer

import "fmt"

// Command is an intent to change state. Every command carries the time it
// is decided at (Now, Unix milliseconds) and any IDs it mints: the reducer
// reads no clock and makes no IDs.
type Command interface {
	// ProjectRef is the ID or name of the project the command addresses.
	ProjectRef() string
	command()
}

// CreateProject opens a project. ProjectID is a fresh ULID.
type CreateProject struct {
	ProjectID string
	Name      string
	Workspace string // absolute and clean
	Now       int64
}

// AddTask adds a task. Project is the project's ID or name; TaskID is fresh.
type AddTask struct {
	Project    string
	TaskID     string
	Title      string
	DependsOn  []string
	MaxRetries uint32
	// The plan's fields (docs/plan.md): Priority nil is DefaultPriority;
	// Parent is the epic's ID or unique title; DiscoveredFrom a run's ID;
	// Key a plan file's key. By is who added it.
	Key            string
	Description    string
	Acceptance     string
	Priority       *int
	Labels         []string
	Parent         string
	DiscoveredFrom string
	By             string
	Now            int64
}

// UpdateTask records what an orchestrator or the owner observed of a task.
type UpdateTask struct {
	Project  string
	TaskID   string
	Status   TaskStatus
	Progress *string
	Now      int64
}

// StartRun starts a run of a ready or stale task. RunID is fresh.
type StartRun struct {
	Project string
	TaskID  string
	RunID   string
	Agent   string
	Now     int64
}

// ProgressRun records a running run's progress text. Every
// (milliseconds) coalesces progress as RecordHeartbeat's coalesces
// heartbeats: progress that comes less than Every after the run's last
// journaled progress or heartbeat is accepted and appends nothing (a
// caller that wants its newest text journaled sends it again later, or
// with Every 0). Zero journals every one.
type ProgressRun struct {
	Project  string
	RunID    string
	Progress string
	Usage    *Usage // the run's so far, or nil (usage.go)
	Every    int64
	Now      int64
}

// FinishRun records a running run's terminal status.
type FinishRun struct {
	Project string
	RunID   string
	Status  RunStatus
	// Usage is the run's in all, or nil: a caller whose reports were
	// coalesced sends its newest here, so that the journal keeps the
	// run's final totals.
	Usage *Usage
	Now   int64
}

// RecordHeartbeat records that a project, or a task, or a run is alive.
// An empty TaskID or RunID means none was named. Every (milliseconds)
// coalesces heartbeats: one that comes less than Every after the last
// journaled heartbeat of the same run (or task, or project) is accepted
// and appends nothing. Zero journals every heartbeat.
type RecordHeartbeat struct {
	Project string
	TaskID  string
	RunID   string
	Usage   *Usage // the run's so far, or nil; only with RunID (usage.go)
	Every   int64
	Now     int64
}

// MarkStale asks which of a project's running runs have been silent for
// longer than Window milliseconds at Now; Decide returns one event for
// each.
type MarkStale struct {
	Project string
	Window  int64
	Now     int64
}

// ExpireApprovals asks which of a project's pending approvals passed
// their deadline more than Grace milliseconds before Now; Decide returns
// one approval_decided event, expired, for each. The daemon that asked
// decides its own approvals at their deadline; this is the sweeper's, for
// approvals whose daemon is gone.
type ExpireApprovals struct {
	Project string
	Grace   int64
	Now     int64
}

// ExpiredBy is who an approval that ExpireApprovals decided was decided
// by.
const ExpiredBy = "the sweeper: its deadline passed"

// RetryTask puts a failed task back to work (the owner's decision):
// ready, or pending while a dependency is not done; its retries start
// again from 0, with MaxRetries as its new budget when set. By is who
// retried it.
type RetryTask struct {
	Project    string
	TaskID     string // ID or unique title
	MaxRetries *uint32
	By         string
	Now        int64
}

// AskApproval records a question to the owner that gates the project,
// and the named task's next run (TaskID, an ID or unique title, may be
// empty), until it is decided. QuestionID is the question's own (the
// question manager mints it); Deadline is when it expires, Unix
// milliseconds.
type AskApproval struct {
	Project    string
	TaskID     string
	QuestionID string
	Question   string
	Deadline   int64
	By         string
	Now        int64
}

// DecideApproval records a pending approval's outcome.
type DecideApproval struct {
	Project    string
	QuestionID string
	Outcome    ApprovalOutcome
	By         string
	Now        int64
}

// ReleaseProject moves a project whose tasks are all done to phase
// production.
type ReleaseProject struct {
	Project string
	By      string
	Now     int64
}

// ArchiveProject retires a project: from then on it takes no write.
type ArchiveProject struct {
	Project string
	By      string
	Now     int64
}

func (c CreateProject) ProjectRef() string   { return c.ProjectID }
func (c AddTask) ProjectRef() string         { return c.Project }
func (c UpdateTask) ProjectRef() string      { return c.Project }
func (c StartRun) ProjectRef() string        { return c.Project }
func (c ProgressRun) ProjectRef() string     { return c.Project }
func (c FinishRun) ProjectRef() string       { return c.Project }
func (c RecordHeartbeat) ProjectRef() string { return c.Project }
func (c MarkStale) ProjectRef() string       { return c.Project }
func (c ExpireApprovals) ProjectRef() string { return c.Project }
func (c RetryTask) ProjectRef() string       { return c.Project }
func (c AskApproval) ProjectRef() string     { return c.Project }
func (c DecideApproval) ProjectRef() string  { return c.Project }
func (c ReleaseProject) ProjectRef() string  { return c.Project }
func (c ArchiveProject) ProjectRef() string  { return c.Project }

func (CreateProject) command()   {}
func (AddTask) command()         {}
func (UpdateTask) command()      {}
func (StartRun) command()        {}
func (ProgressRun) command()     {}
func (FinishRun) command()       {}
func (RecordHeartbeat) command() {}
func (MarkStale) command()       {}
func (ExpireApprovals) command() {}
func (RetryTask) command()       {}
func (AskApproval) command()     {}
func (DecideApproval) command()  {}
func (ReleaseProject) command()  {}
func (ArchiveProject) command()  {}

// Stamp returns c decided at now (Unix milliseconds). The ledger stamps each
// command with its own clock inside the write transaction.
func Stamp(c Command, now int64) Command {
	switch c := c.(type) {
	case CreateProject:
		c.Now = now
		return c
	case AddTask:
		c.Now = now
		return c
	case UpdateTask:
		c.Now = now
		return c
	case StartRun:
		c.Now = now
		return c
	case ProgressRun:
		c.Now = now
		return c
	case FinishRun:
		c.Now = now
		return c
	case RecordHeartbeat:
		c.Now = now
		return c
	case MarkStale:
		c.Now = now
		return c
	case ExpireApprovals:
		c.Now = now
		return c
	case RetryTask:
		c.Now = now
		return c
	case AskApproval:
		c.Now = now
		return c
	case DecideApproval:
		c.Now = now
		return c
	case ReleaseProject:
		c.Now = now
		return c
	case ArchiveProject:
		c.Now = now
		return c
	case EditTask:
		c.Now = now
		return c
	case ApplyPlan:
		c.Now = now
		return c
	case NextTask:
		c.Now = now
		return c
	case SetBudget:
		c.Now = now
		return c
	}
	panic(fmt.Sprintf("reducer: unknown command %T", c))
}
