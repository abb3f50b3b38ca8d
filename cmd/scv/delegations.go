package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"scv/control/api"
	"scv/control/proc"
	"scv/control/render"
	"scv/control/rpc"
	"scv/control/supervise"
)

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
	d.Daemon = &rpc.Remote{Socket: c.socket}
	d.Stdin, d.Stdout, d.Stderr = os.Stdin, os.Stdout, os.Stderr
	d.Signals = sigs
	if !c.json {
		d.Notes = c.stderr
	}
	ws, err := run(context.Background())
	return exitError{supervise.ExitCode(ws, err), err}
}

// DelegationsOptions is `scv delegations`.
type DelegationsOptions struct {
	c   *client
	All bool
}

func newDelegationsCmd(c *client) *cobra.Command {
	o := &DelegationsOptions{c: c}
	cmd := &cobra.Command{
		Use:   "delegations",
		Short: "List running delegations (--all: orphans too), kill one, or report its jobs",
		Long: `List the running delegations, oldest first, each with its live process
count, and for a live agent its turn, idle time and background jobs;
--all adds orphans awaiting cleanup. scv delegations kill stops a
delegation's whole process tree; scv delegations update reports how many
background jobs of a delegation still run.`,
		Example: `  scv delegations
  scv delegations --all --json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := o.c.call(api.CmdDelegations{All: o.All}, printDelegations)
			return err
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", false, "include orphans awaiting cleanup")
	cmd.AddCommand(newDelegationsKillCmd(c), newDelegationsUpdateCmd(c))
	return cmd
}

// printDelegations is `scv delegations` and `scv delegations kill`.
func printDelegations(p *printer, st *api.DaemonStatus) error {
	d := st.Delegations
	for _, h := range d.Killed {
		fmt.Fprintf(p.w, "stopped %s\n", h)
	}
	if len(d.Entries) > 0 {
		t := render.NewTable("HANDLE", "~AGENT", "TURN", "IDLE", "JOBS", "PID", "OWNER", "PROCS", "DEPTH", "STARTED", "~CWD")
		for _, e := range d.Entries {
			handle := e.Handle
			if e.Orphaned {
				handle += " (orphaned)"
			}
			t.Add(handle, e.Agent, uintDash(e.Turn), p.agoPtr(e.IdleSinceUnixSeconds), uintDash(e.BackgroundJobs),
				fmt.Sprint(e.PID), fmt.Sprint(e.OwnerPID), fmt.Sprint(e.Processes),
				fmt.Sprint(e.Depth), p.ago(e.StartedUnixSeconds), e.Cwd)
		}
		p.table(t)
	}
	_, err := fmt.Fprintf(p.w, "%s since the daemon started\n", delegationCounts(d))
	return err
}

// delegationCounts is "N active (I idle), R reaped", without the idle
// count from a daemon that does not tell it.
func delegationCounts(d api.DelegationSummary) string {
	if d.Idle != nil {
		return fmt.Sprintf("%d active (%d idle), %d reaped", d.Active, *d.Idle, d.Reaped)
	}
	return fmt.Sprintf("%d active, %d reaped", d.Active, d.Reaped)
}

// DelegationsKillOptions is `scv delegations kill`.
type DelegationsKillOptions struct {
	c       *client
	Orphans bool
}

func newDelegationsKillCmd(c *client) *cobra.Command {
	o := &DelegationsKillOptions{c: c}
	cmd := &cobra.Command{
		Use:   "kill HANDLE | --orphans",
		Short: "Stop a delegation's whole process tree",
		Long: `Stop the delegation HANDLE (SIGTERM, the daemon's --kill-grace, SIGKILL; the
grandchildren that left its process group included), or with --orphans
every orphaned one.`,
		Example: `  scv delegations kill 01M8KP3V7Q2Z4N6X8B0C1D2E3F
  scv delegations kill --orphans`,
		Args:              rangeArgs(0, "HANDLE"),
		ValidArgsFunction: c.completeHandles,
		RunE: func(cmd *cobra.Command, args []string) error {
			var k api.CmdDelegationKill
			switch {
			case o.Orphans && len(args) == 0:
				k.Orphans = true
			case !o.Orphans && len(args) == 1:
				k.Handle = &args[0]
			default:
				return usagef("give one HANDLE, or --orphans")
			}
			_, err := o.c.call(k, printDelegations)
			return err
		},
	}
	cmd.Flags().BoolVar(&o.Orphans, "orphans", false, "stop every orphaned delegation")
	return cmd
}

// DelegationsUpdateOptions is `scv delegations update`.
type DelegationsUpdateOptions struct {
	c              *client
	Handle         string
	BackgroundJobs uint32
}

func newDelegationsUpdateCmd(c *client) *cobra.Command {
	o := &DelegationsUpdateOptions{c: c}
	cmd := &cobra.Command{
		Use:   "update --background-jobs N [--handle H]",
		Short: "Report how many background jobs of a delegation still run",
		Long: `Report to the daemon how many background jobs of its own the delegation H
(default: $SCV_DELEGATION, the delegation this runs in) still runs: a
restart-when-idle waits for them, and a live agent with any is not counted
idle. Only the delegation's owner or a process started in it may report;
N = 0 says they are all done. It prints the delegation's entry.`,
		Example: `  scv delegations update --background-jobs 2
  scv delegations update --background-jobs 0 --handle 01M8KP3V7Q2Z4N6X8B0C1D2E3F`,
		Args:              exactArgs(),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			handle := o.Handle
			if !cmd.Flags().Changed("handle") {
				handle = os.Getenv(proc.TagEnv)
			}
			if handle == "" {
				return usagef("give --handle H: %s is not set (this does not run in a delegation)", proc.TagEnv)
			}
			_, err := c.call(api.CmdDelegationUpdate{Handle: handle, BackgroundJobs: o.BackgroundJobs}, printDelegations)
			return err
		},
	}
	cmd.Flags().Uint32Var(&o.BackgroundJobs, "background-jobs", 0, "how many background jobs still run, `N`")
	cmd.Flags().StringVar(&o.Handle, "handle", "", "the delegation's `HANDLE` (default: $"+proc.TagEnv+")")
	cmd.MarkFlagRequired("background-jobs")
	cmd.RegisterFlagCompletionFunc("handle", c.completeHandles)
	return cmd
}
