package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/control/daemon"
)

// TestShutdownEndsLongPoll: a client in a confirm_list long poll (what
// `scv chat` keeps open) does not hold the daemon's shutdown: Close
// returns well within 2 s, without its 10 s deadline, and the waiting
// client is answered unavailable instead of losing its connection.
func TestShutdownEndsLongPoll(t *testing.T) {
	d, stop := inDaemonStop(t, daemon.Config{})
	sock := d.Config().Socket
	ctx := context.Background()
	cl, err := control.Dial(ctx, sock)
	require.NoError(t, err)
	defer cl.Close()
	chat, after, wait := "local:owner", uint64(1<<40), uint64(api.MaxListWait)
	answered := make(chan error, 1)
	go func() {
		_, err := cl.Call(ctx, api.CmdConfirmList{Chat: &chat, After: &after, WaitSeconds: &wait})
		answered <- err
	}()
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
	select {
	case err := <-answered:
		var e *api.Error
		require.True(t, errors.As(err, &e), "an error reply, not a lost connection: %v", err)
		assert.Equal(t, api.ReasonUnavailable, e.Data.Reason)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting client got nothing")
	}
	stop()
}

// TestDaemonSignal: Ctrl-C (SIGINT) on a real `scv daemon` with `scv
// chat`, `scv project events --follow` and 256 load clients connected
// exits 0 within 2 s. The chat and the follower then say so in one plain
// note each, not "read reply: EOF", wait for the daemon, and go on from
// where they were, with no event lost or repeated, when a daemon serves
// the socket again.
func TestDaemonSignal(t *testing.T) {
	dir := shortDir(t)
	bin := buildScv(t, dir, "signal")
	sock, db := filepath.Join(dir, "d.sock"), filepath.Join(dir, "l.db")
	args := []string{"--db", db, "--socket", sock, "--config", filepath.Join(dir, "channels.json")}
	d, logs := startDaemon(t, bin, args...)
	scv := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, append([]string{"--socket", sock}, args...)...)
		c.Env = append(os.Environ(), "TZ=UTC", "NO_COLOR=1")
		return c
	}
	for _, a := range [][]string{{"channel", "set", "local:owner", "--enable"}, {"project", "create", "acme", "--workspace", dir}} {
		out, err := scv(a...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}

	chat := scv("chat")
	chatIn, err := chat.StdinPipe()
	require.NoError(t, err)
	defer chatIn.Close()
	var chatOut, chatErr syncBuffer
	chat.Stdout, chat.Stderr = &chatOut, &chatErr
	require.NoError(t, chat.Start())
	chatDone := make(chan error, 1)
	go func() { chatDone <- chat.Wait() }()

	follow := scv("project", "events", "acme", "--follow")
	var followOut, followErr syncBuffer
	follow.Stdout, follow.Stderr = &followOut, &followErr
	require.NoError(t, follow.Start())
	followDone := make(chan error, 1)
	go func() { followDone <- follow.Wait() }()

	// 256 clients, each on a connection of its own, sending requests
	// until the daemon goes.
	var connected sync.WaitGroup
	stopLoad := make(chan struct{})
	var loadDone sync.WaitGroup
	for i := range 256 {
		connected.Add(1)
		loadDone.Add(1)
		go func() {
			defer loadDone.Done()
			c, err := control.Dial(context.Background(), sock)
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
	require.Eventually(t, func() bool { return strings.Contains(chatOut.String(), "chat local:owner") }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(followOut.String(), "project_created") }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // the chat is in its long poll

	began := time.Now()
	require.NoError(t, d.Process.Signal(syscall.SIGINT))
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	select {
	case err := <-exited:
		took := time.Since(began)
		require.NoError(t, err, "the daemon exits 0: %s", logs.String())
		assert.Less(t, took, 2*time.Second, "the daemon took %s to stop", took)
	case <-time.After(15 * time.Second):
		d.Process.Kill()
		t.Fatalf("the daemon did not stop: %s", logs.String())
	}
	assert.NotContains(t, logs.String(), "deadline")

	// The chat and the follower wait, each with one note; a daemon on the
	// socket again, and they go on.
	away := "scv: the daemon went away; waiting up to 1m0s for it to come back\n"
	before := strings.Count(followOut.String(), "\n")
	require.Eventually(t, func() bool { return followErr.String() == away }, 5*time.Second, 10*time.Millisecond, "follower: %s", followErr.String())
	require.Eventually(t, func() bool { return strings.HasSuffix(chatErr.String(), away) }, 5*time.Second, 10*time.Millisecond, "chat: %s", chatErr.String())
	d, logs = startDaemon(t, bin, args...)
	defer func() { d.Process.Signal(syscall.SIGTERM); d.Wait() }()
	out, err := scv("project", "task", "add", "acme", "after the restart").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Eventually(t, func() bool { return strings.Contains(followOut.String(), "after the restart") }, 10*time.Second, 20*time.Millisecond,
		"stderr: %s", followErr.String())
	assert.Equal(t, before+1, strings.Count(followOut.String(), "\n"), "one event more, none repeated")
	// (stderr comes through a pipe of its own: it may lag behind stdout.)
	notes := regexp.MustCompile(`^` + away + `scv: the daemon answers again; following from sequence \d+\n$`)
	require.Eventually(t, func() bool { return notes.MatchString(followErr.String()) }, 5*time.Second, 10*time.Millisecond,
		"plain notes, one each: %s", followErr.String())
	require.NoError(t, follow.Process.Signal(syscall.SIGINT))
	select {
	case err := <-followDone:
		assert.NoError(t, err, "the follower ends 0 on SIGINT: %s", followErr.String())
	case <-time.After(5 * time.Second):
		t.Fatal("the follower did not end")
	}

	// The chat shows a question asked after the restart.
	cl, err := control.Dial(context.Background(), sock)
	require.NoError(t, err)
	defer cl.Close()
	require.Eventually(t, func() bool {
		st, err := cl.Call(context.Background(), api.CmdStatus{})
		if err != nil {
			return false
		}
		for _, c := range st.Components {
			if c.ID == "local:owner" {
				return c.State == api.ComponentConnected
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	out, err = scv("confirm", "ask", "still there?").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Eventually(t, func() bool { return strings.Contains(chatOut.String(), "still there?") }, 10*time.Second, 20*time.Millisecond,
		"stderr: %s", chatErr.String())
	require.Eventually(t, func() bool { return strings.HasSuffix(chatErr.String(), away+"scv: the daemon answers again\n") }, 5*time.Second, 10*time.Millisecond,
		"plain notes, one each: %s", chatErr.String())
	require.NoError(t, chatIn.Close())
	select {
	case err := <-chatDone:
		assert.NoError(t, err, "the end of input ends the chat: %s", chatErr.String())
	case <-time.After(5 * time.Second):
		t.Fatal("the chat did not end")
	}
	assert.NotContains(t, chatErr.String(), "EOF")

	// Every event once, in order: the same lines as plain `events`.
	plain, err := scv("project", "events", "acme").Output()
	require.NoError(t, err)
	assert.Equal(t, string(plain), followOut.String(), "events and events --follow: one format, nothing lost or repeated")
}
