package render

import (
	"slices"
	"time"
)

// Project is what the package draws: a project's tasks, its runs and the
// marks on them, as plain values. The caller builds it from whatever state
// it holds; the package never reads a clock or the ledger.
type Project struct {
	ID, Name string
	// Tasks in the order they were added: a task's dependencies come
	// earlier in the slice (the ledger guarantees it).
	Tasks []Task
	// Runs in the order they started.
	Runs []Run
	// Markers are instants drawn on the timeline: stale marks, approvals
	// asked and answered, retries.
	Markers []Marker
	// Now ends the bars of running runs and the time axis. Zero: a running
	// run ends at its last heartbeat (or its start).
	Now time.Time
	// GapAfter is the longest silence of a run drawn as plain bar: a
	// longer one between its start, its beats and its end (or Now) is drawn
	// as a gap. Zero draws no gaps.
	GapAfter time.Duration
}

// Task is one node of the task graph.
type Task struct {
	ID, Title, Status string
	// DependsOn names tasks that come earlier in Project.Tasks. Any other
	// name (unknown, itself, a later task, a repeat) is ignored.
	DependsOn []string
	// Attempts is the number of runs started; Retries the retries spent
	// (failed and stale runs) of MaxRetries allowed.
	Attempts, Retries, MaxRetries int
	// The plan's fields (docs/plan.md), each drawn only when set.
	// Priority is 0 (the most urgent) to 4, nil for the default (not
	// drawn). Children is the number of an epic's tasks, ChildrenDone
	// how many of them are done: a task with children is an epic, drawn
	// with its progress instead of attempts. Parent is the ID of the
	// task's epic; FoundIn the ID of the task during whose run FoundRun
	// this one was found. Description is shown in tooltips, cut.
	Priority               *int
	Children, ChildrenDone int
	Parent                 string
	FoundIn, FoundRun      string
	Description            string
}

// Run is one attempt at a task: one bar of the timeline.
type Run struct {
	ID, TaskID, Agent, Status string
	Attempt                   int
	// Start and End of the run; End is zero while it runs.
	Start, End time.Time
	// Beats are the times of its heartbeats and progress reports.
	Beats []time.Time
	// Spent is what it spent, on one line ("1000 tokens, 0.5USD"), or ""
	// when it reported nothing (docs/usage.md).
	Spent string
}

// Marker is an instant on a task's row of the timeline. It is drawn on the
// row of TaskID, else of RunID's task, else on a row of the project's own.
type Marker struct {
	TaskID, RunID string
	At            time.Time
	// Kind is one of the Marker* words, or any other word (drawn as a
	// generic marker).
	Kind  string
	Label string
}

// The task statuses (docs/semantics.md).
const (
	TaskPending = "pending"
	TaskReady   = "ready"
	TaskRunning = "running"
	TaskBlocked = "blocked"
	TaskDone    = "done"
	TaskFailed  = "failed"
	TaskStale   = "stale"
)

// The run statuses.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	RunStale     = "stale"
)

// The marker kinds the package draws each in its own way.
const (
	MarkerStale           = "stale"
	MarkerApprovalAsked   = "approval_asked"
	MarkerApprovalYes     = "approval_yes"
	MarkerApprovalNo      = "approval_no"
	MarkerApprovalExpired = "approval_expired"
	MarkerRetry           = "retry"
	// MarkerFound is work found during a run: a task added with the run
	// as its discovered_from, drawn on the run's task's row.
	MarkerFound = "found"
)

var (
	taskStatuses = []string{TaskPending, TaskReady, TaskRunning, TaskBlocked, TaskDone, TaskFailed, TaskStale}
	runStatuses  = []string{RunSucceeded, RunFailed, RunRunning, RunCancelled, RunStale}
	markerKinds  = []string{MarkerStale, MarkerApprovalAsked, MarkerApprovalYes, MarkerApprovalNo, MarkerApprovalExpired, MarkerRetry, MarkerFound}
)

// statusWord is s if it is one of known, else "unknown": the word that
// goes into a CSS class, so a class never carries arbitrary text.
func statusWord(s string, known []string) string {
	if slices.Contains(known, s) {
		return s
	}
	return "unknown"
}

// kindWord is a marker kind fit for a CSS class: lower-case letters,
// digits, '_' and '-' kept, anything else replaced by '_'; "other" if
// empty.
func kindWord(k string) string {
	if k == "" {
		return "other"
	}
	b := []byte(k)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

// taskIndex resolves the dependency names of a task list once.
type taskIndex struct {
	byID map[string]int // the first task of each ID
	deps [][]int        // per task, its kept dependencies in DependsOn order
}

// indexTasks keeps, for each task, the dependencies that name a task
// earlier in the list, each once. So the kept graph is acyclic and every
// dependency's index is smaller than its dependant's.
func indexTasks(tasks []Task) taskIndex {
	ix := taskIndex{byID: make(map[string]int, len(tasks)), deps: make([][]int, len(tasks))}
	for i, t := range tasks {
		if _, ok := ix.byID[t.ID]; !ok {
			ix.byID[t.ID] = i
		}
	}
	for i, t := range tasks {
		for _, name := range t.DependsOn {
			d, ok := ix.byID[name]
			if !ok || d >= i || slices.Contains(ix.deps[i], d) {
				continue
			}
			ix.deps[i] = append(ix.deps[i], d)
		}
	}
	return ix
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
