package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// helperEnv turns the test binary into a helper when set: "setsid" calls
// setsid(2) and execs its arguments (for machines without util-linux's
// setsid), "members" prints the members of the tree its own TagEnv names.
const helperEnv = "PROC_TEST_HELPER"

// TestMain makes the test process a subreaper: the sandbox's init does not
// reap, so orphans of the trees the tests start come back here and the
// tests reap them. Tests in this package do not run in parallel, because
// WaitTree and ReapOrphans reap any child.
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "setsid":
		helpSetsid()
	case "members":
		helpMembers()
	}
	if err := BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func helpSetsid() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "setsid helper: no command")
		os.Exit(2)
	}
	if _, err := unix.Setsid(); err != nil {
		fmt.Fprintln(os.Stderr, "setsid helper:", err)
		os.Exit(2)
	}
	path, err := exec.LookPath(os.Args[1])
	if err == nil {
		os.Unsetenv(helperEnv)
		err = unix.Exec(path, os.Args[1:], os.Environ())
	}
	fmt.Fprintln(os.Stderr, "setsid helper:", err)
	os.Exit(2)
}

func helpMembers() {
	tree := Tree{Handle: os.Getenv(TagEnv)}
	var pids []string
	for _, m := range tree.Members() {
		pids = append(pids, strconv.Itoa(m.PID))
	}
	fmt.Printf("self=%d members=%s\n", os.Getpid(), strings.Join(pids, ","))
	os.Exit(0)
}

// handleFor names t's delegation, unique across concurrent test binaries.
func handleFor(t *testing.T) string {
	return fmt.Sprintf("proc-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "."))
}

// kid is a process a test started with Start.
type kid struct {
	*os.Process
	id     Ident
	tree   Tree
	reaped bool
}

// start starts argv with Start under handle, with env added to the test's
// own environment, and registers a cleanup that stops its tree and reaps
// it unless the test did.
func start(t *testing.T, handle string, env []string, argv ...string) *kid {
	t.Helper()
	var p *os.Process
	var err error
	for range 50 { // a freshly written executable can be busy for a moment
		p, err = Start(argv, "", append(os.Environ(), env...), handle, "", nil, nil, os.Stderr)
		if !errors.Is(err, unix.ETXTBSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err)
	id, err := Identify(p.Pid)
	require.NoError(t, err)
	k := &kid{Process: p, id: id, tree: Tree{Handle: handle, Leader: id}}
	t.Cleanup(func() {
		if k.reaped {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := k.tree.Stop(ctx, 0); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		k.wait(t)
	})
	return k
}

// wait reaps k with WaitTree.
func (k *kid) wait(t *testing.T) unix.WaitStatus {
	t.Helper()
	ws, err := WaitTree(k.Pid)
	require.NoError(t, err)
	k.reaped = true
	return ws
}

// noLeftovers registers a cleanup, to run after every other, that reaps the
// test's orphans and fails if a child of the test process is left.
func noLeftovers(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			switch {
			case errors.Is(err, unix.ECHILD):
				return
			case err == nil && pid > 0, errors.Is(err, unix.EINTR):
				continue
			case err != nil:
				t.Errorf("reap: %v", err)
				return
			}
			if time.Now().After(deadline) {
				var left []Info
				for _, info := range scan() {
					if info.PPID == os.Getpid() {
						left = append(left, info)
					}
				}
				t.Errorf("children left behind: %+v", left)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// readPID waits for a shell to write its "PID\n" to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(data), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	}, 5*time.Second, 5*time.Millisecond, "no pid in %s", filepath.Base(path))
	return pid
}

// waitState waits until pid's state is state.
func waitState(t *testing.T, pid int, state byte) {
	t.Helper()
	require.Eventually(t, func() bool {
		info, err := Read(pid)
		return err == nil && info.State == state
	}, 5*time.Second, 5*time.Millisecond, "pid %d never in state %c", pid, state)
}

func pids(infos []Info) []int {
	out := make([]int, len(infos))
	for i, info := range infos {
		out[i] = info.PID
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
