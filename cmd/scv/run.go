package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"scv/control/api"
	"scv/control/supervise"
	"scv/reducer"
)

// newRunCmd is `scv project run`.
func newRunCmd(c *client) *cobra.Command {
	return withExample(`  R=$(scv project run start acme $T --agent codex | awk 'NR==1{print $2}')
  scv project run finish acme $R succeeded
  scv project run exec acme $T -- make test`, group("run", "Record runs of tasks, or run a command as one (exec)",
		newRunStartCmd(c),
		newRunProgressCmd(c),
		newRunFinishCmd(c),
		newRunExecCmd(c),
	))
}

// RunStartOptions is `scv project run start`.
type RunStartOptions struct {
	c       *client
	Project string
	Task    string
	Agent   string
}

func newRunStartCmd(c *client) *cobra.Command {
	o := &RunStartOptions{c: c}
	cmd := &cobra.Command{
		Use:   "start PROJECT TASK --agent NAME",
		Short: "Start a run of a ready (or stale) task",
		Long: `Start a run of TASK by the agent NAME. The first line printed is
"run ID started": its second word is the run's ID.`,
		Example:           `  R=$(scv project run start acme $B --agent codex | awk 'NR==1{print $2}')`,
		Args:              exactArgs("PROJECT", "TASK"),
		ValidArgsFunction: c.completeProjectTask(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Task = args[0], args[1]
			if o.Agent == "" {
				return usagef("--agent NAME is required")
			}
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Agent, "agent", "", "the agent doing the run, `NAME` (required)")
	return cmd
}

func (o *RunStartOptions) run() error {
	_, err := o.c.call(api.CmdProjectRunStart{Project: o.Project, Task: o.Task, Agent: o.Agent}, func(p *printer, st *api.DaemonStatus) error {
		r, err := projectOf(st, api.KindRunStarted)
		if err != nil {
			return err
		}
		return printNewID(p, "run", r.RunID, "started", r.Project)
	})
	return err
}

// RunProgressOptions is `scv project run progress`.
type RunProgressOptions struct {
	c                  *client
	Project, Run, Text string
	usage              usageFlags
}

// usageHelp is the usage flags' part of the help of run progress and
// finish.
const usageHelp = `

With --tokens-in, --tokens-out (and --tokens-thought, --tokens-cached-read,
--tokens-cached-write), --cost and --model it records what the run has
spent so far (docs/usage.md): each report replaces the last, and one
lower than the last (fewer tokens of a kind, or less cost) is refused.`

func newRunProgressCmd(c *client) *cobra.Command {
	o := &RunProgressOptions{c: c}
	cmd := &cobra.Command{
		Use:   "progress PROJECT RUN TEXT",
		Short: "Record a running run's progress (it counts as a heartbeat)",
		Long: `Record TEXT as the progress of RUN, which must be running: a finished or
stale run is fenced, and what it says is refused.` + usageHelp,
		Example: `  scv project run progress acme $R "compiling"
  scv project run progress acme $R "tests pass" --tokens-in 12000 --tokens-out 800 --cost 0.05USD`,
		Args:              exactArgs("PROJECT", "RUN", "TEXT"),
		ValidArgsFunction: c.completeProjectRun(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Run, o.Text = args[0], args[1], args[2]
			u, err := o.usage.usage(cmd)
			if err != nil {
				return err
			}
			_, err = o.c.call(api.CmdProjectRunProgress{Project: o.Project, Run: o.Run, Progress: o.Text, Usage: u},
				func(p *printer, st *api.DaemonStatus) error {
					return printProjectBlock(p, st, fmt.Sprintf("run %s progress recorded", o.Run))
				})
			return err
		},
	}
	o.usage.add(cmd)
	return cmd
}

// runFinals are the statuses a run finishes with.
var runFinals = []string{string(reducer.RunSucceeded), string(reducer.RunFailed), string(reducer.RunCancelled)}

// RunFinishOptions is `scv project run finish`.
type RunFinishOptions struct {
	c            *client
	Project, Run string
	Status       reducer.RunStatus
	usage        usageFlags
}

func newRunFinishCmd(c *client) *cobra.Command {
	o := &RunFinishOptions{c: c}
	cmd := &cobra.Command{
		Use:   "finish PROJECT RUN STATUS",
		Short: "Finish a running run: succeeded, failed or cancelled",
		Long: `Finish RUN with STATUS, one of:

  succeeded  the task is done
  failed     a retry is spent: the task is ready again, or failed once its
             --max-retries are spent
  cancelled  the task is ready again; no retry is spent` + usageHelp + ` Finishing
with the run's usage in all keeps it whatever reports before were
coalesced.`,
		Example: `  scv project run finish acme $R succeeded
  scv project run finish acme $R succeeded --tokens-in 30000 --tokens-out 2100 --cost 0.12USD`,
		Args:              exactArgs("PROJECT", "RUN", "STATUS"),
		ValidArgsFunction: c.completeProjectRun(runFinals...),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Run = args[0], args[1]
			status, err := finishStatus(args[2])
			if err != nil {
				return usageError{err.Error()}
			}
			o.Status = status
			u, err := o.usage.usage(cmd)
			if err != nil {
				return err
			}
			_, err = o.c.call(api.CmdProjectRunFinish{Project: o.Project, Run: o.Run, Status: o.Status, Usage: u},
				func(p *printer, st *api.DaemonStatus) error {
					return printProjectBlock(p, st, fmt.Sprintf("run %s finished (%s)", o.Run, o.Status))
				})
			return err
		},
	}
	o.usage.add(cmd)
	return cmd
}

// finishStatus reads the STATUS of `project run finish`: a RunStatus, and
// one a run can finish with (`running` and `stale` are the daemon's own
// observations, which it refuses from clients).
func finishStatus(s string) (reducer.RunStatus, error) {
	var status reducer.RunStatus
	if err := status.UnmarshalText([]byte(s)); err != nil {
		return "", fmt.Errorf("STATUS: unknown variant `%s`, expected one of `%s`", s, strings.Join(runFinals, "`, `"))
	}
	if !slices.Contains(runFinals, string(status)) {
		return "", fmt.Errorf("STATUS: a run finishes `%s`, `%s` or `%s`, not `%s`", runFinals[0], runFinals[1], runFinals[2], status)
	}
	return status, nil
}

func newRunExecCmd(c *client) *cobra.Command {
	var r supervise.Run
	cmd := &cobra.Command{
		Use:   "exec PROJECT TASK [--agent NAME] -- CMD [ARGS...]",
		Short: "Run a command as a supervised run of a task",
		Long: `Start a run of TASK, run CMD as a delegation (see scv delegate), send
heartbeats while it lives (--heartbeat-every), record every line of its
output that starts "progress: " as the run's progress, and finish the run
succeeded (exit 0), failed (any other exit) or cancelled (Ctrl-C or
SIGTERM to scv). scv exits with CMD's code (125 when scv itself failed,
127 when CMD could not be started). CMD sees SCV_PROJECT, SCV_TASK and
SCV_RUN.`,
		Example: `  scv project run exec acme $T --agent codex -- codex exec "fix the build"
  scv project run exec acme $T -- sh -c 'echo "progress: compiling"; make'`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeProjectTask(),
		RunE: func(cmd *cobra.Command, args []string) error {
			pos, command, err := commandArgs(cmd, args, "PROJECT", "TASK")
			if err != nil {
				return err
			}
			if r.HeartbeatEvery <= 0 {
				return usagef("--heartbeat-every must be positive")
			}
			r.Project, r.Task, r.Command = pos[0], pos[1], command
			return c.supervise(&r.Delegation, func(ctx context.Context) (unix.WaitStatus, error) { return r.Run(ctx) })
		},
	}
	agentFlags(cmd, &r.Delegation)
	cmd.Flags().DurationVar(&r.HeartbeatEvery, "heartbeat-every", supervise.DefaultHeartbeat, "send a heartbeat this often while the command lives")
	return cmd
}
