package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/proc"
	"scv/reducer"
)

// procGone reports whether pid has ended: no such process, or a zombie
// (PID 1 in some sandboxes reaps no one).
func procGone(pid int) bool {
	info, err := proc.Read(pid)
	return err != nil || info.State == 'Z'
}

// stopPid ends a daemon that is not this test's child, as the process a
// restart started is not.
func stopPid(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 || procGone(pid) {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for !procGone(pid) {
		if time.Now().After(deadline) {
			t.Errorf("pid %d ignored SIGTERM; killing it", pid)
			syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(10 * time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// install copies src to dst the way an installer does: a new file
// renamed over the old one, which a running daemon keeps executing.
func install(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst+".new", b, 0o755))
	require.NoError(t, os.Rename(dst+".new", dst))
}

// writeScript installs a shell script at path.
func writeScript(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path+".new", []byte("#!/bin/sh\n"+body), 0o755))
	require.NoError(t, os.Rename(path+".new", path))
}

func ptr[T any](v T) *T { return &v }

// buildOldNew builds two releases of scv for a restart: 1.0.0-old and
// 2.0.0-new.
func buildOldNew(t *testing.T) (oldBin, newBin string) {
	t.Helper()
	builds := shortDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(builds, "old"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(builds, "new"), 0o755))
	return buildScv(t, filepath.Join(builds, "old"), "1.0.0-old"), buildScv(t, filepath.Join(builds, "new"), "2.0.0-new")
}

// TestRestartWhenIdle runs the real binaries: a daemon started from
// dir/bin/scv (1.0.0-old) restarts into the release installed over that
// path, keeping its socket and its database.
func TestRestartWhenIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	oldBin, newBin := buildOldNew(t)

	start := func(t *testing.T, args ...string) *testDaemon {
		dir := shortDir(t)
		bin := filepath.Join(dir, "bin", "scv")
		install(t, oldBin, bin)
		return startTestDaemon(t, bin, filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock"), "", args...)
	}

	// The upgrade: the old daemon hands over and exits 0; the new one
	// answers on the same socket with the new version and the same
	// state, and owns the socket (removes it when it stops).
	t.Run("upgrade", func(t *testing.T) {
		d := start(t)
		st := d.must(t, control.CmdStatus{})
		assert.Equal(t, "1.0.0-old", st.Version)
		oldPID := st.PID
		d.must(t, control.CmdProjectCreate{Name: "acme", Workspace: d.dir})
		task := d.must(t, control.CmdProjectTaskAdd{Project: "acme", Title: "survive", DependsOn: []string{}}).Project.TaskID

		install(t, newBin, d.bin)
		asked := time.Now()
		st = d.must(t, control.CmdRestartWhenIdle{Version: ptr("2.0.0-new"), Commit: ptr("abc123")})
		assert.Equal(t, "1.0.0-old", st.Version, "the old daemon answers the request")
		require.NotNil(t, st.Restart)
		assert.Equal(t, "2.0.0-new", st.Restart.ToVersion)
		assert.Nil(t, st.Restart.Requester)
		assert.InDelta(t, asked.Add(DefaultRestartMaxWait).Unix(), int64(st.Restart.DeadlineUnixSeconds), 2, "default max wait")

		require.NoError(t, d.waitExit(t), "the old daemon exits 0")
		st = d.must(t, control.CmdStatus{})
		assert.Equal(t, "2.0.0-new", st.Version)
		assert.NotEqual(t, oldPID, st.PID)
		assert.Nil(t, st.Restart, "nothing pending after the restart")
		tasks := d.must(t, control.CmdProjectTasks{Project: "acme"}).Project.Tasks
		require.Len(t, tasks, 1)
		assert.Equal(t, task, tasks[0].ID)
		assert.Equal(t, "survive", tasks[0].Title)
		logs := d.logs()
		assert.Contains(t, logs, "msg=\"handed over\"")
		assert.Contains(t, logs, "inherited_socket=true")

		// The new daemon holds the locks, and its stop removes the socket.
		out, err := exec.Command(oldBin, "daemon", "--db", filepath.Join(d.dir, "other.db"), "--socket", d.sock).CombinedOutput()
		assert.Error(t, err)
		assert.Contains(t, string(out), "another daemon is using "+d.sock)
		stopPid(t, int(st.PID))
		_, err = os.Stat(d.sock)
		assert.True(t, os.IsNotExist(err), "the new daemon removed the socket when it stopped")
	})

	// A release that does not report the requested version, or that
	// cannot run, is refused with nothing scheduled.
	t.Run("refused", func(t *testing.T) {
		d := start(t)
		install(t, newBin, d.bin)
		_, err := d.call(control.CmdRestartWhenIdle{Version: ptr("9.9.9")})
		var e *control.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, control.CodeConflict, e.Code)
		assert.Equal(t, control.ReasonConflict, e.Data.Reason)
		for _, s := range []string{"9.9.9", "2.0.0-new", d.bin} {
			assert.Contains(t, e.Message, s)
		}
		st := d.must(t, control.CmdStatus{})
		assert.Nil(t, st.Restart)
		assert.Equal(t, "1.0.0-old", st.Version)

		require.NoError(t, os.Remove(d.bin))
		_, err = d.call(control.CmdRestartWhenIdle{})
		require.ErrorAs(t, err, &e)
		assert.Equal(t, control.ReasonConflict, e.Data.Reason)
		assert.Contains(t, e.Message, d.bin)
		time.Sleep(200 * time.Millisecond)
		st = d.must(t, control.CmdStatus{})
		assert.Nil(t, st.Restart)
		assert.Equal(t, "1.0.0-old", st.Version)
		assert.Equal(t, uint32(d.cmd.Process.Pid), st.PID)
	})

	// An agent in a delegation installs a release and asks for the
	// restart from inside it (`scv restart-when-idle`, which sends its
	// SCV_PARENT): the daemon names the delegation as requester, waits
	// while it runs, and restarts once it has ended.
	t.Run("waits for the requesting delegation", func(t *testing.T) {
		d := start(t)
		install(t, newBin, d.bin)
		gate := filepath.Join(d.dir, "gate")
		agent := exec.Command(d.bin, "--socket", d.sock, "delegate", "--agent", "upgrader", "--", "sh", "-c",
			`"$0" --socket "$1" restart-when-idle --version 2.0.0-new && touch asked && while [ ! -e "$2" ]; do sleep 0.02; done`,
			d.bin, d.sock, gate)
		agent.Dir = d.dir
		var out strings.Builder
		agent.Stdout, agent.Stderr = &out, &out
		require.NoError(t, agent.Start())
		var handle string
		require.Eventually(t, func() bool {
			st, err := d.call(control.CmdDelegations{})
			if err == nil && len(st.Delegations.Entries) == 1 {
				handle = st.Delegations.Entries[0].Handle
			}
			_, serr := os.Stat(filepath.Join(d.dir, "asked"))
			return handle != "" && serr == nil
		}, 20*time.Second, 20*time.Millisecond, "the agent asked: %s", &out)

		time.Sleep(300 * time.Millisecond) // the restart would be due by now, were it not waiting
		st := d.must(t, control.CmdStatus{})
		assert.Equal(t, "1.0.0-old", st.Version, "still waiting")
		require.NotNil(t, st.Restart)
		require.NotNil(t, st.Restart.Requester)
		assert.Equal(t, handle, *st.Restart.Requester)
		require.NotNil(t, st.Restart.WaitingFor)
		assert.Equal(t, "delegation "+handle, *st.Restart.WaitingFor)

		require.NoError(t, os.WriteFile(gate, nil, 0o600))
		require.NoError(t, agent.Wait(), "%s", &out)
		require.NoError(t, d.waitExit(t), "the old daemon handed over")
		st = d.must(t, control.CmdStatus{})
		assert.Equal(t, "2.0.0-new", st.Version)
		assert.Zero(t, st.Delegations.Active)
	})

	// Writes keep coming through the restart: a client that reconnects
	// once when its connection closes without a reply, and resends,
	// gets every request answered, and the ledger holds each
	// acknowledged task exactly once.
	t.Run("requests through the restart", func(t *testing.T) {
		d := start(t)
		d.must(t, control.CmdProjectCreate{Name: "load", Workspace: d.dir})
		stop := runLoad(d.sock, "load")
		time.Sleep(300 * time.Millisecond)
		install(t, newBin, d.bin)
		d.must(t, control.CmdRestartWhenIdle{Version: ptr("2.0.0-new")})
		require.NoError(t, d.waitExit(t))
		time.Sleep(300 * time.Millisecond)
		o := stop()
		require.NoError(t, o.err)
		t.Logf("%d tasks acknowledged (%v), %d reconnects", len(o.acked), o.versions, o.reconnects)
		assert.Positive(t, o.versions["1.0.0-old"], "answered by the old daemon")
		assert.Positive(t, o.versions["2.0.0-new"], "answered by the new daemon")
		assert.GreaterOrEqual(t, o.reconnects, 1, "the restart closed the client's connection")

		st := d.must(t, control.CmdProjectTasks{Project: "load"})
		assert.Equal(t, "2.0.0-new", st.Version)
		assert.ElementsMatch(t, o.acked, taskIDs(st), "nothing lost, nothing doubled")
	})

	// A release that does not come up: the old daemon takes its locks,
	// its ledger and its sweeper back and serves on, and the pending
	// restart is cleared.
	t.Run("new release fails", func(t *testing.T) {
		d := start(t, "--stale-after", "1s")
		pid := uint32(d.cmd.Process.Pid)
		d.must(t, control.CmdProjectCreate{Name: "acme", Workspace: d.dir})
		task := d.must(t, control.CmdProjectTaskAdd{Project: "acme", Title: "before", DependsOn: []string{}, MaxRetries: 1}).Project.TaskID

		writeScript(t, d.bin, `if [ "$1" = version ]; then echo 2.0.0-broken; exit 0; fi
echo "broken release: $*" >&2
exit 1
`)
		d.must(t, control.CmdProjectCreate{Name: "load", Workspace: d.dir})
		stop := runLoad(d.sock, "load")
		time.Sleep(200 * time.Millisecond)
		st := d.must(t, control.CmdRestartWhenIdle{Version: ptr("2.0.0-broken")})
		require.NotNil(t, st.Restart)
		assert.Equal(t, "2.0.0-broken", st.Restart.ToVersion)
		require.Eventually(t, func() bool { return strings.Contains(d.logs(), "restart failed") },
			20*time.Second, 20*time.Millisecond)
		time.Sleep(200 * time.Millisecond)
		o := stop()
		require.NoError(t, o.err, "no request refused or lost while the restart failed")
		t.Logf("%d tasks acknowledged (%v), %d reconnects", len(o.acked), o.versions, o.reconnects)
		assert.Equal(t, len(o.acked), o.versions["1.0.0-old"], "all answered by the old daemon")
		assert.GreaterOrEqual(t, o.reconnects, 1, "the pause closed the client's connection")
		assert.ElementsMatch(t, o.acked, taskIDs(d.must(t, control.CmdProjectTasks{Project: "load"})))
		assert.Contains(t, d.logs(), "broken release: daemon --db "+d.db+" --socket "+d.sock+" --stale-after 1s",
			"the release ran with the daemon's arguments")

		st = d.must(t, control.CmdStatus{})
		assert.Nil(t, st.Restart, "the failed restart is cleared")
		assert.Equal(t, "1.0.0-old", st.Version)
		assert.Equal(t, pid, st.PID)
		d.must(t, control.CmdProjectTaskAdd{Project: "acme", Title: "after", DependsOn: []string{}})
		tasks := d.must(t, control.CmdProjectTasks{Project: "acme"}).Project.Tasks
		require.Len(t, tasks, 2)
		assert.Equal(t, task, tasks[0].ID)

		// The locks are taken again...
		out, err := exec.Command(oldBin, "daemon", "--db", filepath.Join(d.dir, "other.db"), "--socket", d.sock).CombinedOutput()
		assert.Error(t, err)
		assert.Contains(t, string(out), "another daemon is using "+d.sock)
		out, err = exec.Command(oldBin, "daemon", "--db", d.db, "--socket", filepath.Join(d.dir, "e.sock")).CombinedOutput()
		assert.Error(t, err)
		assert.Contains(t, string(out), "another daemon is using "+d.db)
		// ...and the sweeper runs again: a silent run goes stale.
		d.must(t, control.CmdProjectRunStart{Project: "acme", Task: task, Agent: "codex"})
		assert.Eventually(t, func() bool {
			for _, tk := range d.must(t, control.CmdProjectTasks{Project: "acme"}).Project.Tasks {
				if tk.ID == task {
					return tk.Status == reducer.TaskStale
				}
			}
			return false
		}, 10*time.Second, 50*time.Millisecond, "the sweeper marks the silent run stale")

		// SIGTERM still stops it cleanly.
		require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, d.waitExit(t))
		assert.Contains(t, d.logs(), "daemon stopped")
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
			st, err := rc.call(control.CmdProjectTaskAdd{Project: project, Title: title, DependsOn: []string{}})
			if err != nil {
				o.err = fmt.Errorf("add %s: %w", title, err)
				return
			}
			o.acked = append(o.acked, st.Project.TaskID)
			o.versions[st.Version]++
			if i%3 == 0 {
				if _, err := rc.call(control.CmdProjectStatus{Project: project}); err != nil {
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
func taskIDs(st *control.DaemonStatus) []string {
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
	c          *control.Client
	reconnects int
}

func (rc *resendingClient) call(cmd control.Command) (*control.DaemonStatus, error) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if rc.c == nil {
			c, err := control.Dial(ctx, rc.sock)
			if err != nil {
				cancel()
				return nil, err // refused: the test fails
			}
			rc.c = c
		}
		st, err := rc.c.Call(ctx, cmd)
		cancel()
		if err == nil || !closedWithoutReply(err) {
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

// closedWithoutReply: the daemon closed the connection (not a timeout,
// not an error reply).
func closedWithoutReply(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// TestWaitIdle: the wait loop restarts as soon as nothing is waited for,
// or at the deadline of its clock even if something still is, shows
// what it waits for at each poll, and gives up when cancelled.
func TestWaitIdle(t *testing.T) {
	var mu sync.Mutex
	now, busy := time.Unix(1000, 0), "delegation D"
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(at int64, waiting string) { mu.Lock(); defer mu.Unlock(); now, busy = time.Unix(at, 0), waiting }
	var shown []string
	waitingFor := func() *string {
		mu.Lock()
		defer mu.Unlock()
		shown = append(shown, busy)
		if busy == "" {
			return nil
		}
		w := busy
		return &w
	}
	show := func(*string) {}
	deadline := time.Unix(1010, 0)
	run := func(cancel chan struct{}) chan bool {
		res := make(chan bool, 1)
		go func() { res <- waitIdle(cancel, deadline, clock, time.Millisecond, waitingFor, show) }()
		return res
	}
	pending := func(res chan bool) bool {
		select {
		case <-res:
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}

	// Idle: at once.
	set(1000, "")
	assert.True(t, <-run(make(chan struct{})))

	// Busy until the delegation ends.
	set(1000, "delegation D")
	res := run(make(chan struct{}))
	assert.True(t, pending(res), "waits while the delegation is active")
	set(1005, "")
	assert.True(t, <-res)

	// Busy past the deadline: restarts anyway.
	set(1000, "2 requests in flight")
	res = run(make(chan struct{}))
	assert.True(t, pending(res))
	set(1010, "2 requests in flight")
	assert.True(t, <-res, "the deadline passed")

	// Cancelled (replaced, or the daemon closes): no restart.
	set(1000, "delegation D")
	cancel := make(chan struct{})
	res = run(cancel)
	assert.True(t, pending(res))
	close(cancel)
	assert.False(t, <-res)
	mu.Lock()
	assert.Contains(t, shown, "2 requests in flight")
	mu.Unlock()
}

// TestRestartRequest: the checks and the reply of restart_when_idle,
// without restarting: the release's version is checked (or taken as
// is), the requester is the last delegation of the parent chain, the
// deadline is max_wait_seconds away (600 s by default), and waiting_for
// names the active delegation and the other requests in flight.
func TestRestartRequest(t *testing.T) {
	dir := shortDir(t)
	exe := filepath.Join(dir, "scv")
	writeScript(t, exe, `echo " 3.1.4 "`)
	var mu sync.Mutex
	active, inFlight, restarts := map[string]bool{}, 1, 0
	now := time.Unix(1_000_000, 0)
	r := &restarter{
		exe:      exe,
		log:      slog.New(slog.DiscardHandler),
		active:   func(h string) bool { mu.Lock(); defer mu.Unlock(); return active[h] },
		inFlight: func() int { mu.Lock(); defer mu.Unlock(); return inFlight },
		restart:  func(string) error { mu.Lock(); defer mu.Unlock(); restarts++; return nil },
		now:      func() time.Time { return now },
		poll:     time.Millisecond,
	}
	t.Cleanup(r.cancel)

	var e *control.Error
	_, err := (&restarter{}).RestartWhenIdle(control.CmdRestartWhenIdle{})
	require.ErrorAs(t, err, &e)
	assert.Equal(t, control.ReasonUnavailable, e.Data.Reason, "no executable known (in-process daemon)")

	_, err = r.RestartWhenIdle(control.CmdRestartWhenIdle{Version: ptr("3.1.5")})
	require.ErrorAs(t, err, &e)
	assert.Equal(t, control.ReasonConflict, e.Data.Reason)
	assert.Contains(t, e.Message, `"3.1.4"`)
	assert.Contains(t, e.Message, `"3.1.5"`)
	assert.Contains(t, e.Message, exe)
	assert.Nil(t, r.Pending())

	mu.Lock()
	active["D2"], inFlight = true, 3
	mu.Unlock()
	info, err := r.RestartWhenIdle(control.CmdRestartWhenIdle{Parent: ptr("D1, D2")})
	require.NoError(t, err)
	assert.Equal(t, "3.1.4", info.ToVersion, "no version asked: the installed one, trimmed")
	require.NotNil(t, info.Requester)
	assert.Equal(t, "D2", *info.Requester)
	require.NotNil(t, info.WaitingFor)
	assert.Equal(t, "delegation D2, 2 requests in flight", *info.WaitingFor, "the request itself is not waited for")
	assert.Equal(t, uint64(1_000_600), info.DeadlineUnixSeconds)
	pending := r.Pending()
	require.NotNil(t, pending, "status shows it")
	assert.Equal(t, info.ToVersion, pending.ToVersion)
	assert.Equal(t, info.Requester, pending.Requester)
	assert.Equal(t, info.DeadlineUnixSeconds, pending.DeadlineUnixSeconds)
	require.NotNil(t, pending.WaitingFor, "what the last poll saw, the request itself maybe included")
	assert.Contains(t, *pending.WaitingFor, "delegation D2")

	// A second request replaces the first.
	info, err = r.RestartWhenIdle(control.CmdRestartWhenIdle{Version: ptr("3.1.4"), Parent: ptr("D3"), MaxWaitSeconds: ptr(uint64(5))})
	require.NoError(t, err)
	assert.Equal(t, uint64(1_000_005), info.DeadlineUnixSeconds)
	assert.Equal(t, "D3", *r.Pending().Requester)
	_, err = r.RestartWhenIdle(control.CmdRestartWhenIdle{MaxWaitSeconds: ptr(uint64(1) << 63)})
	require.NoError(t, err, "a huge max wait is capped, not overflowed")
	assert.Greater(t, r.Pending().DeadlineUnixSeconds, uint64(1_000_000))

	// Idle at last: one restart, for the pending request only.
	mu.Lock()
	active["D2"], inFlight = false, 0
	mu.Unlock()
	require.Eventually(t, func() bool { return r.Pending() == nil }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	assert.Equal(t, 1, restarts)
	mu.Unlock()
}

// restartScript is a release for the in-process tests: it reports
// version v, and started as the daemon it records that it ran and then
// runs body.
func restartScript(t *testing.T, dir, v, body string) (exe, marker string) {
	t.Helper()
	exe, marker = filepath.Join(dir, "scv"), filepath.Join(dir, "ran")
	writeScript(t, exe, fmt.Sprintf(`if [ "$1" = version ]; then echo %s; exit 0; fi
echo $$ > %s
%s
`, v, marker, body))
	return exe, marker
}

// restartableDaemon runs a Daemon in-process whose own executable is exe,
// with active standing in for the delegation registry.
func restartableDaemon(t *testing.T, dir, exe string, ready time.Duration, active func(string) bool) (*Daemon, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	d := &Daemon{DBPath: filepath.Join(dir, "l.db"), SocketPath: filepath.Join(dir, "d.sock"), Executable: exe,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), readyTimeout: ready}
	require.NoError(t, d.Open(context.Background()))
	// Before Serve: nothing reads them yet.
	d.restarter.active = active
	d.restarter.poll = 10 * time.Millisecond
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	t.Cleanup(func() {
		assert.NoError(t, d.Close())
		assert.NoError(t, <-served)
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	return d, logs
}

// inCall sends one command to an in-process daemon on a connection of
// its own (a restart closes idle connections).
func inCall(t *testing.T, d *Daemon, cmd control.Command) *control.DaemonStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := control.Dial(ctx, d.SocketPath)
	require.NoError(t, err)
	defer c.Close()
	st, err := c.Call(ctx, cmd)
	require.NoError(t, err, "%s", cmd.Action())
	return st
}

// TestRestartWaitsForDelegation: a restart waits while its requester's
// delegation is active, and status shows it (requester, waiting_for,
// deadline); a second request replaces the first; once the delegation
// ends, it restarts. The release here fails to come up, so the daemon
// serves on with nothing pending. With the delegation still active,
// max_wait_seconds passing restarts anyway.
func TestRestartWaitsForDelegation(t *testing.T) {
	dir := shortDir(t)
	exe, marker := restartScript(t, dir, "2.0.0-next", "exit 1")
	var mu sync.Mutex
	active := map[string]bool{}
	setActive := func(h string, on bool) { mu.Lock(); defer mu.Unlock(); active[h] = on }
	// The release here ends at once: a long readiness timeout keeps a
	// loaded machine from killing it before it wrote its marker.
	d, logs := restartableDaemon(t, dir, exe, time.Minute, func(h string) bool { mu.Lock(); defer mu.Unlock(); return active[h] })
	ran := func() bool { _, err := os.Stat(marker); return err == nil }

	setActive("DELEG", true)
	asked := time.Now()
	st := inCall(t, d, control.CmdRestartWhenIdle{Version: ptr("2.0.0-next"), Parent: ptr("OUTER,DELEG"), MaxWaitSeconds: ptr(uint64(3600))})
	require.NotNil(t, st.Restart)
	assert.Equal(t, "2.0.0-next", st.Restart.ToVersion)
	assert.Equal(t, "DELEG", *st.Restart.Requester)
	require.NotNil(t, st.Restart.WaitingFor)
	assert.Equal(t, "delegation DELEG", *st.Restart.WaitingFor)
	assert.InDelta(t, asked.Add(time.Hour).Unix(), int64(st.Restart.DeadlineUnixSeconds), 2)

	time.Sleep(200 * time.Millisecond)
	st = inCall(t, d, control.CmdStatus{})
	require.NotNil(t, st.Restart, "every status shows the pending restart")
	assert.Equal(t, "DELEG", *st.Restart.Requester)
	require.NotNil(t, st.Restart.WaitingFor)
	assert.Contains(t, *st.Restart.WaitingFor, "delegation DELEG")
	assert.False(t, ran(), "no restart while the delegation runs")

	// Replaced: the first request's delegation ending starts nothing.
	setActive("OTHER", true)
	st = inCall(t, d, control.CmdRestartWhenIdle{Parent: ptr("OTHER"), MaxWaitSeconds: ptr(uint64(7200))})
	assert.Equal(t, "OTHER", *st.Restart.Requester)
	setActive("DELEG", false)
	time.Sleep(200 * time.Millisecond)
	assert.False(t, ran(), "the replaced request does not restart")
	st = inCall(t, d, control.CmdStatus{})
	require.NotNil(t, st.Restart)
	assert.Equal(t, "OTHER", *st.Restart.Requester)

	setActive("OTHER", false)
	require.Eventually(t, ran, 10*time.Second, 10*time.Millisecond, "restarts once the delegation ended")
	require.Eventually(t, func() bool { return inCall(t, d, control.CmdStatus{}).Restart == nil }, 10*time.Second, 10*time.Millisecond)
	st = inCall(t, d, control.CmdProjectCreate{Name: "after", Workspace: dir})
	assert.Equal(t, version, st.Version)
	assert.Equal(t, uint32(os.Getpid()), st.PID)
	assert.Contains(t, logs.String(), "ended before it was ready")

	// Max wait: the delegation never ends, the restart happens anyway.
	require.NoError(t, os.Remove(marker))
	setActive("SLOW", true)
	asked = time.Now()
	st = inCall(t, d, control.CmdRestartWhenIdle{Parent: ptr("SLOW"), MaxWaitSeconds: ptr(uint64(1))})
	require.NotNil(t, st.Restart)
	require.Eventually(t, ran, 10*time.Second, 10*time.Millisecond, "restarts at the deadline")
	assert.GreaterOrEqual(t, time.Since(asked), 900*time.Millisecond, "not before the deadline")
	require.Eventually(t, func() bool { return inCall(t, d, control.CmdStatus{}).Restart == nil }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, logs.String(), "restarting at the deadline")
	inCall(t, d, control.CmdProjectStatus{Project: "after"})
}

// TestRestartNotReady: a release that starts but never says it is ready
// is killed at the readiness timeout, and the daemon serves on.
func TestRestartNotReady(t *testing.T) {
	dir := shortDir(t)
	exe, marker := restartScript(t, dir, "2.0.0-slow", "exec sleep 60")
	d, logs := restartableDaemon(t, dir, exe, 500*time.Millisecond, func(string) bool { return false })
	inCall(t, d, control.CmdProjectCreate{Name: "acme", Workspace: dir})

	inCall(t, d, control.CmdRestartWhenIdle{MaxWaitSeconds: ptr(uint64(0))})
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "restart failed") }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, logs.String(), "was not ready within 500ms; killed it")
	b, err := os.ReadFile(marker)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assert.True(t, procGone(pid), "the release that was not ready is gone")

	st := inCall(t, d, control.CmdProjectStatus{Project: "acme"})
	assert.Nil(t, st.Restart)
	assert.Equal(t, "acme", st.Project.Project.Name)
}
