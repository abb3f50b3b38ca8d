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
	"sync"
	"syscall"
	"time"

	"scv/control"
	"scv/control/channels"
	"scv/control/confirm"
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
	// KillGrace is how long a delegation's processes have between SIGTERM
	// and SIGKILL when the daemon stops them (0: the default).
	KillGrace time.Duration
	// ConfigPath is the channel settings file that reload rereads.
	ConfigPath string
	// Notify is the chat (`<channel>:<account>`) a question goes to when
	// the work that asks it was not started from a chat ("": the only
	// connected chat, if there is exactly one).
	Notify string
	Logger *slog.Logger
	// Executable is the daemon's own binary, resolved once at start
	// (before any release replaces it): restart_when_idle restarts into
	// the release installed there. Empty: restarts are refused.
	Executable string
	// Args are the arguments the daemon was started with (after the
	// program name); the release it restarts into gets them again.
	Args []string

	ledger    *ledger.Ledger
	server    *control.Server
	ln        net.Listener
	inherited bool     // ln came from the daemon this one replaced
	ready     *os.File // that daemon's readiness pipe, written once open
	locks     []*os.File
	restarter *restarter
	channels  *channels.Manager
	questions *confirm.Manager
	// readyTimeout bounds the wait for a restart's new process (0: 30 s).
	readyTimeout time.Duration
	loops        *loops     // the background loops running, or nil
	life         *lifecycle // made by Open
}

// loops are the daemon's background goroutines.
type loops struct {
	ctx    context.Context // cancelled to end them
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// lifecycle is the state Close and a restart agree on. Open makes it
// anew, so that a Serve still returning from a closed daemon does not
// touch a Daemon value opened again.
type lifecycle struct {
	mu        sync.Mutex // serialises Close and a restart
	closed    bool
	handedOff bool  // a new process took the socket over
	successor int   // its pid
	broken    error // a failed restart could not reopen: Serve returns it
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
	configPath, _ := channels.DefaultPath()
	fs.StringVar(&d.ConfigPath, "config", configPath, "the channel settings `file` that reload rereads")
	fs.StringVar(&d.Notify, "notify", "", "the chat (`CHANNEL:ACCOUNT`) that questions go to when their work names none")
	fs.DurationVar(&d.KillGrace, "kill-grace", control.DefaultKillGrace, "time a stopped delegation's processes get between SIGTERM and SIGKILL")
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
	if d.Notify != "" {
		if ch, acct, ok := strings.Cut(d.Notify, ":"); !ok || ch == "" || acct == "" {
			return usageError{"scv daemon: --notify wants CHANNEL:ACCOUNT, such as local:owner"}
		}
	}
	if d.KillGrace <= 0 {
		return usageError{"scv daemon: --kill-grace must be positive"}
	}
	if d.HeartbeatEvery >= d.StaleAfter {
		// A live run's heartbeats would be coalesced past its window.
		return usageError{"scv daemon: --heartbeat-every must be shorter than --stale-after"}
	}
	return nil
}

// Open takes the daemon's locks, opens the socket, then the ledger: a
// daemon that cannot have the socket never touches (or migrates) the
// database. A daemon started by restart_when_idle takes the listener its
// predecessor passed it instead of opening the socket, and tells it once
// it is open.
func (d *Daemon) Open(ctx context.Context) (err error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	d.life = &lifecycle{}
	defer func() {
		if err != nil {
			if d.channels != nil {
				d.channels.Close()
			}
			d.closeLedger()
			d.release()
		}
	}()
	// A database the daemon could not write, or one that is not SQLite's,
	// is refused before the locks, so that it gets no lock file beside it.
	if err := ledger.CheckFile(d.DBPath); err != nil {
		return err
	}
	if err := d.lock(); err != nil {
		return err
	}
	if err := d.listen(); err != nil {
		return err
	}
	if d.StaleAfter <= 0 {
		d.StaleAfter = DefaultStaleAfter
	}
	if d.HeartbeatEvery < 0 {
		d.HeartbeatEvery = d.StaleAfter / 10
	}
	svc := &control.Service{Version: version, PID: uint32(os.Getpid()), HeartbeatEvery: d.HeartbeatEvery}
	d.server = &control.Server{Service: svc, Logger: d.Logger.With("component", "control")}
	if err := d.openLedger(ctx); err != nil {
		return err
	}
	svc.Delegations = &control.Delegations{Ledger: d.ledger, Grace: d.KillGrace, Logger: d.Logger.With("component", "delegations")}
	if err := svc.Delegations.Load(ctx); err != nil {
		return err
	}
	d.channels = channels.New(d.ledger)
	d.channels.Path = d.ConfigPath
	d.channels.Logger = d.Logger.With("component", "channels")
	if err := d.channels.Load(ctx); err != nil {
		return err
	}
	svc.Channels = d.channels
	d.questions = &confirm.Manager{
		Ledger: d.ledger, Chats: d.channels, DelegationChat: svc.Delegations.ChatOf,
		Notify: d.Notify, Logger: d.Logger.With("component", "questions"),
	}
	// Questions still pending from before lose their answer here.
	if err := d.questions.Load(ctx); err != nil {
		return err
	}
	svc.Questions = d.questions
	d.restarter = newRestarter(d, d.Logger.With("component", "restart"))
	svc.Restarter = d.restarter
	d.startLoops()
	if d.ready != nil {
		// The daemon this one replaces waits for this byte to hand over.
		_, err := d.ready.Write([]byte{1})
		d.ready.Close()
		d.ready = nil
		if err != nil {
			d.stopLoops()
			return fmt.Errorf("signal readiness: %w", err)
		}
	}
	return nil
}

// lock takes the daemon's locks. One daemon per socket and one per
// database: flock(2) on a lock file beside each, released by the kernel
// when the process ends, or by unlock before a restart.
func (d *Daemon) lock() error {
	for _, p := range []string{d.SocketPath, d.DBPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			d.unlock()
			return err
		}
		f, err := lockFile(p + ".lock")
		if err != nil {
			d.unlock()
			return err
		}
		d.locks = append(d.locks, f)
	}
	return nil
}

// unlock releases the locks lock took.
func (d *Daemon) unlock() {
	for _, f := range d.locks {
		f.Close()
	}
	d.locks = nil
}

// listen opens the socket, or takes the listener passed by the daemon
// this one replaces.
func (d *Daemon) listen() error {
	ln, ready, err := inheritedListener(d.SocketPath)
	if err != nil {
		return err
	}
	if ln != nil {
		d.ln, d.ready, d.inherited = ln, ready, true
		return nil
	}
	if d.ln, err = control.Listen(d.SocketPath); err != nil {
		return fmt.Errorf("listen on %s: %w", d.SocketPath, err)
	}
	return nil
}

// openLedger opens the ledger and hands it to the service.
func (d *Daemon) openLedger(ctx context.Context) error {
	l, err := ledger.Open(ctx, d.DBPath, ledger.Options{})
	if err != nil {
		return openLedgerError(ctx, d.DBPath, err)
	}
	d.ledger = l
	d.server.Service.Ledger = l
	// Reopened after a failed restart: everyone gets the new ledger.
	if dels := d.server.Service.Delegations; dels != nil {
		dels.Ledger = l
	}
	if d.channels != nil {
		d.channels.Ledger = l
	}
	if d.questions != nil {
		d.questions.Ledger = l
	}
	return nil
}

// openLedgerError is the error of a ledger.Open of path that failed with
// err, naming the database. Open stops at the first damaged page it reads,
// with SQLite's bare words: if SQLite's quick_check finds the file
// damaged, its findings are the error.
func openLedgerError(ctx context.Context, path string, err error) error {
	if errors.Is(err, ledger.ErrCorrupt) || errors.Is(err, ledger.ErrNotWritable) {
		return err
	}
	if qerr := ledger.QuickCheck(ctx, path); errors.Is(qerr, ledger.ErrCorrupt) {
		return qerr
	}
	if strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("open ledger %s: %w", path, err)
}

// closeLedger closes the ledger, if open: it answers the commands already
// queued first.
func (d *Daemon) closeLedger() error {
	if d.ledger == nil {
		return nil
	}
	err := d.ledger.Close()
	d.ledger = nil
	return err
}

// startLoops starts the daemon's background loops; stopLoops ends them.
// A restart stops them before it closes the ledger and starts them again
// if the new process fails. A loop runs until its context is cancelled.
func (d *Daemon) startLoops() {
	d.loops = &loops{}
	d.loops.ctx, d.loops.cancel = context.WithCancel(context.Background())
	d.loops.run(d.sweep)
	d.loops.run(func(ctx context.Context) { d.server.Service.Delegations.Run(ctx, control.DefaultSweepEvery) })
	d.loops.run(func(ctx context.Context) { d.questions.Run(ctx, confirm.DefaultTickEvery) })
}

// run runs loop until stopLoops.
func (l *loops) run(loop func(ctx context.Context)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		loop(l.ctx)
	}()
}

// stopLoops ends the background loops and waits for them.
func (d *Daemon) stopLoops() {
	if d.loops == nil {
		return
	}
	d.loops.cancel()
	d.loops.wg.Wait()
	d.loops = nil
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

// sweep marks silent runs stale, and compacts, until ctx ends.
func (d *Daemon) sweep(ctx context.Context) {
	log := d.Logger.With("component", "sweeper")
	t := time.NewTicker(d.SweepEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
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

// release closes the listener and the locks. It leaves a socket this
// daemon did not create (it was passed one by the daemon it replaces,
// which may still serve on it).
func (d *Daemon) release() {
	if d.ln != nil {
		if d.inherited {
			d.ln.(*net.UnixListener).SetUnlinkOnClose(false)
		}
		d.ln.Close()
		if !d.inherited {
			os.Remove(d.SocketPath)
		}
	}
	if d.ready != nil {
		d.ready.Close()
		d.ready = nil
	}
	d.unlock()
}

// Serve answers requests until Close, or until a restart handed the
// socket over to a new process (it returns nil then).
func (d *Daemon) Serve() error {
	life := d.life
	err := d.server.Serve(d.ln)
	life.mu.Lock()
	defer life.mu.Unlock()
	if life.broken != nil {
		return life.broken
	}
	return err
}

// HandedOff reports whether a restart handed the socket over to a new
// process: this one has nothing left to close.
func (d *Daemon) HandedOff() bool {
	d.life.mu.Lock()
	defer d.life.mu.Unlock()
	return d.life.handedOff
}

// Close stops taking requests, answers those in flight, and closes the
// ledger. After a restart handed over, there is nothing left to close.
func (d *Daemon) Close() error {
	d.life.mu.Lock()
	defer d.life.mu.Unlock()
	if d.life.closed {
		return nil
	}
	d.life.closed = true
	if d.restarter != nil {
		d.restarter.cancel()
	}
	if d.life.handedOff {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.server.Shutdown(ctx)
	d.stopLoops()
	d.channels.Close()
	os.Remove(d.SocketPath)
	err = errors.Join(err, d.closeLedger())
	d.release()
	return err
}

// runDaemon is `scv daemon`: it runs in the foreground until SIGINT or
// SIGTERM, or until restart_when_idle handed over to a new process.
func runDaemon(args []string, stderr io.Writer) error {
	// Everything the daemon creates (database, socket, lock files) is
	// for its owner alone.
	syscall.Umask(0o077)
	d := &Daemon{Logger: slog.New(slog.NewTextHandler(stderr, nil)), Args: append([]string{"daemon"}, args...)}
	if err := d.ParseFlags(args, stderr); err != nil {
		return err
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
	go logFileSizeLimit(d.Logger, xfsz)
	// Resolved now: a release installed later replaces the file, not
	// this path (Go drops the " (deleted)" Linux then shows).
	if exe, err := os.Executable(); err == nil {
		d.Executable = exe
	} else {
		d.Logger.Warn("own executable unknown: restart_when_idle is refused", "err", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := d.Open(ctx); err != nil {
		return err
	}
	d.Logger.Info("daemon started", "version", version, "db", d.DBPath, "socket", d.SocketPath,
		"stale_after", d.StaleAfter, "heartbeat_every", d.HeartbeatEvery, "pid", os.Getpid(), "inherited_socket", d.inherited)
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	select {
	case <-ctx.Done():
		d.Logger.Info("shutting down")
	case err := <-served:
		if err == nil && d.HandedOff() {
			d.Logger.Info("daemon stopped: a new process serves the socket")
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
		d.Logger.Info("daemon stopped: passing the stop on to the new process", "pid", d.life.successor)
		syscall.Kill(d.life.successor, syscall.SIGTERM)
		return nil
	}
	d.Logger.Info("daemon stopped")
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
