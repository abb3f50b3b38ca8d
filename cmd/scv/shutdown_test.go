package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// TestChatAndFollowWhenTheDaemonStops: with `scv chat` and `scv project
// events --follow` connected, Ctrl-C (SIGINT) on the daemon: the chat and
// the follower each say so in one plain note, not "read reply: EOF", wait
// for the daemon, and go on from where they were, with no event lost or
// repeated, when a daemon serves the socket again. (The daemon's side of the stop: control/daemon's
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

	// The chat and the follower wait, each with one plain note (not
	// "read reply: EOF"); a daemon on the socket again, and they go on.
	away := "scv: the daemon went away; waiting up to 1m0s for it to come back\n"
	before := strings.Count(followOut.String(), "\n")
	require.Eventually(t, func() bool { return followErr.String() == away }, 5*time.Second, 10*time.Millisecond, "follower: %s", followErr.String())
	require.Eventually(t, func() bool { return strings.HasSuffix(chatErr.String(), away) }, 5*time.Second, 10*time.Millisecond, "chat: %s", chatErr.String())
	d = startTestDaemon(t, bin, db, sock, "", "--config", config)
	d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "after the restart", DependsOn: []string{}})
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

	// The chat shows a question asked after the restart, once its
	// channel is connected again.
	require.Eventually(t, func() bool {
		for _, c := range d.must(t, api.CmdStatus{}).Components {
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
