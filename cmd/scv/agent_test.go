package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// renderTurn feeds updates to a turnPrinter and returns what it wrote.
func renderTurn(t *testing.T, thoughts bool, ups ...api.AgentUpdate) string {
	t.Helper()
	var b bytes.Buffer
	p := &turnPrinter{w: &b, thoughts: thoughts}
	for _, u := range ups {
		require.NoError(t, p.update(u))
	}
	return b.String()
}

// TestAgentTurnPrinter: a turn's updates as `agent prompt` prints them.
func TestAgentTurnPrinter(t *testing.T) {
	t.Parallel()
	got := renderTurn(t, false,
		api.AgentUpdate{Turn: 2, Kind: "turn_started", Text: "fix it"},
		api.AgentUpdate{Turn: 2, Kind: "agent_message_chunk", Text: "Looking"},
		api.AgentUpdate{Turn: 2, Kind: "agent_message_chunk", Text: " at it."},
		api.AgentUpdate{Turn: 2, Kind: "agent_thought_chunk", Text: "hidden thinking"},
		api.AgentUpdate{Turn: 2, Kind: "tool_call", ToolCallID: "t1", Title: "Read main.go", Status: "pending"},
		api.AgentUpdate{Turn: 2, Kind: "tool_call_update", ToolCallID: "t1"}, // no status: nothing
		api.AgentUpdate{Turn: 2, Kind: "tool_call_update", ToolCallID: "t1", Status: "completed"},
		api.AgentUpdate{Turn: 2, Kind: "plan", Text: "[in_progress] read\n[pending] fix"},
		api.AgentUpdate{Turn: 2, Kind: "permission", Title: "Edit main.go", Status: "refused", Text: "the agent was started without --ask"},
		api.AgentUpdate{Turn: 2, Kind: "permission", Title: "Run tests", Status: "allowed"},
		api.AgentUpdate{Turn: 2, Kind: "file", Title: "write", Text: "main.go", Status: "ok"},
		api.AgentUpdate{Turn: 2, Kind: "terminal", Text: "go test ./...", Status: "refused"},
		api.AgentUpdate{Turn: 2, Kind: "agent_message_chunk", Text: "Done.\n"},
		api.AgentUpdate{Turn: 2, Kind: "current_mode_update", Text: "code"},
		api.AgentUpdate{Turn: 2, Kind: "available_commands_update"},
		api.AgentUpdate{Turn: 2, Kind: "agent_message_chunk", Text: "I could not"},
		api.AgentUpdate{Turn: 2, Kind: "turn_ended", StopReason: "refusal", Status: "failed", Text: "the agent ended its turn: refusal"},
	)
	assert.Equal(t, "Looking at it.\n"+
		"[tool] Read main.go (pending)\n"+
		"[tool] t1 completed\n"+
		"[plan]\n"+
		"  [in_progress] read\n"+
		"  [pending] fix\n"+
		"[permission] Edit main.go: refused (the agent was started without --ask)\n"+
		"[permission] Run tests: allowed\n"+
		"[file] write main.go: ok\n"+
		"[terminal] go test ./...: refused\n"+
		"Done.\n"+
		"[current_mode_update] code\n"+
		"[available_commands_update]\n"+
		"I could not\n"+
		"-- turn 2 ended: refusal (run failed)\n"+
		"the agent ended its turn: refusal\n", got)
}

// TestAgentTurnPrinterNewlineBeforeEnd: the turn's end starts a line of
// its own: a newline is written before it only when the message did not
// end with one.
func TestAgentTurnPrinterNewlineBeforeEnd(t *testing.T) {
	t.Parallel()
	end := api.AgentUpdate{Turn: 1, Kind: "turn_ended", StopReason: "end_turn", Status: "succeeded"}
	assert.Equal(t, "Hello, world\n-- turn 1 ended: end_turn (run succeeded)\n", renderTurn(t, false,
		api.AgentUpdate{Turn: 1, Kind: "agent_message_chunk", Text: "Hello,"},
		api.AgentUpdate{Turn: 1, Kind: "agent_message_chunk", Text: " world"},
		end))
	assert.Equal(t, "Hello\n-- turn 1 ended: end_turn (run succeeded)\n", renderTurn(t, false,
		api.AgentUpdate{Turn: 1, Kind: "agent_message_chunk", Text: "Hello\n"}, end))
	assert.Equal(t, "-- turn 1 ended: end_turn (run succeeded)\n", renderTurn(t, false, end), "nothing said: no blank line")
	// The run status only when there is one; the reason's text on its own line.
	assert.Equal(t, "ok\n-- turn 4 ended: cancelled\n", renderTurn(t, false,
		api.AgentUpdate{Turn: 4, Kind: "agent_message_chunk", Text: "ok"},
		api.AgentUpdate{Turn: 4, Kind: "turn_ended", StopReason: "cancelled"}))
	assert.Equal(t, "[agent exited] exit status 3\n-- turn 5 ended: crashed (run failed)\nagent crashed (exit status 3)\n", renderTurn(t, false,
		api.AgentUpdate{Turn: 5, Kind: "agent_exited", Text: "exit status 3"},
		api.AgentUpdate{Turn: 5, Kind: "turn_ended", StopReason: "crashed", Status: "failed", Text: "agent crashed (exit status 3)"}))
	// A bracketed line after a message that did not end its line starts
	// a line of its own too.
	assert.Equal(t, "Let me look\n[tool] Read (pending)\n", renderTurn(t, false,
		api.AgentUpdate{Kind: "agent_message_chunk", Text: "Let me look"},
		api.AgentUpdate{Kind: "tool_call", Title: "Read", Status: "pending"}))
}

// TestAgentTurnPrinterThoughts: thoughts only with --thoughts, marked,
// on lines of their own.
func TestAgentTurnPrinterThoughts(t *testing.T) {
	t.Parallel()
	ups := []api.AgentUpdate{
		{Kind: "agent_thought_chunk", Text: "the test"},
		{Kind: "agent_thought_chunk", Text: " fails"},
		{Kind: "agent_message_chunk", Text: "Fixed"},
		{Kind: "agent_thought_chunk", Text: "done?"},
	}
	assert.Equal(t, "Fixed", renderTurn(t, false, ups...))
	assert.Equal(t, "[thought] the test fails\nFixed\n[thought] done?", renderTurn(t, true, ups...))
}

// TestAgentTurnPrinterOneLine: what the agent names is kept on its line.
func TestAgentTurnPrinterOneLine(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "[tool] Read a b (pending)\n[permission] x y: refused (why not)\n", renderTurn(t, false,
		api.AgentUpdate{Kind: "tool_call", Title: "Read a\nb", Status: "pending"},
		api.AgentUpdate{Kind: "permission", Title: "x\ty", Status: "refused", Text: "why\nnot"}))
}

// TestAgentTurnResult: end_turn is success; any other stop reason exits
// 1, saying how the turn ended, as text or as the JSON error object.
func TestAgentTurnResult(t *testing.T) {
	t.Parallel()
	assert.NoError(t, turnResult(api.AgentUpdate{Turn: 3, Kind: "turn_ended", StopReason: "end_turn"}))
	err := turnResult(api.AgentUpdate{Turn: 3, Kind: "turn_ended", StopReason: "refusal"})
	require.Error(t, err)
	var stderr bytes.Buffer
	assert.Equal(t, 1, report(&stderr, err, false, ""))
	assert.Equal(t, "scv: turn 3 ended: refusal\n", stderr.String())
	stderr.Reset()
	assert.Equal(t, 1, report(&stderr, err, true, ""))
	var f failure
	require.NoError(t, json.Unmarshal(stderr.Bytes(), &f), stderr.String())
	assert.Equal(t, failure{Exit: 1, Reason: reasonError, Message: "turn 3 ended: refusal"}, f)
}

// TestAgentPromptText: TEXT, else all of standard input (also for -); an
// empty prompt is a usage error.
func TestAgentPromptText(t *testing.T) {
	t.Parallel()
	text, err := promptText([]string{"fix it"}, iotest.ErrReader(errors.New("stdin must not be read")))
	require.NoError(t, err)
	assert.Equal(t, "fix it", text)
	text, err = promptText(nil, strings.NewReader("line 1\nline 2\n"))
	require.NoError(t, err)
	assert.Equal(t, "line 1\nline 2\n", text)
	text, err = promptText([]string{"-"}, strings.NewReader("from stdin"))
	require.NoError(t, err)
	assert.Equal(t, "from stdin", text)
	for _, c := range []struct {
		args  []string
		stdin string
	}{{nil, ""}, {[]string{"-"}, " \n\t"}, {[]string{"  "}, "not read"}} {
		_, err = promptText(c.args, strings.NewReader(c.stdin))
		var u usageError
		assert.True(t, errors.As(err, &u), "%q %q: %v", c.args, c.stdin, err)
	}
	_, err = promptText(nil, iotest.ErrReader(errors.New("boom")))
	assert.ErrorContains(t, err, "boom")
}

// TestAgentStartFlags: --init-timeout is rounded up to whole seconds and
// must be positive; --project and --task go together.
func TestAgentStartFlags(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]uint64{10 * time.Second: 10, 1500 * time.Millisecond: 2, time.Nanosecond: 1, time.Minute: 60} {
		got, err := initTimeoutSeconds(d)
		require.NoError(t, err, d)
		assert.Equal(t, want, got, d)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := initTimeoutSeconds(d)
		var u usageError
		assert.True(t, errors.As(err, &u), "%v: %v", d, err)
	}
	for _, o := range []AgentStartOptions{{Project: "acme"}, {Task: "build"}, {InitTimeout: 0, Project: "a", Task: "b"}} {
		var u usageError
		assert.True(t, errors.As(o.check(), &u), "%+v", o)
	}
	assert.NoError(t, (&AgentStartOptions{InitTimeout: time.Second}).check())
	assert.NoError(t, (&AgentStartOptions{InitTimeout: time.Second, Project: "a", Task: "b"}).check())
}

// TestAgentStatusLines: status counts the idle live agents; delegations
// shows a live agent's turn, idle time and jobs, - for the others.
func TestAgentStatusLines(t *testing.T) {
	t.Parallel()
	now := time.Unix(1764400200, 0)
	var b bytes.Buffer
	p := &printer{w: &b, now: now}
	idle := uint64(1)
	require.NoError(t, printDaemonStatus(p, &api.DaemonStatus{Version: "1", PID: 7, Delegations: api.DelegationSummary{Active: 3, Idle: &idle, Reaped: 2}}))
	assert.Contains(t, b.String(), "delegations  3 active (1 idle), 2 reaped\n")
	b.Reset()
	require.NoError(t, printDaemonStatus(p, &api.DaemonStatus{Version: "1", PID: 7, Delegations: api.DelegationSummary{Active: 3, Reaped: 2}}))
	assert.Contains(t, b.String(), "delegations  3 active, 2 reaped\n")

	b.Reset()
	turn, jobs, since := uint32(4), uint32(2), uint64(1764400200-90)
	require.NoError(t, printDelegations(p, &api.DaemonStatus{Delegations: api.DelegationSummary{Active: 2, Reaped: 0, Entries: []api.DelegationInfo{
		{Handle: "H1", Agent: "make", PID: 10, OwnerPID: 9, Processes: 1, Depth: 1, Cwd: "/w", StartedUnixSeconds: 1764400200 - 60},
		{Handle: "H2", Agent: "gem", PID: 11, OwnerPID: 7, Processes: 2, Depth: 1, Cwd: "/w", StartedUnixSeconds: 1764400200 - 120,
			Turn: &turn, IdleSinceUnixSeconds: &since, BackgroundJobs: &jobs},
	}}}))
	assert.Equal(t, "HANDLE  AGENT  TURN  IDLE    JOBS  PID  OWNER  PROCS  DEPTH  STARTED  CWD\n"+
		"H1      make   -     -       -     10   9      1      1      1m ago   /w\n"+
		"H2      gem    4     1m ago  2     11   7      2      1      2m ago   /w\n"+
		"2 active, 0 reaped since the daemon started\n", b.String())
}

// TestAgentListAndBlock: the agents table and an agent's block.
func TestAgentListAndBlock(t *testing.T) {
	t.Parallel()
	now := time.Unix(1764400200, 0)
	var b bytes.Buffer
	p := &printer{w: &b, now: now}
	require.NoError(t, printAgents(p, &api.DaemonStatus{Agents: &[]api.AgentInfo{}}))
	assert.Equal(t, "no live agents\n", b.String())

	conv, task, project, reason := "sess-1", "01M8XF1TERD02JWQ0YJ50WK11P", "01M8XF1TERD02JWQ0YJ50WK11Q", "end_turn"
	since, jobs := uint64(1764400200-30), uint32(1)
	agents := []api.AgentInfo{
		{Name: "gem", State: api.AgentIdle, Turn: 2, PID: 42, Conversation: &conv, IdleSinceUnixSeconds: &since, BackgroundJobs: &jobs,
			Task: &task, Project: &project, StopReason: &reason, Handle: "01HANDLE", Workspace: "/w", StartedUnixSeconds: 1764400200 - 60},
		{Name: "claude", State: api.AgentWorking, Turn: 1, PID: 43},
	}
	b.Reset()
	require.NoError(t, printAgents(p, &api.DaemonStatus{Agents: &agents}))
	assert.Equal(t, "NAME    STATE    TURN  IDLE     JOBS  CONVERSATION  TASK       PID\n"+
		"gem     idle     2     30s ago  1     sess-1        …J50WK11P  42\n"+
		"claude  working  1     -        0     -             -          43\n", b.String())

	b.Reset()
	require.NoError(t, printAgent(p, agents[0]))
	out := b.String()
	for _, line := range []string{
		`name +gem`, `handle +01HANDLE`, `state +idle`, `conversation +sess-1`, `turn +2`,
		`idle since +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(30s ago\)`, `background jobs +1`, `workspace +/w`,
		`task +` + task + ` \(project ` + project + `\)`, `run +-`, `last stop reason +end_turn`, `pid +42`,
		`started +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(1m ago\)`,
	} {
		assert.Regexp(t, `(?m)^`+line+`$`, out)
	}
}

// fakeDaemon answers daemon.control requests on a socket with answer,
// recording each request's params.
type fakeDaemon struct {
	sock   string
	answer func(n int, action string, params map[string]any) (any, *api.Error)

	mu    sync.Mutex
	calls []map[string]any
}

func newFakeDaemon(t *testing.T, answer func(n int, action string, params map[string]any) (any, *api.Error)) *fakeDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "scvfake")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeDaemon{sock: filepath.Join(dir, "d.sock"), answer: answer}
	l, err := net.Listen("unix", f.sock)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(conn)
		}
	}()
	return f
}

func (f *fakeDaemon) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params map[string]any  `json:"params"`
		}
		if json.Unmarshal(line, &req) != nil || req.Method != api.Method {
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, req.Params)
		n := len(f.calls)
		f.mu.Unlock()
		action, _ := req.Params["action"].(string)
		result, e := f.answer(n, action, req.Params)
		var reply []byte
		if e != nil {
			reply, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": e})
		} else {
			reply, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		}
		if _, err := conn.Write(append(reply, '\n')); err != nil {
			return
		}
	}
}

// actions are the actions asked so far, in order.
func (f *fakeDaemon) actions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		a, _ := c["action"].(string)
		out = append(out, a)
	}
	return out
}

func (f *fakeDaemon) call(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[i]
}

// agentReply is a reply about agent gem (handle H1) in turn, with a page
// of updates.
func agentReply(turn uint32, page *api.AgentUpdates) api.DaemonStatus {
	return api.DaemonStatus{Version: "t", PID: 1, Components: []api.ComponentHealth{},
		Agents:       &[]api.AgentInfo{{Name: "gem", Handle: "H1", State: api.AgentWorking, Turn: turn}},
		AgentUpdates: page}
}

func pageOf(turn uint32, working bool, next uint64, ups ...api.AgentUpdate) api.DaemonStatus {
	for i := range ups {
		if ups[i].Turn == 0 {
			ups[i].Turn = turn
		}
	}
	if ups == nil {
		ups = []api.AgentUpdate{}
	}
	return api.DaemonStatus{Version: "t", PID: 1, Components: []api.ComponentHealth{},
		AgentUpdates: &api.AgentUpdates{Agent: "gem", Turn: turn, Working: working, Next: next, Updates: ups}}
}

// runScv runs one scv command line against sock, stdin as given.
func runScv(sock, stdin string, args ...string) cliResult {
	var stdout, stderr bytes.Buffer
	c := &client{streams: streams{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr}, now: time.Now}
	code := c.execute(append([]string{"--socket", sock}, args...))
	return cliResult{code, stdout.String(), stderr.String()}
}

// TestAgentPromptFollows: prompt sends the text, then follows the turn
// page after page (after the prompt's next, then each page's) until its
// turn_ended, printing the updates as they come; end_turn exits 0.
func TestAgentPromptFollows(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		switch n {
		case 1:
			return agentReply(3, &api.AgentUpdates{Agent: "gem", Turn: 3, Working: true, Next: 10, Updates: []api.AgentUpdate{}}), nil
		case 2:
			return pageOf(3, true, 12, api.AgentUpdate{Seq: 11, Kind: "turn_started", Text: "hi"},
				api.AgentUpdate{Seq: 12, Kind: "agent_message_chunk", Text: "Hello"}), nil
		case 3:
			return pageOf(3, false, 14, api.AgentUpdate{Seq: 13, Kind: "agent_message_chunk", Text: " there"},
				api.AgentUpdate{Seq: 14, Kind: "turn_ended", StopReason: "end_turn", Status: "succeeded"}), nil
		}
		return nil, api.NewError(api.CodeInvalidParams, api.ReasonInvalidArgument, "unexpected call %d", n)
	})
	r := runScv(f.sock, "hi from stdin", "agent", "prompt", "gem", "--task", "build")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "Hello there\n-- turn 3 ended: end_turn (run succeeded)\n", r.stdout)
	assert.Empty(t, r.stderr)
	assert.Equal(t, []string{"agent_prompt", "agent_updates", "agent_updates"}, f.actions())
	assert.Equal(t, map[string]any{"action": "agent_prompt", "agent": "gem", "text": "hi from stdin", "task": "build"}, f.call(0))
	assert.Equal(t, map[string]any{"action": "agent_updates", "agent": "H1", "after": 10.0, "wait_seconds": 30.0}, f.call(1))
	assert.Equal(t, 12.0, f.call(2)["after"])
}

// TestAgentPromptJSON: under --json the prompt's reply as it came, then
// one update a line; a stop reason other than end_turn exits 1 with the
// JSON error object.
func TestAgentPromptJSON(t *testing.T) {
	t.Parallel()
	ended := api.AgentUpdate{Seq: 2, Turn: 1, Kind: "turn_ended", StopReason: "max_tokens", Status: "failed"}
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		if n == 1 {
			return agentReply(1, &api.AgentUpdates{Agent: "gem", Turn: 1, Working: true, Next: 0, Updates: []api.AgentUpdate{}}), nil
		}
		return pageOf(1, false, 2, api.AgentUpdate{Seq: 1, Kind: "agent_message_chunk", Text: "<b>"}, ended), nil
	})
	r := runScv(f.sock, "", "--json", "agent", "prompt", "gem", "go")
	assert.Equal(t, 1, r.code)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3, r.stdout)
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &st))
	require.NotNil(t, st.AgentUpdates)
	b, _ := json.Marshal(api.AgentUpdate{Seq: 1, Turn: 1, Kind: "agent_message_chunk", Text: "<b>"})
	assert.Equal(t, string(b), lines[1])
	b, _ = json.Marshal(ended)
	assert.Equal(t, string(b), lines[2])
	var fl failure
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &fl), r.stderr)
	assert.Equal(t, failure{Exit: 1, Reason: reasonError, Message: "turn 1 ended: max_tokens"}, fl)
}

// TestAgentPromptAgentEnded: agent_updates answering not_found after the
// turn began: what came is printed, ended with a newline, and it exits 1.
func TestAgentPromptAgentEnded(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		switch n {
		case 1:
			return agentReply(2, &api.AgentUpdates{Agent: "gem", Turn: 2, Working: true, Next: 5, Updates: []api.AgentUpdate{}}), nil
		case 2:
			return pageOf(2, true, 6, api.AgentUpdate{Seq: 6, Kind: "agent_message_chunk", Text: "half"}), nil
		}
		return nil, api.NewError(api.CodeNotFound, api.ReasonNotFound, "live agent %q not found", "H1")
	})
	r := runScv(f.sock, "", "agent", "prompt", "gem", "go")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "half\n", r.stdout)
	assert.Equal(t, "scv: agent gem ended before turn 2 did\n", r.stderr)
}

// TestAgentPromptEndNotSeen: a page that says the turn is over without
// its end is looked at again at once (the end may have come right after
// the page was read); when the end is still not there, it is lost (the
// daemon restarted) and prompt exits 1.
func TestAgentPromptEndNotSeen(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		if n == 1 {
			return agentReply(2, &api.AgentUpdates{Agent: "gem", Turn: 2, Working: true, Next: 5, Updates: []api.AgentUpdate{}}), nil
		}
		// The first page races the end: the turn is over, its end not in
		// the page; the look again finds it.
		if n == 2 {
			return pageOf(2, false, 6, api.AgentUpdate{Seq: 6, Kind: "agent_message_chunk", Text: "ok"}), nil
		}
		return pageOf(2, false, 7, api.AgentUpdate{Seq: 7, Kind: "turn_ended", StopReason: "end_turn", Status: "succeeded"}), nil
	})
	r := runScv(f.sock, "", "agent", "prompt", "gem", "go")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "ok\n-- turn 2 ended: end_turn (run succeeded)\n", r.stdout)
	assert.Equal(t, 0.0, f.call(2)["wait_seconds"], "the look again does not wait")

	f = newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		if n == 1 {
			return agentReply(2, &api.AgentUpdates{Agent: "gem", Turn: 2, Working: true, Next: 5, Updates: []api.AgentUpdate{}}), nil
		}
		if n > 5 { // a follower that never gives up ends here, not at the test's timeout
			return nil, api.NewError(api.CodeNotFound, api.ReasonNotFound, "enough")
		}
		return pageOf(2, false, 5), nil
	})
	r = runScv(f.sock, "", "agent", "prompt", "gem", "go")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "", r.stdout)
	assert.Equal(t, "scv: agent gem: the end of turn 2 was not seen (the daemon restarted while it ran)\n", r.stderr)
	assert.Equal(t, []string{"agent_prompt", "agent_updates", "agent_updates"}, f.actions())
}

// TestAgentPromptDaemonAway: a daemon that answers unavailable (it is
// shutting down) is waited for, with one plain note when it goes and one
// when it answers again; the look after it came back does not wait.
func TestAgentPromptDaemonAway(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		switch n {
		case 1:
			return agentReply(2, &api.AgentUpdates{Agent: "gem", Turn: 2, Working: true, Next: 5, Updates: []api.AgentUpdate{}}), nil
		case 2, 3:
			return nil, api.NewError(api.CodeUnavailable, api.ReasonUnavailable, "the daemon is shutting down")
		}
		return pageOf(2, false, 6, api.AgentUpdate{Seq: 6, Kind: "turn_ended", StopReason: "end_turn", Status: "succeeded"}), nil
	})
	r := runScv(f.sock, "", "agent", "prompt", "gem", "go")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "-- turn 2 ended: end_turn (run succeeded)\n", r.stdout)
	assert.Equal(t, "scv: the daemon went away; waiting up to 1m0s for it to come back\n"+
		"scv: the daemon answers again; following turn 2 of agent gem\n", r.stderr)
	assert.Equal(t, []string{"agent_prompt", "agent_updates", "agent_updates", "agent_updates"}, f.actions())
	assert.Equal(t, 30.0, f.call(1)["wait_seconds"])
	assert.Equal(t, 0.0, f.call(2)["wait_seconds"], "a look while the daemon is away")
	assert.Equal(t, 0.0, f.call(3)["wait_seconds"])
	assert.Equal(t, 5.0, f.call(3)["after"], "from where it was")
}

// TestAgentPromptInterrupt: the first SIGINT sends agent_cancel once and
// goes on following the turn to its end; the second exits 130 at once.
// Not parallel: the signal goes to the whole test process.
func TestAgentPromptInterrupt(t *testing.T) {
	var once sync.Once
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		switch action {
		case "agent_prompt":
			return agentReply(1, &api.AgentUpdates{Agent: "gem", Turn: 1, Working: true, Next: 0, Updates: []api.AgentUpdate{}}), nil
		case "agent_cancel":
			return agentReply(1, nil), nil
		}
		first := false
		once.Do(func() { first = true })
		if first {
			// scv follows the turn now: interrupt it, and answer once
			// it had time to ask for the cancel.
			syscall.Kill(os.Getpid(), syscall.SIGINT)
			time.Sleep(300 * time.Millisecond)
			return pageOf(1, true, 1, api.AgentUpdate{Seq: 1, Kind: "agent_message_chunk", Text: "stopping"}), nil
		}
		return pageOf(1, false, 2, api.AgentUpdate{Seq: 2, Kind: "turn_ended", StopReason: "cancelled", Status: "cancelled"}), nil
	})
	r := runScv(f.sock, "", "agent", "prompt", "gem", "go")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "stopping\n-- turn 1 ended: cancelled (run cancelled)\n", r.stdout)
	assert.Contains(t, r.stderr, "scv: turn 1 ended: cancelled\n")
	assert.Equal(t, []string{"agent_prompt", "agent_updates", "agent_cancel", "agent_updates"}, f.actions())
	assert.Equal(t, "H1", f.call(2)["agent"])

	cancelled := make(chan struct{})
	var cancelOnce sync.Once
	f = newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		switch action {
		case "agent_prompt":
			return agentReply(1, &api.AgentUpdates{Agent: "gem", Turn: 1, Working: true, Next: 0, Updates: []api.AgentUpdate{}}), nil
		case "agent_cancel":
			cancelOnce.Do(func() { close(cancelled) })
			return agentReply(1, nil), nil
		}
		if n == 2 {
			return pageOf(1, true, 1, api.AgentUpdate{Seq: 1, Kind: "agent_message_chunk", Text: "working"}), nil
		}
		if n > 4 {
			return nil, api.NewError(api.CodeNotFound, api.ReasonNotFound, "enough")
		}
		// The agent does not stop: the poll waits, and Ctrl-C twice.
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		<-cancelled
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(5 * time.Second)
		return pageOf(1, true, 1), nil
	})
	start := time.Now()
	r = runScv(f.sock, "", "agent", "prompt", "gem", "go")
	assert.Equal(t, exitInterrupted, r.code, r.stderr)
	assert.Less(t, time.Since(start), 4*time.Second, "the second Ctrl-C does not wait for the poll")
	assert.Equal(t, "working\n", r.stdout)
}

// TestAgentStartRequest: start resolves CMD on the PATH (not found: 127,
// nothing sent), sends its absolute path, this environment and the
// current directory as the workspace (none with --project, the
// project's), the init timeout in whole seconds; and prints the agent.
// Not parallel: it changes the directory and the environment.
func TestAgentStartRequest(t *testing.T) {
	ws := t.TempDir()
	t.Chdir(ws)
	t.Setenv("SCV_PARENT", "P1,P2")
	t.Setenv("SCV_CHAT", "local:owner")
	t.Setenv("SCV_SESSION", "")
	conv := "sess-9"
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		st := api.DaemonStatus{Version: "t", PID: 1, Components: []api.ComponentHealth{},
			Agents: &[]api.AgentInfo{{Name: "sh", Handle: "H9", State: api.AgentIdle, Conversation: &conv, Workspace: ws, PID: 5}}}
		return st, nil
	})
	r := runScv(f.sock, "", "agent", "start", "--", "no-such-agent-here", "x")
	assert.Equal(t, exitNotFound, r.code)
	assert.Contains(t, r.stderr, "no-such-agent-here")
	assert.Empty(t, f.actions(), "nothing sent")

	sh, err := filepath.Abs(mustLookPath(t, "sh"))
	require.NoError(t, err)
	r = runScv(f.sock, "", "agent", "start", "--init-timeout", "2500ms", "--ask", "--session", "S1", "--", "sh", "-c", "x")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^agent sh started \(conversation sess-9\)\nname +sh\nhandle +H9\n`, r.stdout)
	p := f.call(0)
	assert.Equal(t, "agent_start", p["action"])
	assert.Equal(t, []any{sh, "-c", "x"}, p["command"])
	assert.Equal(t, ws, p["workspace"])
	assert.Equal(t, 3.0, p["init_timeout_seconds"])
	assert.Equal(t, true, p["ask"])
	assert.Equal(t, "S1", p["session"])
	assert.Equal(t, "P1,P2", p["parent"])
	assert.Equal(t, "local:owner", p["chat"])
	assert.Contains(t, p["env"], "SCV_CHAT=local:owner")
	assert.NotContains(t, p, "project")

	r = runScv(f.sock, "", "agent", "start", "--project", "acme", "--task", "build", "--name", "b", "--", "sh")
	assert.Equal(t, 0, r.code, r.stderr)
	p = f.call(1)
	assert.NotContains(t, p, "workspace", "the project's workspace")
	assert.NotContains(t, p, "init_timeout_seconds", "the daemon's default")
	assert.Equal(t, "acme", p["project"])
	assert.Equal(t, "build", p["task"])
	assert.Equal(t, "b", p["name"])

	r = runScv(f.sock, "", "agent", "start", "--workspace", "sub", "--", "sh")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, filepath.Join(ws, "sub"), f.call(2)["workspace"])

	for _, args := range [][]string{
		{"agent", "start", "--project", "acme", "--", "sh"},
		{"agent", "start", "--init-timeout", "0s", "--", "sh"},
		{"agent", "start", "sh"},
		{"agent", "prompt", "gem", ""},
		{"agent", "prompt"},
		{"agent", "stop"},
	} {
		r = runScv(f.sock, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
	assert.Len(t, f.actions(), 3, "usage errors send nothing")
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Skipf("no %s on the PATH", name)
	return ""
}

// TestAgentSmallCommands: list, stop, cancel and delegations update say
// what the daemon did, in one line each (update: the entry).
// Not parallel: it sets SCV_DELEGATION.
func TestAgentSmallCommands(t *testing.T) {
	t.Setenv("SCV_DELEGATION", "")
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		switch action {
		case "agent_list":
			return api.DaemonStatus{Version: "t", Agents: &[]api.AgentInfo{}}, nil
		case "agent_stop", "agent_cancel":
			return api.DaemonStatus{Version: "t", Agents: &[]api.AgentInfo{{Name: "gem", Handle: "H1", Turn: 4}}}, nil
		case "delegation_update":
			jobs := uint32(2)
			return api.DaemonStatus{Version: "t", Delegations: api.DelegationSummary{Active: 1, Entries: []api.DelegationInfo{
				{Handle: "H1", Agent: "gem", PID: 5, BackgroundJobs: &jobs, StartedUnixSeconds: uint64(time.Now().Unix())}}}}, nil
		}
		return nil, api.NewError(api.CodeInvalidParams, api.ReasonInvalidArgument, "unexpected %s", action)
	})
	assert.Equal(t, cliResult{0, "no live agents\n", ""}, runScv(f.sock, "", "agent", "list"))
	assert.Equal(t, cliResult{0, "agent gem stopped\n", ""}, runScv(f.sock, "", "agent", "stop", "H1"))
	assert.Equal(t, cliResult{0, "agent gem: turn 4 cancelling\n", ""}, runScv(f.sock, "", "agent", "cancel", "gem"))

	r := runScv(f.sock, "", "delegations", "update", "--background-jobs", "2")
	assert.Equal(t, exitUsage, r.code, "no handle, no SCV_DELEGATION")
	r = runScv(f.sock, "", "delegations", "update", "--handle", "H1")
	assert.Equal(t, exitUsage, r.code, "--background-jobs is required")
	assert.Equal(t, []string{"agent_list", "agent_stop", "agent_cancel"}, f.actions())

	t.Setenv("SCV_DELEGATION", "H1")
	r = runScv(f.sock, "", "delegations", "update", "--background-jobs", "2")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^HANDLE +AGENT +TURN +IDLE +JOBS +PID .*\nH1 +gem +- +- +2 +5 `, r.stdout)
	assert.Equal(t, map[string]any{"action": "delegation_update", "handle": "H1", "background_jobs": 2.0}, f.call(3))
	r = runScv(f.sock, "", "delegations", "update", "--background-jobs", "0", "--handle", "H2")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, map[string]any{"action": "delegation_update", "handle": "H2", "background_jobs": 0.0}, f.call(4))
}
