package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"scv/control"
	"scv/ledger"
)

// Daemon is `scv daemon`: the ledger and the control server wired
// together. Tests drive it in-process through Open, Serve and Close.
type Daemon struct {
	DBPath     string
	SocketPath string
	// StaleAfter is the stale window: a running run silent for longer is
	// marked stale by the sweeper.
	StaleAfter time.Duration
	// HeartbeatEvery coalesces heartbeats (0: journal every one); negative
	// means a tenth of StaleAfter.
	HeartbeatEvery time.Duration
	// CompactAfter: a project whose live tail holds more events is
	// compacted by the sweeper, keeping its Retain newest. 0 turns
	// automatic compaction off.
	CompactAfter int
	Retain       int
	// CompactDrop deletes compacted events instead of archiving them.
	CompactDrop bool
	Logger      *slog.Logger

	ledger *ledger.Ledger
	server *control.Server
	ln     net.Listener
	locks  []*os.File
	stop   chan struct{} // closed by Close: the sweeper ends
	swept  chan struct{} // closed when the sweeper has ended
}

// Defaults of the daemon's flags.
const (
	DefaultStaleAfter   = 5 * time.Minute
	DefaultCompactAfter = 10_000
	DefaultRetain       = 1_000
)

// defaultDBPath is $SCV_DB, else $XDG_STATE_HOME/scv/ledger.db.
func defaultDBPath() string {
	if p := os.Getenv("SCV_DB"); p != "" {
		return p
	}
	return filepath.Join(control.StateDir(), "ledger.db")
}

// ParseFlags reads `scv daemon` flags.
func (d *Daemon) ParseFlags(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("scv daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&d.DBPath, "db", defaultDBPath(), "ledger database `path` (env SCV_DB)")
	fs.StringVar(&d.SocketPath, "socket", control.DefaultSocketPath(), "control socket `path` (env SCV_SOCKET)")
	fs.DurationVar(&d.StaleAfter, "stale-after", DefaultStaleAfter, "mark a running run stale after this long without a heartbeat or progress")
	fs.DurationVar(&d.HeartbeatEvery, "heartbeat-every", -1, "journal at most one heartbeat per run per `interval` (0: every one; default: a tenth of --stale-after)")
	fs.IntVar(&d.CompactAfter, "compact-after", DefaultCompactAfter, "compact a project whose live tail holds more than `N` events (0: never)")
	fs.IntVar(&d.Retain, "retain", DefaultRetain, "events a compaction keeps live (`K` newest)")
	fs.BoolVar(&d.CompactDrop, "compact-drop", false, "delete what compaction folds into a snapshot instead of archiving it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"scv daemon: unexpected argument " + fs.Arg(0)}
	}
	if d.StaleAfter <= 0 {
		return usageError{"scv daemon: --stale-after must be positive"}
	}
	if d.CompactAfter < 0 || d.Retain < 0 || (d.CompactAfter > 0 && d.Retain >= d.CompactAfter) {
		return usageError{"scv daemon: --retain must be at least 0 and smaller than --compact-after"}
	}
	if d.HeartbeatEvery >= d.StaleAfter {
		// A live run's heartbeats would be coalesced past its window.
		return usageError{"scv daemon: --heartbeat-every must be shorter than --stale-after"}
	}
	return nil
}

// Open takes the daemon's locks, opens the socket, then the ledger: a
// daemon that cannot have the socket never touches (or migrates) the
// database.
func (d *Daemon) Open(ctx context.Context) (err error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			d.release()
		}
	}()
	// One daemon per socket and one per database: flock(2) on a lock file
	// beside each, released by the kernel when the process ends.
	for _, p := range []string{d.SocketPath, d.DBPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		f, err := lockFile(p + ".lock")
		if err != nil {
			return err
		}
		d.locks = append(d.locks, f)
	}
	ln, err := control.Listen(d.SocketPath)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.SocketPath, err)
	}
	d.ln = ln
	l, err := ledger.Open(ctx, d.DBPath, ledger.Options{})
	if err != nil {
		return err
	}
	d.ledger = l
	if d.StaleAfter <= 0 {
		d.StaleAfter = DefaultStaleAfter
	}
	if d.HeartbeatEvery < 0 {
		d.HeartbeatEvery = d.StaleAfter / 10
	}
	d.server = &control.Server{
		Service: &control.Service{Ledger: l, Version: version, PID: uint32(os.Getpid()), HeartbeatEvery: d.HeartbeatEvery},
		Logger:  d.Logger.With("component", "control"),
	}
	d.stop, d.swept = make(chan struct{}), make(chan struct{})
	go d.sweep()
	return nil
}

// SweepEvery is how often the sweeper looks for silent runs: a twentieth
// of the stale window, so that a run is marked at most that long (plus the
// time of one transaction) after its window ran out, well inside the tenth
// of the window that is promised.
func (d *Daemon) SweepEvery() time.Duration {
	return max(d.StaleAfter/20, time.Millisecond)
}

// compact compacts every project whose live tail outgrew CompactAfter.
func (d *Daemon) compact(log *slog.Logger) {
	for _, id := range d.ledger.CompactDue(d.CompactAfter) {
		c, err := d.ledger.CompactWith(context.Background(), id, ledger.CompactOptions{Retain: d.Retain, Drop: d.CompactDrop})
		if err != nil {
			log.Error("compact", "project", id, "err", err)
			continue
		}
		log.Info("compacted", "project", id, "through", c.Sequence, "archived", c.Archived, "live", c.Live)
	}
}

// sweep marks silent runs stale, and compacts, until Close.
func (d *Daemon) sweep() {
	defer close(d.swept)
	log := d.Logger.With("component", "sweeper")
	t := time.NewTicker(d.SweepEvery())
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			n, err := d.ledger.MarkStale(context.Background(), d.StaleAfter)
			if err != nil {
				log.Error("sweep", "err", err)
			} else if n > 0 {
				log.Info("marked runs stale", "runs", n)
			}
			if d.CompactAfter > 0 {
				d.compact(log)
			}
		}
	}
}

// lockFile takes an exclusive, non-blocking flock on path.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another daemon is using %s", strings.TrimSuffix(path, ".lock"))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// release closes what Open opened, in reverse order.
func (d *Daemon) release() {
	if d.ln != nil {
		d.ln.Close()
		os.Remove(d.SocketPath)
	}
	for _, f := range d.locks {
		f.Close()
	}
	d.locks = nil
}

// Serve answers requests until Close.
func (d *Daemon) Serve() error { return d.server.Serve(d.ln) }

// Close stops taking requests, answers those in flight, and closes the
// ledger.
func (d *Daemon) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.server.Shutdown(ctx)
	close(d.stop)
	<-d.swept
	os.Remove(d.SocketPath)
	err = errors.Join(err, d.ledger.Close())
	d.release()
	return err
}

// runDaemon is `scv daemon`: it runs in the foreground until SIGINT or
// SIGTERM.
func runDaemon(args []string, stderr io.Writer) error {
	// Everything the daemon creates (database, socket, lock files) is
	// for its owner alone.
	syscall.Umask(0o077)
	d := &Daemon{Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if err := d.ParseFlags(args, stderr); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := d.Open(ctx); err != nil {
		return err
	}
	d.Logger.Info("daemon started", "version", version, "db", d.DBPath, "socket", d.SocketPath,
		"stale_after", d.StaleAfter, "heartbeat_every", d.HeartbeatEvery)
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	select {
	case <-ctx.Done():
		d.Logger.Info("shutting down")
	case err := <-served:
		d.Close()
		return err
	}
	if err := d.Close(); err != nil {
		return err
	}
	d.Logger.Info("daemon stopped")
	return nil
}
