package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testClient is the client side of the tests: it records the session
// updates as short strings and allows every permission request.
type testClient struct {
	mu       sync.Mutex
	updates  []string
	sessions []acp.SessionId // each update's
	perms    []string
}

func (c *testClient) record(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, s)
}

func (c *testClient) recorded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.updates...)
}

func (c *testClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	c.sessions = append(c.sessions, n.SessionId)
	c.mu.Unlock()
	u := n.Update
	switch {
	case u.UserMessageChunk != nil:
		c.record("user:" + u.UserMessageChunk.Content.Text.Text)
	case u.AgentMessageChunk != nil:
		c.record("agent:" + u.AgentMessageChunk.Content.Text.Text)
	case u.AgentThoughtChunk != nil:
		c.record("thought:" + u.AgentThoughtChunk.Content.Text.Text)
	case u.Plan != nil:
		var items []string
		for _, e := range u.Plan.Entries {
			items = append(items, fmt.Sprintf("%s(%s,%s)", e.Content, e.Status, e.Priority))
		}
		c.record("plan:" + strings.Join(items, ";"))
	case u.UsageUpdate != nil:
		v := u.UsageUpdate
		rec := fmt.Sprintf("usage:%d/%d", v.Used, v.Size)
		if v.Cost != nil {
			rec += fmt.Sprintf(" %v %s", v.Cost.Amount, v.Cost.Currency)
		}
		c.record(rec)
	default:
		c.record("other")
	}
	return nil
}

func (c *testClient) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	var opts []string
	for _, o := range p.Options {
		opts = append(opts, fmt.Sprintf("%s=%s", o.OptionId, o.Kind))
	}
	c.mu.Lock()
	c.perms = append(c.perms, fmt.Sprintf("%s %s [%s]", p.ToolCall.ToolCallId, *p.ToolCall.Title, strings.Join(opts, " ")))
	c.mu.Unlock()
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
		Selected: &acp.RequestPermissionOutcomeSelected{OptionId: "allow"},
	}}, nil
}

func (c *testClient) ReadTextFile(_ context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	b, err := os.ReadFile(p.Path)
	return acp.ReadTextFileResponse{Content: string(b)}, err
}

func (c *testClient) WriteTextFile(_ context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, os.WriteFile(p.Path, []byte(p.Content), 0o644)
}

var errNoTerminal = errors.New("no terminals in this test")

func (c *testClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNoTerminal
}

func (c *testClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNoTerminal
}

func (c *testClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNoTerminal
}

func (c *testClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNoTerminal
}

func (c *testClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNoTerminal
}

// build compiles acpagent (this test's package) into a temporary folder.
func build(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "acpagent")
	out, err := exec.Command("go", "build", "-o", bin, dir).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// proc is a running acpagent with the SDK's client side on its pipes.
type proc struct {
	cmd    *exec.Cmd
	conn   *acp.ClientSideConnection
	client *testClient
	stderr *bytes.Buffer
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, bin, nil, args...)
}

// startEnv starts bin with args and, if env is not nil, only env.
func startEnv(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &proc{cmd: cmd, client: &testClient{}, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(p.kill)
	p.conn = acp.NewClientSideConnection(p.client, stdin, stdout)
	return p
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

func (p *proc) initialize(ctx context.Context, t *testing.T) acp.InitializeResponse {
	t.Helper()
	r, err := p.conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
		},
	})
	require.NoError(t, err)
	return r
}

func TestPromptThenLoadInAnotherProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bin := build(t)
	state := t.TempDir()
	cwd := t.TempDir()

	p := start(t, bin, "--state", state)
	init := p.initialize(ctx, t)
	assert.True(t, init.AgentCapabilities.LoadSession)
	assert.Equal(t, acp.ProtocolVersion(acp.ProtocolVersionNumber), init.ProtocolVersion)
	require.NotNil(t, init.AgentInfo)
	assert.Equal(t, "acpagent", init.AgentInfo.Name)

	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	assert.Regexp(t, `^sess-[0-9a-f]{16}$`, string(sess.SessionId))

	script := "say hello\nchunks 2\nplan a;b\npermission deploy\nstop max_tokens"
	r, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(script)}})
	require.NoError(t, err)
	assert.Equal(t, acp.StopReasonMaxTokens, r.StopReason)
	said := []string{"agent:hello", "agent:chunk 1 ", "agent:chunk 2 "}
	assert.Equal(t, append(said,
		"plan:a(in_progress,medium);b(pending,medium)",
		"agent:permission: allowed",
	), p.client.recorded())
	p.client.mu.Lock()
	assert.Equal(t, []string{"perm-1 deploy [allow=allow_once reject=reject_once]"}, p.client.perms)
	p.client.mu.Unlock()
	p.kill()

	q := start(t, bin, "--state", state)
	q.initialize(ctx, t)
	_, err = q.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sess.SessionId, Cwd: cwd, McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	assert.Equal(t, append(append([]string{"user:" + script}, said...), "agent:permission: allowed"),
		q.client.recorded())

	_, err = q.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "sess-0000000000000000", Cwd: cwd, McpServers: []acp.McpServer{}})
	assert.Error(t, err, "loading a session that does not exist")
}

func TestScriptVerbs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	require.NoError(t, os.WriteFile(in, []byte("some text"), 0o644))
	out := filepath.Join(dir, "out.txt")

	state := t.TempDir()
	p := start(t, build(t), "--state", state)
	p.initialize(ctx, t)
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
	require.NoError(t, err)

	script := strings.Join([]string{
		"read " + in,
		"write " + out + " written text",
		"garbage",
		"big 100",
		"thought hmm",
		"exec echo hi there",
		"hello world",
		"as sess-other say elsewhere",
		"refuse",
		"say never said",
	}, "\n")
	r, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(script)}})
	require.NoError(t, err)
	assert.Equal(t, acp.StopReasonRefusal, r.StopReason)
	assert.Equal(t, []string{
		"agent:read: some text",
		"agent:write: ok",
		"agent:" + strings.Repeat("x", 100),
		"thought:hmm",
		"agent:exec: hi there",
		"agent:hello world",
		"agent:elsewhere",
	}, p.client.recorded())
	p.client.mu.Lock()
	n := len(p.client.sessions)
	assert.Equal(t, []acp.SessionId{sess.SessionId, "sess-other"}, p.client.sessions[n-2:], "as names its session")
	p.client.mu.Unlock()
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "written text", string(b))

	// A prompt cancelled while it sleeps stops there, with its history saved.
	type result struct {
		r   acp.PromptResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId,
			Prompt: []acp.ContentBlock{acp.TextBlock("say before\nsleep 1m\nsay after")}})
		done <- result{r, err}
	}()
	require.Eventually(t, func() bool {
		u := p.client.recorded()
		return u[len(u)-1] == "agent:before"
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, p.conn.Cancel(ctx, acp.CancelNotification{SessionId: sess.SessionId}))
	res := <-done // the prompt's context ends in 20 s at the latest
	require.NoError(t, res.err, "the cancelled prompt did not return")
	assert.Equal(t, acp.StopReasonCancelled, res.r.StopReason)
	s, err := (&agent{state: state}).load(sess.SessionId)
	require.NoError(t, err)
	assert.Equal(t, dir, s.Cwd)
	assert.Equal(t, []entry{{"user", "say before\nsleep 1m\nsay after"}, {"agent", "before"}}, s.History[len(s.History)-2:])
}

// TestUsage: `usage_update` sends one, `usage` puts usage on the
// prompt's answer (its total the sum of its counts), --model names the
// session's model, and session/load sends the last usage_update again.
func TestUsage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bin, state, cwd := build(t), t.TempDir(), t.TempDir()
	p := start(t, bin, "--state", state, "--model", "m-1")
	p.initialize(ctx, t)
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	require.NotNil(t, sess.Models)
	assert.Equal(t, acp.ModelId("m-1"), sess.Models.CurrentModelId)

	script := "usage_update 10 100\nusage_update 20 100 0.045 USD\nusage 1 2 3 4\nusage_update x\nusage 1"
	r, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(script)}})
	require.NoError(t, err)
	assert.Equal(t, &acp.Usage{InputTokens: 1, OutputTokens: 2, ThoughtTokens: acp.Ptr(3), CachedReadTokens: acp.Ptr(4),
		TotalTokens: 10}, r.Usage, "the last good usage step")
	assert.Equal(t, []string{"usage:10/100", "usage:20/100 0.045 USD",
		`agent:usage_update: want USED SIZE [AMOUNT CURRENCY], got "x"`,
		`agent:usage: want IN OUT [THOUGHT [CACHED_READ [CACHED_WRITE]]], got "1"`}, p.client.recorded())
	r, err = p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("say no usage")}})
	require.NoError(t, err)
	assert.Nil(t, r.Usage, "a turn without a usage step answers none")
	p.kill()

	q := start(t, bin, "--state", state, "--model", "m-2")
	q.initialize(ctx, t)
	l, err := q.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sess.SessionId, Cwd: cwd, McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	require.NotNil(t, l.Models)
	assert.Equal(t, acp.ModelId("m-2"), l.Models.CurrentModelId)
	got := q.client.recorded()
	assert.Equal(t, "usage:20/100 0.045 USD", got[len(got)-1], "the last usage_update, after the history")
}

func TestNoLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := start(t, build(t), "--state", t.TempDir(), "--no-load")
	assert.False(t, p.initialize(ctx, t).AgentCapabilities.LoadSession)
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	_, err = p.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sess.SessionId, Cwd: "/", McpServers: []acp.McpServer{}})
	assert.Error(t, err)
}

func TestExitAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, build(t), "--exit-at-once", "--stderr", "hello stderr")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Equal(t, "hello stderr\nacpagent: exiting at once\n", stderr.String())
}

// TestHelp: --help lists the flags, ACPAGENT_STATE and every script step
// with its arguments.
func TestHelp(t *testing.T) {
	out, err := exec.Command(build(t), "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	help := string(out)
	for _, want := range []string{"-state", "-no-load", "ACPAGENT_STATE", "Script steps:", "  say TEXT ", "  stop [REASON] ", "  crash "} {
		assert.Contains(t, help, want)
	}
	for _, s := range steps {
		assert.Contains(t, help, "\n  "+strings.TrimSpace(s.verb+" "+s.args)+" ", "step %s", s.verb)
	}
}

// TestStateFolder: without --state or ACPAGENT_STATE, sessions are kept in
// the user's state folder, made 0700, their files 0600; a folder others
// may write in is refused.
func TestStateFolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bin := build(t)
	home, xdg := t.TempDir(), t.TempDir()
	for _, c := range []struct {
		xdg, want string
	}{
		{"", filepath.Join(home, ".local", "state", "acpagent")},
		{xdg, filepath.Join(xdg, "acpagent")},
	} {
		p := startEnv(t, bin, []string{"HOME=" + home, "XDG_STATE_HOME=" + c.xdg})
		p.initialize(ctx, t)
		sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
		require.NoError(t, err, "%s", p.stderr)
		fi, err := os.Stat(c.want)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), c.want)
		fi, err = os.Stat(filepath.Join(c.want, string(sess.SessionId)+".json"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}

	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(open, 0o777))
	require.NoError(t, os.Chmod(open, 0o777))
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{"ACPAGENT_STATE=" + open}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), "session folder "+open+" may be written by others")
}

// TestStepsOnly: with --steps-only, a prompt's steps run and its other
// lines are not said.
func TestStepsOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := start(t, build(t), "--state", t.TempDir(), "--steps-only")
	p.initialize(ctx, t)
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	require.NoError(t, err)
	prompt := "You triage one email.\nFrom: someone\n<<<\nsay report: hello\nusage 7 3\n>>>\n"
	r, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(prompt)}})
	require.NoError(t, err)
	assert.Equal(t, []string{"agent:report: hello"}, p.client.recorded())
	assert.Equal(t, 10, r.Usage.TotalTokens)
	p.kill()
}
