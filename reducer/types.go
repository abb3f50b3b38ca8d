package reducer

import "fmt"

// TaskStatus is a task's observed state.
type TaskStatus string

// The task states of SPEC section 3.
const (
	TaskPending TaskStatus = "pending"
	TaskReady   TaskStatus = "ready"
	TaskRunning TaskStatus = "running"
	TaskBlocked TaskStatus = "blocked"
	TaskDone    TaskStatus = "done"
	TaskFailed  TaskStatus = "failed"
	TaskStale   TaskStatus = "stale"
)

// Final reports whether no transition leaves s.
func (s TaskStatus) Final() bool { return s == TaskDone || s == TaskFailed }

// RunStatus is a run's observed state.
type RunStatus string

// The run states.
const (
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
	RunStale     RunStatus = "stale"
)

// ApprovalOutcome is where an approval stands: pending until the owner
// answers yes or no, or it expires, or it fails (the daemon restarted, no
// chat could take it). The words are the seed's ConfirmState values.
type ApprovalOutcome string

// The approval outcomes.
const (
	ApprovalPending   ApprovalOutcome = "pending"
	ApprovalYes       ApprovalOutcome = "yes"
	ApprovalNo        ApprovalOutcome = "no"
	ApprovalExpired   ApprovalOutcome = "expired"
	ApprovalWithdrawn ApprovalOutcome = "withdrawn"
	ApprovalFailed    ApprovalOutcome = "failed"
)

var approvalOutcomes = []ApprovalOutcome{ApprovalPending, ApprovalYes, ApprovalNo, ApprovalExpired, ApprovalWithdrawn, ApprovalFailed}

// UnmarshalText accepts only the outcomes above.
func (o *ApprovalOutcome) UnmarshalText(b []byte) error { return parseEnum(o, approvalOutcomes, b) }

// Phase is the lifecycle phase derived for a project.
type Phase string

// The phases. Production follows the owner's release of a completed
// project, reporting its archiving.
const (
	PhaseDiscovery      Phase = "discovery"
	PhasePlanning       Phase = "planning"
	PhaseImplementation Phase = "implementation"
	PhaseVerification   Phase = "verification"
	PhaseStaging        Phase = "staging"
	PhaseProduction     Phase = "production"
	PhaseReporting      Phase = "reporting"
)

// ProjectStatus is the status derived for a project.
type ProjectStatus string

// The project statuses. WaitingApproval holds while an approval is
// pending, Archived once the owner archived the project.
const (
	ProjectActive          ProjectStatus = "active"
	ProjectBlocked         ProjectStatus = "blocked"
	ProjectWaitingApproval ProjectStatus = "waiting_approval"
	ProjectCompleted       ProjectStatus = "completed"
	ProjectFailed          ProjectStatus = "failed"
	ProjectArchived        ProjectStatus = "archived"
)

var (
	taskStatuses    = []TaskStatus{TaskPending, TaskReady, TaskRunning, TaskBlocked, TaskDone, TaskFailed, TaskStale}
	runStatuses     = []RunStatus{RunRunning, RunSucceeded, RunFailed, RunCancelled, RunStale}
	phases          = []Phase{PhaseDiscovery, PhasePlanning, PhaseImplementation, PhaseVerification, PhaseStaging, PhaseProduction, PhaseReporting}
	projectStatuses = []ProjectStatus{ProjectActive, ProjectBlocked, ProjectWaitingApproval, ProjectCompleted, ProjectFailed, ProjectArchived}
)

// UnmarshalText accepts only the variants above, as serde does.
func (s *TaskStatus) UnmarshalText(b []byte) error { return parseEnum(s, taskStatuses, b) }

// UnmarshalText accepts only the variants above, as serde does.
func (s *RunStatus) UnmarshalText(b []byte) error { return parseEnum(s, runStatuses, b) }

// UnmarshalText accepts only the variants above, as serde does.
func (s *Phase) UnmarshalText(b []byte) error { return parseEnum(s, phases, b) }

// UnmarshalText accepts only the variants above, as serde does.
func (s *ProjectStatus) UnmarshalText(b []byte) error { return parseEnum(s, projectStatuses, b) }

func parseEnum[T ~string](dst *T, variants []T, b []byte) error {
	for _, v := range variants {
		if string(v) == string(b) {
			*dst = v
			return nil
		}
	}
	return fmt.Errorf("unknown variant `%s`, expected one of %s", b, quoteAll(variants))
}

func quoteAll[T ~string](vs []T) string {
	out := ""
	for i, v := range vs {
		if i > 0 {
			out += ", "
		}
		out += "`" + string(v) + "`"
	}
	return out
}
