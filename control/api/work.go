package api

// The work's extension actions (docs/work.md, docs/protocol.md): the
// daemon keeps N live agents on the ready tasks of a project, each idle
// agent given the next ready task (project_task_next's claim) as one
// turn, until nothing is ready and nothing runs.

// CmdProjectWork is an extension (action `project_work`): start the work
// of Project: Command started Agents times as agent_start starts it
// (named PROJECT-1 … PROJECT-N, in the project's workspace), each turn a
// run of a task claimed for it. The reply is the work, in `work`.
type CmdProjectWork struct {
	Project string `json:"project"`
	// Agents is how many agents work at once, 1 to MaxWorkAgents.
	Agents  uint32   `json:"agents"`
	Command []string `json:"command"`
	// Env is the environment the agents run with (the caller's).
	Env []string `json:"env,omitempty" serde:"default"`
	// Labels take only the ready tasks with every one of them.
	Labels []string `json:"labels,omitempty" serde:"default"`
	// MaxTurns bounds the turns the work starts in all; absent: no bound.
	MaxTurns *uint64 `json:"max_turns,omitempty"`
	// PromptTemplate is a text/template of each turn's prompt
	// (docs/work.md); "" is the default, DefaultPromptTemplate.
	PromptTemplate string `json:"prompt_template,omitempty" serde:"default"`
	Ask            bool   `json:"ask,omitempty" serde:"default"`
	AllowTerminal  bool   `json:"allow_terminal,omitempty" serde:"default"`
}

// MaxWorkAgents is the most agents one work runs.
const MaxWorkAgents = 64

// CmdProjectWorkStatus is an extension (action `project_work_status`): the
// project's work (running, or the last that ended), with its log after
// the sequence After; with WaitSeconds (at most MaxListWait) it waits that
// long for an entry after After, or for the work's end.
type CmdProjectWorkStatus struct {
	Project     string  `json:"project"`
	After       *uint64 `json:"after,omitempty"`
	WaitSeconds *uint64 `json:"wait_seconds,omitempty"`
}

// CmdProjectWorkStop is an extension (action `project_work_stop`): the
// work takes no more tasks and ends when its running turns have; with
// Now, they are cancelled (their runs cancelled, no retry spent).
type CmdProjectWorkStop struct {
	Project string `json:"project"`
	Now     bool   `json:"now,omitempty" serde:"default"`
}

func (CmdProjectWork) Action() string       { return "project_work" }
func (CmdProjectWorkStatus) Action() string { return "project_work_status" }
func (CmdProjectWorkStop) Action() string   { return "project_work_stop" }

// WorkState is where a work is.
type WorkState string

// The states of a work.
const (
	WorkRunning  WorkState = "running"  // taking tasks
	WorkStopping WorkState = "stopping" // taking none, its turns ending
	WorkEnded    WorkState = "ended"
)

// WorkInfo is a project's work, in the reply's extension field `work`.
type WorkInfo struct {
	Project     string    `json:"project"` // the project's ID
	ProjectName string    `json:"project_name"`
	State       WorkState `json:"state"`
	Agents      uint32    `json:"agents"`
	Command     []string  `json:"command"`
	Labels      []string  `json:"labels,omitempty"`
	MaxTurns    *uint64   `json:"max_turns,omitempty"`
	// StartedUnixMillis is when the work started, EndedUnixMillis when it
	// ended.
	StartedUnixMillis int64  `json:"started_unix_millis"`
	EndedUnixMillis   *int64 `json:"ended_unix_millis,omitempty"`
	// Why says why the work stopped taking tasks, or ended.
	Why string `json:"why,omitempty"`
	// Waiting says what the work waits for while nothing is ready and
	// something is not done (an approval, a run of another).
	Waiting string     `json:"waiting,omitempty"`
	Turns   WorkTurns  `json:"turns"`
	Slots   []WorkSlot `json:"slots"`
	// Log is the work's entries after the request's `after`, oldest
	// first; Next is the cursor of the next page.
	Log     []WorkEntry `json:"log"`
	Next    uint64      `json:"next"`
	Summary WorkSummary `json:"summary"`
}

// WorkTurns counts the work's turns: started, and ended by their run's
// outcome.
type WorkTurns struct {
	Started   uint64 `json:"started"`
	Succeeded uint64 `json:"succeeded"`
	Failed    uint64 `json:"failed"`
	Cancelled uint64 `json:"cancelled"`
}

// WorkSlot is one of the work's agents.
type WorkSlot struct {
	Agent string `json:"agent"`
	// State is idle, working, starting or stopped.
	State string  `json:"state"`
	Task  *string `json:"task,omitempty"`
	Run   *string `json:"run,omitempty"`
	Turns uint64  `json:"turns"`
	// Starts counts its agent's starts; Why says why the slot stopped.
	Starts uint64 `json:"starts"`
	Why    string `json:"why,omitempty"`
}

// WorkEntry is one line of the work's log: a turn's start or end, an
// agent's start or crash, a slot or the work stopping.
type WorkEntry struct {
	Seq            uint64 `json:"seq"`
	TimeUnixMillis int64  `json:"time_unix_millis"`
	// Kind is turn_started, turn_ended, agent_started, agent_crashed,
	// slot_stopped, waiting, stopping or ended.
	Kind      string `json:"kind"`
	Agent     string `json:"agent,omitempty"`
	Task      string `json:"task,omitempty"`
	TaskTitle string `json:"task_title,omitempty"`
	Run       string `json:"run,omitempty"`
	// StopReason is the turn's (end_turn, refusal, crashed, …), Status its
	// run's at its end.
	StopReason string `json:"stop_reason,omitempty"`
	Status     string `json:"status,omitempty"`
	Text       string `json:"text,omitempty"`
}

// WorkSummary is the project as the ledger has it now: its tasks done,
// failed and left (neither; epics not counted), the runs of the work,
// and what the project spent.
type WorkSummary struct {
	TasksDone   uint64   `json:"tasks_done"`
	TasksFailed uint64   `json:"tasks_failed"`
	TasksLeft   uint64   `json:"tasks_left"`
	Runs        uint64   `json:"runs"`
	Tokens      uint64   `json:"tokens"`
	Cost        []string `json:"cost"`
	// Seconds is how long the work has run (to its end).
	Seconds uint64 `json:"seconds"`
}
