package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

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

// parseDaemonFlags reads `scv daemon` flags into a daemon configuration.
func parseDaemonFlags(args []string, stderr io.Writer) (daemon.Config, error) {
	var c daemon.Config
	fs := flag.NewFlagSet("scv daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.DB, "db", defaultDBPath(), "ledger database: a SQLite `path`, or a postgres:// URL a fleet shares (env SCV_DB)")
	fs.StringVar(&c.LocalDB, "local-db", defaultLocalDBPath(), "with a postgres:// --db, this machine's own state (delegations, channels, questions): a SQLite `path` (env SCV_LOCAL_DB)")
	fs.DurationVar(&c.LeaseTTL, "lease", 0, "with a shared --db, the sweeper lease's `length`: a dead sweeper is replaced within it (default 10s)")
	fs.StringVar(&c.Socket, "socket", control.DefaultSocketPath(), "control socket `path` (env SCV_SOCKET)")
	fs.DurationVar(&c.StaleAfter, "stale-after", daemon.DefaultStaleAfter, "mark a running run stale after this long without a heartbeat or progress")
	fs.DurationVar(&c.HeartbeatEvery, "heartbeat-every", -1, "journal at most one heartbeat per run per `interval` (0: every one; default: a tenth of --stale-after)")
	fs.IntVar(&c.CompactAfter, "compact-after", daemon.DefaultCompactAfter, "compact a project whose live tail holds more than `N` events (0: never)")
	fs.IntVar(&c.Retain, "retain", daemon.DefaultRetain, "events a compaction keeps live (`K` newest)")
	fs.BoolVar(&c.CompactDrop, "compact-drop", false, "delete what compaction folds into a snapshot instead of archiving it")
	fs.IntVar(&c.CacheSize, "cache-projects", daemon.DefaultCacheSize, "keep at most `N` projects in memory; the others are loaded when addressed")
	configPath, _ := channels.DefaultPath()
	fs.StringVar(&c.ConfigPath, "config", configPath, "the channel settings `file` that reload rereads")
	fs.StringVar(&c.Notify, "notify", "", "the chat (`CHANNEL:ACCOUNT`) that questions go to when their work names none")
	fs.DurationVar(&c.KillGrace, "kill-grace", daemon.DefaultKillGrace, "time a stopped delegation's processes get between SIGTERM and SIGKILL")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, usageError{"scv daemon: unexpected argument " + fs.Arg(0)}
	}
	if c.StaleAfter <= 0 {
		return c, usageError{"scv daemon: --stale-after must be positive"}
	}
	if c.KillGrace <= 0 {
		return c, usageError{"scv daemon: --kill-grace must be positive"}
	}
	if err := c.Check(); err != nil {
		return c, usageError{"scv daemon: " + err.Error()}
	}
	return c, nil
}

// runDaemon is `scv daemon`: it runs in the foreground until SIGINT or
// SIGTERM, or until restart_when_idle handed over to a new process.
func runDaemon(args []string, stderr io.Writer) error {
	// Everything the daemon creates (database, socket, lock files) is
	// for its owner alone.
	syscall.Umask(0o077)
	cfg, err := parseDaemonFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.Failpoints, err = ledger.ParseFailpoints(os.Getenv(ledger.FailpointsEnv)); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Logger, cfg.Version, cfg.Args = log, version, append([]string{"daemon"}, args...)
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
