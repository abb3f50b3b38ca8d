package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/control/daemon"
)

// buildScv compiles the binary with a stamped version into dir.
func buildScv(t *testing.T, dir, stamp string) string {
	t.Helper()
	bin := filepath.Join(dir, "scv")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+stamp, "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// shortDir returns a temp dir whose paths fit a socket's 108-byte limit.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "scv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startDaemon starts `scv daemon ARGS` (ARGS must include --socket) and
// waits until it answers on its socket; stderr is collected in the
// returned builder, to be read after the process ended.
func startDaemon(t *testing.T, bin string, args ...string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	sock := args[slices.Index(args, "--socket")+1]
	cmd := exec.Command(bin, append([]string{"daemon"}, args...)...)
	var logs strings.Builder
	cmd.Stderr = &logs
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool {
		c, err := control.Dial(context.Background(), sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "daemon did not listen")
	return cmd, &logs
}

// TestDaemonProcess runs the real binary: the stamped version is what
// `scv version` prints and what status reports; SIGTERM ends the daemon
// with exit code 0, after the request in flight was answered and with the
// database closed (a second daemon can open it and sees the event).
func TestDaemonProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := shortDir(t)
	bin := buildScv(t, dir, "9.8.7-test")

	out, err := exec.Command(bin, "version").Output()
	require.NoError(t, err)
	assert.Equal(t, "9.8.7-test\n", string(out))

	db, sock := filepath.Join(dir, "ledger.db"), filepath.Join(dir, "d.sock")
	start := func() (*exec.Cmd, *strings.Builder) { return startDaemon(t, bin, "--db", db, "--socket", sock) }

	d, logs := start()
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket mode")
	fi, err = os.Stat(db)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "database mode")

	ctx := context.Background()
	c, err := control.Dial(ctx, sock)
	require.NoError(t, err)
	st, err := c.Call(ctx, api.CmdStatus{})
	require.NoError(t, err)
	assert.Equal(t, "9.8.7-test", st.Version)
	assert.Equal(t, uint32(d.Process.Pid), st.PID)

	// A request in flight when SIGTERM arrives is still answered: send it
	// and the signal together, then read the reply.
	req := `{"jsonrpc":"2.0","id":7,"method":"daemon.control","params":{"action":"project_create","name":"acme","workspace":"` + dir + `"}}` + "\n"
	raw, err := control.Dial(ctx, sock)
	require.NoError(t, err)
	reply := make(chan []byte, 1)
	go func() {
		b, _ := raw.Send(ctx, []byte(req))
		reply <- b
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, d.Process.Signal(syscall.SIGTERM))
	assert.Contains(t, string(<-reply), `"kind":"created"`)
	require.NoError(t, d.Wait(), "daemon exit: %s", logs)
	assert.Contains(t, logs.String(), "daemon stopped")
	_, err = os.Stat(sock)
	assert.True(t, os.IsNotExist(err), "socket removed on exit")
	c.Close()
	raw.Close()

	// SIGINT ends it the same way, and the project created before is there.
	d, logs = start()
	c, err = control.Dial(ctx, sock)
	require.NoError(t, err)
	st, err = c.Call(ctx, api.CmdProjectStatus{Project: "acme"})
	require.NoError(t, err)
	assert.Equal(t, "acme", st.Project.Project.Name)
	c.Close()
	require.NoError(t, d.Process.Signal(syscall.SIGINT))
	require.NoError(t, d.Wait(), "daemon exit: %s", logs)

	// A second daemon on a live socket, or on the same database through
	// another socket, is refused, and touches neither.
	d, _ = start()
	second := exec.Command(bin, "daemon", "--db", filepath.Join(dir, "other.db"), "--socket", sock)
	out, err = second.CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "another daemon is using "+sock)
	_, err = os.Stat(filepath.Join(dir, "other.db"))
	assert.True(t, os.IsNotExist(err), "the refused daemon created no database")
	third := exec.Command(bin, "daemon", "--db", db, "--socket", filepath.Join(dir, "e.sock"))
	out, err = third.CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "another daemon is using "+db)
	c, err = control.Dial(ctx, sock)
	require.NoError(t, err)
	_, err = c.Call(ctx, api.CmdStatus{})
	assert.NoError(t, err, "the first daemon still answers")
	c.Close()
	require.NoError(t, d.Process.Signal(syscall.SIGTERM))
	require.NoError(t, d.Wait())
}

// TestDaemonDefaults checks the XDG defaults: with no flags the database
// lives under $XDG_STATE_HOME/scv and the socket under
// $XDG_RUNTIME_DIR/scv, falling back to the state directory.
func TestDaemonDefaults(t *testing.T) {
	dir := shortDir(t)
	t.Setenv("SCV_DB", "")
	t.Setenv("SCV_SOCKET", "")
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(dir, "run"))
	c, err := parseDaemonFlags(nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "state", "scv", "ledger.db"), c.DB)
	assert.Equal(t, filepath.Join(dir, "run", "scv", "daemon.sock"), c.Socket)

	t.Setenv("XDG_RUNTIME_DIR", "")
	c, err = parseDaemonFlags(nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "state", "scv", "daemon.sock"), c.Socket)

	t.Setenv("SCV_DB", "/x/l.db")
	t.Setenv("SCV_SOCKET", "/x/s.sock")
	c, err = parseDaemonFlags(nil)
	require.NoError(t, err)
	assert.Equal(t, "/x/l.db", c.DB)
	assert.Equal(t, "/x/s.sock", c.Socket)

	c, err = parseDaemonFlags([]string{"--db", "/y/l.db", "--socket", "/y/s.sock"})
	require.NoError(t, err)
	assert.Equal(t, "/y/l.db", c.DB)
	assert.Equal(t, "/y/s.sock", c.Socket)

	// The stale window, the heartbeat interval and the cache: defaults,
	// and refusals.
	c, err = parseDaemonFlags(nil)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, c.StaleAfter)
	assert.Equal(t, time.Duration(-1), c.HeartbeatEvery, "a tenth of the window, settled by daemon.New")
	assert.Equal(t, daemon.DefaultCacheSize, c.CacheSize)
	c, err = parseDaemonFlags([]string{"--stale-after", "2s", "--heartbeat-every", "0", "--cache-projects", "7"})
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, c.StaleAfter)
	assert.Equal(t, time.Duration(0), c.HeartbeatEvery)
	assert.Equal(t, 7, c.CacheSize)
	for _, bad := range [][]string{
		{"--stale-after", "0s"},
		{"--stale-after", "2s", "--heartbeat-every", "2s"},
		{"extra"},
		{"--compact-after", "100", "--retain", "100"},
		{"--retain", "-1"},
		{"--cache-projects", "-1"},
	} {
		var u usageError
		_, err := parseDaemonFlags(bad)
		assert.ErrorAs(t, err, &u, "%v", bad)
	}

	// The socket folder is created 0700.
	d := inDaemon(t, daemon.Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "run2", "scv", "d.sock"),
		StaleAfter: time.Minute, HeartbeatEvery: -1})
	assert.Equal(t, 6*time.Second, d.Config().HeartbeatEvery)
	fi, err := os.Stat(filepath.Dir(d.Config().Socket))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}
