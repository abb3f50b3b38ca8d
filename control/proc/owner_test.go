package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestStartTagsAndGroup: Start puts the command in a group of its own, in
// dir, on /dev/null, and replaces any tag it inherits with its own.
func TestStartTagsAndGroup(t *testing.T) {
	noLeftovers(t)
	dir := t.TempDir()
	handle := handleFor(t)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		TagEnv + "=stale",
		"KEEP=1",
		ParentEnv + "=stale1,stale2",
	}
	p, err := Start([]string{"sleep", "60"}, dir, env, handle, "outer1,outer2", nil, nil, nil)
	require.NoError(t, err)
	id, err := Identify(p.Pid)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, Signal(id, unix.SIGKILL))
		_, err := WaitTree(p.Pid)
		assert.NoError(t, err)
	})

	info, err := Read(p.Pid)
	require.NoError(t, err)
	sid, err := unix.Getsid(0)
	require.NoError(t, err)
	assert.Equal(t, p.Pid, info.PGID, "own group")
	assert.Equal(t, sid, info.SID, "same session")
	assert.Equal(t, "sleep", info.Comm)

	// /proc/PID/environ reads empty for a moment while exec sets up the
	// new image (its name is already the new one by then).
	var environ []byte
	require.Eventually(t, func() bool {
		environ, err = os.ReadFile(filepath.Join("/proc", itoa(p.Pid), "environ"))
		return err == nil && len(environ) > 0
	}, 10*time.Second, time.Millisecond, "environ readable")
	vars := strings.Split(strings.TrimSuffix(string(environ), "\x00"), "\x00")
	slices.Sort(vars)
	assert.Equal(t, []string{
		"KEEP=1",
		"PATH=" + os.Getenv("PATH"),
		TagEnv + "=" + handle,
		ParentEnv + "=outer1,outer2," + handle,
	}, vars)

	assert.True(t, Tagged(p.Pid, handle))
	assert.True(t, Tagged(p.Pid, "outer1"))
	assert.True(t, Tagged(p.Pid, "outer2"))
	for _, no := range []string{"", "outer", "stale", "stale1", handle + "x"} {
		assert.False(t, Tagged(p.Pid, no), "tagged %q", no)
	}
	assert.False(t, Tagged(0, handle))

	cwd, err := os.Readlink(filepath.Join("/proc", itoa(p.Pid), "cwd"))
	require.NoError(t, err)
	assert.Equal(t, dir, cwd)
	for _, fd := range []string{"0", "1", "2"} {
		target, err := os.Readlink(filepath.Join("/proc", itoa(p.Pid), "fd", fd))
		require.NoError(t, err)
		assert.Equal(t, os.DevNull, target, "fd %s", fd)
	}
}

func TestStartRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		argv   []string
		handle string
	}{
		"no command":    {nil, "h"},
		"not in PATH":   {[]string{"scv-proc-test-no-such-command"}, "h"},
		"no such file":  {[]string{"/nonexistent/x"}, "h"},
		"empty handle":  {[]string{"true"}, ""},
		"comma handle":  {[]string{"true"}, "a,b"},
		"NUL in handle": {[]string{"true"}, "a\x00b"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Start(tc.argv, "", nil, tc.handle, "", nil, nil, nil)
			assert.Error(t, err)
			assert.Nil(t, p)
		})
	}
}

func TestTagEnv(t *testing.T) {
	assert.Equal(t, []string{TagEnv + "=h", ParentEnv + "=h"}, tagEnv(nil, "h", ""))
	assert.Equal(t,
		[]string{"A=1", "B==x", TagEnv + "=h", ParentEnv + "=p,q,h"},
		tagEnv([]string{TagEnv + "=x", "A=1", ParentEnv + "=y", "B==x", TagEnv + "=z"}, "h", "p,,q,"))
}

// TestWaitTreeReapsOrphan: the leader leaves an orphan, which comes back to
// the test process, a subreaper, and exits first; WaitTree reaps it while
// it waits, and returns the leader's status.
func TestWaitTreeReapsOrphan(t *testing.T) {
	noLeftovers(t)
	dir := t.TempDir()
	for _, fifo := range []string{"orphan.fifo", "leader.fifo"} {
		require.NoError(t, unix.Mkfifo(filepath.Join(dir, fifo), 0o600))
	}
	k := start(t, handleFor(t), []string{"D=" + dir}, "/bin/sh", "-c", `
		( /bin/sh -c 'echo $$ > "$D/orphan"; read x < "$D/orphan.fifo"' & )
		read y < "$D/leader.fifo"
		exit 3`)
	orphan := readPID(t, filepath.Join(dir, "orphan"))
	require.Eventually(t, func() bool {
		info, err := Read(orphan)
		return err == nil && info.PPID == os.Getpid()
	}, 5*time.Second, 5*time.Millisecond, "orphan not re-parented to the test")

	k.reaped = true // by the goroutine
	var ws unix.WaitStatus
	var err error
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		ws, err = WaitTree(k.Pid)
	}()
	t.Cleanup(func() { // on failure, unblock WaitTree
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		k.tree.Stop(ctx, 0)
		<-waited
	})

	release(t, filepath.Join(dir, "orphan.fifo"))
	require.Eventually(t, func() bool {
		_, err := Read(orphan)
		return errors.Is(err, ErrGone)
	}, 5*time.Second, 5*time.Millisecond, "WaitTree did not reap the orphan")
	select {
	case <-waited:
		t.Fatal("WaitTree returned before the leader exited")
	default:
	}
	release(t, filepath.Join(dir, "leader.fifo"))
	<-waited
	require.NoError(t, err)
	assert.True(t, ws.Exited())
	assert.Equal(t, 3, ws.ExitStatus())
	assert.Equal(t, 3, ExitCode(ws))
}

// release lets a shell blocked in `read x < fifo` go on: it opens the fifo
// for writing once the shell has it open for reading, and closes it.
func release(t *testing.T, fifo string) {
	t.Helper()
	require.Eventually(t, func() bool {
		fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return false // ENXIO: no reader yet
		}
		unix.Close(fd)
		return true
	}, 5*time.Second, 5*time.Millisecond, "nobody reads %s", fifo)
}

func TestReapOrphans(t *testing.T) {
	noLeftovers(t)
	a := start(t, handleFor(t)+"-a", nil, "/bin/sh", "-c", "exit 0")
	b := start(t, handleFor(t)+"-b", nil, "/bin/sh", "-c", "exit 1")
	waitState(t, a.Pid, 'Z')
	waitState(t, b.Pid, 'Z')
	a.reaped, b.reaped = true, true
	assert.Equal(t, 2, ReapOrphans())
	assert.Equal(t, 0, ReapOrphans())
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		ws   unix.WaitStatus
		want int
	}{
		{0, 0},
		{3 << 8, 3},
		{255 << 8, 255},
		{unix.WaitStatus(unix.SIGTERM), 143},
		{unix.WaitStatus(unix.SIGKILL), 137},
		{unix.WaitStatus(unix.SIGSEGV) | 0x80, 139}, // core dumped
		{unix.WaitStatus(unix.SIGSTOP)<<8 | 0x7f, -1},
	} {
		assert.Equal(t, tc.want, ExitCode(tc.ws), "status %#x", uint32(tc.ws))
	}
}
