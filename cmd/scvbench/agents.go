package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/control/rpc"
)

// AgentResult is what a live agent's turn costs the daemon: the daemon's
// CPU per session/update the agent sends, with the turn recorded as a run
// of a task and without, against the agent's own CPU to write one (the
// ACP SDK's encoding and the pipe), measured in the same turns.
type AgentResult struct {
	Updates int `json:"updates_per_turn"`
	Rounds  int `json:"rounds"`
	// Medians over the rounds, in µs of CPU per update.
	DaemonWithRun    float64 `json:"daemon_cpu_us_per_update_with_run"`
	DaemonWithoutRun float64 `json:"daemon_cpu_us_per_update_without_run"`
	Agent            float64 `json:"agent_cpu_us_per_update"`
	// Ratio is DaemonWithRun over Agent.
	Ratio float64 `json:"daemon_over_agent"`
	// EventsPerTurn is the ledger events one turn of Updates updates
	// appended (run_started, the progress and heartbeats journaled,
	// run_finished), with the daemon's default coalescing.
	EventsPerTurn float64 `json:"events_per_turn"`
	// TurnSeconds is the median wall time of a turn, prompt to its end.
	TurnSeconds float64 `json:"turn_s"`
}

// startDialled starts a daemon of its own on name.db and name.sock in
// dir, waits for it, and dials it.
func startDialled(ctx context.Context, bin, dir, name string) (*daemonproc.Daemon, *rpc.Client, error) {
	d, err := daemonproc.Start(bin, filepath.Join(dir, name+".db"), filepath.Join(dir, name+".sock"))
	if err != nil {
		return nil, nil, err
	}
	if _, err := d.Ready(ctx, time.Minute); err != nil {
		d.Kill()
		return nil, nil, err
	}
	c, err := rpc.Dial(ctx, d.Sock)
	if err != nil {
		d.Kill()
		return nil, nil, err
	}
	return d, c, nil
}

// agentTurns measures the bookkeeping of live agents' turns: a daemon
// with its defaults, the scripted agent of cmd/internal/acpagent sending
// cfg.AgentUpdates message chunks per turn, one agent whose turns are runs
// and one without a project, alternating, cfg.AgentRounds turns each.
func agentTurns(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (AgentResult, error) {
	res := AgentResult{Updates: cfg.AgentUpdates, Rounds: cfg.AgentRounds}
	agentBin := filepath.Join(dir, "acpagent")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", agentBin, "scv/cmd/internal/acpagent").CombinedOutput(); err != nil {
		return res, fmt.Errorf("build acpagent: %v: %s", err, out)
	}
	d, c, err := startDialled(ctx, bin, dir, "agents")
	if err != nil {
		return res, err
	}
	defer d.Kill()
	defer c.Close()
	call := func(cmd api.Command) (*api.DaemonStatus, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return c.Call(cctx, cmd)
	}
	if _, err := call(api.CmdProjectCreate{Name: "agents", Workspace: dir}); err != nil {
		return res, err
	}
	for i := range cfg.AgentRounds {
		if _, err := call(api.CmdProjectTaskAdd{Project: "agents", Title: fmt.Sprintf("turn %d", i+1), DependsOn: []string{}}); err != nil {
			return res, err
		}
	}
	start := func(name string, project bool) (int, error) {
		s := api.CmdAgentStart{Name: name, Command: []string{agentBin, "--state", filepath.Join(dir, "agent-state")}, Workspace: dir}
		if project {
			p, t := "agents", "turn 1"
			s.Project, s.Task = &p, &t
		}
		st, err := call(s)
		if err != nil {
			return 0, err
		}
		return int((*st.Agents)[0].PID), nil
	}
	runPID, err := start("with-run", true)
	if err != nil {
		return res, err
	}
	plainPID, err := start("without-run", false)
	if err != nil {
		return res, err
	}
	// turn prompts agent and waits for the turn to end (polling the list,
	// not following the updates: a follower's cost is not the turn's),
	// returning the daemon's and the agent's CPU per update, and the
	// turn's wall time.
	script := fmt.Sprintf("chunks %d", cfg.AgentUpdates)
	turn := func(agent string, pid int, task *string) (daemonUs, agentUs float64, wall time.Duration, err error) {
		before, err := cpuSeconds([]int{d.Pid()})
		if err != nil {
			return 0, 0, 0, err
		}
		abefore, err := cpuSeconds([]int{pid})
		if err != nil {
			return 0, 0, 0, err
		}
		began := time.Now()
		st, err := call(api.CmdAgentPrompt{Agent: agent, Text: script, Task: task})
		if err != nil {
			return 0, 0, 0, err
		}
		want := (*st.Agents)[0].Turn
		for {
			if err := ctx.Err(); err != nil {
				return 0, 0, 0, err
			}
			time.Sleep(20 * time.Millisecond)
			st, err := call(api.CmdAgentList{})
			if err != nil {
				return 0, 0, 0, err
			}
			done := false
			for _, a := range *st.Agents {
				if a.Name == agent {
					done = a.State == api.AgentIdle && a.Turn == want
				}
			}
			if done {
				break
			}
		}
		wall = time.Since(began)
		after, err := cpuSeconds([]int{d.Pid()})
		if err != nil {
			return 0, 0, 0, err
		}
		aafter, err := cpuSeconds([]int{pid})
		if err != nil {
			return 0, 0, 0, err
		}
		n := float64(cfg.AgentUpdates)
		return (after - before) * 1e6 / n, (aafter - abefore) * 1e6 / n, wall, nil
	}
	var withRun, without, agentCPU, walls []float64
	for i := range cfg.AgentRounds {
		task := fmt.Sprintf("turn %d", i+1)
		du, au, wall, err := turn("with-run", runPID, &task)
		if err != nil {
			return res, err
		}
		withRun, agentCPU, walls = append(withRun, du), append(agentCPU, au), append(walls, wall.Seconds())
		pu, au2, _, err := turn("without-run", plainPID, nil)
		if err != nil {
			return res, err
		}
		without, agentCPU = append(without, pu), append(agentCPU, au2)
		logf("  turn %d: %d updates, daemon %.1f µs CPU/update with its run, %.1f without; agent %.1f and %.1f; %.2f s",
			i+1, cfg.AgentUpdates, du, pu, au, au2, wall.Seconds())
	}
	st, err := call(api.CmdProjectEvents{Project: "agents"})
	if err != nil {
		return res, err
	}
	ev := st.Project.Events
	if len(ev) == 0 {
		return res, errors.New("the project has no events")
	}
	// The project's own events: created, one task_added per round; the
	// rest are the turns'.
	turnEvents := len(ev) - 1 - cfg.AgentRounds
	res.DaemonWithRun, res.DaemonWithoutRun, res.Agent = median(withRun), median(without), median(agentCPU)
	if res.Agent > 0 {
		res.Ratio = res.DaemonWithRun / res.Agent
	}
	res.EventsPerTurn = float64(turnEvents) / float64(cfg.AgentRounds)
	res.TurnSeconds = median(walls)
	return res, nil
}
