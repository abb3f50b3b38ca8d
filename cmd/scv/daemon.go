package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/channels"
	"scv/control/daemon"
	"scv/control/render"
	"scv/control/web"
)

// DaemonOptions is `scv daemon`.
type DaemonOptions struct {
	c   *client
	cfg daemon.Config
}

// newDaemonCmd is `scv daemon`, which run runs once its flags are read.
func newDaemonCmd(c *client, run func(daemon.Config) error) *cobra.Command {
	o := &DaemonOptions{c: c}
	cfg := &o.cfg
	cfg.HeartbeatEvery = -1
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the daemon in the foreground",
		Long: `Run the ledger daemon in the foreground on --db (a SQLite file, created if
missing, or a postgres:// URL that a fleet shares) and the control socket
--socket, until SIGINT or SIGTERM (Ctrl-C): it then answers or closes
every connection, a connected scv chat included, and exits 0. It logs to
stderr in slog's text format (JSON with --json). Another daemon on the
same socket or database is refused (exit 1).

With --http ADDR it also serves the web UI and /metrics on ADDR, a
loopback address only (127.0.0.1, ::1 or localhost; anything else is
refused, exit 2); port 0 picks a free one. A new token is made at each
start and kept in a 0600 file beside the socket, never in the log: scv ui
prints the address to open, with it (the log line "web UI listening" at
start names the command, open=).`,
		Example: `  scv daemon
  scv daemon --http 127.0.0.1:0          # and the web UI: scv ui prints its address
  scv daemon --db /srv/scv/ledger.db --socket /run/scv/daemon.sock --stale-after 10m
  scv daemon --json 2>>daemon.log`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Socket = c.socket
			if err := o.check(); err != nil {
				return err
			}
			return run(*cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DB, "db", daemon.DefaultDB(), "ledger database: a SQLite `PATH`, or a postgres:// URL a fleet shares (env SCV_DB)")
	f.StringVar(&cfg.LocalDB, "local-db", daemon.DefaultLocalDB(), "with a postgres:// --db, this machine's own state (delegations, channels, questions): a SQLite `PATH` (env SCV_LOCAL_DB)")
	f.DurationVar(&cfg.LeaseTTL, "lease", 0, "with a shared --db, the sweeper lease's `length`: a dead sweeper is replaced within it (default 10s)")
	f.DurationVar(&cfg.StaleAfter, "stale-after", daemon.DefaultStaleAfter, "mark a running run stale after this long without a heartbeat or progress")
	f.Var(heartbeatFlag{&cfg.HeartbeatEvery}, "heartbeat-every", "journal at most one heartbeat per run per `interval` (0: every one; default: a tenth of --stale-after)")
	f.IntVar(&cfg.CompactAfter, "compact-after", daemon.DefaultCompactAfter, "compact a project whose live tail holds more than `N` events (0: never)")
	f.IntVar(&cfg.Retain, "retain", daemon.DefaultRetain, "events a compaction keeps live (`K` newest)")
	f.BoolVar(&cfg.CompactDrop, "compact-drop", false, "delete what compaction folds into a snapshot instead of archiving it")
	f.IntVar(&cfg.CacheSize, "cache-projects", daemon.DefaultCacheSize, "keep at most `N` projects in memory; the others are loaded when addressed")
	configPath, _ := channels.DefaultPath()
	f.StringVar(&cfg.ConfigPath, "config", configPath, "the channel settings `FILE` that reload rereads")
	f.StringVar(&cfg.Notify, "notify", "", "the chat (`CHANNEL:ACCOUNT`) that questions go to when their work names none")
	f.DurationVar(&cfg.KillGrace, "kill-grace", daemon.DefaultKillGrace, "time a stopped delegation's processes get between SIGTERM and SIGKILL")
	f.StringVar(&cfg.HTTP, "http", "", "serve the web UI and /metrics on `ADDR`, a loopback HOST:PORT (port 0: a free one; default: none)")
	return cmd
}

func (o *DaemonOptions) check() error {
	c := &o.cfg
	if c.StaleAfter <= 0 {
		return usagef("scv daemon: --stale-after must be positive")
	}
	if c.KillGrace <= 0 {
		return usagef("scv daemon: --kill-grace must be positive")
	}
	if err := c.Check(); err != nil {
		return usagef("scv daemon: %v", err)
	}
	return nil
}

// runDaemon is `scv daemon` once its flags are read: it runs in the
// foreground until SIGINT or SIGTERM, or until restart_when_idle handed
// over to a new process, logging to stderr.
func (c *client) runDaemon(cfg daemon.Config) error {
	var handler slog.Handler = slog.NewTextHandler(c.stderr, nil)
	if c.json {
		handler = slog.NewJSONHandler(c.stderr, nil)
	}
	// The release a restart starts gets the daemon's own command line.
	cfg.Logger, cfg.Version, cfg.Args = slog.New(handler), version, os.Args[1:]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return daemon.Run(ctx, cfg)
}

// heartbeatFlag is --heartbeat-every: a duration, or unset for a tenth
// of --stale-after (the daemon's negative HeartbeatEvery).
type heartbeatFlag struct{ d *time.Duration }

func (h heartbeatFlag) String() string {
	if h.d == nil || *h.d < 0 {
		return ""
	}
	return h.d.String()
}

func (h heartbeatFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("must not be negative")
	}
	*h.d = d
	return nil
}

func (heartbeatFlag) Type() string { return "duration" }

// parseDaemonFlags reads `scv daemon ARGS...` into the daemon's
// configuration, without starting it.
func parseDaemonFlags(args []string) (daemon.Config, error) {
	var cfg daemon.Config
	c := &client{streams: streams{stdout: io.Discard, stderr: io.Discard}, now: time.Now}
	root := newRootCmd(c, func(got daemon.Config) error { cfg = got; return nil })
	root.SetArgs(append([]string{"daemon"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	_, err := root.ExecuteC()
	return cfg, err
}

func newStatusCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "The daemon's version, pid, components and delegations",
		Long: `Report the running daemon: its version and pid, how many channel components
it runs, its delegations (active, and orphans reaped since it started),
each email account's counts (docs/mail.md), each live agent (its turn,
idle since when, its background jobs), and a pending restart. --json prints the daemon's status reply as it came,
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

// printDaemonStatus is `scv status`.
func printDaemonStatus(p *printer, st *api.DaemonStatus) error {
	t := render.Block()
	t.Add("version", st.Version)
	t.Add("pid", fmt.Sprint(st.PID))
	t.Add("components", fmt.Sprint(len(st.Components)))
	t.Add("delegations", delegationCounts(st.Delegations))
	for _, c := range st.Components {
		if c.Mail != nil {
			t.Add("mail "+c.ID, mailLine(p, c.Mail))
		}
	}
	for _, e := range st.Delegations.Entries {
		if e.Conversation == nil || e.Turn == nil {
			continue // not a live agent
		}
		state := fmt.Sprintf("turn %d under way", *e.Turn)
		if e.IdleSinceUnixSeconds != nil {
			state = fmt.Sprintf("turn %d, idle since %s", *e.Turn, p.ago(*e.IdleSinceUnixSeconds))
		}
		if e.BackgroundJobs != nil {
			state += fmt.Sprintf(", %d background jobs", *e.BackgroundJobs)
		}
		t.Add("agent "+e.Agent, state)
	}
	if r := st.Restart; r != nil {
		waiting := "nothing"
		if r.WaitingFor != nil {
			waiting = *r.WaitingFor
		}
		t.Add("restart", fmt.Sprintf("to %s, waiting for %s, at the latest %s", r.ToVersion, waiting, p.stamp(r.DeadlineUnixSeconds)))
	}
	return p.table(t)
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
	c.Parent = delegationParent() // inside a delegation, the daemon waits for it to end
	if o.set("max-wait") {
		secs := uint64(o.MaxWait.Round(time.Second) / time.Second)
		c.MaxWaitSeconds = &secs
	}
	_, err := o.c.call(c, printDaemonStatus)
	return err
}

// UIOptions is `scv ui`.
type UIOptions struct {
	c *client
}

func newUICmd(c *client) *cobra.Command {
	o := &UIOptions{c: c}
	return &cobra.Command{
		Use:   "ui",
		Short: "Print the address of the daemon's web UI, with its token",
		Long: `Print the address of the web UI of the daemon on --socket, with the token
that opens it: open it once in a browser on this machine, which trades the
token for a cookie. The daemon serves the UI only when started with
--http ADDR (a loopback address; port 0 picks a free one), and makes a new
token at each start. The address is read from the file beside the socket
(SOCKET.http-url, mode 0600) that the daemon writes while the UI runs.

Exit 0 with the address; 1 when the daemon runs without --http; 3 when
no daemon answers on the socket. Under --json it prints {"url","file"}.`,
		Example: `  scv daemon --http 127.0.0.1:0     # in one terminal
  scv ui                             # in another
  xdg-open "$(scv ui)"`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run() },
	}
}

// uiJSON is `scv ui --json`.
type uiJSON struct {
	URL  string `json:"url"`
	File string `json:"file"`
}

func (o *UIOptions) run() error {
	// The file outlives a daemon that was killed: ask the daemon first.
	if _, err := o.c.do(api.CmdStatus{}); err != nil {
		return err
	}
	_, file := web.Files(o.c.socket)
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the daemon at %s runs without a web UI: start it with `scv daemon --http 127.0.0.1:0` (any loopback address; port 0 picks a free one)", o.c.socket)
	}
	if err != nil {
		return fmt.Errorf("the web UI's address: %w", err)
	}
	url := strings.TrimSpace(string(b))
	if url == "" {
		return fmt.Errorf("the web UI's address: %s is empty", file)
	}
	if o.c.json {
		return o.c.printJSON(uiJSON{URL: url, File: file})
	}
	_, err = fmt.Fprintln(o.c.stdout, url)
	return err
}
