package api

import "encoding/json"

// The live agents' extension actions (docs/agents.md, docs/protocol.md):
// the daemon starts an agent that speaks the Agent Client Protocol, owns
// its process, and sends it prompts, one turn at a time. A live agent is a
// delegation too: `status` and `delegations` list it with its
// conversation, turn, idle time and background jobs.

// CmdAgentStart is an extension (action `agent_start`): start Command as a
// live ACP agent in Workspace, and open a session. The reply lists the new
// agent in `agents` and its delegation in `delegations.entries`.
type CmdAgentStart struct {
	// Name names the agent for the other agent actions; "" is the
	// command's file name, made unique with a number ("gemini-2").
	Name    string   `json:"name,omitempty" serde:"default"`
	Command []string `json:"command"`
	// Workspace is the agent's working directory and the only folder its
	// file requests may reach; "" is the project's workspace.
	Workspace string `json:"workspace,omitempty" serde:"default"`
	// Env is the environment the agent runs with (the caller's); the
	// daemon adds SCV_DELEGATION and SCV_PARENT.
	Env []string `json:"env,omitempty" serde:"default"`
	// Project and Task make every turn a run of the task.
	Project *string `json:"project,omitempty"`
	Task    *string `json:"task,omitempty"`
	// Ask sends the agent's permission requests to the owner as
	// questions (confirm_ask); without it they are refused.
	Ask bool `json:"ask,omitempty" serde:"default"`
	// AllowTerminal lets the agent run commands in terminals of its own,
	// in its workspace; without it terminal requests are refused.
	AllowTerminal bool `json:"allow_terminal,omitempty" serde:"default"`
	// InitTimeoutSeconds bounds the wait for the agent's answer to
	// `initialize` and `session/new` (default DefaultAgentInitTimeout).
	InitTimeoutSeconds *uint64 `json:"init_timeout_seconds,omitempty"`
	// Session is the SCV session that starts it (SCV_SESSION), Parent the
	// caller's SCV_PARENT chain, Chat the chat that started the work
	// (SCV_CHAT), where its questions go.
	Session string `json:"session,omitempty" serde:"default"`
	Parent  string `json:"parent,omitempty" serde:"default"`
	Chat    string `json:"chat,omitempty" serde:"default"`
}

// DefaultAgentInitTimeout is how long, in seconds, an agent has to answer
// `initialize` (and then `session/new`) unless agent_start says otherwise.
const DefaultAgentInitTimeout = 10

// CmdAgentList is an extension (action `agent_list`): every live agent,
// in `agents`, oldest first.
type CmdAgentList struct{}

// CmdAgentStop is an extension (action `agent_stop`): cancel the agent's
// turn, if one runs, and stop its process tree, as a delegation's is
// stopped. Agent is its name or handle.
type CmdAgentStop struct {
	Agent string `json:"agent"`
}

// CmdAgentPrompt is an extension (action `agent_prompt`): send Text as the
// agent's next turn (`session/prompt`). It answers at once with the turn
// begun, in `agents`, and where its updates start, in `agent_updates`
// (`next`); agent_updates then follows the turn. With Task, the turn is a
// run of that task, and so are the agent's later turns.
type CmdAgentPrompt struct {
	Agent string  `json:"agent"`
	Text  string  `json:"text"`
	Task  *string `json:"task,omitempty"`
}

// CmdAgentCancel is an extension (action `agent_cancel`): ask the agent to
// end its running turn (`session/cancel`); the turn ends with the stop
// reason the agent gives, `cancelled`.
type CmdAgentCancel struct {
	Agent string `json:"agent"`
}

// CmdAgentUpdates is an extension (action `agent_updates`): the agent's
// updates after the sequence After (0: the oldest the daemon keeps); with
// WaitSeconds (at most MaxListWait), it waits that long for one when
// there is none yet.
type CmdAgentUpdates struct {
	Agent       string  `json:"agent"`
	After       *uint64 `json:"after,omitempty"`
	WaitSeconds *uint64 `json:"wait_seconds,omitempty"`
}

// CmdDelegationUpdate is an extension (action `delegation_update`): a
// process of the delegation Handle (its owner, or a process whose
// SCV_DELEGATION is Handle, such as a nested SCV) reports how many of its
// own background jobs still run. A restart_when_idle waits for them, and
// `delegations.idle` does not count a live agent that has any.
type CmdDelegationUpdate struct {
	Handle         string `json:"handle"`
	BackgroundJobs uint32 `json:"background_jobs"`
}

func (CmdAgentStart) Action() string       { return "agent_start" }
func (CmdAgentList) Action() string        { return "agent_list" }
func (CmdAgentStop) Action() string        { return "agent_stop" }
func (CmdAgentPrompt) Action() string      { return "agent_prompt" }
func (CmdAgentCancel) Action() string      { return "agent_cancel" }
func (CmdAgentUpdates) Action() string     { return "agent_updates" }
func (CmdDelegationUpdate) Action() string { return "delegation_update" }

// AgentState is where a live agent is.
type AgentState string

// The agent states.
const (
	// AgentStarting: its process runs and the daemon waits for its
	// answer to initialize and session/new (or session/load, after a
	// restart).
	AgentStarting AgentState = "starting"
	// AgentIdle: between turns.
	AgentIdle AgentState = "idle"
	// AgentWorking: a turn runs.
	AgentWorking AgentState = "working"
	// AgentStopping: its turn is being cancelled and its tree stopped.
	AgentStopping AgentState = "stopping"
	// AgentStopped: it has ended (agent_stop's reply says so); it is no
	// longer listed.
	AgentStopped AgentState = "stopped"
)

// AgentInfo is one live agent.
type AgentInfo struct {
	Name    string     `json:"name"`
	Handle  string     `json:"handle"`
	State   AgentState `json:"state"`
	Command []string   `json:"command"`
	// Workspace is its working directory and the folder its file
	// requests are confined to.
	Workspace string `json:"workspace"`
	PID       uint32 `json:"pid"`
	// Conversation is the ACP session ID, once the session is open.
	Conversation *string `json:"conversation,omitempty"`
	// Turn counts the turns sent, the running one included.
	Turn                 uint32  `json:"turn"`
	IdleSinceUnixSeconds *uint64 `json:"idle_since_unix_seconds,omitempty"`
	BackgroundJobs       *uint32 `json:"background_jobs,omitempty"`
	// Project and Task are the task whose runs its turns are (IDs); Run is
	// the running turn's run.
	Project *string `json:"project,omitempty"`
	Task    *string `json:"task,omitempty"`
	Run     *string `json:"run,omitempty"`
	// StopReason is how the last turn ended: ACP's stop reason
	// (end_turn, max_tokens, max_turn_requests, refusal, cancelled), or
	// `crashed`.
	StopReason *string `json:"stop_reason,omitempty"`
	// LoadSession: the agent offers session/load, so its conversation
	// survives a daemon restart.
	LoadSession        bool   `json:"load_session"`
	Ask                bool   `json:"ask"`
	AllowTerminal      bool   `json:"allow_terminal"`
	StartedUnixSeconds uint64 `json:"started_unix_seconds"`
}

// AgentUpdates is a page of one agent's updates (agent_updates, and
// agent_prompt's starting point).
type AgentUpdates struct {
	Agent string `json:"agent"`
	// Turn is the agent's turn count, and Working whether it runs, when
	// the page was read.
	Turn    uint32 `json:"turn"`
	Working bool   `json:"working"`
	// Next is the After to ask with for what comes after this page.
	Next    uint64        `json:"next"`
	Updates []AgentUpdate `json:"updates"`
	// Dropped counts updates after the asked After that the daemon no
	// longer keeps (it keeps the newest MaxAgentUpdates).
	Dropped uint64 `json:"dropped,omitempty"`
}

// MaxAgentUpdates is how many of an agent's newest updates the daemon
// keeps for agent_updates.
const MaxAgentUpdates = 10_000

// AgentUpdate is one step of a turn as it arrived: a `session/update` of
// the agent (Kind is ACP's sessionUpdate: agent_message_chunk,
// agent_thought_chunk, tool_call, tool_call_update, plan, …, with Update
// as the agent sent it), or one of the daemon's own steps:
//
//	turn_started   Text is the prompt
//	turn_ended     StopReason says how
//	permission     the agent asked (Title); Status is allowed, rejected or refused, Text why
//	file           a file request (Title: read or write, Text the path); Status ok or refused
//	terminal       a terminal request (Text the command); Status ok or refused
//	agent_exited   the process ended; Text how
type AgentUpdate struct {
	Seq            uint64          `json:"seq"`
	Turn           uint32          `json:"turn"`
	TimeUnixMillis int64           `json:"time_unix_millis"`
	Kind           string          `json:"kind"`
	Text           string          `json:"text,omitempty"`
	ToolCallID     string          `json:"tool_call_id,omitempty"`
	Title          string          `json:"title,omitempty"`
	Status         string          `json:"status,omitempty"`
	StopReason     string          `json:"stop_reason,omitempty"`
	Update         json.RawMessage `json:"update,omitempty"`
}
