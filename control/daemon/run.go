package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"scv/ledger"
	"scv/ledger/postgres"
)

// ClockSkewEnv names the environment variable that skews the daemon's own
// clock by a duration (`+1h`, `-90s`), for the fault checks of a fleet
// (scvrel linear): it moves what the daemon times itself (reports,
// questions' deadlines, the pace of the sweeper's lease renewals), and,
// on a SQLite ledger, the events' stamps; on a shared ledger the server's
// clock stamps events and times the lease whatever it says.
const ClockSkewEnv = "SCV_CLOCK_SKEW"

// Run is `scv daemon`: a daemon in the foreground of this process, from
// its start to its stop, when ctx ends (SIGINT, SIGTERM) or a restart
// handed the socket over to a new process. Everything it creates is for
// its owner alone (umask 077). The environment may set failpoints
// (ledger.FailpointsEnv) and skew the clock (ClockSkewEnv), for the
// reliability checks. cfg.Logger is its log.
func Run(ctx context.Context, cfg Config) error {
	syscall.Umask(0o077)
	var err error
	if cfg.Failpoints, err = ledger.ParseFailpoints(os.Getenv(ledger.FailpointsEnv)); err != nil {
		return err
	}
	if cfg.Clock, err = skewedClock(os.Getenv(ClockSkewEnv)); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
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
	d := New(cfg)
	if err := d.Open(ctx); err != nil {
		return err
	}
	cfg = d.Config()
	db := cfg.DB
	if d.Shared() {
		db = postgres.Redact(db) + " (local " + cfg.LocalDB + ")"
	}
	log.Info("daemon started", "version", cfg.Version, "db", db, "socket", cfg.Socket,
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
