package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/control/proc"
	"scv/control/rpc"
	"scv/ledger"
)

// testDaemon is `scv daemon` run from a test (internal/daemonproc: its
// log in SOCK.log). The later daemons of a restart, seen in replies, are
// stopped at cleanup too.
type testDaemon struct {
	dir, bin, db, sock string
	p                  *daemonproc.Daemon
	cmd                *exec.Cmd
	mu                 sync.Mutex
	pids               []int // later daemons, seen in replies
}

// startTestDaemon starts `bin daemon --db DB --socket SOCK ARGS...`, with
// SCV_FAILPOINTS set to failpoints only ("": none, whatever the test's
// environment says), and waits until it answers.
func startTestDaemon(t *testing.T, bin, db, sock, failpoints string, args ...string) *testDaemon {
	t.Helper()
	p, err := daemonproc.StartEnv([]string{ledger.FailpointsEnv + "=" + failpoints}, bin, db, sock, args...)
	require.NoError(t, err)
	d := &testDaemon{dir: filepath.Dir(db), bin: bin, db: db, sock: sock, p: p, cmd: p.Cmd}
	t.Cleanup(func() {
		d.mu.Lock()
		pids := d.pids
		d.mu.Unlock()
		for _, pid := range pids {
			stopPid(t, pid)
		}
		if p.Running() {
			p.Stop()
		}
		if t.Failed() {
			t.Logf("daemon log %s:\n%s", p.LogPath, p.Log())
		}
	})
	_, err = p.Ready(context.Background(), 20*time.Second)
	require.NoError(t, err)
	return d
}

func (d *testDaemon) logs() string { return d.p.Log() }

// call sends one command on a connection of its own, and notes the PID of
// a daemon other than the first that answers it.
func (d *testDaemon) call(cmd api.Command) (*api.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, d.sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st, err := c.Call(ctx, cmd)
	if err == nil && st.PID != uint32(d.cmd.Process.Pid) {
		d.mu.Lock()
		if !slices.Contains(d.pids, int(st.PID)) {
			d.pids = append(d.pids, int(st.PID))
		}
		d.mu.Unlock()
	}
	return st, err
}

func (d *testDaemon) must(t *testing.T, cmd api.Command) *api.DaemonStatus {
	t.Helper()
	st, err := d.call(cmd)
	require.NoError(t, err, "%s", cmd.Action())
	return st
}

// waitExit waits for the first daemon to end and returns how it ended:
// nil for exit 0.
func (d *testDaemon) waitExit(t *testing.T) error {
	t.Helper()
	select {
	case <-d.p.Exited():
		return d.p.Err()
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon did not exit: %s", d.logs())
		return nil
	}
}

// procGone reports whether pid has ended: no such process, or a zombie
// (PID 1 in some sandboxes reaps no one).
func procGone(pid int) bool {
	info, err := proc.Read(pid)
	return err != nil || info.State == 'Z'
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

// buildOldNew builds two releases of scv for a restart: 1.0.0-old and
// 2.0.0-new.
func buildOldNew(t *testing.T) (oldBin, newBin string) {
	t.Helper()
	builds := shortDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(builds, "old"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(builds, "new"), 0o755))
	return buildScv(t, filepath.Join(builds, "old"), "1.0.0-old"), buildScv(t, filepath.Join(builds, "new"), "2.0.0-new")
}
