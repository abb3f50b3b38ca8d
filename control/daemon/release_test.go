package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/restart"
	"scv/control/rpc"
	"scv/reducer"
)

// TestRestartWhenIdle runs the real binaries: a daemon started from
// DIR/bin/scv (oldRelease) restarts into the release installed over that
// path, keeping its socket and its database.
func TestRestartWhenIdle(t *testing.T) {
	oldBin, newBin := scvBinary(t, oldRelease), scvBinary(t, newRelease)

	// start starts the old release from DIR/bin/scv, on DIR/l.db and
	// DIR/d.Sock.
	start := func(t *testing.T, args ...string) (*process, string) {
		dir := shortDir(t)
		bin := filepath.Join(dir, "bin", "scv")
		install(t, oldBin, bin)
		return startProcess(t, bin, filepath.Join(dir, "l.db"), filepath.Join(dir, "d.Sock"), "", args...), dir
	}

	// The upgrade: the old daemon hands over and exits 0; the new one
	// answers on the same socket with the new version and the same
	// state, and owns the socket (removes it when it stops).
	t.Run("upgrade", func(t *testing.T) {
		d, dir := start(t)
		st := d.must(t, api.CmdStatus{})
		assert.Equal(t, oldRelease, st.Version)
		oldPID := st.PID
		d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: dir})
		task := d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "survive", DependsOn: []string{}}).Project.TaskID

		install(t, newBin, d.bin)
		asked := time.Now()
		st = d.must(t, api.CmdRestartWhenIdle{Version: ptr(newRelease), Commit: ptr("abc123")})
		assert.Equal(t, oldRelease, st.Version, "the old daemon answers the request")
		require.NotNil(t, st.Restart)
		assert.Equal(t, newRelease, st.Restart.ToVersion)
		assert.Nil(t, st.Restart.Requester)
		assert.InDelta(t, asked.Add(restart.DefaultRestartMaxWait).Unix(), int64(st.Restart.DeadlineUnixSeconds), 2, "default max wait")

		d.exitedZero(t) // the old daemon
		st = d.must(t, api.CmdStatus{})
		assert.Equal(t, newRelease, st.Version)
		assert.NotEqual(t, oldPID, st.PID)
		assert.Nil(t, st.Restart, "nothing pending after the restart")
		tasks := d.must(t, api.CmdProjectTasks{Project: "acme"}).Project.Tasks
		require.Len(t, tasks, 1)
		assert.Equal(t, task, tasks[0].ID)
		assert.Equal(t, "survive", tasks[0].Title)
		logs := d.Log()
		assert.Contains(t, logs, "msg=\"handed over\"")
		assert.Contains(t, logs, "inherited_socket=true")

		// The new daemon holds the locks, and its stop removes the socket.
		out, err := exec.Command(oldBin, "daemon", "--db", filepath.Join(dir, "other.db"), "--socket", d.Sock).CombinedOutput()
		assert.Error(t, err)
		assert.Contains(t, string(out), "another daemon is using "+d.Sock)
		stopPid(t, int(st.PID))
		_, err = os.Stat(d.Sock)
		assert.True(t, os.IsNotExist(err), "the new daemon removed the socket when it stopped")
	})

	// A release that does not report the requested version, or that
	// cannot run, is refused with nothing scheduled.
	t.Run("refused", func(t *testing.T) {
		d, _ := start(t)
		install(t, newBin, d.bin)
		_, err := d.call(api.CmdRestartWhenIdle{Version: ptr("9.9.9")})
		var e *api.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, api.CodeConflict, e.Code)
		assert.Equal(t, api.ReasonConflict, e.Data.Reason)
		for _, s := range []string{"9.9.9", newRelease, d.bin} {
			assert.Contains(t, e.Message, s)
		}
		st := d.must(t, api.CmdStatus{})
		assert.Nil(t, st.Restart)
		assert.Equal(t, oldRelease, st.Version)

		require.NoError(t, os.Remove(d.bin))
		_, err = d.call(api.CmdRestartWhenIdle{})
		require.ErrorAs(t, err, &e)
		assert.Equal(t, api.ReasonConflict, e.Data.Reason)
		assert.Contains(t, e.Message, d.bin)
		time.Sleep(200 * time.Millisecond)
		st = d.must(t, api.CmdStatus{})
		assert.Nil(t, st.Restart)
		assert.Equal(t, oldRelease, st.Version)
		assert.Equal(t, uint32(d.Pid()), st.PID)
	})

	// An agent in a delegation installs a release and asks for the
	// restart from inside it, its SCV_PARENT chain as the parent (what
	// `scv restart-when-idle` sends): the daemon names the delegation as
	// requester, waits while it runs, and restarts once it has ended.
	t.Run("waits for the requesting delegation", func(t *testing.T) {
		d, dir := start(t)
		install(t, newBin, d.bin)
		// The delegation: a command of this test's, in a process group of
		// its own, registered as a supervisor (`scv delegate`) does.
		gate := filepath.Join(dir, "gate")
		agent := exec.Command("sh", "-c", `while [ ! -e "$0" ]; do sleep 0.02; done`, gate)
		agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, agent.Start())
		t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
		const handle = "UPGRADER"
		d.must(t, api.CmdDelegationRegister{Handle: handle, Agent: "upgrader", Parent: "OUTER," + handle,
			PID: uint32(agent.Process.Pid), OwnerPID: uint32(os.Getpid()), Cwd: dir})
		d.must(t, api.CmdRestartWhenIdle{Version: ptr(newRelease), Parent: ptr("OUTER," + handle)})

		time.Sleep(300 * time.Millisecond) // the restart would be due by now, were it not waiting
		st := d.must(t, api.CmdStatus{})
		assert.Equal(t, oldRelease, st.Version, "still waiting")
		require.NotNil(t, st.Restart)
		require.NotNil(t, st.Restart.Requester)
		assert.Equal(t, handle, *st.Restart.Requester)
		require.NotNil(t, st.Restart.WaitingFor)
		assert.Equal(t, "delegation "+handle, *st.Restart.WaitingFor)

		require.NoError(t, os.WriteFile(gate, nil, 0o600))
		require.NoError(t, agent.Wait())
		d.must(t, api.CmdDelegationDone{Handle: handle})
		d.exitedZero(t) // the old daemon handed over
		st = d.must(t, api.CmdStatus{})
		assert.Equal(t, newRelease, st.Version)
		assert.Zero(t, st.Delegations.Active)
	})

	// Writes keep coming through the restart: a client that reconnects
	// once when its connection closes without a reply, and resends,
	// gets every request answered, and the ledger holds each
	// acknowledged task exactly once.
	t.Run("requests through the restart", func(t *testing.T) {
		d, dir := start(t)
		d.must(t, api.CmdProjectCreate{Name: "load", Workspace: dir})
		stop := runLoad(d.Sock, "load")
		time.Sleep(300 * time.Millisecond)
		install(t, newBin, d.bin)
		d.must(t, api.CmdRestartWhenIdle{Version: ptr(newRelease)})
		d.exitedZero(t)
		time.Sleep(300 * time.Millisecond)
		o := stop()
		require.NoError(t, o.err)
		t.Logf("%d tasks acknowledged (%v), %d reconnects", len(o.acked), o.versions, o.reconnects)
		assert.Positive(t, o.versions[oldRelease], "answered by the old daemon")
		assert.Positive(t, o.versions[newRelease], "answered by the new daemon")
		assert.GreaterOrEqual(t, o.reconnects, 1, "the restart closed the client's connection")

		st := d.must(t, api.CmdProjectTasks{Project: "load"})
		assert.Equal(t, newRelease, st.Version)
		assert.ElementsMatch(t, o.acked, taskIDs(st), "nothing lost, nothing doubled")
	})

	// A release that does not come up: the old daemon takes its locks,
	// its ledger and its sweeper back and serves on, and the pending
	// restart is cleared.
	t.Run("new release fails", func(t *testing.T) {
		d, dir := start(t, "--stale-after", "1s")
		pid := uint32(d.Pid())
		d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: dir})
		task := d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "before", DependsOn: []string{}, MaxRetries: 1}).Project.TaskID

		writeScript(t, d.bin, `if [ "$1" = version ]; then echo 2.0.0-broken; exit 0; fi
echo "broken release: $*" >&2
exit 1
`)
		d.must(t, api.CmdProjectCreate{Name: "load", Workspace: dir})
		stop := runLoad(d.Sock, "load")
		time.Sleep(200 * time.Millisecond)
		st := d.must(t, api.CmdRestartWhenIdle{Version: ptr("2.0.0-broken")})
		require.NotNil(t, st.Restart)
		assert.Equal(t, "2.0.0-broken", st.Restart.ToVersion)
		require.Eventually(t, func() bool { return strings.Contains(d.Log(), "restart failed") },
			20*time.Second, 20*time.Millisecond)
		time.Sleep(200 * time.Millisecond)
		o := stop()
		require.NoError(t, o.err, "no request refused or lost while the restart failed")
		t.Logf("%d tasks acknowledged (%v), %d reconnects", len(o.acked), o.versions, o.reconnects)
		assert.Equal(t, len(o.acked), o.versions[oldRelease], "all answered by the old daemon")
		assert.GreaterOrEqual(t, o.reconnects, 1, "the pause closed the client's connection")
		assert.ElementsMatch(t, o.acked, taskIDs(d.must(t, api.CmdProjectTasks{Project: "load"})))
		assert.Contains(t, d.Log(), "broken release: daemon --db "+d.db+" --socket "+d.Sock+" --stale-after 1s",
			"the release ran with the daemon's arguments")

		st = d.must(t, api.CmdStatus{})
		assert.Nil(t, st.Restart, "the failed restart is cleared")
		assert.Equal(t, oldRelease, st.Version)
		assert.Equal(t, pid, st.PID)
		d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "after", DependsOn: []string{}})
		tasks := d.must(t, api.CmdProjectTasks{Project: "acme"}).Project.Tasks
		require.Len(t, tasks, 2)
		assert.Equal(t, task, tasks[0].ID)

		// The locks are taken again...
		out, err := exec.Command(oldBin, "daemon", "--db", filepath.Join(dir, "other.db"), "--socket", d.Sock).CombinedOutput()
		assert.Error(t, err)
		assert.Contains(t, string(out), "another daemon is using "+d.Sock)
		out, err = exec.Command(oldBin, "daemon", "--db", d.db, "--socket", filepath.Join(dir, "e.sock")).CombinedOutput()
		assert.Error(t, err)
		assert.Contains(t, string(out), "another daemon is using "+d.db)
		// ...and the sweeper runs again: a silent run goes stale.
		d.must(t, api.CmdProjectRunStart{Project: "acme", Task: task, Agent: "codex"})
		assert.Eventually(t, func() bool {
			for _, tk := range d.must(t, api.CmdProjectTasks{Project: "acme"}).Project.Tasks {
				if tk.ID == task {
					return tk.Status == reducer.TaskStale
				}
			}
			return false
		}, 10*time.Second, 50*time.Millisecond, "the sweeper marks the silent run stale")

		// SIGTERM still stops it cleanly.
		d.stop(t)
		assert.Contains(t, d.Log(), "daemon stopped")
	})
}

// loadOutcome is what runLoad's client saw.
type loadOutcome struct {
	acked      []string // the IDs of the tasks acknowledged
	versions   map[string]int
	reconnects int
	err        error
}

// runLoad adds tasks to project one after the other, with a status read
// every third, through a resendingClient, until the returned stop.
func runLoad(sock, project string) (stop func() loadOutcome) {
	quit := make(chan struct{})
	done := make(chan loadOutcome, 1)
	go func() {
		rc := &resendingClient{sock: sock}
		defer rc.close()
		o := loadOutcome{versions: map[string]int{}}
		defer func() { o.reconnects = rc.reconnects; done <- o }()
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			title := fmt.Sprintf("task-%04d", i)
			st, err := rc.call(api.CmdProjectTaskAdd{Project: project, Title: title, DependsOn: []string{}})
			if err != nil {
				o.err = fmt.Errorf("add %s: %w", title, err)
				return
			}
			o.acked = append(o.acked, st.Project.TaskID)
			o.versions[st.Version]++
			if i%3 == 0 {
				if _, err := rc.call(api.CmdProjectStatus{Project: project}); err != nil {
					o.err = fmt.Errorf("status after %s: %w", title, err)
					return
				}
			}
		}
	}()
	return func() loadOutcome {
		close(quit)
		return <-done
	}
}

// taskIDs lists a project's task IDs.
func taskIDs(st *api.DaemonStatus) []string {
	var ids []string
	for _, tk := range st.Project.Tasks {
		ids = append(ids, tk.ID)
	}
	return ids
}

// resendingClient follows the client contract: a request on a connection
// the daemon closed without replying was not executed, so it reconnects
// and sends it again, once.
type resendingClient struct {
	sock       string
	c          *rpc.Client
	reconnects int
}

func (rc *resendingClient) call(cmd api.Command) (*api.DaemonStatus, error) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if rc.c == nil {
			c, err := rpc.Dial(ctx, rc.sock)
			if err != nil {
				cancel()
				return nil, err // refused: the test fails
			}
			rc.c = c
		}
		st, err := rc.c.Call(ctx, cmd)
		cancel()
		if err == nil || !rpc.LostConnection(err) {
			return st, err
		}
		rc.close()
		if attempt == 1 {
			return nil, fmt.Errorf("closed without a reply again after a reconnect: %w", err)
		}
		rc.reconnects++
	}
}

func (rc *resendingClient) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}
