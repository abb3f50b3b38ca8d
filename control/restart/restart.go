// Package restart is restart_when_idle: the daemon checks the release
// installed at its own path, waits until the requesting delegation has
// ended, no request is being answered, and no live agent's turn or
// background job runs (or until the deadline), then
// hands its listening socket to a new process running that release,
// which opens the same database. Clients are never refused: connections
// made meanwhile wait in the socket's backlog for whichever process
// accepts next.
//
// Restarter schedules restarts (control.Restarter) and calls the daemon's
// handover when the moment comes; Successor starts the new process with
// the listener, and Inherited is the new process's side.
package restart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"scv/control/api"
	"scv/ledger"
)

// Restart timing.
const (
	// DefaultRestartMaxWait is how long a restart waits for work to end
	// when the request gives no max_wait_seconds.
	DefaultRestartMaxWait = 10 * time.Minute
	// versionCheckTimeout bounds `<path> version`.
	versionCheckTimeout = 5 * time.Second
	// DefaultPoll is how often a waiting restart looks again.
	DefaultPoll = 50 * time.Millisecond
	// DefaultReadyTimeout bounds the wait for the new process.
	DefaultReadyTimeout = 30 * time.Second
	// maxWaitSeconds caps max_wait_seconds so the deadline cannot
	// overflow (about 272 years).
	maxWaitSeconds = 1 << 33
)

// The environment a daemon passes the socket to its successor in: the
// listener's descriptor and the write end of a pipe it closes after one
// byte once it is open.
const (
	envListenFD = "SCV_LISTEN_FD"
	envReadyFD  = "SCV_READY_FD"
)

// Restarter implements control.Restarter: it schedules restarts and, when
// one's moment comes, calls Handoff. As a service it has nothing to start;
// Stop drops the pending restart and refuses new ones (the daemon is
// closing).
type Restarter struct {
	Exe     string // the daemon's own path; "": restarts are refused
	Version string // the running release, for messages
	Log     *slog.Logger
	// Active reports whether a delegation still runs; Busy says what
	// else a restart waits for (live agents' turns, background jobs; nil:
	// nothing); InFlight counts the requests being answered.
	Active   func(handle string) bool
	Busy     func() []string
	InFlight func() int
	// Hold, when set, is called when a restart's moment has come: from
	// then on it lets no work begin that a restart must not cut (a live
	// agent's turn), and it returns what of that work still runs; at the
	// deadline (end), it ends that work first. The restart goes when Hold
	// returns nothing, or at the deadline; else Release lifts the hold and
	// the wait goes on. A failed hand-over calls Release too.
	Hold    func(why string, end bool) []string
	Release func()
	// Handoff hands over to the release of version toVersion; nil: a new
	// process serves.
	Handoff func(toVersion string) error
	Now     func() time.Time // nil: the system clock
	Poll    time.Duration    // 0: DefaultPoll

	mu         sync.Mutex
	pending    *pendingRestart
	restarting bool // the handover is under way
	stopped    bool // the daemon is closing: nothing more is scheduled
}

// pendingRestart is one scheduled restart.
type pendingRestart struct {
	info      api.RestartInfo // what status shows; WaitingFor is updated
	requester string
	deadline  time.Time
	cancel    chan struct{} // closed when replaced or the daemon closes
}

func (r *Restarter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Restarter) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return DefaultPoll
}

func (r *Restarter) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

// conflict is a refusal with nothing scheduled.
func conflict(format string, args ...any) error {
	return api.Errorf(api.ErrConflict, format, args...)
}

// RestartWhenIdle checks the installed release and schedules the restart,
// replacing one already pending.
func (r *Restarter) RestartWhenIdle(c api.CmdRestartWhenIdle) (*api.RestartInfo, error) {
	if r.Exe == "" {
		return nil, api.Errorf(api.ErrUnavailable, "this daemon does not know its own executable, so it cannot restart itself")
	}
	installed, err := installedVersion(r.Exe)
	if err != nil {
		want := "its version"
		if c.Version != nil {
			want = fmt.Sprintf("version %q", *c.Version)
		}
		return nil, conflict("cannot check the release installed at %s (running %s, requested %s): %v; no restart scheduled",
			r.Exe, r.Version, want, err)
	}
	if c.Version != nil && *c.Version != installed {
		return nil, conflict("the release installed at %s is version %q, not the requested %q; no restart scheduled",
			r.Exe, installed, *c.Version)
	}
	wait := DefaultRestartMaxWait
	if c.MaxWaitSeconds != nil {
		wait = time.Duration(min(*c.MaxWaitSeconds, maxWaitSeconds)) * time.Second
	}
	p := &pendingRestart{requester: requester(c.Parent), deadline: r.now().Add(wait), cancel: make(chan struct{})}
	p.info = api.RestartInfo{ToVersion: installed, DeadlineUnixSeconds: uint64(max(p.deadline.Unix(), 0))}
	if p.requester != "" {
		p.info.Requester = &p.requester
	}
	// This request is being answered: it is not waited for.
	p.info.WaitingFor = r.waitingFor(p.requester, 1)

	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil, api.Errorf(api.ErrUnavailable, "the daemon is shutting down")
	}
	if r.restarting {
		r.mu.Unlock()
		return nil, conflict("a restart is under way; ask again once it is done")
	}
	replaced := r.pending
	if replaced != nil {
		close(replaced.cancel)
	}
	r.pending = p
	info := p.info
	r.mu.Unlock()

	commit := ""
	if c.Commit != nil {
		commit = *c.Commit
	}
	r.log().Info("restart scheduled", "from_version", r.Version, "to_version", installed, "commit", commit,
		"requester", p.requester, "deadline", p.deadline, "replaces", replaced != nil)
	go r.watch(p)
	return &info, nil
}

// Pending is the scheduled restart, or nil.
func (r *Restarter) Pending() *api.RestartInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		return nil
	}
	info := r.pending.info
	return &info
}

// Start does nothing: a restart is scheduled by request.
func (r *Restarter) Start(context.Context) error { return nil }

// Stop drops the pending restart and refuses new ones: the daemon is
// closing.
func (r *Restarter) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.pending != nil {
		close(r.pending.cancel)
		r.pending = nil
	}
}

// watch waits for p's moment and restarts, unless p was replaced.
func (r *Restarter) watch(p *pendingRestart) {
	show := func(w *string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.pending == p {
			p.info.WaitingFor = w
		}
	}
	waitingFor := func() *string { return r.waitingFor(p.requester, 0) }
	for {
		if !waitIdle(p.cancel, p.deadline, r.now, r.poll(), waitingFor, show) {
			return
		}
		if r.Hold == nil {
			break
		}
		end := !r.now().Before(p.deadline)
		busy := r.Hold("the daemon restarts into "+p.info.ToVersion, end)
		if len(busy) == 0 || end {
			break
		}
		// A turn began as the wait ended: it is waited for too.
		r.Release()
		show(ptr(strings.Join(busy, ", ")))
	}
	r.mu.Lock()
	if r.pending != p || r.stopped {
		r.mu.Unlock()
		r.release()
		return
	}
	waited := p.info.WaitingFor
	p.info.WaitingFor = nil
	r.restarting = true
	r.mu.Unlock()

	if waited != nil {
		r.log().Warn("restarting at the deadline", "to_version", p.info.ToVersion, "still_waiting_for", *waited)
	} else {
		r.log().Info("restarting", "to_version", p.info.ToVersion)
	}
	err := r.Handoff(p.info.ToVersion)

	r.mu.Lock()
	r.restarting = false
	if r.pending == p {
		r.pending = nil
	}
	r.mu.Unlock()
	if err != nil {
		r.release()
		r.log().Error("restart failed; this daemon keeps serving", "to_version", p.info.ToVersion, "err", err)
	}
}

// release lifts Hold's hold.
func (r *Restarter) release() {
	if r.Release != nil {
		r.Release()
	}
}

func ptr[T any](v T) *T { return &v }

// waitingFor says what a restart still waits for, nil for nothing: the
// requesting delegation while it is active, what Busy names, and the
// requests being answered (less self, the caller's own).
func (r *Restarter) waitingFor(requester string, self int) *string {
	var parts []string
	if requester != "" && r.Active != nil && r.Active(requester) {
		parts = append(parts, "delegation "+requester)
	}
	if r.Busy != nil {
		parts = append(parts, r.Busy()...)
	}
	switch n := r.InFlight() - self; {
	case n == 1:
		parts = append(parts, "1 request in flight")
	case n > 1:
		parts = append(parts, strconv.Itoa(n)+" requests in flight")
	}
	if len(parts) == 0 {
		return nil
	}
	w := strings.Join(parts, ", ")
	return &w
}

// waitIdle polls, every poll, what a restart waits for, passing it to
// show, until nothing is waited for or the deadline (by now) has come:
// then it returns true, time to restart. It returns false if cancel
// closes first. The first look is one poll after the start: by then the
// request that asked has been answered.
func waitIdle(cancel <-chan struct{}, deadline time.Time, now func() time.Time, poll time.Duration,
	waitingFor func() *string, show func(*string)) bool {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-cancel:
			return false
		case <-t.C:
		}
		select {
		case <-cancel:
			return false // cancelled as the tick came
		default:
		}
		w := waitingFor()
		show(w)
		if w == nil || !now().Before(deadline) {
			return true
		}
	}
}

// requester is the last delegation of an SCV_PARENT chain
// ("outer,inner"), or "".
func requester(parent *string) string {
	if parent == nil {
		return ""
	}
	chain := strings.Split(*parent, ",")
	return strings.TrimSpace(chain[len(chain)-1])
}

// installedVersion runs `exe version` and returns what it prints.
func installedVersion(exe string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), versionCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "version")
	cmd.WaitDelay = time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return "", fmt.Errorf("`%s version` did not answer within %s", exe, versionCheckTimeout)
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("`%s version`: %w: %s", exe, err, msg)
		}
		return "", fmt.Errorf("`%s version`: %w", exe, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("`%s version` printed nothing", exe)
	}
	return v, nil
}

// Successor starts the release at exe with args, in its own session,
// with the listener ln as descriptor 3 and a readiness pipe as descriptor
// 4, and waits up to timeout (0: DefaultReadyTimeout) for its byte. It
// returns the new process's pid; on failure the process is gone. The
// restart-exec failpoint is passed first.
func Successor(exe string, args []string, ln net.Listener, timeout time.Duration, fail ledger.Failpoints) (int, error) {
	if err := fail.Hit(ledger.FailRestartExec); err != nil {
		return 0, err
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		return 0, fmt.Errorf("cannot pass a %T on", ln)
	}
	lf, err := ul.File()
	if err != nil {
		return 0, fmt.Errorf("pass the listener: %w", err)
	}
	defer lf.Close()
	rd, wr, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{lf, wr} // descriptors 3 and 4
	cmd.Env = append(handoffFree(os.Environ()), envListenFD+"=3", envReadyFD+"=4")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	wr.Close() // the child holds the only write end: its exit is EOF
	// Start put the descriptor in blocking mode (os.File.Fd does), and
	// the listener shares it: without this, Accept would block in the
	// kernel, deaf to Pause's deadline and to Close, should this
	// daemon serve on.
	nbErr := setNonblock(ul)
	if err != nil {
		return 0, errors.Join(fmt.Errorf("start %s: %w", exe, err), nbErr)
	}
	if nbErr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, nbErr
	}
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	rd.SetReadDeadline(time.Now().Add(timeout))
	var b [1]byte
	n, err := rd.Read(b[:])
	if n == 1 {
		pid := cmd.Process.Pid
		cmd.Process.Release()
		return pid, nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%s (pid %d) was not ready within %s; killed it", exe, cmd.Process.Pid, timeout)
	} else {
		err = fmt.Errorf("%s (pid %d) ended before it was ready", exe, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	if werr := cmd.Wait(); werr != nil {
		err = fmt.Errorf("%w: %w", err, werr)
	}
	return 0, err
}

// setNonblock puts ul's socket back in non-blocking mode.
func setNonblock(ul *net.UnixListener) error {
	rc, err := ul.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), true) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("listener: %w", serr)
	}
	return nil
}

// handoffFree is env without the handover variables.
func handoffFree(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, envListenFD+"=") || strings.HasPrefix(kv, envReadyFD+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Inherited is the listener a predecessor passed (SCV_LISTEN_FD)
// and the pipe to tell it when this daemon is open (SCV_READY_FD); nil
// when none was passed. Both variables are cleared, so that processes this
// daemon starts do not see them.
func Inherited(socketPath string) (net.Listener, *os.File, error) {
	lfd, rfd := os.Getenv(envListenFD), os.Getenv(envReadyFD)
	os.Unsetenv(envListenFD)
	os.Unsetenv(envReadyFD)
	if lfd == "" {
		return nil, nil, nil
	}
	fd := func(name, v string) (uintptr, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			return 0, fmt.Errorf("%s=%q is not a passed descriptor", name, v)
		}
		return uintptr(n), nil
	}
	var ready *os.File
	if rfd != "" {
		n, err := fd(envReadyFD, rfd)
		if err != nil {
			return nil, nil, err
		}
		ready = os.NewFile(n, "ready")
	}
	n, err := fd(envListenFD, lfd)
	if err == nil {
		f := os.NewFile(n, "listener")
		var ln net.Listener
		ln, err = net.FileListener(f) // a duplicate, close-on-exec
		f.Close()
		if err == nil {
			ul, ok := ln.(*net.UnixListener)
			switch {
			case !ok:
				err = fmt.Errorf("%s: not a Unix socket listener", envListenFD)
			case ul.Addr().String() != socketPath:
				err = fmt.Errorf("%s: passed socket %s, not %s", envListenFD, ul.Addr(), socketPath)
			default:
				return ln, ready, nil
			}
			ul.SetUnlinkOnClose(false)
			ln.Close()
		}
	}
	if ready != nil {
		ready.Close()
	}
	return nil, nil, err
}
