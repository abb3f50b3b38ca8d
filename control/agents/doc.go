// Package agents runs live agents: agent programs that speak the Agent
// Client Protocol (ACP: JSON-RPC 2.0 on the agent's standard input and
// output) and stay up between turns, such as Gemini CLI, Claude Code
// through its adapter, or Codex (docs/agents.md).
//
// The daemon owns each agent's process: it starts it in a process group
// of its own, tagged with the agent's handle as a delegation's command is
// (package control/proc), reaps it, and stops its tree as a delegation's
// is. It speaks ACP to it as the client, with github.com/coder/acp-go-sdk:
// initialize, session/new (or session/load, after a restart), one
// session/prompt per turn, session/cancel. What the agent asks of the
// client is answered by the agent's policy: permission by the owner
// (a confirm_ask question) when it was started with --ask, else refused;
// files only inside its workspace; terminals only with --allow-terminal.
// Only the session the daemon opened for the agent is its: a request
// about another is refused and an update about another dropped, each with
// a warning in the log.
//
// # Turns and runs
//
// An agent started with a project and a task records every turn as a run
// of that task, through the daemon's api.Handler (Manager.Handler, the
// daemon's control.Service) as any client's run is: run_started when the
// prompt goes out, run_progress from its updates (at most one per
// --heartbeat-every, the newest text) and a heartbeat while it is silent
// (coalesced by the daemon), run_finished when the
// answer comes: succeeded on end_turn, cancelled on cancelled, failed on
// any other stop reason or when the agent crashes or breaks the protocol
// (the reason is the run's last progress). The daemon makes the progress
// text, so it is cut to the ledger's limit (reducer.ClipProgress), never
// refused.
//
// What the agent says a turn spent (its answer's `usage`, its
// `usage_update`s' context and cost, the cost made the run's share of the
// session's) is the run's Usage, handed to turnRun.usage (docs/agents.md,
// "Usage").
//
// # Lifecycle
//
// Manager is a daemon service. Each agent has a row in the local store
// (local.Agents) while it lives; Stop stops every agent, cancelling its
// turn, and keeps the rows; Start resumes them: the agent is started again
// and its conversation loaded where it offers session/load, and is ended
// (its row dropped, the log saying why) where it does not. Delegations
// joins the live agents to the delegation registry for `status`,
// `delegations`, `delegation_kill`, `delegation_update` and
// restart_when_idle.
package agents
