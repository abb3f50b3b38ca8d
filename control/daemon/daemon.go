// Package daemon is `scv daemon` wired together: the ledger on its
// database, the machine's local store, the control server on its socket,
// and the daemon's services (the sweeper, the delegation reaper, the
// question deadlines, the channel accounts, restart_when_idle), started
// and stopped together; the email accounts (control/mail) run as channel
// accounts of channel email. The CLI runs it (cmd/scv), and tests start it
// in-process on a real socket and a real database file:
//
//	d := daemon.New(daemon.Config{DB: path, Socket: sock})
//	if err := d.Open(ctx); err != nil { … }
//	go d.Serve()
//	defer d.Close()
//
// Its own tests that need the daemon as a process (killed with SIGKILL,
// stopped by a signal, restarted into another release, a fleet of them on
// PostgreSQL) run the real scv binary through internal/daemonproc.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"scv/control"
	"scv/control/agents"
	"scv/control/api"
	"scv/control/channels"
	"scv/control/confirm"
	"scv/control/delegations"
	"scv/control/mail"
	"scv/control/metrics"
	"scv/control/proc"
	"scv/control/restart"
	"scv/control/startstop"
	"scv/control/sweeper"
	"scv/control/web"
	"scv/control/work"
	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/local"
	"scv/ledger/postgres"
	"scv/ledger/sqlite"
)

// Defaults of the daemon's settings.
const (
	DefaultStaleAfter   = 5 * time.Minute
	DefaultCompactAfter = 10_000
	DefaultRetain       = 1_000
	DefaultKillGrace    = proc.DefaultKillGrace
	DefaultCacheSize    = ledger.DefaultCacheSize
)

// Config is what a daemon is started with.
type Config struct {
	// DB is the ledger database: a SQLite file, or a PostgreSQL URL
	// (postgres://…) that daemons on many machines may share.
	DB string
	// LocalDB is the machine's own state (delegations, channel accounts,
	// questions) when DB is a URL: a SQLite file. With a SQLite DB it is
	// kept in that file and LocalDB is not used.
	LocalDB string
	// Socket is the control socket's path.
	Socket string
	// StaleAfter is the stale window: a running run silent for longer is
	// marked stale by the sweeper (0: DefaultStaleAfter).
	StaleAfter time.Duration
	// HeartbeatEvery coalesces heartbeats (0: journal every one);
	// negative means a tenth of StaleAfter.
	HeartbeatEvery time.Duration
	// CompactAfter: a project whose live tail holds more events is
	// compacted by the sweeper, keeping its Retain newest. 0 turns
	// automatic compaction off.
	CompactAfter int
	Retain       int
	// CompactDrop deletes compacted events instead of archiving them.
	CompactDrop bool
	// CacheSize is how many projects the ledger keeps in memory (0:
	// DefaultCacheSize).
	CacheSize int
	// LeaseTTL is the length of the sweeper's lease (0:
	// sweeper.DefaultLeaseTTL): with daemons sharing a ledger, a sweeper
	// that dies is replaced within it.
	LeaseTTL time.Duration
	// KillGrace is how long a delegation's processes have between SIGTERM
	// and SIGKILL when the daemon stops them (0: DefaultKillGrace).
	KillGrace time.Duration
	// ConfigPath is the channel settings file that reload rereads.
	ConfigPath string
	// Notify is the chat (`<channel>:<account>`) a question goes to when
	// the work that asks it was not started from a chat ("": the only
	// connected chat, if there is exactly one).
	Notify string
	// Version is the release the daemon reports.
	Version string
	Logger  *slog.Logger
	// Executable is the daemon's own binary, resolved once at start
	// (before any release replaces it): restart_when_idle restarts into
	// the release installed there. Empty: restarts are refused.
	Executable string
	// Args are the arguments the daemon was started with (after the
	// program name); the release it restarts into gets them again.
	Args []string
	// Failpoints are the failpoints set (SCV_FAILPOINTS).
	Failpoints ledger.Failpoints
	// Clock is the daemon's own clock (nil: the system clock): it stamps
	// reports and questions, times the sweeper's lease renewals, and, on
	// a ledger the daemon has alone (SQLite), stamps events. On a shared
	// ledger the database server's clock stamps events and times the
	// lease, one clock for every daemon, whatever this one says (scvrel's
	// linear check skews it, SCV_CLOCK_SKEW). PID is the pid replies
	// report (0: the process's own). For tests.
	Clock func() time.Time
	PID   uint32
	// LineTimeout bounds a request line's arrival (0: the server's
	// default); ReadyTimeout bounds the wait for a restart's new process
	// (0: restart.DefaultReadyTimeout). For tests.
	LineTimeout  time.Duration
	ReadyTimeout time.Duration
	// HTTP is the loopback address of the web UI and /metrics
	// (127.0.0.1:PORT, [::1]:PORT or localhost:PORT; port 0 picks one);
	// empty: none (http.go).
	HTTP string
	// MailDial connects the email accounts to their mailboxes (nil:
	// control/mail/imap's). For tests.
	MailDial mail.Dialer
}

// Check refuses settings that cannot work together, saying which.
func (c *Config) Check() error {
	switch {
	case postgres.IsURL(c.DB) && c.LocalDB == "":
		return errors.New("a shared ledger (--db postgres://…) needs --local-db, the file of this machine's own state")
	case postgres.IsURL(c.LocalDB):
		return errors.New("--local-db is a file of this machine: a SQLite path, not a URL")
	case c.StaleAfter < 0:
		return errors.New("--stale-after must be positive")
	case c.CompactAfter < 0 || c.Retain < 0 || (c.CompactAfter > 0 && c.Retain >= c.CompactAfter):
		return errors.New("--retain must be at least 0 and smaller than --compact-after")
	case c.KillGrace < 0:
		return errors.New("--kill-grace must be positive")
	case c.CacheSize < 0:
		return errors.New("--cache-projects must be positive")
	case c.StaleAfter > 0 && c.HeartbeatEvery >= c.StaleAfter:
		// A live run's heartbeats would be coalesced past its window.
		return errors.New("--heartbeat-every must be shorter than --stale-after")
	}
	if err := c.checkHTTP(); err != nil {
		return err
	}
	if c.Notify != "" {
		if _, _, err := api.ParseChat(c.Notify); err != nil {
			return fmt.Errorf("--notify: %w", err)
		}
	}
	return nil
}

// Daemon is the ledger and the control server wired together.
type Daemon struct {
	cfg Config
	log *slog.Logger

	drv       driver.Driver // the ledger's database
	db        *sqlite.DB    // the local store (drv itself, for SQLite)
	ledger    *ledger.Ledger
	server    *control.Server
	ln        net.Listener
	inherited bool     // ln came from the daemon this one replaced
	ready     *os.File // that daemon's readiness pipe, written once open
	locks     []*os.File
	registry  *delegations.Registry
	agents    *agents.Manager
	work      *work.Manager
	channels  *channels.Manager
	questions *confirm.Manager
	mail      *mail.Service // the email accounts (mail.go)
	restarter *restart.Restarter
	sweeper   *sweeper.Sweeper
	// services are the background services that follow the ledger: a
	// restart stops them before it closes the ledger and starts them again
	// if the new process fails.
	services startstop.Group
	life     *lifecycle        // made by Open
	web      *web.Server       // the web UI, with Config.HTTP (http.go)
	metrics  *metrics.Recorder // its /metrics
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

// New is a daemon with cfg, not yet open.
func New(cfg Config) *Daemon {
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.HeartbeatEvery < 0 {
		cfg.HeartbeatEvery = cfg.StaleAfter / 10
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Daemon{cfg: cfg, log: log}
}

// Config is what the daemon was made with, defaults filled in.
func (d *Daemon) Config() Config { return d.cfg }

// Ledger is the open ledger (nil before Open and after Close).
func (d *Daemon) Ledger() *ledger.Ledger { return d.ledger }

// Open takes the daemon's locks, opens the socket, then the database: a
// daemon that cannot have the socket never touches (or migrates) the
// database. A daemon started by restart_when_idle takes the listener its
// predecessor passed it instead of opening the socket, and tells it once
// it is open.
func (d *Daemon) Open(ctx context.Context) (err error) {
	d.life = &lifecycle{}
	if err := d.cfg.checkHTTP(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if d.channels != nil {
				d.channels.Close()
			}
			d.closeStores()
			d.release()
		}
	}()
	// A database file the daemon could not write, or one that is not
	// SQLite's, is refused before the locks, so that it gets no lock file
	// beside it.
	if err := sqlite.CheckFile(d.localPath()); err != nil {
		return err
	}
	if err := d.lock(); err != nil {
		return err
	}
	if err := d.listen(); err != nil {
		return err
	}
	pid := d.cfg.PID
	if pid == 0 {
		pid = uint32(os.Getpid())
	}
	svc := &control.Service{Version: d.cfg.Version, PID: pid, Clock: d.cfg.Clock, HeartbeatEvery: d.cfg.HeartbeatEvery,
		Metrics: d.recorder()}
	d.server = &control.Server{Service: svc, Logger: d.log.With("component", "control"), LineTimeout: d.cfg.LineTimeout,
		Metrics: d.recorder()}
	if err := d.openStores(ctx); err != nil {
		return err
	}
	d.registry = &delegations.Registry{Store: d.db, Grace: d.cfg.KillGrace, Clock: d.cfg.Clock, Logger: d.log.With("component", "delegations")}
	if err := d.registry.Load(ctx); err != nil {
		return err
	}
	d.agents = &agents.Manager{Store: d.db, Handler: svc, Projects: d.ledger, Clock: d.cfg.Clock, Logger: d.log.With("component", "agents"),
		Grace: d.cfg.KillGrace, Every: d.cfg.HeartbeatEvery, Beat: d.beat()}
	dels := agents.Delegations{Registry: d.registry, Agents: d.agents}
	svc.Delegations = dels
	svc.Agents = d.agents
	d.work = &work.Manager{Store: d.db, Agents: d.agents, Handler: svc, Projects: d.ledger, Clock: d.cfg.Clock,
		Logger: d.log.With("component", "work"), Metrics: d.recorder(), // a nil *Recorder records nothing
		Scv: d.cfg.Executable, Socket: d.cfg.Socket}
	svc.Work = d.work
	d.channels = channels.New(d.db)
	d.channels.Path = d.cfg.ConfigPath
	d.channels.Logger = d.log.With("component", "channels")
	d.questions = &confirm.Manager{
		Log: d.db, Ledger: d.ledger, Chats: d.channels, DelegationChat: dels.ChatOf, Clock: d.cfg.Clock,
		Notify: d.cfg.Notify, Logger: d.log.With("component", "questions"),
	}
	// Questions still pending from before lose their answer here. The
	// log is loaded before the channel accounts start: an email account
	// looks in it for the digest it told before a crash.
	if err := d.questions.Load(ctx); err != nil {
		return err
	}
	if err := d.openMail(); err != nil {
		return err
	}
	if err := d.channels.Load(ctx); err != nil {
		return err
	}
	svc.Channels = d.channels
	svc.Questions = d.questions
	d.agents.Questions = d.questions
	d.restarter = &restart.Restarter{
		Exe: d.cfg.Executable, Version: d.cfg.Version, Log: d.log.With("component", "restart"),
		Active: dels.Active, Busy: dels.Busy, InFlight: d.server.InFlight, Hold: d.agents.Hold, Release: d.agents.Release,
		Handoff: d.handoff,
	}
	svc.Restarter = d.restarter
	d.work.Restarting = func() string {
		if p := d.restarter.Pending(); p != nil {
			return "the daemon restarts into " + p.ToVersion + " once the turns under way have ended"
		}
		return ""
	}
	d.sweeper = &sweeper.Sweeper{StaleAfter: d.cfg.StaleAfter, CompactAfter: d.cfg.CompactAfter, Retain: d.cfg.Retain,
		Drop: d.cfg.CompactDrop, Logger: d.log.With("component", "sweeper"), Holder: holder(), LeaseTTL: d.cfg.LeaseTTL,
		Clock: d.cfg.Clock, Shared: d.Shared()}
	d.wire()
	// Stopped in the reverse order: the live agents before the questions
	// their permission requests wait on, all before the ledger closes.
	d.services = append(startstop.Group{d.sweeper, d.registry, d.questions, d.agents, d.work}, d.httpServices()...)
	if err := d.services.Start(ctx); err != nil {
		return err
	}
	if d.ready != nil {
		// The daemon this one replaces waits for this byte to hand over.
		_, err := d.ready.Write([]byte{1})
		d.ready.Close()
		d.ready = nil
		if err != nil {
			d.services.Stop()
			return fmt.Errorf("signal readiness: %w", err)
		}
	}
	return nil
}

// beat is how often a live agent's silent turn gets a heartbeat: the
// coalescing interval, else a tenth of the stale window.
func (d *Daemon) beat() time.Duration {
	if d.cfg.HeartbeatEvery > 0 {
		return d.cfg.HeartbeatEvery
	}
	return d.cfg.StaleAfter / 10
}

// holder names this daemon among those that share a ledger: its host and
// pid.
func holder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

// Shared reports whether the ledger is a database daemons share.
func (d *Daemon) Shared() bool { return postgres.IsURL(d.cfg.DB) }

// localPath is the SQLite file of the machine's own state: the ledger's
// file itself, unless the ledger is shared.
func (d *Daemon) localPath() string {
	if d.Shared() {
		return d.cfg.LocalDB
	}
	return d.cfg.DB
}

// lock takes the daemon's locks. One daemon per socket and one per
// database file: flock(2) on a lock file beside each, released by the
// kernel when the process ends, or by unlock before a restart. A shared
// ledger is locked by nobody: its writers serialize in the database.
func (d *Daemon) lock() error {
	for _, p := range []string{d.cfg.Socket, d.localPath()} {
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
	ln, ready, err := restart.Inherited(d.cfg.Socket)
	if err != nil {
		return err
	}
	if ln != nil {
		d.ln, d.ready, d.inherited = ln, ready, true
		return nil
	}
	if d.ln, err = control.Listen(d.cfg.Socket); err != nil {
		return fmt.Errorf("listen on %s: %w", d.cfg.Socket, err)
	}
	return nil
}

// openStores opens the databases and the ledger.
func (d *Daemon) openStores(ctx context.Context) error {
	db, err := sqlite.Open(ctx, d.localPath(), sqlite.Options{Clock: d.cfg.Clock})
	if err != nil {
		return openError(ctx, d.localPath(), err)
	}
	var drv driver.Driver = db
	if d.Shared() {
		if drv, err = postgres.Open(ctx, d.cfg.DB, postgres.Options{}); err != nil {
			db.Close()
			return err
		}
	}
	clock := d.cfg.Clock
	if d.Shared() {
		clock = nil // the server's
	}
	l, err := ledger.Open(ctx, drv, ledger.Options{Clock: clock, CacheSize: d.cfg.CacheSize, Failpoints: d.cfg.Failpoints,
		Metrics: d.recorder()})
	if err != nil {
		drv.Close()
		if drv != driver.Driver(db) {
			db.Close()
		}
		if d.Shared() {
			return err
		}
		return openError(ctx, d.cfg.DB, err)
	}
	d.drv, d.db, d.ledger = drv, db, l
	d.wire()
	return nil
}

// wire hands the open stores to whoever uses them (again after a failed
// restart reopened them).
func (d *Daemon) wire() {
	if d.server != nil {
		d.server.Service.Ledger = d.ledger
	}
	if d.sweeper != nil {
		d.sweeper.Ledger = d.ledger
	}
	if d.registry != nil {
		d.registry.Store = d.db
	}
	if d.agents != nil {
		d.agents.Store, d.agents.Projects = d.db, d.ledger
	}
	if d.work != nil {
		d.work.Store, d.work.Projects = d.db, d.ledger
	}
	if d.channels != nil {
		d.channels.Store = d.db
	}
	if d.mail != nil {
		d.mail.Store = d.db
	}
	if d.questions != nil {
		d.questions.Log = d.db
		d.questions.Ledger = d.ledger
	}
}

// openError is the error of an open of path that failed with err, naming
// the database. Opening stops at the first damaged page it reads, with
// SQLite's bare words: if SQLite's quick_check finds the file damaged,
// its findings are the error.
func openError(ctx context.Context, path string, err error) error {
	if errors.Is(err, sqlite.ErrCorrupt) || errors.Is(err, sqlite.ErrNotWritable) {
		return err
	}
	if qerr := sqlite.QuickCheck(ctx, path); errors.Is(qerr, sqlite.ErrCorrupt) {
		return qerr
	}
	if strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("open ledger %s: %w", path, err)
}

// closeStores closes the ledger, if open (it answers the commands already
// queued first), the database under it, and the local store.
func (d *Daemon) closeStores() error {
	var err error
	if d.ledger != nil {
		err = d.ledger.Close() // closes d.drv
	}
	if d.db != nil && (d.ledger == nil || d.Shared()) {
		err = errors.Join(err, d.db.Close())
	}
	d.ledger, d.drv, d.db = nil, nil, nil
	return err
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
			os.Remove(d.cfg.Socket)
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
	if errors.Is(err, net.ErrClosed) && life.closed {
		return nil // closed before it served
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

// Successor is the pid of the process a restart handed over to (0: none).
func (d *Daemon) Successor() int {
	d.life.mu.Lock()
	defer d.life.mu.Unlock()
	return d.life.successor
}

// Inherited reports whether the socket came from the daemon this one
// replaced.
func (d *Daemon) Inherited() bool { return d.inherited }

// Close stops taking requests, answers those in flight, stops the
// services and closes the ledger. After a restart handed over, there is
// nothing left to close.
func (d *Daemon) Close() error {
	d.life.mu.Lock()
	defer d.life.mu.Unlock()
	if d.life.closed {
		return nil
	}
	d.life.closed = true
	if d.restarter != nil {
		d.restarter.Stop()
	}
	if d.life.handedOff {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.server.Shutdown(ctx)
	d.services.Stop()
	d.channels.Close()
	d.closeMail()
	os.Remove(d.cfg.Socket)
	err = errors.Join(err, d.closeStores())
	d.release()
	return err
}

// Server is the control server (nil before Open).
func (d *Daemon) Server() *control.Server { return d.server }

// Store is the machine's local store (nil before Open and after Close).
func (d *Daemon) Store() local.Store {
	if d.db == nil {
		return nil
	}
	return d.db
}

// Sweep runs one round of the sweeper now (stale runs, then compaction),
// as its ticker would.
func (d *Daemon) Sweep(ctx context.Context) { d.sweeper.Sweep(ctx) }
