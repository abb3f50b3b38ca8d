package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/rpc"
	"scv/reducer"
)

// fleet is a real daemon binary on a real socket and database, with the
// same binary for the delegating commands.
type fleet struct {
	dir, bin, sock string
	args           []string  // the daemon's
	daemon         *exec.Cmd // the daemon running now
}

func startFleet(t *testing.T, daemonArgs ...string) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs real process trees")
	}
	dir := shortDir(t)
	f := &fleet{dir: dir, bin: buildScv(t, dir, "delegate-test"), sock: filepath.Join(dir, "d.sock")}
	f.args = append([]string{"--db", filepath.Join(dir, "l.db"), "--socket", f.sock}, daemonArgs...)
	f.daemon, _ = startDaemon(t, f.bin, f.args...)
	t.Cleanup(func() {
		f.daemon.Process.Signal(syscall.SIGTERM)
		f.daemon.Wait()
	})
	return f
}

// cmd is `scv --socket SOCK ARGS...`, run from the fleet's folder.
func (f *fleet) cmd(args ...string) *exec.Cmd {
	c := exec.Command(f.bin, append([]string{"--socket", f.sock}, args...)...)
	c.Dir = f.dir
	return c
}

// status is the daemon's reply to cmd.
func (f *fleet) status(t *testing.T, cmd api.Command) *api.DaemonStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, f.sock)
	require.NoError(t, err)
	defer c.Close()
	st, err := c.Call(ctx, cmd)
	require.NoError(t, err)
	return st
}

// pids reads the PIDs a tree script wrote to the files names, in the
// fleet's folder, waiting until all are there.
func (f *fleet) pids(t *testing.T, names ...string) []int {
	t.Helper()
	var out []int
	require.Eventually(t, func() bool {
		out = out[:0]
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(f.dir, n))
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || perr != nil {
				return false
			}
			out = append(out, pid)
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the tree wrote its PIDs")
	return out
}

// TestDelegateOrphanReaped: `scv delegate` registers its command with
// its flags (agent, session) and itself as the owner, in its folder; a
// SIGKILL of scv gets the whole tree, setsid grandchild included, stopped
// by the daemon and counted in reaped.
func TestDelegateOrphanReaped(t *testing.T) {
	f := startFleet(t)
	owner := f.cmd("delegate", "--agent", "codex", "--session", "s-1", "--", "sh", "-c", `echo $$ > leader.pid
sleep 60 & echo $! > child.pid
setsid sh -c 'echo $$ > grandchild.pid; exec sleep 60' &
wait`)
	require.NoError(t, owner.Start())
	pids := f.pids(t, "leader.pid", "child.pid", "grandchild.pid")

	var e api.DelegationInfo
	require.Eventually(t, func() bool {
		st := f.status(t, api.CmdDelegations{})
		if len(st.Delegations.Entries) != 1 {
			return false
		}
		e = st.Delegations.Entries[0]
		return e.Processes == 3
	}, 10*time.Second, 20*time.Millisecond, "listed with its 3 processes")
	assert.Equal(t, "codex", e.Agent)
	assert.Equal(t, "s-1", e.Session)
	assert.Equal(t, uint32(pids[0]), e.PID)
	assert.Equal(t, uint32(owner.Process.Pid), e.OwnerPID)
	assert.Equal(t, f.dir, e.Cwd)

	require.NoError(t, owner.Process.Kill())
	owner.Wait()
	require.Eventually(t, func() bool {
		st := f.status(t, api.CmdStatus{})
		return st.Delegations.Reaped == 1 && st.Delegations.Active == 0
	}, 10*time.Second, 20*time.Millisecond, "reaped")
	for _, pid := range pids {
		assert.True(t, procGone(pid), "process %d stopped", pid)
	}
	assert.Empty(t, f.status(t, api.CmdDelegations{All: true}).Delegations.Entries)
}

// TestDelegateKillByHandle: `scv delegations kill HANDLE` says it stopped
// the delegation, and the `scv delegate` that ran it exits with its
// command's code (killed by SIGTERM: 143); the command's name is the agent
// by default.
func TestDelegateKillByHandle(t *testing.T) {
	f := startFleet(t)
	owner := f.cmd("delegate", "--", "sh", "-c", "echo $$ > leader.pid; exec sleep 60")
	require.NoError(t, owner.Start())
	f.pids(t, "leader.pid")
	var handle string
	require.Eventually(t, func() bool {
		st := f.status(t, api.CmdDelegations{})
		if len(st.Delegations.Entries) == 1 {
			handle = st.Delegations.Entries[0].Handle
			assert.Equal(t, "sh", st.Delegations.Entries[0].Agent)
		}
		return handle != ""
	}, 10*time.Second, 20*time.Millisecond)

	out, err := f.cmd("delegations", "kill", handle).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "stopped "+handle)
	err = owner.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 128+int(syscall.SIGTERM), exit.ExitCode())
}

// exitCode runs c and returns its exit code and its stderr.
func exitCode(t *testing.T, c *exec.Cmd) (int, string) {
	t.Helper()
	var stderr strings.Builder
	c.Stderr = &stderr
	err := c.Run()
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit, "%s", stderr.String())
		return exit.ExitCode(), stderr.String()
	}
	return 0, stderr.String()
}

// TestDelegateExitCode: scv exits with the command's code, 127 when it is
// not found, 125 when scv failed (no daemon: the JSON error says
// unreachable), 2 without the command after --.
func TestDelegateExitCode(t *testing.T) {
	f := startFleet(t)
	code, stderr := exitCode(t, f.cmd("delegate", "--", "sh", "-c", "exit 7"))
	assert.Equal(t, 7, code, stderr)
	assert.Empty(t, stderr)

	code, stderr = exitCode(t, f.cmd("--json", "delegate", "--", "no-such-command-here"))
	assert.Equal(t, 127, code)
	assert.Contains(t, stderr, `"exit":127`)
	assert.Contains(t, stderr, "no-such-command-here")

	c := exec.Command(f.bin, "--json", "--socket", filepath.Join(f.dir, "none.sock"), "delegate", "--", "true")
	code, stderr = exitCode(t, c)
	assert.Equal(t, 125, code)
	var obj failure
	require.NoError(t, json.Unmarshal([]byte(stderr), &obj), stderr)
	assert.Equal(t, failure{Exit: 125, Code: api.CodeUnavailable, Reason: reasonUnreachable, Message: obj.Message}, obj)
	assert.Contains(t, obj.Message, "register the delegation: cannot reach the daemon")

	code, stderr = exitCode(t, f.cmd("delegate", "sh"))
	assert.Equal(t, 2, code, "no -- is a usage error")
	assert.Contains(t, stderr, "missing the command: give it after --")
}

// TestRunExec: `scv project run exec` records a run of a real command,
// passing its output through and saying on stderr that the run started
// and how it ended; it exits with the command's code. A task the daemon
// does not know is 125 with the daemon's reason; a missing TASK or a
// --heartbeat-every that is not positive is a usage error.
func TestRunExec(t *testing.T) {
	f := startFleet(t)
	require.NoError(t, f.cmd("project", "create", "acme", "--workspace", f.dir).Run())
	out, err := f.cmd("project", "task", "add", "acme", "build").Output()
	require.NoError(t, err)
	task := cliNewID(t, string(out), "task", "added")

	c := f.cmd("project", "run", "exec", "acme", task, "--agent", "codex", "--",
		"sh", "-c", `echo "progress: compiling $SCV_TASK"; echo plain; exit 3`)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err = c.Output()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", stderr.String())
	assert.Equal(t, 3, exit.ExitCode())
	assert.Equal(t, "progress: compiling "+task+"\nplain\n", string(out), "output passed through")
	r := f.status(t, api.CmdProjectReport{Project: "acme"}).Project.Report
	require.Len(t, r.Runs, 1)
	run := r.Runs[0]
	assert.Equal(t, reducer.RunFailed, run.Status)
	assert.Equal(t, "codex", run.Agent)
	assert.Equal(t, "scv: run "+run.ID+" of task "+task+" started\nscv: run "+run.ID+" failed\n", stderr.String())

	code, stderrText := exitCode(t, f.cmd("--json", "project", "run", "exec", "acme", "no-such-task", "--", "true"))
	assert.Equal(t, 125, code)
	var obj failure
	require.NoError(t, json.Unmarshal([]byte(stderrText), &obj), stderrText)
	assert.Equal(t, 125, obj.Exit)
	assert.Equal(t, api.ReasonNotFound, obj.Reason)

	code, stderrText = exitCode(t, f.cmd("project", "run", "exec", "acme", "--", "true"))
	assert.Equal(t, 2, code)
	assert.Contains(t, stderrText, "missing TASK before --")
	code, stderrText = exitCode(t, f.cmd("project", "run", "exec", "acme", task, "--heartbeat-every", "0", "--", "true"))
	assert.Equal(t, 2, code)
	assert.Contains(t, stderrText, "--heartbeat-every must be positive")
}
