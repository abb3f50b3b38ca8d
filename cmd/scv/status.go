package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/proc"
)

func newStatusCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "The daemon's version, pid, components and delegations",
		Long: `Report the running daemon: its version and pid, how many channel components
it runs, its delegations (active, and orphans reaped since it started),
each live agent (its turn, idle since when, its background jobs), and a
pending restart. --json prints the daemon's status reply as it came,
which counts the delegations; scv delegations --json lists them.`,
		Example: `  scv status
  scv status --json | jq .version`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(api.CmdStatus{}, func(p *printer, st *api.DaemonStatus) error {
				if st.Delegations.Active > 0 {
					// The live agents: a second question, of delegations.
					d, err := c.do(api.CmdDelegations{})
					if err != nil {
						return err
					}
					st.Delegations.Entries = d.Delegations.Entries
				}
				return printDaemonStatus(p, st)
			})
			return err
		},
	}
}

// versionJSON is `scv version --json`.
type versionJSON struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}

func newVersionCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this scv binary",
		Long: `Print the version this binary was built with (make build stamps it; a plain
go build says 0.0.0-dev). The daemon's own is in scv status.`,
		Example: `  scv version
  scv --version
  scv version --json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.json {
				return c.printJSON(versionJSON{Version: version, Go: runtime.Version()})
			}
			_, err := fmt.Fprintln(c.stdout, version)
			return err
		},
	}
}

// RestartWhenIdleOptions is `scv restart-when-idle`.
type RestartWhenIdleOptions struct {
	c       *client
	Version string
	Commit  string
	MaxWait time.Duration
	set     func(string) bool
}

func newRestartWhenIdleCmd(c *client) *cobra.Command {
	o := &RestartWhenIdleOptions{c: c}
	cmd := &cobra.Command{
		Use:   "restart-when-idle",
		Short: "Restart the daemon into the release installed at its path, once idle",
		Long: `Ask the daemon to restart into the release installed at its own path, once
this delegation ($SCV_PARENT) has ended and no request is being answered,
or after --max-wait whatever still runs. With --version the daemon first
checks that the installed release reports it. Clients are never refused a
connection, and no request is lost or run twice (docs/operations.md).`,
		Example: `  install bin/scv ~/bin/scv && scv restart-when-idle --version 1.3.0
  scv restart-when-idle --max-wait 0`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.set = cmd.Flags().Changed
			if o.set("max-wait") && o.MaxWait < 0 {
				return usagef("--max-wait must not be negative")
			}
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Version, "version", "", "the release installed at the daemon's path, `V`; the daemon checks it")
	cmd.Flags().StringVar(&o.Commit, "commit", "", "the commit it was built from, `C`, for the daemon's log")
	cmd.Flags().DurationVar(&o.MaxWait, "max-wait", 0, "restart after this long even if work still runs (default: the daemon's, 10m)")
	return cmd
}

func (o *RestartWhenIdleOptions) run() error {
	c := api.CmdRestartWhenIdle{}
	if o.Version != "" {
		c.Version = &o.Version
	}
	if o.Commit != "" {
		c.Commit = &o.Commit
	}
	// Inside a delegation, the daemon waits for it to end.
	if parent := os.Getenv(proc.ParentEnv); parent != "" {
		c.Parent = &parent
	}
	if o.set("max-wait") {
		secs := uint64(o.MaxWait.Round(time.Second) / time.Second)
		c.MaxWaitSeconds = &secs
	}
	_, err := o.c.call(c, printDaemonStatus)
	return err
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
