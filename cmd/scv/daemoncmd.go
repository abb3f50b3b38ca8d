package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"scv/control/channels"
	"scv/control/daemon"
)

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
	c := &client{stdout: io.Discard, stderr: io.Discard, now: time.Now}
	c.startDaemon = func(got daemon.Config) error { cfg = got; return nil }
	root := newRootCmd(c)
	root.SetArgs(append([]string{"daemon"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	_, err := root.ExecuteC()
	return cfg, err
}

// DaemonOptions is `scv daemon`.
type DaemonOptions struct {
	c   *client
	cfg daemon.Config
}

func newDaemonCmd(c *client) *cobra.Command {
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
			if c.startDaemon != nil {
				return c.startDaemon(*cfg)
			}
			return o.run()
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

// run is `scv daemon`: it runs in the foreground until SIGINT or
// SIGTERM, or until restart_when_idle handed over to a new process.
func (o *DaemonOptions) run() error {
	var handler slog.Handler = slog.NewTextHandler(o.c.stderr, nil)
	if o.c.json {
		handler = slog.NewJSONHandler(o.c.stderr, nil)
	}
	cfg := o.cfg
	// The release a restart starts gets the daemon's own command line.
	cfg.Logger, cfg.Version, cfg.Args = slog.New(handler), version, os.Args[1:]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return daemon.Run(ctx, cfg)
}
