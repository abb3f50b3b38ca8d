package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/rpc"
)

// longPoll sends, on a connection of its own, the confirm_list long poll
// `scv chat` keeps open, and returns where its answer will come.
func longPoll(t *testing.T, sock string) <-chan error {
	t.Helper()
	cl := dial(t, sock)
	chat, after, wait := "local:owner", uint64(1<<40), uint64(api.MaxListWait)
	answered := make(chan error, 1)
	go func() {
		_, err := cl.Call(context.Background(), api.CmdConfirmList{Chat: &chat, After: &after, WaitSeconds: &wait})
		answered <- err
	}()
	return answered
}

// assertUnavailable checks that the long poll was answered unavailable.
func assertUnavailable(t *testing.T, answered <-chan error) {
	t.Helper()
	select {
	case err := <-answered:
		var e *api.Error
		require.True(t, errors.As(err, &e), "an error reply, not a lost connection: %v", err)
		assert.Equal(t, api.ReasonUnavailable, e.Data.Reason)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting client got nothing")
	}
}

// TestShutdownEndsLongPoll: a client in a confirm_list long poll (what
// `scv chat` keeps open) does not hold the daemon's shutdown: Close
// returns well within 2 s, without its 10 s deadline, and the waiting
// client is answered unavailable instead of losing its connection.
func TestShutdownEndsLongPoll(t *testing.T) {
	d, stop := serve(t, Config{})
	answered := longPoll(t, d.Config().Socket)
	require.Eventually(t, func() bool { return d.Server().Waiting() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the long poll is under way")

	began := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		assert.NoError(t, err, "no deadline ran out")
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown waited for the long poll")
	}
	took := time.Since(began)
	assert.Less(t, took, 2*time.Second, "shutdown took %s", took)
	assertUnavailable(t, answered)
	stop()
}

// TestSettledAtOpen: a heartbeat interval of -1 is a tenth of the stale
// window, and the socket's folder is created 0700.
func TestSettledAtOpen(t *testing.T) {
	dir := shortDir(t)
	d, _ := serve(t, Config{Socket: filepath.Join(dir, "run", "scv", "d.sock"), StaleAfter: time.Minute, HeartbeatEvery: -1})
	assert.Equal(t, 6*time.Second, d.Config().HeartbeatEvery)
	fi, err := os.Stat(filepath.Dir(d.Config().Socket))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

// TestDaemonProcess runs the real binary: status reports the version it
// was built with and its pid; the socket and the database are 0600;
// SIGTERM ends the daemon with exit code 0, after the request in flight
// was answered and with the database closed (a second daemon can open it
// and sees the event); SIGINT does the same. A second daemon on a live
// socket, or on the same database through another socket, is refused
// (exit 1, naming it) and touches neither.
func TestDaemonProcess(t *testing.T) {
	bin := scvBinary(t, oldRelease)
	dir := shortDir(t)
	db, sock := filepath.Join(dir, "ledger.db"), filepath.Join(dir, "d.sock")

	d := startProcess(t, bin, db, sock, "")
	for _, f := range []string{sock, db} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	st := d.must(t, api.CmdStatus{})
	assert.Equal(t, oldRelease, st.Version)
	assert.Equal(t, uint32(d.Pid()), st.PID)

	// A request in flight when SIGTERM arrives is still answered: send it
	// and the signal together, then read the reply.
	ctx := context.Background()
	req := `{"jsonrpc":"2.0","id":7,"method":"daemon.control","params":{"action":"project_create","name":"acme","workspace":"` + dir + `"}}` + "\n"
	raw := dial(t, sock)
	reply := make(chan []byte, 1)
	go func() {
		b, _ := raw.Send(ctx, []byte(req))
		reply <- b
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGTERM))
	assert.Contains(t, string(<-reply), `"kind":"created"`)
	d.exitedZero(t)
	assert.Contains(t, d.Log(), "daemon stopped")
	assert.NoFileExists(t, sock, "socket removed on exit")

	// SIGINT ends it the same way, and the project created before is there.
	d = startProcess(t, bin, db, sock, "")
	assert.Equal(t, "acme", d.must(t, api.CmdProjectStatus{Project: "acme"}).Project.Project.Name)
	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGINT))
	d.exitedZero(t)

	// A second daemon on a live socket, or on the same database through
	// another socket, is refused, and touches neither.
	d = startProcess(t, bin, db, sock, "")
	refused := func(db, sock, which string) {
		t.Helper()
		out, err := exec.Command(bin, "daemon", "--db", db, "--socket", sock).CombinedOutput()
		var x *exec.ExitError
		if assert.ErrorAs(t, err, &x, "%s", out) {
			assert.Equal(t, 1, x.ExitCode(), "%s", out)
		}
		assert.Contains(t, string(out), "another daemon is using "+which)
	}
	refused(filepath.Join(dir, "other.db"), sock, sock)
	assert.NoFileExists(t, filepath.Join(dir, "other.db"), "the refused daemon created no database")
	refused(db, filepath.Join(dir, "e.sock"), db)
	d.must(t, api.CmdStatus{}) // the first daemon still answers
	d.stop(t)
}

// TestDaemonSignal: Ctrl-C (SIGINT) on a real `scv daemon --json` with a
// confirm_list long poll (what `scv chat` keeps open) and 256 load
// clients connected exits 0 within 2 s, with no deadline run out; the
// waiting client is answered unavailable, not left with a lost
// connection; and every line the daemon logged is JSON. (What `scv chat`
// and `scv project events --follow` make of it: cmd/scv.)
func TestDaemonSignal(t *testing.T) {
	bin := scvBinary(t, oldRelease)
	dir := shortDir(t)
	sock := filepath.Join(dir, "d.sock")
	d := startProcess(t, bin, filepath.Join(dir, "l.db"), sock, "", "--json", "--config", filepath.Join(dir, "channels.json"))
	d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: dir})

	// 256 clients, each on a connection of its own, sending requests
	// until the daemon goes.
	var connected, loadDone sync.WaitGroup
	stopLoad := make(chan struct{})
	for i := range 256 {
		connected.Add(1)
		loadDone.Add(1)
		go func() {
			defer loadDone.Done()
			c, err := rpc.Dial(context.Background(), sock)
			connected.Done()
			if err != nil {
				return
			}
			defer c.Close()
			for n := 0; n < 100000; n++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var err error
				if i%4 == 0 {
					_, err = c.Call(ctx, api.CmdProjectHeartbeat{Project: "acme"})
				} else {
					_, err = c.Call(ctx, api.CmdStatus{})
				}
				cancel()
				if err != nil {
					return
				}
			}
		}()
	}
	connected.Wait()
	defer func() { close(stopLoad); loadDone.Wait() }()
	answered := longPoll(t, sock)
	time.Sleep(300 * time.Millisecond) // the long poll is under way

	began := time.Now()
	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGINT))
	d.exitedZero(t)
	took := time.Since(began)
	assert.Less(t, took, 2*time.Second, "the daemon took %s to stop", took)
	assert.NotContains(t, d.Log(), "deadline")
	assertUnavailable(t, answered)

	lines := strings.Split(strings.TrimSpace(d.Log()), "\n")
	require.Greater(t, len(lines), 2, "the daemon logged its start and its stop")
	for _, l := range lines {
		assert.True(t, json.Valid([]byte(l)), "a log line that is not JSON: %q", l)
	}
	assert.Contains(t, lines[len(lines)-1], `"msg":"daemon stopped"`)
}
