package supervise_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"scv/control/api"
	scvdaemon "scv/control/daemon"
	"scv/control/proc"
	"scv/control/supervise"
)

// TestMain makes the test process a subreaper, as `scv delegate` is: the
// orphans of the trees the tests start come back to it, and Run reaps
// them. Tests in this package do not run in parallel, because Run reaps
// any child of the process.
func TestMain(m *testing.M) {
	if err := proc.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// ioTimeout bounds every wait of a test.
const ioTimeout = 10 * time.Second

// daemon is a real daemon (control/daemon, as `scv daemon` runs it) in
// this process, on a SQLite file in a temporary folder, that can be
// stopped and started again on the same files. As an api.Handler it is
// the daemon's own Service while it runs, and while it is stopped the
// unavailable error a caller of its socket would get. It keeps the
// actions it was sent.
type daemon struct {
	t    *testing.T
	dir  string // the database, the socket, and the workspace work
	work string // where the commands run and the project's workspace

	mu      sync.Mutex
	d       *scvdaemon.Daemon // nil while stopped
	served  chan error
	actions []string
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	// t.TempDir() can be too long for sun_path (108 bytes): keep it short.
	dir, err := os.MkdirTemp("", "scv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	td := &daemon{t: t, dir: dir, work: filepath.Join(dir, "work")}
	require.NoError(t, os.Mkdir(td.work, 0o755))
	td.start()
	t.Cleanup(td.stop)
	return td
}

// start starts the daemon (again) on its files.
func (td *daemon) start() {
	td.t.Helper()
	d := scvdaemon.New(scvdaemon.Config{
		DB: filepath.Join(td.dir, "ledger.db"), Socket: filepath.Join(td.dir, "d.sock"),
		ConfigPath: filepath.Join(td.dir, "channels.json"), Version: "test", KillGrace: 500 * time.Millisecond,
	})
	require.NoError(td.t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	td.mu.Lock()
	td.d, td.served = d, served
	td.mu.Unlock()
}

// stop stops the daemon, if it runs.
func (td *daemon) stop() {
	td.mu.Lock()
	d, served := td.d, td.served
	td.d = nil
	td.mu.Unlock()
	if d == nil {
		return
	}
	assert.NoError(td.t, d.Close(), "close")
	select {
	case err := <-served:
		assert.NoError(td.t, err, "Serve after Close")
	case <-time.After(ioTimeout):
		td.t.Error("Serve did not return after Close")
	}
}

func (td *daemon) Handle(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	td.mu.Lock()
	td.actions = append(td.actions, cmd.Action())
	td.mu.Unlock()
	d := td.current()
	if d == nil {
		return nil, fmt.Errorf("%w: the daemon is stopped", api.ErrUnavailable)
	}
	return d.Server().Service.Handle(ctx, cmd)
}

// sent counts the commands of action the daemon was sent.
func (td *daemon) sent(action string) int {
	td.mu.Lock()
	defer td.mu.Unlock()
	n := 0
	for _, a := range td.actions {
		if a == action {
			n++
		}
	}
	return n
}

// call is the daemon's reply to cmd, which must succeed.
func (td *daemon) call(cmd api.Command) *api.DaemonStatus {
	td.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	st, err := td.Handle(ctx, cmd)
	require.NoError(td.t, err, "%s", cmd.Action())
	return st
}

// delegations lists the registered delegations.
func (td *daemon) delegations() []api.DelegationInfo {
	td.t.Helper()
	return td.call(api.CmdDelegations{All: true}).Delegations.Entries
}

// delegation is a command run in the daemon's work folder.
func (td *daemon) delegation(script string) supervise.Delegation {
	return supervise.Delegation{Daemon: td, Command: []string{"sh", "-c", script}, Dir: td.work}
}

// running is a delegation's Run under way.
type running struct {
	ws   unix.WaitStatus
	err  error
	done chan struct{}
}

// goRun calls run in a goroutine.
func goRun(ctx context.Context, run func(context.Context) (unix.WaitStatus, error)) *running {
	r := &running{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.ws, r.err = run(ctx)
	}()
	return r
}

// wait waits for the Run to return.
func (r *running) wait(t *testing.T) (unix.WaitStatus, error) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(3 * ioTimeout):
		require.FailNow(t, "Run did not return")
	}
	return r.ws, r.err
}

// readFile waits until a script has written a line to name, in dir, and
// returns it without its newline.
func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	var line string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, name))
		line = strings.TrimSuffix(string(b), "\n")
		return err == nil && strings.HasSuffix(string(b), "\n")
	}, ioTimeout, 5*time.Millisecond, "no line in %s", name)
	return line
}

// readPID is the PID a script wrote to name.
func readPID(t *testing.T, dir, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(readFile(t, dir, name))
	require.NoError(t, err)
	return pid
}

// noChildren checks that the test process has no child left, running or
// a zombie not yet reaped: Run reaped its command and its orphans.
func noChildren(t *testing.T) {
	t.Helper()
	var ws unix.WaitStatus
	pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
	if errors.Is(err, unix.ECHILD) {
		return
	}
	var left []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			if info, err := proc.Read(n); err == nil && info.PPID == os.Getpid() {
				left = append(left, n)
			}
		}
	}
	t.Errorf("children left behind (wait4: %d, %v): %v", pid, err, left)
}

// gone reports whether pid names no process, not even a zombie.
func gone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, os.ErrNotExist)
}

// lines splits notes into lines.
func lines(notes string) []string {
	return slices.DeleteFunc(strings.Split(notes, "\n"), func(s string) bool { return s == "" })
}

// gate makes a FIFO named gate in dir, which a script waits on with
// `read _ < gate`, and returns the function that opens it.
func gate(t *testing.T, dir string) (open func()) {
	t.Helper()
	path := filepath.Join(dir, "gate")
	require.NoError(t, unix.Mkfifo(path, 0o600))
	return func() {
		t.Helper()
		var f *os.File
		require.Eventually(t, func() bool { // ENXIO until the script reads
			var err error
			f, err = os.OpenFile(path, os.O_WRONLY|unix.O_NONBLOCK, 0)
			return err == nil
		}, ioTimeout, 5*time.Millisecond, "the script waits at the gate")
		_, err := f.WriteString("go\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
}

// current is the running daemon (nil while stopped).
func (td *daemon) current() *scvdaemon.Daemon {
	td.mu.Lock()
	defer td.mu.Unlock()
	return td.d
}
