package control_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"scv/control"
	"scv/control/api"
)

// shortTempDir is a fresh 0700 folder short enough for sun_path.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "scv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestReliabilitySocketSecurity: Listen creates the folder 0700 and the
// socket 0600 even under umask 0; never removes anything at the socket
// path that is not a socket; refuses a socket folder that is not ours or
// is open to others; and a peer of another uid can neither connect
// through the modes nor, with the modes opened, get past SO_PEERCRED.
func TestReliabilitySocketSecurity(t *testing.T) {
	var facts []string

	t.Run("modes under umask 0", func(t *testing.T) {
		// Under umask 0 a bind would create the socket 0777. Listen must
		// set its own umask before bind: the final modes say that only
		// with the inotify record beside them, which shows that nothing
		// changed a mode after creation (a chmod is IN_ATTRIB), so the
		// modes seen now are the modes they were created with.
		dir := shortTempDir(t)
		w := watchFolder(t, dir)
		nested := filepath.Join(dir, "a", "b", "d.sock")
		flat := filepath.Join(dir, "d.sock")
		old := syscall.Umask(0)
		ln, err := control.Listen(nested)
		var ln2 net.Listener
		if err == nil {
			ln2, err = control.Listen(flat)
		}
		syscall.Umask(old)
		require.NoError(t, err)
		defer ln.Close()
		defer ln2.Close()
		events := w.events(t)
		assert.Equal(t, []string{"a CREATE", "d.sock CREATE"}, events, "created once each, and never chmodded")
		for _, p := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "a", "b")} {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "folder %s", p)
		}
		for _, sock := range []string{nested, flat} {
			fi, err := os.Lstat(sock)
			require.NoError(t, err)
			assert.Equal(t, os.ModeSocket, fi.Mode().Type(), "a socket")
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket mode")
			st := fi.Sys().(*syscall.Stat_t)
			assert.Equal(t, uint32(os.Geteuid()), st.Uid, "socket owner")
		}
		facts = append(facts, fmt.Sprintf("under umask 0 folders 0700 and socket 0600 from creation on (inotify: %s)", strings.Join(events, ", ")))
	})

	t.Run("never removes what is not a socket", func(t *testing.T) {
		dir := shortTempDir(t)
		target := filepath.Join(dir, "target")
		require.NoError(t, os.WriteFile(target, []byte("keep me"), 0o600))
		live := filepath.Join(dir, "live.sock")
		liveLn, err := net.Listen("unix", live)
		require.NoError(t, err)
		defer liveLn.Close()
		staleSock := filepath.Join(dir, "stale.sock")
		sl, err := net.Listen("unix", staleSock)
		require.NoError(t, err)
		sl.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, sl.Close())

		cases := []struct {
			name, what string
			make       func(p string) error
		}{
			{"regular file", "a regular file", func(p string) error { return os.WriteFile(p, []byte("data"), 0o600) }},
			{"empty file", "a regular file", func(p string) error { return os.WriteFile(p, nil, 0o600) }},
			{"empty folder", "a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
			{"folder with a file", "a directory", func(p string) error {
				if err := os.Mkdir(p, 0o700); err != nil {
					return err
				}
				return os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o600)
			}},
			{"symlink to a file", "a symbolic link", func(p string) error { return os.Symlink(target, p) }},
			{"dangling symlink", "a symbolic link", func(p string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) }},
			{"symlink to a stale socket", "a symbolic link", func(p string) error { return os.Symlink(staleSock, p) }},
			{"symlink to a live socket", "a symbolic link", func(p string) error { return os.Symlink(live, p) }},
			{"named pipe", "a named pipe", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		}
		for i, c := range cases {
			p := filepath.Join(dir, fmt.Sprintf("s%d", i))
			require.NoError(t, c.make(p), c.name)
			before, err := os.Lstat(p)
			require.NoError(t, err)
			ln, err := control.Listen(p)
			if !assert.Error(t, err, "%s: refused", c.name) {
				ln.Close()
				continue
			}
			assert.Contains(t, err.Error(), p, "%s: the error names the path", c.name)
			assert.Contains(t, err.Error(), c.what, "%s: the error says what is there", c.name)
			after, err := os.Lstat(p)
			if assert.NoError(t, err, "%s: still there", c.name) {
				assert.True(t, os.SameFile(before, after), "%s: the same file", c.name)
				assert.Equal(t, before.Mode(), after.Mode(), "%s: mode unchanged", c.name)
			}
		}
		b, err := os.ReadFile(target)
		require.NoError(t, err)
		assert.Equal(t, "keep me", string(b), "a symlink's target is untouched")
		c, err := net.Dial("unix", live)
		require.NoError(t, err, "the live socket behind a symlink still works")
		c.Close()

		// A stale socket is replaced; a live one is not stolen.
		ln, err := control.Listen(staleSock)
		require.NoError(t, err, "a stale socket is replaced")
		ln.Close()
		_, err = control.Listen(live)
		assert.ErrorContains(t, err, "another daemon is listening on "+live)
		facts = append(facts, fmt.Sprintf("%d kinds of non-socket left in place", len(cases)))
	})

	t.Run("socket folder", func(t *testing.T) {
		dir := shortTempDir(t)
		for _, mode := range []os.FileMode{0o710, 0o750, 0o701, 0o705, 0o755, 0o770, 0o777, 0o1777, 0o702} {
			folder := filepath.Join(dir, fmt.Sprintf("m%o", mode))
			require.NoError(t, os.Mkdir(folder, 0o700))
			require.NoError(t, os.Chmod(folder, mode))
			sock := filepath.Join(folder, "d.sock")
			ln, err := control.Listen(sock)
			if !assert.Error(t, err, "folder mode %#o refused", mode) {
				ln.Close()
				continue
			}
			assert.Contains(t, err.Error(), folder, "the error names the folder")
			assert.Contains(t, err.Error(), fmt.Sprintf("%#o", mode.Perm()), "the error names the mode")
			fi, err := os.Stat(folder)
			require.NoError(t, err)
			assert.Equal(t, mode.Perm(), fi.Mode().Perm(), "the folder is not chmodded")
			_, err = os.Lstat(sock)
			assert.ErrorIs(t, err, os.ErrNotExist, "no socket created in a %#o folder", mode)
		}
		// The folder's own mode is what counts, not its parents'.
		open := filepath.Join(dir, "open")
		require.NoError(t, os.Mkdir(open, 0o755))
		ln, err := control.Listen(filepath.Join(open, "scv", "d.sock"))
		require.NoError(t, err, "a 0700 folder Listen creates inside a 0755 one")
		ln.Close()

		// A file where the folder should be.
		file := filepath.Join(dir, "file")
		require.NoError(t, os.WriteFile(file, nil, 0o600))
		_, err = control.Listen(filepath.Join(file, "d.sock"))
		assert.Error(t, err, "a file as the socket folder")

		if os.Getuid() != 0 {
			t.Log("not root: the foreign-owner case needs chown")
			return
		}
		foreign := filepath.Join(dir, "foreign")
		require.NoError(t, os.Mkdir(foreign, 0o700))
		require.NoError(t, os.Chown(foreign, nobody, nobody))
		_, err = control.Listen(filepath.Join(foreign, "d.sock"))
		if assert.Error(t, err, "a folder owned by uid %d", nobody) {
			assert.Contains(t, err.Error(), foreign)
			assert.Contains(t, err.Error(), "0700")
			assert.Contains(t, err.Error(), fmt.Sprintf("uid %d", nobody))
		}
		fi, err := os.Stat(foreign)
		require.NoError(t, err)
		assert.Equal(t, uint32(nobody), fi.Sys().(*syscall.Stat_t).Uid, "the folder keeps its owner")
		facts = append(facts, "9 folder modes wider than 0700 and a foreign owner refused")
	})

	t.Run("another uid", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to run a child process under another uid")
		}
		d := startDaemon(t, nil)
		c := d.client(t)
		call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
		before := lastSequence(t, d)
		run := filepath.Dir(d.sock)

		// As Listen left them: the child cannot even connect. d.dir and
		// run are 0700, so it cannot reach the socket.
		res := runAsNobody(t, d.sock)
		assert.True(t, res.eacces, "with the folder 0700 the other uid gets EACCES:\n%s", res.out)
		// Folders open, socket 0600: connect needs write permission on
		// the socket, so the mode alone still keeps it out.
		for _, p := range []string{d.dir, run} {
			require.NoError(t, os.Chmod(p, 0o755))
		}
		res = runAsNobody(t, d.sock)
		assert.True(t, res.eacces, "with the socket 0600 the other uid gets EACCES:\n%s", res.out)
		// Socket opened too: only SO_PEERCRED is left, and it refuses.
		require.NoError(t, os.Chmod(d.sock, 0o666))
		res = runAsNobody(t, d.sock)
		require.Empty(t, res.dialErr, "with everything open the child connects:\n%s", res.out)
		require.NotEmpty(t, res.reply, "the daemon answers the refused peer:\n%s", res.out)
		assertError(t, parseReply(t, []byte(res.reply)), `null`, -32008, "forbidden")
		assert.True(t, res.closedBy, "the daemon closes the refused connection:\n%s", res.out)

		assert.Equal(t, before, lastSequence(t, d), "nothing appended for the other uid")
		e := callErr(t, c, api.CmdProjectStatus{Project: "intruder"})
		assertCode(t, e, -32001, "not_found", "the other uid's project_create did not run")
		facts = append(facts, fmt.Sprintf("uid %d: EACCES through the folder, EACCES through the socket mode, -32008 forbidden past both", nobody))
	})

	t.Logf("RELIABILITY: socket security: %s", strings.Join(facts, "; "))
}

// folderWatch records the creations and attribute changes of a folder's
// entries with inotify.
type folderWatch struct{ fd int }

func watchFolder(t *testing.T, dir string) folderWatch {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	_, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_ATTRIB)
	require.NoError(t, err)
	return folderWatch{fd: fd}
}

// events is what happened so far, as "name CREATE" or "name ATTRIB". The
// kernel queues an event within the system call that causes it.
func (w folderWatch) events(t *testing.T) []string {
	t.Helper()
	var out []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return out
		}
		require.NoError(t, err)
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			// struct inotify_event: wd, mask, cookie, len, name[len].
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			size := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+size]), "\x00")
			switch {
			case mask&unix.IN_CREATE != 0:
				out = append(out, name+" CREATE")
			case mask&unix.IN_ATTRIB != 0:
				out = append(out, name+" ATTRIB")
			}
			off += unix.SizeofInotifyEvent + size
		}
	}
}
