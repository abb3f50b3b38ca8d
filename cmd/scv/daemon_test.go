package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/daemon"
	"scv/control/rpc"
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
		c, err := rpc.Dial(context.Background(), sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "daemon did not listen")
	return cmd, &logs
}

// TestDaemonDefaults checks the XDG defaults: with no flags the database
// lives under $XDG_STATE_HOME/scv and the socket under
// $XDG_RUNTIME_DIR/scv, falling back to the state directory; and the
// flags' defaults and refusals. (The daemon itself, as a process:
// control/daemon's TestDaemonProcess.)
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

}
