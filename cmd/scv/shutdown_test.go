package main

import (
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
)

// TestChatAndFollowWhenTheDaemonStops: with `scv chat` and `scv project
// events --follow` connected, Ctrl-C (SIGINT) on the daemon ends the chat
// with a note on stderr and exit 3 (the daemon is unavailable), not
// "read reply: EOF"; the follower waits for the daemon, and goes on from
// where it was, with no event lost or repeated, when a daemon serves the
// socket again. (The daemon's side of the stop: control/daemon's
// TestDaemonSignal.) The binary reports the version it was built with.
func TestChatAndFollowWhenTheDaemonStops(t *testing.T) {
	dir := shortDir(t)
	bin := buildScv(t, dir, "9.8.7-test")
	out, err := exec.Command(bin, "version").Output()
	require.NoError(t, err)
	assert.Equal(t, "9.8.7-test\n", string(out))

	sock, db := filepath.Join(dir, "d.sock"), filepath.Join(dir, "l.db")
	config := filepath.Join(dir, "channels.json")
	d := startTestDaemon(t, bin, db, sock, "", "--config", config)
	d.must(t, api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: dir})
	scv := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, append([]string{"--socket", sock}, args...)...)
		c.Env = append(os.Environ(), "TZ=UTC", "NO_COLOR=1")
		return c
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
	t.Cleanup(func() {
		for _, c := range []*exec.Cmd{chat, follow} {
			c.Process.Kill()
		}
	})

	require.Eventually(t, func() bool { return strings.Contains(chatOut.String(), "chat local:owner") }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(followOut.String(), "project_created") }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // the chat is in its long poll

	require.NoError(t, d.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, d.waitExit(t), "the daemon exits 0")

	select {
	case err := <-chatDone:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "chat: %s", chatErr.String())
		assert.Equal(t, 3, exit.ExitCode(), "chat: %s", chatErr.String())
		assert.Contains(t, chatErr.String(), "scv: chat ended: the daemon is shutting down")
		assert.NotContains(t, chatErr.String(), "EOF")
	case <-time.After(10 * time.Second):
		t.Fatal("chat did not end")
	}

	// The follower waits; a daemon on the socket again, and it goes on.
	before := strings.Count(followOut.String(), "\n")
	require.Eventually(t, func() bool { return strings.Contains(followErr.String(), "the daemon went away") }, 5*time.Second, 10*time.Millisecond)
	d = startTestDaemon(t, bin, db, sock, "", "--config", config)
	d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "after the restart", DependsOn: []string{}})
	require.Eventually(t, func() bool { return strings.Contains(followOut.String(), "after the restart") }, 10*time.Second, 20*time.Millisecond,
		"stderr: %s", followErr.String())
	assert.Equal(t, before+1, strings.Count(followOut.String(), "\n"), "one event more, none repeated")
	require.NoError(t, follow.Process.Signal(syscall.SIGINT))
	select {
	case err := <-followDone:
		assert.NoError(t, err, "the follower ends 0 on SIGINT: %s", followErr.String())
	case <-time.After(5 * time.Second):
		t.Fatal("the follower did not end")
	}
	// Every event once, in order: the same lines as plain `events`.
	plain, err := scv("project", "events", "acme").Output()
	require.NoError(t, err)
	assert.Equal(t, string(plain), followOut.String(), "events and events --follow: one format, nothing lost or repeated")
}
