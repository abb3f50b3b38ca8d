package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start starts argv[0], looked up in PATH as exec.LookPath does when it has
// no slash (a relative path with a slash is taken from dir, as exec.Cmd
// does), with argv as its arguments, in dir ("" for the current
// directory), in a new process group of its own. Its environment is env
// (os.Environ() if env is nil) without any TagEnv and ParentEnv, plus
// TagEnv=handle and ParentEnv=ExtendChain(parentChain, handle). A nil
// stdin, stdout or stderr is /dev/null.
//
// The caller reaps the process with WaitTree, never with the returned
// Process's Wait.
func Start(argv []string, dir string, env []string, handle, parentChain string, stdin, stdout, stderr *os.File) (*os.Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("proc: start: no command")
	}
	if handle == "" || strings.ContainsAny(handle, ",\x00") {
		return nil, fmt.Errorf("proc: start: invalid handle %q", handle)
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		lp, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("proc: start: %w", err)
		}
		path = lp
	}
	if env == nil {
		env = os.Environ()
	}
	files := []*os.File{stdin, stdout, stderr}
	var null *os.File
	for i, f := range files {
		if f != nil {
			continue
		}
		if null == nil {
			var err error
			if null, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
				return nil, fmt.Errorf("proc: start: %w", err)
			}
			defer null.Close()
		}
		files[i] = null
	}
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir:   dir,
		Env:   tagEnv(env, handle, parentChain),
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return nil, fmt.Errorf("proc: start: %w", err)
	}
	return p, nil
}

// tagEnv returns env without TagEnv and ParentEnv, plus both set for
// handle.
func tagEnv(env []string, handle, parentChain string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == TagEnv || k == ParentEnv {
			continue
		}
		out = append(out, kv)
	}
	return append(out, TagEnv+"="+handle, ParentEnv+"="+ExtendChain(parentChain, handle))
}

// BecomeSubreaper marks the calling process as a child subreaper
// (PR_SET_CHILD_SUBREAPER): descendants orphaned by the death of their
// parent are re-parented to it rather than to init, so that it can reap
// them.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("proc: become subreaper: %w", err)
	}
	return nil
}

// WaitTree reaps children of the calling process, blocking, until it has
// reaped leader, and returns leader's wait status. Other children reaped
// meanwhile, such as orphans re-parented to a subreaper, are discarded.
// Children that exit after the leader, or that had exited when WaitTree
// was called but come later in the kernel's order, are left: sweep them
// with ReapOrphans.
func WaitTree(leader int) (unix.WaitStatus, error) {
	if leader <= 0 {
		return 0, fmt.Errorf("proc: wait for %d: invalid pid", leader)
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case err == unix.EINTR:
		case err != nil:
			return 0, fmt.Errorf("proc: wait for %d: %w", leader, err)
		case pid == leader:
			return ws, nil
		}
	}
}

// ReapOrphans reaps every child of the calling process that has already
// exited, without blocking, and returns how many it reaped.
func ReapOrphans() int {
	n := 0
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
		case err != nil || pid <= 0:
			return n
		default:
			n++
		}
	}
}

// ExitCode turns a wait status into a shell's exit code: the exit status,
// or 128 plus the signal number for a process killed by a signal. It is -1
// for a status that is neither (a stopped or continued process).
func ExitCode(ws unix.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return -1
}
