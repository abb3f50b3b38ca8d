package main

import (
	"bytes"
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

	"scv/control"
	"scv/control/api"
	"scv/control/proc"
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
	c, err := control.Dial(ctx, f.sock)
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

// treeScript starts a child in the group and a grandchild that leaves it
// with setsid, records their PIDs, and waits.
const treeScript = `echo $$ > leader.pid
sleep 60 & echo $! > child.pid
setsid sh -c 'echo $$ > grandchild.pid; exec sleep 60' &
wait`

// TestDelegateOrphanReaped: SIGKILL of an `scv delegate` owner gets its
// whole tree, the setsid grandchild included, stopped by the daemon within
// seconds and counted in reaped.
func TestDelegateOrphanReaped(t *testing.T) {
	f := startFleet(t)
	owner := f.cmd("delegate", "--agent", "codex", "--session", "s-1", "--", "sh", "-c", treeScript)
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
	gc, err := proc.Read(pids[2])
	require.NoError(t, err)
	assert.NotEqual(t, pids[0], gc.PGID, "the grandchild left the group")

	// SCV_PARENT and the tag reach the grandchild.
	// (Read again while an exec has it empty for a moment.)
	var env []byte
	assert.Eventually(t, func() bool {
		env, _ = os.ReadFile("/proc/" + strconv.Itoa(pids[2]) + "/environ")
		return bytes.Contains(env, []byte("\x00"+proc.ParentEnv+"="+e.Handle+"\x00"))
	}, 10*time.Second, time.Millisecond, "SCV_PARENT reaches the grandchild: %q", env)

	killedAt := time.Now()
	require.NoError(t, owner.Process.Kill())
	owner.Wait()
	require.Eventually(t, func() bool {
		st := f.status(t, api.CmdStatus{})
		return st.Delegations.Reaped == 1 && st.Delegations.Active == 0
	}, 10*time.Second, 20*time.Millisecond, "reaped")
	t.Logf("reaped %v after the owner's SIGKILL", time.Since(killedAt).Round(time.Millisecond))
	for _, pid := range pids {
		assert.True(t, procGone(pid), "process %d stopped", pid)
	}
	assert.Empty(t, f.status(t, api.CmdDelegations{All: true}).Delegations.Entries)
}

// TestDelegateKillByHandle: `scv delegations kill HANDLE` stops the whole
// tree, setsid grandchild included; the owner returns with the command's
// code (killed by SIGTERM: 143).
func TestDelegateKillByHandle(t *testing.T) {
	f := startFleet(t)
	owner := f.cmd("delegate", "--", "sh", "-c", treeScript)
	require.NoError(t, owner.Start())
	pids := f.pids(t, "leader.pid", "child.pid", "grandchild.pid")
	var handle string
	require.Eventually(t, func() bool {
		st := f.status(t, api.CmdDelegations{})
		if len(st.Delegations.Entries) == 1 {
			handle = st.Delegations.Entries[0].Handle
			assert.Equal(t, "sh", st.Delegations.Entries[0].Agent, "the command's name by default")
		}
		return handle != ""
	}, 10*time.Second, 20*time.Millisecond)

	out, err := f.cmd("delegations", "kill", handle).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "stopped "+handle)
	err = owner.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 128+int(syscall.SIGTERM), exit.ExitCode(), "the owner returned the command's code")
	for _, pid := range pids {
		assert.True(t, procGone(pid), "process %d stopped", pid)
	}
	st := f.status(t, api.CmdStatus{})
	assert.Zero(t, st.Delegations.Active)
	assert.Zero(t, st.Delegations.Reaped, "a kill by handle is not an orphan reaped")
}

// TestDelegateExitCode: the owner exits with the command's code and
// unregisters; leftovers of the tree are stopped; a missing command is
// 127 with nothing registered.
func TestDelegateExitCode(t *testing.T) {
	f := startFleet(t)
	owner := f.cmd("delegate", "--", "sh", "-c",
		`setsid sh -c 'echo $$ > left.tmp; mv left.tmp left.pid; exec sleep 60' & while [ ! -e left.pid ]; do sleep 0.01; done; exit 7`)
	out, err := owner.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 7, exit.ExitCode())
	left := f.pids(t, "left.pid")[0]
	assert.True(t, procGone(left), "the command's leftover was stopped when it ended")
	assert.Zero(t, f.status(t, api.CmdStatus{}).Delegations.Active)

	out, err = f.cmd("delegate", "--", "no-such-command-here").CombinedOutput()
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 127, exit.ExitCode())

	out, err = f.cmd("delegate", "sh").CombinedOutput()
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 2, exit.ExitCode(), "no -- is a usage error")
}

// TestRunExec: `scv project run exec` records a run from a real command:
// done on exit 0 with its progress lines, failed on exit 3 (max_retries
// 0), cancelled on SIGTERM; it exits with the command's code.
func TestRunExec(t *testing.T) {
	f := startFleet(t, "--stale-after", "2s")
	require.NoError(t, f.cmd("project", "create", "acme", "--workspace", f.dir).Run())
	task := func(title string) string {
		out, err := f.cmd("project", "task", "add", "acme", title).Output()
		require.NoError(t, err)
		return cliNewID(t, string(out), "task", "added")
	}
	// report returns a task and its runs, from project_report.
	report := func(id string) (api.ProjectTask, []api.ProjectRun) {
		r := f.status(t, api.CmdProjectReport{Project: "acme"}).Project.Report
		var tk api.ProjectTask
		for _, x := range r.Tasks {
			if x.ID == id {
				tk = x
			}
		}
		var runs []api.ProjectRun
		for _, x := range r.Runs {
			if x.TaskID == id {
				runs = append(runs, x)
			}
		}
		return tk, runs
	}

	// Exit 0: succeeded, task done, progress recorded; the command sees
	// its run, and outlives the stale window on heartbeats alone.
	ok := task("build")
	c := f.cmd("project", "run", "exec", "acme", ok, "--agent", "codex", "--heartbeat-every", "200ms", "--",
		"sh", "-c", `echo "progress: compiling $SCV_TASK"; sleep 3; echo "progress: linked"; echo plain`)
	out, err := c.Output()
	require.NoError(t, err)
	assert.Equal(t, "progress: compiling "+ok+"\nprogress: linked\nplain\n", string(out), "output passed through")
	tk, runs := report(ok)
	assert.Equal(t, reducer.TaskDone, tk.Status)
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunSucceeded, runs[0].Status)
	assert.Equal(t, "codex", runs[0].Agent)
	require.NotNil(t, runs[0].Progress)
	assert.Equal(t, "linked", *runs[0].Progress)

	// Exit 3 with max_retries 0: failed, and the project with it.
	bad := task("lint")
	err = f.cmd("project", "run", "exec", "acme", bad, "--", "sh", "-c", "exit 3").Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 3, exit.ExitCode())
	tk, runs = report(bad)
	assert.Equal(t, reducer.TaskFailed, tk.Status)
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunFailed, runs[0].Status)

	// SIGTERM to scv: cancelled, no retry spent, the task ready again.
	cancel := task("deploy")
	c = f.cmd("project", "run", "exec", "acme", cancel, "--", "sh", "-c", "echo $$ > deploy.pid; sleep 60")
	require.NoError(t, c.Start())
	pid := f.pids(t, "deploy.pid")[0]
	require.NoError(t, c.Process.Signal(syscall.SIGTERM))
	err = c.Wait()
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 128+int(syscall.SIGTERM), exit.ExitCode())
	assert.True(t, procGone(pid))
	tk, runs = report(cancel)
	assert.Equal(t, reducer.TaskReady, tk.Status)
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunCancelled, runs[0].Status)
	assert.Zero(t, tk.Retries)

	// The whole history as JSON: every run finished.
	raw, err := f.cmd("--json", "project", "events", "acme").Output()
	require.NoError(t, err)
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal(raw, &st))
	finished := 0
	for _, e := range st.Project.Events {
		if e.Kind == "run_finished" {
			finished++
		}
	}
	assert.Equal(t, 3, finished)
}
