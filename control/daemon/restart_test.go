package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/proc"
	"scv/control/rpc"
)

// version is the release the in-process daemons report.
const version = "1.0.0-test"

func ptr[T any](v T) *T { return &v }

// shortDir returns a temp dir whose paths fit a socket's 108-byte limit.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "scv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// writeScript installs a shell script at path.
func writeScript(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path+".new", []byte("#!/bin/sh\n"+body), 0o755))
	require.NoError(t, os.Rename(path+".new", path))
}

// procGone reports whether pid has ended: no such process, or a zombie.
func procGone(pid int) bool {
	info, err := proc.Read(pid)
	return err != nil || info.State == 'Z'
}

// syncBuffer is a bytes.Buffer safe to read while another goroutine writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// restartScript is a release for the in-process tests: it reports
// version v, and started as the daemon it records that it ran and then
// runs body.
func restartScript(t *testing.T, dir, v, body string) (exe, marker string) {
	t.Helper()
	exe, marker = filepath.Join(dir, "scv"), filepath.Join(dir, "ran")
	writeScript(t, exe, fmt.Sprintf(`if [ "$1" = version ]; then echo %s; exit 0; fi
echo $$ > %s
%s
`, v, marker, body))
	return exe, marker
}

// restartableDaemon runs a Daemon in-process whose own executable is exe,
// with active standing in for the delegation registry.
func restartableDaemon(t *testing.T, dir, exe string, ready time.Duration, active func(string) bool) (*Daemon, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	d := New(Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), Executable: exe, Version: version,
		ConfigPath: filepath.Join(dir, "channels.json"), Logger: slog.New(slog.NewTextHandler(logs, nil)), ReadyTimeout: ready})
	require.NoError(t, d.Open(context.Background()))
	// Before Serve: nothing reads them yet.
	d.restarter.Active = active
	d.restarter.Poll = 10 * time.Millisecond
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	t.Cleanup(func() {
		assert.NoError(t, d.Close())
		assert.NoError(t, <-served)
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	return d, logs
}

// inCall sends one command to an in-process daemon on a connection of
// its own (a restart closes idle connections).
func inCall(t *testing.T, d *Daemon, cmd api.Command) *api.DaemonStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, d.cfg.Socket)
	require.NoError(t, err)
	defer c.Close()
	st, err := c.Call(ctx, cmd)
	require.NoError(t, err, "%s", cmd.Action())
	return st
}

// TestRestartWaitsForDelegation: a restart waits while its requester's
// delegation is active, and status shows it (requester, waiting_for,
// deadline); a second request replaces the first; once the delegation
// ends, it restarts. The release here fails to come up, so the daemon
// serves on with nothing pending. With the delegation still active,
// max_wait_seconds passing restarts anyway.
func TestRestartWaitsForDelegation(t *testing.T) {
	dir := shortDir(t)
	exe, marker := restartScript(t, dir, "2.0.0-next", "exit 1")
	var mu sync.Mutex
	active := map[string]bool{}
	setActive := func(h string, on bool) { mu.Lock(); defer mu.Unlock(); active[h] = on }
	// The release here ends at once: a long readiness timeout keeps a
	// loaded machine from killing it before it wrote its marker.
	d, logs := restartableDaemon(t, dir, exe, time.Minute, func(h string) bool { mu.Lock(); defer mu.Unlock(); return active[h] })
	ran := func() bool { _, err := os.Stat(marker); return err == nil }

	setActive("DELEG", true)
	asked := time.Now()
	st := inCall(t, d, api.CmdRestartWhenIdle{Version: ptr("2.0.0-next"), Parent: ptr("OUTER,DELEG"), MaxWaitSeconds: ptr(uint64(3600))})
	require.NotNil(t, st.Restart)
	assert.Equal(t, "2.0.0-next", st.Restart.ToVersion)
	assert.Equal(t, "DELEG", *st.Restart.Requester)
	require.NotNil(t, st.Restart.WaitingFor)
	assert.Equal(t, "delegation DELEG", *st.Restart.WaitingFor)
	assert.InDelta(t, asked.Add(time.Hour).Unix(), int64(st.Restart.DeadlineUnixSeconds), 2)

	time.Sleep(200 * time.Millisecond)
	st = inCall(t, d, api.CmdStatus{})
	require.NotNil(t, st.Restart, "every status shows the pending restart")
	assert.Equal(t, "DELEG", *st.Restart.Requester)
	require.NotNil(t, st.Restart.WaitingFor)
	assert.Contains(t, *st.Restart.WaitingFor, "delegation DELEG")
	assert.False(t, ran(), "no restart while the delegation runs")

	// Replaced: the first request's delegation ending starts nothing.
	setActive("OTHER", true)
	st = inCall(t, d, api.CmdRestartWhenIdle{Parent: ptr("OTHER"), MaxWaitSeconds: ptr(uint64(7200))})
	assert.Equal(t, "OTHER", *st.Restart.Requester)
	setActive("DELEG", false)
	time.Sleep(200 * time.Millisecond)
	assert.False(t, ran(), "the replaced request does not restart")
	st = inCall(t, d, api.CmdStatus{})
	require.NotNil(t, st.Restart)
	assert.Equal(t, "OTHER", *st.Restart.Requester)

	setActive("OTHER", false)
	require.Eventually(t, ran, 10*time.Second, 10*time.Millisecond, "restarts once the delegation ended")
	require.Eventually(t, func() bool { return inCall(t, d, api.CmdStatus{}).Restart == nil }, 10*time.Second, 10*time.Millisecond)
	st = inCall(t, d, api.CmdProjectCreate{Name: "after", Workspace: dir})
	assert.Equal(t, version, st.Version)
	assert.Equal(t, uint32(os.Getpid()), st.PID)
	assert.Contains(t, logs.String(), "ended before it was ready")

	// Max wait: the delegation never ends, the restart happens anyway.
	require.NoError(t, os.Remove(marker))
	setActive("SLOW", true)
	asked = time.Now()
	st = inCall(t, d, api.CmdRestartWhenIdle{Parent: ptr("SLOW"), MaxWaitSeconds: ptr(uint64(1))})
	require.NotNil(t, st.Restart)
	require.Eventually(t, ran, 10*time.Second, 10*time.Millisecond, "restarts at the deadline")
	assert.GreaterOrEqual(t, time.Since(asked), 900*time.Millisecond, "not before the deadline")
	require.Eventually(t, func() bool { return inCall(t, d, api.CmdStatus{}).Restart == nil }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, logs.String(), "restarting at the deadline")
	inCall(t, d, api.CmdProjectStatus{Project: "after"})
}

// TestRestartNotReady: a release that starts but never says it is ready
// is killed at the readiness timeout, and the daemon serves on.
func TestRestartNotReady(t *testing.T) {
	dir := shortDir(t)
	exe, marker := restartScript(t, dir, "2.0.0-slow", "exec sleep 60")
	d, logs := restartableDaemon(t, dir, exe, 500*time.Millisecond, func(string) bool { return false })
	inCall(t, d, api.CmdProjectCreate{Name: "acme", Workspace: dir})

	inCall(t, d, api.CmdRestartWhenIdle{MaxWaitSeconds: ptr(uint64(0))})
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "restart failed") }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, logs.String(), "was not ready within 500ms; killed it")
	b, err := os.ReadFile(marker)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assert.True(t, procGone(pid), "the release that was not ready is gone")

	st := inCall(t, d, api.CmdProjectStatus{Project: "acme"})
	assert.Nil(t, st.Restart)
	assert.Equal(t, "acme", st.Project.Project.Name)
}
