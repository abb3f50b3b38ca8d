package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"scv/control"
	"scv/control/channels"
	"scv/control/daemon"
	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/postgres"
	"scv/ledger/sqlite"
)

// defaultDBPath is $SCV_DB, else $XDG_STATE_HOME/scv/ledger.db.
func defaultDBPath() string {
	if p := os.Getenv("SCV_DB"); p != "" {
		return p
	}
	return filepath.Join(control.StateDir(), "ledger.db")
}

// defaultLocalDBPath is $SCV_LOCAL_DB, else $XDG_STATE_HOME/scv/local.db.
func defaultLocalDBPath() string {
	if p := os.Getenv("SCV_LOCAL_DB"); p != "" {
		return p
	}
	return filepath.Join(control.StateDir(), "local.db")
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
	f.StringVar(&cfg.DB, "db", defaultDBPath(), "ledger database: a SQLite `PATH`, or a postgres:// URL a fleet shares (env SCV_DB)")
	f.StringVar(&cfg.LocalDB, "local-db", defaultLocalDBPath(), "with a postgres:// --db, this machine's own state (delegations, channels, questions): a SQLite `PATH` (env SCV_LOCAL_DB)")
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
	// Everything the daemon creates (database, socket, lock files) is
	// for its owner alone.
	syscall.Umask(0o077)
	cfg := o.cfg
	var err error
	if cfg.Failpoints, err = ledger.ParseFailpoints(os.Getenv(ledger.FailpointsEnv)); err != nil {
		return err
	}
	if cfg.Clock, err = skewedClock(os.Getenv(ClockSkewEnv)); err != nil {
		return err
	}
	var handler slog.Handler = slog.NewTextHandler(o.c.stderr, nil)
	if o.c.json {
		handler = slog.NewJSONHandler(o.c.stderr, nil)
	}
	log := slog.New(handler)
	// The release a restart starts gets the daemon's own command line.
	cfg.Logger, cfg.Version, cfg.Args = log, version, os.Args[1:]
	// A write past the process's file size limit (RLIMIT_FSIZE) gets
	// SIGXFSZ, whose default action kills the process (the Go runtime
	// drops it when no one asked for it; this says so, and logs it).
	// Caught, the write only fails (EFBIG), and its batch is refused
	// with storage_full. Caught, not ignored: an ignored signal stays
	// ignored across exec, in every process a delegation starts.
	xfsz := make(chan os.Signal, 1)
	signal.Notify(xfsz, syscall.SIGXFSZ)
	defer func() {
		signal.Stop(xfsz)
		close(xfsz)
	}()
	go logFileSizeLimit(log, xfsz)
	// Resolved now: a release installed later replaces the file, not
	// this path (Go drops the " (deleted)" Linux then shows).
	if exe, err := os.Executable(); err == nil {
		cfg.Executable = exe
	} else {
		log.Warn("own executable unknown: restart_when_idle is refused", "err", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := daemon.New(cfg)
	if err := d.Open(ctx); err != nil {
		return err
	}
	cfg = d.Config()
	db := cfg.DB
	if d.Shared() {
		db = postgres.Redact(db) + " (local " + cfg.LocalDB + ")"
	}
	log.Info("daemon started", "version", version, "db", db, "socket", cfg.Socket,
		"stale_after", cfg.StaleAfter, "heartbeat_every", cfg.HeartbeatEvery, "cache_projects", cfg.CacheSize,
		"pid", os.Getpid(), "inherited_socket", d.Inherited())
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-served:
		if err == nil && d.HandedOff() {
			log.Info("daemon stopped: a new process serves the socket")
			return nil
		}
		d.Close()
		return err
	}
	if err := d.Close(); err != nil {
		return err
	}
	if d.HandedOff() {
		// The signal came while a restart handed over: the stop was
		// meant for the daemon, whichever process it is now.
		log.Info("daemon stopped: passing the stop on to the new process", "pid", d.Successor())
		syscall.Kill(d.Successor(), syscall.SIGTERM)
		return nil
	}
	log.Info("daemon stopped")
	return nil
}

// logFileSizeLimit logs the SIGXFSZ signals received on c, at most one a
// minute, until c is closed.
func logFileSizeLimit(log *slog.Logger, c <-chan os.Signal) {
	var last time.Time
	for range c {
		if time.Since(last) >= time.Minute {
			log.Warn("a write reached the file size limit (RLIMIT_FSIZE): writes are refused with storage_full until it is raised")
			last = time.Now()
		}
	}
}

// openReadOnly opens the ledger database db (a SQLite file or a
// PostgreSQL URL) for the auditor's tools, as it is, creating and
// migrating nothing.
func openReadOnly(ctx context.Context, db string) (driver.Driver, error) {
	if postgres.IsURL(db) {
		return postgres.Open(ctx, db, postgres.Options{ReadOnly: true})
	}
	return sqlite.OpenReadOnly(ctx, db)
}

// openWritable opens (creating and migrating it) the ledger database db,
// a SQLite file or a PostgreSQL URL, for `ledger copy`.
func openWritable(ctx context.Context, db string) (driver.Driver, error) {
	if postgres.IsURL(db) {
		return postgres.Open(ctx, db, postgres.Options{})
	}
	return sqlite.Open(ctx, db, sqlite.Options{})
}

// ClockSkewEnv names the environment variable that skews the daemon's own
// clock by a duration (`+1h`, `-90s`), for the fault checks of a fleet
// (scvrel linear): it moves what the daemon times itself (reports,
// questions' deadlines, the pace of the sweeper's lease renewals), and,
// on a SQLite ledger, the events' stamps; on a shared ledger the server's
// clock stamps events and times the lease whatever it says.
const ClockSkewEnv = "SCV_CLOCK_SKEW"

// skewedClock is the system clock moved by the duration spec, nil (the
// system's) when spec is empty.
func skewedClock(spec string) (func() time.Time, error) {
	if spec == "" {
		return nil, nil
	}
	skew, err := time.ParseDuration(strings.TrimPrefix(spec, "+"))
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a duration such as +1h or -90s", ClockSkewEnv, spec)
	}
	return func() time.Time { return time.Now().Add(skew) }, nil
}
