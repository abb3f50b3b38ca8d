package supervise_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/proc"
	"scv/control/supervise"
)

// TestDelegationRegisteredWhileItRuns: the command is registered while it
// runs, with its agent, session, leader, owner, folder, chain and chat,
// and every process of its tree counted; the tag and the chain reach a
// grandchild that left the group. When the leader exits, the delegation
// is unregistered and what it left running (a child, a setsid grandchild)
// is stopped.
func TestDelegationRegisteredWhileItRuns(t *testing.T) {
	td := startDaemon(t)
	open := gate(t, td.work)
	d := td.delegation(`echo $$ > leader.pid
sleep 60 & echo $! > child.pid
setsid sh -c 'echo $$ > grandchild.pid; exec sleep 60' &
read _ < gate`)
	d.Agent, d.Session = "codex", "s-1"
	d.Env = append(os.Environ(), proc.ParentEnv+"=outer", supervise.ChatEnv+"=local:owner")
	r := goRun(context.Background(), d.Run)
	leader, child, grandchild := readPID(t, td.work, "leader.pid"), readPID(t, td.work, "child.pid"), readPID(t, td.work, "grandchild.pid")

	var e api.DelegationInfo
	require.Eventually(t, func() bool {
		entries := td.delegations()
		if len(entries) == 1 {
			e = entries[0]
		}
		return e.Processes == 3
	}, ioTimeout, 10*time.Millisecond, "listed with its 3 processes")
	assert.Equal(t, "codex", e.Agent)
	assert.Equal(t, "s-1", e.Session)
	assert.Equal(t, uint32(2), e.Depth, "inside the delegation outer")
	assert.Equal(t, uint32(leader), e.PID)
	assert.Equal(t, uint32(os.Getpid()), e.OwnerPID)
	assert.Equal(t, td.work, e.Cwd)
	stored, err := td.current().Store().Delegations(context.Background())
	require.NoError(t, err)
	require.Len(t, stored, 1)
	assert.Equal(t, "outer,"+e.Handle, stored[0].Parent)
	assert.Equal(t, "local:owner", stored[0].Chat)
	gc, err := proc.Read(grandchild)
	require.NoError(t, err)
	assert.NotEqual(t, leader, gc.PGID, "the grandchild left the group")
	var env []byte
	assert.Eventually(t, func() bool { // empty for a moment while it execs
		env, _ = os.ReadFile("/proc/" + strconv.Itoa(grandchild) + "/environ")
		return bytes.Contains(env, []byte("\x00"+proc.ParentEnv+"=outer,"+e.Handle+"\x00")) &&
			bytes.Contains(env, []byte("\x00"+proc.TagEnv+"="+e.Handle+"\x00"))
	}, ioTimeout, time.Millisecond, "the tag and the chain reach the grandchild: %q", env)

	open()
	ws, err := r.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 0, supervise.ExitCode(ws, err))
	assert.Empty(t, td.delegations(), "unregistered")
	st := td.call(api.CmdStatus{})
	assert.Zero(t, st.Delegations.Active)
	assert.Zero(t, st.Delegations.Reaped, "unregistered, not reaped as an orphan")
	for _, pid := range []int{leader, child, grandchild} {
		assert.True(t, gone(pid), "process %d stopped and reaped", pid)
	}
	noChildren(t)
}

// TestDelegationExitCode: Run returns the command's wait status, and
// ExitCode makes it the shell's code; each command is unregistered.
func TestDelegationExitCode(t *testing.T) {
	td := startDaemon(t)
	for script, code := range map[string]int{"exit 0": 0, "exit 7": 7, "kill -KILL $$": 128 + int(syscall.SIGKILL)} {
		ws, err := td.delegation(script).Run(context.Background())
		require.NoError(t, err, script)
		assert.Equal(t, code, supervise.ExitCode(ws, err), script)
	}
	assert.Equal(t, 3, td.sent("delegation_register"))
	assert.Equal(t, 3, td.sent("delegation_done"))
	assert.Empty(t, td.delegations())
	noChildren(t)
}

// TestDelegationCommandNotFound: a command that is not found is an
// *exec.Error, ExitNotFound, and nothing is registered.
func TestDelegationCommandNotFound(t *testing.T) {
	td := startDaemon(t)
	d := td.delegation("")
	d.Command = []string{"no-such-command-here", "x"}
	ws, err := d.Run(context.Background())
	var notFound *exec.Error
	require.ErrorAs(t, err, &notFound)
	assert.Equal(t, supervise.ExitNotFound, supervise.ExitCode(ws, err))
	assert.Zero(t, td.sent("delegation_register"))

	d.Command = nil
	ws, err = d.Run(context.Background())
	require.Error(t, err)
	assert.Equal(t, supervise.ExitFailed, supervise.ExitCode(ws, err), "no command")
}

// TestDelegationNotRegistered: a command the daemon could not register is
// not run: Run stops and reaps it and fails with the daemon's error.
func TestDelegationNotRegistered(t *testing.T) {
	td := startDaemon(t)
	td.stop()
	r := goRun(context.Background(), td.delegation("exec sleep 60").Run)
	ws, err := r.wait(t)
	require.ErrorIs(t, err, api.ErrUnavailable)
	assert.Contains(t, err.Error(), "register the delegation")
	assert.Equal(t, supervise.ExitFailed, supervise.ExitCode(ws, err))
	noChildren(t)
}

// TestDelegationSignalsForwarded: a signal given to Run reaches every
// process of the command's group, the leader and its child alike.
func TestDelegationSignalsForwarded(t *testing.T) {
	td := startDaemon(t)
	d := td.delegation(`sh -c 'trap "echo child > child.got; exit 0" HUP; echo > child.ready; while :; do sleep 0.01; done' &
trap 'wait; echo leader > leader.got; exit 9' HUP
while [ ! -e child.ready ]; do sleep 0.01; done
echo > ready
while :; do sleep 0.01; done`)
	sigs := make(chan os.Signal, 1)
	d.Signals = sigs
	r := goRun(context.Background(), d.Run)
	readFile(t, td.work, "ready")
	sigs <- syscall.SIGHUP
	ws, err := r.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 9, supervise.ExitCode(ws, err), "the leader's own code")
	assert.Equal(t, "child", readFile(t, td.work, "child.got"))
	assert.Equal(t, "leader", readFile(t, td.work, "leader.got"))
	noChildren(t)
}

// TestDelegationContextEnds: when Run's context ends, the command's group
// gets SIGTERM, and the delegation is unregistered all the same.
func TestDelegationContextEnds(t *testing.T) {
	td := startDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := goRun(ctx, td.delegation("echo $$ > leader.pid; exec sleep 60").Run)
	readPID(t, td.work, "leader.pid")
	cancel()
	ws, err := r.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 128+int(syscall.SIGTERM), supervise.ExitCode(ws, err))
	assert.Equal(t, 1, td.sent("delegation_done"))
	assert.Empty(t, td.delegations())
	noChildren(t)
}

// TestDelegationOrphansReaped: descendants whose parent died are the
// owner's children (it is their subreaper), and Run reaps them: one that
// ended by itself, and one the daemon stopped.
func TestDelegationOrphansReaped(t *testing.T) {
	td := startDaemon(t)
	open := gate(t, td.work)
	// An intermediate shell that exits at once orphans its two children.
	d := td.delegation(`sh -c 'sh -c "echo \$\$ > early.tmp; mv early.tmp early.pid" & sh -c "echo \$\$ > late.tmp; mv late.tmp late.pid; exec sleep 60" &'
read _ < gate`)
	r := goRun(context.Background(), d.Run)
	early, late := readPID(t, td.work, "early.pid"), readPID(t, td.work, "late.pid")
	for _, pid := range []int{early, late} {
		require.Eventually(t, func() bool {
			info, err := proc.Read(pid)
			return err == nil && info.PPID == os.Getpid()
		}, ioTimeout, 5*time.Millisecond, "orphan %d re-parented to the owner", pid)
	}
	info, err := proc.Read(early)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err = proc.Read(early)
		return err == nil && info.State == 'Z'
	}, ioTimeout, 5*time.Millisecond, "the early orphan ended, not reaped yet")

	open()
	ws, err := r.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 0, supervise.ExitCode(ws, err))
	assert.True(t, gone(early), "the orphan that ended was reaped")
	assert.True(t, gone(late), "the orphan left running was stopped and reaped")
	noChildren(t)
}

// TestDelegationKilledByHandle: delegation_kill stops the whole tree, and
// Run returns the command's status (killed by SIGTERM).
func TestDelegationKilledByHandle(t *testing.T) {
	td := startDaemon(t)
	r := goRun(context.Background(), td.delegation(`echo $$ > leader.pid
sleep 60 & echo $! > child.pid
wait`).Run)
	leader, child := readPID(t, td.work, "leader.pid"), readPID(t, td.work, "child.pid")
	var handle string
	require.Eventually(t, func() bool {
		if entries := td.delegations(); len(entries) == 1 {
			handle = entries[0].Handle
		}
		return handle != ""
	}, ioTimeout, 10*time.Millisecond)
	td.call(api.CmdDelegationKill{Handle: &handle})
	ws, err := r.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 128+int(syscall.SIGTERM), supervise.ExitCode(ws, err))
	assert.True(t, gone(leader))
	assert.True(t, gone(child))
	st := td.call(api.CmdStatus{})
	assert.Zero(t, st.Delegations.Active)
	assert.Zero(t, st.Delegations.Reaped, "a kill by handle is not an orphan reaped")
	noChildren(t)
}

// leftoverScript leaves a process of the tree (in a session of its own)
// running when the leader exits, at the gate.
const leftoverScript = `setsid sh -c 'echo $$ > left.tmp; mv left.tmp left.pid; exec sleep 60' &
while [ ! -e left.pid ]; do sleep 0.01; done
read _ < gate`

// TestDelegationDaemonRestarts: a command that ends while the daemon is
// stopped is unregistered once the daemon is back (it was asked again
// meanwhile), and the daemon stops what the command left.
func TestDelegationDaemonRestarts(t *testing.T) {
	td := startDaemon(t)
	open := gate(t, td.work)
	d := td.delegation(leftoverScript)
	var notes bytes.Buffer
	d.Notes = &notes
	r := goRun(context.Background(), d.Run)
	left := readPID(t, td.work, "left.pid")
	require.Eventually(t, func() bool { return len(td.delegations()) == 1 }, ioTimeout, 10*time.Millisecond)

	td.stop()
	open()
	require.Eventually(t, func() bool { return td.sent("delegation_done") >= 2 }, ioTimeout, 10*time.Millisecond,
		"delegation_done asked again")
	td.start()
	ws, err := r.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 0, supervise.ExitCode(ws, err))
	assert.Empty(t, notes.String(), "the daemon was told")
	assert.Empty(t, td.delegations(), "unregistered with the new daemon")
	assert.True(t, gone(left), "the leftover was stopped")
	noChildren(t)
}

// TestDelegationDaemonGone: a command that ends while the daemon is gone
// for good has its leftovers stopped by the owner, which says so.
func TestDelegationDaemonGone(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the owner's 10 s of retries")
	}
	td := startDaemon(t)
	open := gate(t, td.work)
	d := td.delegation(leftoverScript)
	var notes bytes.Buffer
	d.Notes = &notes
	r := goRun(context.Background(), d.Run)
	left := readPID(t, td.work, "left.pid")
	require.Eventually(t, func() bool { return len(td.delegations()) == 1 }, ioTimeout, 10*time.Millisecond)

	td.stop()
	open()
	ws, err := r.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 0, supervise.ExitCode(ws, err))
	assert.Contains(t, notes.String(), "stopping what is left of it here")
	assert.True(t, gone(left), "the leftover was stopped by the owner")
	noChildren(t)
}
