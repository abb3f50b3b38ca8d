package control_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/rpc"
)

// TestListen: a socket folder Listen creates is 0700 and the socket 0600
// (SPEC 1), an existing folder open to others is refused (not chmodded), a
// stale socket file is replaced, and a live daemon's socket is not stolen.
func TestListen(t *testing.T) {
	dir, err := os.MkdirTemp("", "scv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	run := filepath.Join(dir, "run", "scv")
	sock := filepath.Join(run, "d.sock")

	ln, err := control.Listen(sock)
	require.NoError(t, err)
	fi, err := os.Stat(run)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "socket folder mode")
	fi, err = os.Stat(sock)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSocket, "a socket")
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket mode")

	_, err = control.Listen(sock)
	assert.Error(t, err, "a live daemon's socket is not taken over")
	c, err := net.Dial("unix", sock)
	require.NoError(t, err, "the live socket still works")
	c.Close()

	// Leave the socket file behind, as a crashed daemon would.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	_, err = os.Stat(sock)
	require.NoError(t, err, "stale socket file left")
	ln, err = control.Listen(sock)
	require.NoError(t, err, "a stale socket is replaced")
	ln.Close()

	// An existing folder open to others is refused, and keeps its mode:
	// Listen does not chmod the operator's folder.
	open := filepath.Join(dir, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	_, err = control.Listen(filepath.Join(open, "d.sock"))
	assert.ErrorContains(t, err, open)
	fi, err = os.Stat(open)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "a refused folder keeps its mode")
}

// TestDefaultSocketPath: SCV_SOCKET, else $XDG_RUNTIME_DIR/scv, else
// $XDG_STATE_HOME/scv, else ~/.local/state/scv.
func TestDefaultSocketPath(t *testing.T) {
	t.Setenv("HOME", "/home/me")
	t.Setenv("SCV_SOCKET", "/x/s.sock")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1")
	t.Setenv("XDG_STATE_HOME", "/state")
	assert.Equal(t, "/x/s.sock", rpc.DefaultSocketPath())
	t.Setenv("SCV_SOCKET", "")
	assert.Equal(t, "/run/user/1/scv/daemon.sock", rpc.DefaultSocketPath())
	t.Setenv("XDG_RUNTIME_DIR", "")
	assert.Equal(t, "/state/scv/daemon.sock", rpc.DefaultSocketPath())
	t.Setenv("XDG_STATE_HOME", "")
	assert.Equal(t, "/home/me/.local/state/scv/daemon.sock", rpc.DefaultSocketPath())
	assert.Equal(t, "/home/me/.local/state/scv", rpc.StateDir())
}
