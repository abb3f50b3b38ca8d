package main

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"scv/control/api"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run runs `scv ARGS...` against the fleet's daemon and returns its exit
// code and output.
func (f *fleet) run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := f.cmd(args...).CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
		return exit.ExitCode(), string(out)
	}
	return 0, string(out)
}

// ask asks through the CLI and returns the question's ID and state.
func (f *fleet) ask(t *testing.T, args ...string) (id string, state api.ConfirmState) {
	t.Helper()
	code, out := f.run(t, append([]string{"confirm", "ask"}, args...)...)
	// question ID STATE in CHAT, deadline …
	fields := strings.Fields(out)
	require.GreaterOrEqual(t, len(fields), 3, out)
	require.Equal(t, "question", fields[0], out)
	state = api.ConfirmState(fields[2])
	if state == api.ConfirmFailed {
		require.Equal(t, 6, code, "a question no chat could take: exit 6: %s", out)
	} else {
		require.Zero(t, code, out)
	}
	return fields[1], state
}

func (f *fleet) component(t *testing.T, id string) (api.ComponentHealth, bool) {
	t.Helper()
	for _, c := range f.status(t, api.CmdStatus{}).Components {
		if c.ID == id {
			return c, true
		}
	}
	return api.ComponentHealth{}, false
}

// enableLocal turns on the owner's local chat and waits until it is
// connected.
func (f *fleet) enableLocal(t *testing.T) {
	t.Helper()
	code, out := f.run(t, "channel", "set", "local:owner", "--enable")
	require.Zero(t, code, out)
	require.Eventually(t, func() bool {
		c, ok := f.component(t, "local:owner")
		return ok && c.State == api.ComponentConnected
	}, 10*time.Second, 20*time.Millisecond)
}

func (f *fleet) confirm(t *testing.T, id string) api.ConfirmInfo {
	t.Helper()
	return *f.status(t, api.CmdConfirmStatus{ID: id}).Confirm
}

// TestQuestionsInLocalChat is the owner's side of questions, on the real
// binary: with no chat a question fails; in local:owner it is pending,
// answered once, expires at its deadline, is withdrawn when nobody asks
// about it for a minute, and fails when the daemon restarts.
func TestQuestionsInLocalChat(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "--config", "/nonexistent/channels.json")

	id, state := f.ask(t, "ship it?")
	assert.Equal(t, api.ConfirmFailed, state, "no chat configured")
	assert.Empty(t, f.confirm(t, id).Chat)

	f.enableLocal(t)

	// Asked, pending in local:owner, answered yes once.
	id, state = f.ask(t, "deploy acme to staging?")
	assert.Equal(t, api.ConfirmPending, state)
	assert.Equal(t, "local:owner", f.confirm(t, id).Chat)
	code, out := f.run(t, "confirm", "answer", id, "yes")
	require.Zero(t, code, out)
	assert.Contains(t, out, "question "+id+" yes")
	code, out = f.run(t, "confirm", "answer", id, "no")
	assert.Equal(t, 1, code, "a second answer is refused: %s", out)
	assert.Contains(t, out, "[conflict]")
	assert.Equal(t, api.ConfirmYes, f.confirm(t, id).State)

	// A 2-second question expires.
	quick, state := f.ask(t, "quick one?", "--timeout", "2s")
	assert.Equal(t, api.ConfirmPending, state)
	// An unwatched one: nobody asks about it.
	unwatched, _ := f.ask(t, "anyone there?")
	require.Eventually(t, func() bool {
		return f.confirm(t, quick).State == api.ConfirmExpired
	}, 10*time.Second, 200*time.Millisecond, "expired at its deadline")

	asked := time.Now()
	require.Eventually(t, func() bool {
		qs := f.status(t, api.CmdConfirmList{}).Questions
		for _, q := range qs {
			if q.ID == unwatched {
				return q.State == api.ConfirmWithdrawn
			}
		}
		return false
	}, 90*time.Second, 500*time.Millisecond, "withdrawn a minute after the last confirm_status")
	assert.GreaterOrEqual(t, time.Since(asked), 55*time.Second)

	// The audit: who decided what.
	code, out = f.run(t, "confirm", "list")
	require.Zero(t, code, out)
	assert.Regexp(t, id+`\s+yes\s+local:owner.*uid \d+`, out)

	// One that is pending when the daemon restarts.
	restarted, state := f.ask(t, "still there after a restart?")
	require.Equal(t, api.ConfirmPending, state)
	f.restartDaemon(t)
	assert.Equal(t, api.ConfirmFailed, f.confirm(t, restarted).State, "its answer could not be kept")
	assert.Equal(t, api.ConfirmYes, f.confirm(t, id).State, "decided questions stay decided")
}

// TestChatTerminal: `scv chat` shows a question as it is asked and takes
// the owner's yes from standard input; the outcome is shown as a notice.
func TestChatTerminal(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "--config", "/nonexistent/channels.json")
	f.enableLocal(t)

	chat := f.cmd("chat")
	stdin, err := chat.StdinPipe()
	require.NoError(t, err)
	stdout, err := chat.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, chat.Start())
	t.Cleanup(func() { chat.Process.Kill(); chat.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(prefix string) string {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "chat ended before %q", prefix)
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-deadline:
				require.Failf(t, "no line", "chat printed no line starting %q", prefix)
			}
		}
	}
	expect("chat local:owner")

	id, _ := f.ask(t, "merge the release branch?")
	assert.Contains(t, expect("? "+id), "merge the release branch?")
	_, err = io.WriteString(stdin, "yes\n")
	require.NoError(t, err)
	expect("answered " + id + " yes")
	assert.Contains(t, expect("= "+id), "yes")
	assert.Equal(t, api.ConfirmYes, f.confirm(t, id).State)

	require.NoError(t, stdin.Close())
	require.NoError(t, chat.Wait(), "the end of input ends the chat")
}

// TestChannelAccountsCLI: a platform account without a connector in this
// build says why it is not connected; remote tools need a known owner;
// disabling keeps the settings, logout removes them; bad input changes
// nothing.
func TestChannelAccountsCLI(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "--config", "/nonexistent/channels.json")
	code, out := f.run(t, "channel", "set", "wechat:main", "--enable", "--remote-tools", "owner", "--senders", "anyone")
	require.Zero(t, code, out)
	var c api.ComponentHealth
	require.Eventually(t, func() bool {
		c, _ = f.component(t, "wechat:main")
		return c.State == api.ComponentFailed
	}, 10*time.Second, 20*time.Millisecond)
	require.NotNil(t, c.Error)
	assert.Contains(t, *c.Error, "connector")
	assert.Equal(t, api.RemoteToolsNone, c.RemoteTools, "no owner ID: no tools")
	assert.True(t, c.Enabled)

	code, out = f.run(t, "channel", "set", "wechat:main", "--disable")
	require.Zero(t, code, out)
	c, ok := f.component(t, "wechat:main")
	require.True(t, ok, "disabling keeps the account")
	assert.Equal(t, api.ComponentDisabled, c.State)
	require.NotNil(t, c.Senders)
	assert.Equal(t, api.SendersAnyone, *c.Senders, "and its settings")

	before := f.status(t, api.CmdStatus{}).Components
	for _, bad := range [][]string{
		{"channel", "set", ":main", "--enable"},
		{"channel", "set", "wechat:", "--enable"},
		{"channel", "set", "pigeon:main", "--enable"},
		{"channel", "set", "wechat:main", "--enable", "--workspace", "relative/dir"},
	} {
		code, out := f.run(t, bad...)
		assert.NotZero(t, code, "%v: %s", bad, out)
	}
	assert.Equal(t, before, f.status(t, api.CmdStatus{}).Components, "refused input changed nothing")

	code, out = f.run(t, "channel", "logout", "wechat:main")
	require.Zero(t, code, out)
	_, ok = f.component(t, "wechat:main")
	assert.False(t, ok, "logout removes it")
}

// restartDaemon stops the fleet's daemon with SIGTERM and starts it again
// on the same database and socket.
func (f *fleet) restartDaemon(t *testing.T) {
	t.Helper()
	f.daemon.Process.Signal(syscall.SIGTERM)
	require.NoError(t, f.daemon.Wait())
	d, _ := startDaemon(t, f.bin, f.args...)
	f.daemon = d
}
