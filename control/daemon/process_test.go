package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/control/rpc"
	"scv/ledger"
)

// The tests that need the daemon as a process of its own (killed with
// SIGKILL, stopped by a signal, restarted into another release, run as
// another user, given a file size limit) run the real scv binary through
// internal/daemonproc, built once per version stamp, and talk to it with
// rpc.Client. Under -short they are skipped.

// The releases the process tests build: every test runs oldRelease; a
// restart goes to newRelease.
const (
	oldRelease = "1.0.0-old"
	newRelease = "2.0.0-new"
)

var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	os.Exit(code)
}

// scvBinary is the scv binary whose version is stamp, built once.
func scvBinary(t *testing.T, stamp string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the scv binary")
	}
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if bin, ok := builds.bins[stamp]; ok {
		return bin
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "scvbin")
		require.NoError(t, err)
		builds.dir, builds.bins = dir, map[string]string{}
	}
	bin := filepath.Join(builds.dir, stamp, "scv")
	require.NoError(t, daemonproc.Build(context.Background(), bin, "-ldflags", "-X main.version="+stamp))
	builds.bins[stamp] = bin
	return bin
}

// process is `scv daemon` run by a test. The daemons a restart started from
// it, seen in its replies, are stopped with it when the test ends.
type process struct {
	*daemonproc.Daemon
	bin, db string
	mu      sync.Mutex
	later   []int
}

// startProcess starts `bin daemon --db DB --socket SOCK ARGS...` with
// SCV_FAILPOINTS set to failpoints only ("": none, whatever the test's
// environment says), and waits until it answers.
func startProcess(t *testing.T, bin, db, sock, failpoints string, args ...string) *process {
	t.Helper()
	d, err := daemonproc.StartEnv([]string{ledger.FailpointsEnv + "=" + failpoints}, bin, db, sock, args...)
	require.NoError(t, err)
	p := &process{Daemon: d, bin: bin, db: db}
	t.Cleanup(func() {
		p.mu.Lock()
		later := p.later
		p.mu.Unlock()
		for _, pid := range later {
			stopPid(t, pid)
		}
		if d.Running() {
			d.Stop()
		}
		if t.Failed() {
			t.Logf("daemon log %s:\n%s", d.LogPath, d.Log())
		}
	})
	_, err = d.Ready(context.Background(), 30*time.Second)
	require.NoError(t, err)
	return p
}

// call sends one command on a connection of its own, and notes the pid of
// a daemon other than this process that answers it.
func (p *process) call(cmd api.Command) (*api.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, p.Sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st, err := c.Call(ctx, cmd)
	if err == nil && int(st.PID) != p.Pid() {
		p.mu.Lock()
		if !slices.Contains(p.later, int(st.PID)) {
			p.later = append(p.later, int(st.PID))
		}
		p.mu.Unlock()
	}
	return st, err
}

func (p *process) must(t *testing.T, cmd api.Command) *api.DaemonStatus {
	t.Helper()
	st, err := p.call(cmd)
	require.NoError(t, err, "%s", cmd.Action())
	return st
}

// waitExit waits for the process to end and says how it ended.
func (p *process) waitExit(t *testing.T) *os.ProcessState {
	t.Helper()
	select {
	case <-p.Exited():
		return p.Cmd.ProcessState
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon did not exit: %s", p.Log())
		return nil
	}
}

// exitedZero waits for the process to end, which it must with status 0.
func (p *process) exitedZero(t *testing.T) {
	t.Helper()
	st := p.waitExit(t)
	require.True(t, st.Success(), "the daemon exits 0, not %v: %s", st, p.Log())
}

// stop ends the daemon with SIGTERM; it must exit 0.
func (p *process) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	p.exitedZero(t)
}

// assertKilled checks that the daemon ended by SIGKILL at point.
func (p *process) assertKilled(t *testing.T, point ledger.Failpoint) {
	t.Helper()
	assertSIGKILL(t, p.waitExit(t), p.Log())
	assert.Contains(t, p.Log(), "scv: failpoint "+string(point)+": crash (SIGKILL)", "it died at the point")
}

// assertSIGKILL checks that st is the end of a process SIGKILL ended.
func assertSIGKILL(t *testing.T, st *os.ProcessState, logs string) {
	t.Helper()
	ws, ok := st.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed by SIGKILL, not %v: %s", st, logs)
}

// stopPid ends a daemon that is not this test's child, as the process a
// restart started is not.
func stopPid(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 || procGone(pid) {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for !procGone(pid) {
		if time.Now().After(deadline) {
			t.Errorf("pid %d ignored SIGTERM; killing it", pid)
			syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(10 * time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// install copies src to dst the way an installer does: a new file
// renamed over the old one, which a running daemon keeps executing.
func install(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst+".new", b, 0o755))
	require.NoError(t, os.Rename(dst+".new", dst))
}

// verifyLedger runs ledger.Verify on db, with no daemon needed, and
// returns its report, or the error that stopped it.
func verifyLedger(db string) (*ledger.VerifyReport, error) {
	ctx := context.Background()
	drv, err := OpenLedger(ctx, db, false)
	if err != nil {
		return nil, err
	}
	defer drv.Close()
	return ledger.Verify(ctx, drv, ledger.VerifyOptions{})
}

// verifyIntact checks that the ledger at db is intact and returns what
// Verify saw.
func verifyIntact(t *testing.T, db string) *ledger.VerifyReport {
	t.Helper()
	rep, err := verifyLedger(db)
	require.NoError(t, err, "verify %s", db)
	require.Empty(t, rep.Problems, "verify %s", db)
	return rep
}
