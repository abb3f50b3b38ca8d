package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/ledger"
)

// testDaemon is `scv daemon` run from a test, logging to a file (a pipe
// would keep Wait waiting for a daemon a restart started, which inherits
// it). The later daemons of a restart, seen in status replies, are stopped
// at cleanup too.
type testDaemon struct {
	dir, bin, db, sock, logPath string
	cmd                         *exec.Cmd
	exited                      chan struct{} // closed once Wait returned; then err is set
	err                         error
	mu                          sync.Mutex
	pids                        []int // later daemons, seen in status
}

// startTestDaemon starts `bin daemon --db DB --socket SOCK ARGS...`, with
// SCV_FAILPOINTS set to failpoints only ("": none, whatever the test's
// environment says), logging to DB.log, and waits until it answers.
func startTestDaemon(t *testing.T, bin, db, sock, failpoints string, args ...string) *testDaemon {
	t.Helper()
	d := &testDaemon{dir: filepath.Dir(db), bin: bin, db: db, sock: sock, logPath: db + ".log", exited: make(chan struct{})}
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer logf.Close()
	d.cmd = exec.Command(bin, append([]string{"daemon", "--db", db, "--socket", sock}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = fpEnv(failpoints)
	require.NoError(t, d.cmd.Start())
	go func() { d.err = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.mu.Lock()
		pids := d.pids
		d.mu.Unlock()
		for _, pid := range pids {
			stopPid(t, pid)
		}
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.exited:
			case <-time.After(10 * time.Second):
				d.cmd.Process.Kill()
				<-d.exited
			}
		}
		if t.Failed() {
			t.Logf("daemon log %s:\n%s", d.logPath, d.logs())
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-d.exited:
			return true // reported below
		default:
		}
		_, err := d.call(api.CmdStatus{})
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "daemon did not listen: %s", d.logs())
	select {
	case <-d.exited:
		t.Fatalf("the daemon ended at start (%v): %s", d.err, d.logs())
	default:
	}
	return d
}

// fpEnv is the test's environment with SCV_FAILPOINTS set to failpoints
// only.
func fpEnv(failpoints string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, ledger.FailpointsEnv+"=") {
			env = append(env, kv)
		}
	}
	if failpoints != "" {
		env = append(env, ledger.FailpointsEnv+"="+failpoints)
	}
	return env
}

func (d *testDaemon) logs() string {
	b, _ := os.ReadFile(d.logPath)
	return string(b)
}

// call sends one command on a connection of its own, and notes the PID of
// a daemon other than the first that answers it.
func (d *testDaemon) call(cmd api.Command) (*api.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := control.Dial(ctx, d.sock)
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

// waitExit waits for the first daemon to end and returns its exit error.
func (d *testDaemon) waitExit(t *testing.T) error {
	t.Helper()
	select {
	case <-d.exited:
		return d.err
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon did not exit: %s", d.logs())
		return nil
	}
}

// stop ends the daemon with SIGTERM; it must exit 0.
func (d *testDaemon) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, d.waitExit(t), "%s", d.logs())
}

// assertKilled checks that the daemon ended by SIGKILL at point.
func (d *testDaemon) assertKilled(t *testing.T, point ledger.Failpoint) {
	t.Helper()
	assertSIGKILL(t, d.waitExit(t), d.logs())
	assert.Contains(t, d.logs(), "scv: failpoint "+string(point)+": crash (SIGKILL)", "it died at the point")
}
