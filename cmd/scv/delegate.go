package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"scv/control"
	"scv/control/supervise"
)

// agentFlags declares the flags `scv delegate` and `scv project run exec`
// share.
func agentFlags(cmd *cobra.Command, d *supervise.Delegation) {
	cmd.Flags().StringVar(&d.Agent, "agent", "", "the agent's `NAME` (default: the command's file name)")
	cmd.Flags().StringVar(&d.Session, "session", os.Getenv("SCV_SESSION"), "the SCV `SESSION` that starts it (env SCV_SESSION)")
}

// commandArgs splits `POSITIONAL... -- CMD ARGS...` at the dash: names
// are the positional arguments wanted before it.
func commandArgs(cmd *cobra.Command, args []string, names ...string) (pos, command []string, err error) {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 || dash == len(args) {
		return nil, nil, usagef("%s: missing the command: give it after --", cmd.CommandPath())
	}
	pos, command = args[:dash], args[dash:]
	if len(pos) < len(names) {
		return nil, nil, usagef("%s: missing %s before --", cmd.CommandPath(), strings.Join(names[len(pos):], " "))
	}
	if len(pos) > len(names) {
		return nil, nil, usagef("%s: unexpected argument %q before --", cmd.CommandPath(), pos[len(names)])
	}
	return pos, command, nil
}

// supervise gives d scv's daemon, streams and signals, calls run, and ends
// scv with the code of d's command (125 when scv failed, 127 when the
// command could not be found).
func (c *client) supervise(d *supervise.Delegation, run func(context.Context) (unix.WaitStatus, error)) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// A delegation outlives connections: each call dials anew.
	d.Daemon = &control.Remote{Socket: c.socket}
	d.Stdin, d.Stdout, d.Stderr = os.Stdin, os.Stdout, os.Stderr
	d.Signals = sigs
	if !c.json {
		d.Notes = c.stderr
	}
	ws, err := run(context.Background())
	return exitError{supervise.ExitCode(ws, err), err}
}

func newDelegateCmd(c *client) *cobra.Command {
	var d supervise.Delegation
	cmd := &cobra.Command{
		Use:   "delegate [--agent NAME] -- CMD [ARGS...]",
		Short: "Run a command as a delegation the daemon tracks",
		Long: `Run CMD as a delegation: in a process group of its own, tagged, and
registered with the daemon, so that scv delegations lists it with its live
processes, scv delegations kill stops its whole tree, and the daemon stops
it by itself if this scv process dies. scv exits with CMD's code (125 when
scv itself failed, 127 when CMD could not be started).`,
		Example: `  scv delegate --agent codex -- codex exec "fix the build"
  scv delegate -- make test`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if _, d.Command, err = commandArgs(cmd, args); err != nil {
				return err
			}
			return c.supervise(&d, func(ctx context.Context) (unix.WaitStatus, error) { return d.Run(ctx) })
		},
	}
	agentFlags(cmd, &d)
	return cmd
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
