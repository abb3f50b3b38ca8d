package agents_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// TestLongProgressIsCut: the progress a turn records is made by the
// daemon from the agent's updates, so a text past the ledger's limit is
// cut to reducer.MaxProgressLen characters, ending in "…", and its
// control characters become spaces, not refused.
func TestLongProgressIsCut(t *testing.T) {
	e := newEnv(t, "build")
	e.agent("a", "build")
	title := "x\u0085" + strings.Repeat("é", 3000)
	e.prompt("a", "tool t1 "+title)
	runs := e.runs("build")
	require.Len(t, runs, 1)
	require.NotNil(t, runs[0].Progress)
	got := *runs[0].Progress
	assert.Equal(t, reducer.MaxProgressLen, utf8.RuneCountInString(got))
	assert.Equal(t, "tool: x "+strings.Repeat("é", reducer.MaxProgressLen-len("tool: x ")-1)+"…", got)
	assert.NoError(t, reducer.ValidProgress(got))
}

// TestTurns: a live agent opens its session idle at turn 0; each prompt is
// a turn whose updates stream in order and whose run records its end:
// succeeded on end_turn, cancelled on cancel, failed on refusal (a retry
// spent). While a turn runs the agent is working, not idle, and a second
// prompt is refused.
func TestTurns(t *testing.T) {
	e := newEnv(t, "build", "test")
	info := e.agent("a", "build")
	require.NotNil(t, info.Conversation)
	assert.True(t, strings.HasPrefix(*info.Conversation, "sess-"), *info.Conversation)
	assert.Equal(t, api.AgentIdle, info.State)
	assert.Zero(t, info.Turn)
	assert.NotNil(t, info.IdleSinceUnixSeconds)
	d := e.dels.List(false)
	require.Len(t, d.Entries, 1)
	assert.Equal(t, info.Handle, d.Entries[0].Handle)
	require.NotNil(t, d.Entries[0].Turn)
	assert.Zero(t, *d.Entries[0].Turn)
	assert.Equal(t, info.Conversation, d.Entries[0].Conversation)
	assert.NotNil(t, d.Entries[0].IdleSinceUnixSeconds)
	assert.Equal(t, uint64(1), d.Active)
	assert.Equal(t, uint64(1), *d.Idle)

	ups := e.prompt("a", "say hello \nchunks 3\nplan compile;link\ntool t1 Reading main.go\ntooldone t1")
	assert.Equal(t, []string{"turn_started", "agent_message_chunk", "agent_message_chunk", "agent_message_chunk",
		"agent_message_chunk", "plan", "tool_call", "tool_call_update", "turn_ended"}, kinds(ups))
	assert.Equal(t, "hello chunk 1 chunk 2 chunk 3 ", said(ups))
	end := last(t, ups, "turn_ended")
	assert.Equal(t, "end_turn", end.StopReason)
	assert.Equal(t, "succeeded", end.Status)
	runs := e.runs("build")
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunSucceeded, runs[0].Status)
	assert.Equal(t, "a", runs[0].Agent)
	require.NotNil(t, runs[0].Progress)
	assert.Equal(t, "tool: Reading main.go", *runs[0].Progress, "the newest progress text is journaled at the turn's end")

	// The task is done: the next turn names another.
	_, _, err := e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: "a", Text: "say again"})
	assert.ErrorIs(t, err, reducer.ErrInvalidTransition, "a run of a done task is refused, and nothing is sent")
	assert.Equal(t, uint32(1), e.info("a").Turn)

	test := "test"
	info, page, err := e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: "a", Text: "say waiting\nsleep 30s", Task: &test})
	require.NoError(t, err)
	assert.Equal(t, uint32(2), info.Turn)
	assert.Equal(t, api.AgentWorking, info.State)
	assert.Nil(t, info.IdleSinceUnixSeconds)
	assert.NotNil(t, info.Run)
	assert.Zero(t, *e.dels.Summary().Idle, "a working agent is not idle")
	_, _, err = e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: "a", Text: "say twice"})
	assert.ErrorIs(t, err, api.ErrConflict)
	assert.Contains(t, err.Error(), "in turn 2")
	assert.Equal(t, []string{"agent a (turn 2)"}, e.dels.Busy())
	_, err = e.m.CancelTurn(e.ctx, "a")
	require.NoError(t, err)
	ups = e.follow("a", 2, page.Next)
	end = last(t, ups, "turn_ended")
	assert.Equal(t, "cancelled", end.StopReason)
	runs = e.runs("test")
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunCancelled, runs[0].Status)
	info = e.info("a")
	assert.Equal(t, api.AgentIdle, info.State)
	assert.NotNil(t, info.IdleSinceUnixSeconds)
	assert.Empty(t, e.dels.Busy())

	ups = e.prompt("a", "say no\nrefuse")
	assert.Equal(t, "refusal", last(t, ups, "turn_ended").StopReason)
	runs = e.runs("test")
	require.Len(t, runs, 2)
	assert.Equal(t, reducer.RunFailed, runs[1].Status)
	task, _ := e.project().Task(e.tasks["test"])
	assert.Equal(t, uint32(1), task.Retries, "a refusal spends a retry")
	assert.Equal(t, uint32(3), e.info("a").Turn)
}

// TestHeartbeatsWhileSilent: a turn whose agent says nothing for a while
// gets heartbeats, so its run does not go stale.
func TestHeartbeatsWhileSilent(t *testing.T) {
	e := newEnv(t, "build")
	e.agent("a", "build")
	e.prompt("a", "silent 400ms")
	var beats int
	for _, r := range e.runs("build") {
		_ = r
	}
	page, err := e.l.EventsPage(e.ctx, "01JPROJECT0000000000000000", 0, 1000)
	require.NoError(t, err)
	for _, ev := range page.Rows {
		if ev.Kind == reducer.KindHeartbeat {
			beats++
		}
	}
	assert.GreaterOrEqual(t, beats, 2, "heartbeats every 50 ms, coalesced at 20 ms, over 400 ms of silence")
}

// TestCrash: an agent that crashes in a turn fails its run (the retry
// budget applies) with the crash as its last progress, and is gone with
// every process it started.
func TestCrash(t *testing.T) {
	e := newEnv(t, "build")
	info := e.agent("a", "build", "--stderr", "about to misbehave")
	ups := e.prompt("a", "spawn sleep 300\nsay going\ncrash")
	end := last(t, ups, "turn_ended")
	assert.Equal(t, "crashed", end.StopReason)
	assert.Equal(t, "failed", end.Status)
	assert.Contains(t, end.Text, "agent crashed (exit status 3)")
	runs := e.runs("build")
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunFailed, runs[0].Status)
	require.NotNil(t, runs[0].Progress)
	assert.Contains(t, *runs[0].Progress, "agent crashed (exit status 3)")
	task, _ := e.project().Task(e.tasks["build"])
	assert.Equal(t, uint32(1), task.Retries)
	assert.Equal(t, reducer.TaskReady, task.Status)
	gone(t, info.Handle, e.state)
	assert.Eventually(t, func() bool { return len(e.m.ListAgents()) == 0 }, 10*time.Second, 10*time.Millisecond, "the agent is forgotten")
	assert.Empty(t, e.dels.List(true).Entries)
	rows, err := e.db.Agents(e.ctx)
	require.NoError(t, err)
	assert.Empty(t, rows, "its row is gone")
}

// TestNotAnAgent: a command that speaks no ACP is refused with an error
// naming the agent and what it did, and nothing of it is left running.
func TestNotAnAgent(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name  string
		flags []string
		init  uint64
		want  string
	}{
		{"exits", []string{"--exit-at-once"}, 10, "ended (exit status 2) before it answered initialize; its standard error: acpagent: exiting at once"},
		{"garbage", []string{"--garbage"}, 10, `is not an ACP agent: it wrote a line that is not a JSON-RPC message: "this is not json-rpc"`},
		{"silent", []string{"--no-init"}, 1, "did not answer initialize within 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.startCmd(tc.name, "", append(tc.flags, "--state", e.state+"/"+tc.name)...)
			c.InitTimeoutSeconds = &tc.init
			start := time.Now()
			_, _, err := e.m.StartAgent(e.ctx, c)
			require.Error(t, err)
			assert.ErrorIs(t, err, api.ErrInvalidArgument)
			assert.Contains(t, err.Error(), "agent "+tc.name+" ("+acpagent(t)+")")
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, time.Since(start), time.Duration(tc.init+5)*time.Second)
			gone(t, "", e.state+"/"+tc.name)
			assert.Empty(t, e.m.ListAgents())
		})
	}
	rows, err := e.db.Agents(e.ctx)
	require.NoError(t, err)
	assert.Empty(t, rows)
}

// TestBadMessages: an agent that writes a line that is no JSON-RPC
// message, or one over the size limit, in a turn is stopped, and its run
// failed with that reason.
func TestBadMessages(t *testing.T) {
	e := newEnv(t, "one", "two")
	for _, tc := range []struct{ task, script, want string }{
		{"one", "say hi\ngarbage\nsay more", `it wrote a line that is not a JSON-RPC message: "this is not json"`},
		{"two", "big 5000000", "it wrote a message longer than the 4194304-byte limit"},
	} {
		info := e.agent(tc.task, tc.task)
		ups := e.prompt(tc.task, tc.script)
		end := last(t, ups, "turn_ended")
		assert.Equal(t, "failed", end.Status)
		assert.Contains(t, end.Text, tc.want)
		runs := e.runs(tc.task)
		require.Len(t, runs, 1)
		assert.Equal(t, reducer.RunFailed, runs[0].Status)
		assert.Contains(t, *runs[0].Progress, tc.want)
		gone(t, info.Handle, "")
	}
	assert.Eventually(t, func() bool { return len(e.m.ListAgents()) == 0 }, 10*time.Second, 10*time.Millisecond)
}

// TestFiles: an agent reads and writes files of its workspace, and is
// refused any path outside it, a symbolic link out of it included.
func TestFiles(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "in.txt"), []byte("inside"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.ws, "escape")))
	e.agent("a", "")
	ups := e.prompt("a", strings.Join([]string{
		"read " + filepath.Join(e.ws, "in.txt"),
		"read " + filepath.Join(outside, "secret.txt"),
		"read " + filepath.Join(e.ws, "escape", "secret.txt"),
		"read " + filepath.Join(e.ws, "..", filepath.Base(outside), "secret.txt"),
		"write " + filepath.Join(e.ws, "new", "out.txt") + " written",
		"write " + filepath.Join(e.ws, "escape", "planted.txt") + " planted",
	}, "\n"))
	text := said(ups)
	assert.Contains(t, text, "read: inside")
	assert.Equal(t, 4, strings.Count(text, "outside the agent's workspace"), text)
	assert.NotContains(t, text, "read: secret")
	assert.Contains(t, text, "write: ok")
	b, err := os.ReadFile(filepath.Join(e.ws, "new", "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written", string(b))
	assert.NoFileExists(t, filepath.Join(outside, "planted.txt"))
	var refused int
	for _, u := range ups {
		if u.Kind == "file" && u.Status == "refused" {
			refused++
		}
	}
	assert.Equal(t, 4, refused, "each refusal is an update")
}

// TestPermission: with --ask the owner decides the agent's permission
// requests (one question each, naming the agent and what it asks);
// without it they are refused unasked.
func TestPermission(t *testing.T) {
	e := newEnv(t)
	e.agent("asks", "", "--state", e.state)
	c := e.startCmd("asks-owner", "")
	c.Ask = true
	_, _, err := e.m.StartAgent(e.ctx, c)
	require.NoError(t, err)

	ups := e.prompt("asks", "permission deploy to production")
	assert.Contains(t, said(ups), "permission: rejected")
	assert.Equal(t, "refused", last(t, ups, "permission").Status)
	assert.Empty(t, e.asked.asked, "nobody was asked")

	ups = e.prompt("asks-owner", "permission deploy to production")
	assert.Contains(t, said(ups), "permission: allowed")
	assert.Equal(t, "allowed", last(t, ups, "permission").Status)
	require.Len(t, e.asked.asked, 1)
	assert.Contains(t, e.asked.asked[0].Question, "Agent asks-owner (turn 1) asks for permission: deploy to production")
	require.NotNil(t, e.asked.asked[0].Parent)
	assert.True(t, strings.HasSuffix(*e.asked.asked[0].Parent, e.info("asks-owner").Handle), "asked on the agent's behalf")

	e.asked.mu.Lock()
	e.asked.answer = api.ConfirmNo
	e.asked.mu.Unlock()
	ups = e.prompt("asks-owner", "permission delete the database")
	assert.Contains(t, said(ups), "permission: rejected")
	assert.Equal(t, "rejected", last(t, ups, "permission").Status)
}

// TestTerminals: terminals run in the workspace only for an agent started
// with --allow-terminal.
func TestTerminals(t *testing.T) {
	e := newEnv(t)
	e.agent("plain", "")
	c := e.startCmd("shell", "")
	c.AllowTerminal = true
	_, _, err := e.m.StartAgent(e.ctx, c)
	require.NoError(t, err)
	ups := e.prompt("plain", "terminal pwd")
	assert.Contains(t, said(ups), "terminal error")
	assert.Contains(t, said(ups), "--allow-terminal")
	ups = e.prompt("shell", "terminal pwd")
	assert.Contains(t, said(ups), "terminal: exit 0 output "+e.ws)
}

// TestRestartResumes: a stopped manager keeps its agents (between turns);
// the next one starts them again and loads their conversations, turn
// counts kept. An agent that does not offer session/load has ended, and
// its row is dropped.
func TestRestartResumes(t *testing.T) {
	e := newEnv(t, "build", "test")
	before := e.agent("a", "build")
	e.agent("b", "", "--no-load")
	e.prompt("a", "say first")
	old := e.m
	old.Stop()
	gone(t, before.Handle, e.state)
	rows, err := e.db.Agents(e.ctx)
	require.NoError(t, err)
	require.Len(t, rows, 2, "both kept for the next start")

	e.start()
	require.Eventually(t, func() bool {
		as := e.m.ListAgents()
		return len(as) == 1 && as[0].State == api.AgentIdle
	}, 20*time.Second, 20*time.Millisecond, "a resumed, b ended")
	after := e.info("a")
	assert.Equal(t, before.Handle, after.Handle)
	assert.Equal(t, before.Conversation, after.Conversation, "the same conversation")
	assert.Equal(t, uint32(1), after.Turn)
	assert.True(t, after.LoadSession)
	assert.NotEqual(t, before.PID, after.PID, "a new process")

	// The agent knows only the sessions it created or loaded: a turn
	// runs, so session/load did.
	test := "test"
	_, page, err := e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: "a", Text: "say second", Task: &test})
	require.NoError(t, err)
	ups := e.follow("a", 2, page.Next)
	assert.Equal(t, "end_turn", last(t, ups, "turn_ended").StopReason)
	assert.Equal(t, "second", said(ups))
	rows, err = e.db.Agents(e.ctx)
	require.NoError(t, err)
	require.Len(t, rows, 1, "b's row is dropped")
	assert.Equal(t, "a", rows[0].Name)
}

// TestHold: while a restart is about to go, no turn begins (a prompt is
// refused unavailable, saying why, and nothing is recorded); Hold names
// the turns under way, and with end cuts them short: each cancelled, its
// run cancelled with the reason, before Hold returns. Release lets turns
// begin again.
func TestHold(t *testing.T) {
	e := newEnv(t, "build", "test")
	e.agent("a", "build")
	assert.Empty(t, e.m.Hold("the daemon restarts into 2.0", false), "no turn under way")
	_, _, err := e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: "a", Text: "say hello"})
	require.ErrorIs(t, err, api.ErrUnavailable)
	assert.Contains(t, err.Error(), "agent a takes no prompt now: the daemon restarts into 2.0")
	assert.Zero(t, e.info("a").Turn, "the refused prompt counts no turn")
	assert.Empty(t, e.runs("build"), "and starts no run")
	e.m.Release()

	_, page, err := e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: "a", Text: "say waiting\nsleep 30s"})
	require.NoError(t, err)
	assert.Equal(t, []string{"agent a (turn 1)"}, e.m.Hold("the daemon restarts into 2.0", false))
	e.m.Release()
	assert.Empty(t, e.m.Hold("the daemon restarts into 2.0 at its deadline", true), "the turn was cut short")
	runs := e.runs("build")
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunCancelled, runs[0].Status, "recorded before Hold returned")
	require.NotNil(t, runs[0].Progress)
	assert.Equal(t, "cancelled: the daemon restarts into 2.0 at its deadline", *runs[0].Progress)
	end := last(t, e.follow("a", 1, page.Next), "turn_ended")
	assert.Equal(t, "cancelled", end.StopReason)
	assert.Equal(t, "cancelled: the daemon restarts into 2.0 at its deadline", end.Text, "the turn's follower is told why")
	e.m.Release()

	// A turn cancelled by hand afterwards says no such reason.
	test := "test"
	_, page, err = e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: "a", Text: "sleep 30s", Task: &test})
	require.NoError(t, err)
	_, err = e.m.CancelTurn(e.ctx, "a")
	require.NoError(t, err)
	assert.Empty(t, last(t, e.follow("a", 2, page.Next), "turn_ended").Text)
}

// TestDaemonDiedInATurn: a row left with a turn under way (a daemon that
// was killed) fails that turn's run when the next manager starts.
func TestDaemonDiedInATurn(t *testing.T) {
	e := newEnv(t, "build")
	info := e.agent("a", "build")
	_, _, err := e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: "a", Text: "sleep 30s"})
	require.NoError(t, err)
	rows, err := e.db.Agents(e.ctx)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.NotEmpty(t, rows[0].RunID, "the row names the turn's run")
	// As if the daemon died: its row stays as it is, and the agent's
	// processes go.
	killed := rows[0]
	e.m.Stop()
	require.NoError(t, e.db.PutAgent(e.ctx, killed))
	runs := e.runs("build")
	require.Len(t, runs, 1)
	require.Equal(t, reducer.RunCancelled, runs[0].Status, "the stop cancelled it")

	// A second run, left running as a killed daemon leaves it.
	_, err = e.l.Execute(e.ctx, reducer.RetryTask{Project: "acme", TaskID: e.tasks["build"]})
	require.Error(t, err, "a cancelled run leaves the task ready, not failed")
	_, err = e.l.Execute(e.ctx, reducer.StartRun{Project: "acme", TaskID: e.tasks["build"], RunID: "01JRUNLEFT0000000000000000", Agent: "a"})
	require.NoError(t, err)
	killed.RunID = "01JRUNLEFT0000000000000000"
	require.NoError(t, e.db.PutAgent(e.ctx, killed))
	e.start()
	require.Eventually(t, func() bool {
		r, ok := e.project().Run("01JRUNLEFT0000000000000000")
		return ok && r.Status == reducer.RunFailed
	}, 20*time.Second, 20*time.Millisecond)
	r, _ := e.project().Run("01JRUNLEFT0000000000000000")
	assert.Equal(t, "the daemon ended in the middle of turn 1", *r.Progress)
	require.Eventually(t, func() bool { return e.info("a").State == api.AgentIdle }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, info.Handle, e.info("a").Handle)
}

// TestBackgroundJobs: a process started in a live agent reports its
// background jobs; the agent is then not idle, and a restart waits for
// them. A process outside the agent is refused, and changes nothing.
func TestBackgroundJobs(t *testing.T) {
	e := newEnv(t)
	info := e.agent("a", "")
	ups := e.prompt("a", "spawn sleep 60")
	pid, err := strconv.Atoi(strings.TrimPrefix(said(ups), "spawned "))
	require.NoError(t, err, said(ups))
	end := last(t, ups, "turn_ended")
	assert.Equal(t, "end_turn", end.StopReason)
	assert.Empty(t, end.Status, "an agent of no project: its turns are no runs")
	inside := api.WithPeer(e.ctx, api.Peer{PID: int32(pid)})
	d, err := e.dels.Update(inside, api.CmdDelegationUpdate{Handle: info.Handle, BackgroundJobs: 2})
	require.NoError(t, err)
	require.NotNil(t, d.BackgroundJobs)
	assert.Equal(t, uint32(2), *d.BackgroundJobs)
	assert.Zero(t, *e.dels.Summary().Idle, "an agent with background jobs is not idle")
	assert.Equal(t, uint64(1), e.dels.Summary().Active)
	assert.Equal(t, []string{"agent a (2 background jobs)"}, e.dels.Busy())

	outside := api.WithPeer(e.ctx, api.Peer{PID: int32(os.Getpid())})
	_, err = e.dels.Update(outside, api.CmdDelegationUpdate{Handle: info.Handle, BackgroundJobs: 0})
	require.Error(t, err)
	assert.Equal(t, api.ReasonForbidden, api.ErrorOf(err).Data.Reason)
	_, err = e.dels.Update(e.ctx, api.CmdDelegationUpdate{Handle: info.Handle, BackgroundJobs: 0})
	assert.Equal(t, api.ReasonForbidden, api.ErrorOf(err).Data.Reason, "no peer, no owner")
	assert.Equal(t, uint32(2), *e.info("a").BackgroundJobs, "a refusal changes nothing")

	_, err = e.dels.Update(inside, api.CmdDelegationUpdate{Handle: info.Handle, BackgroundJobs: 0})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), *e.dels.Summary().Idle)
	assert.Empty(t, e.dels.Busy())
	_, err = e.dels.Update(inside, api.CmdDelegationUpdate{Handle: "01JNOSUCHDELEGATION0000000", BackgroundJobs: 1})
	assert.Equal(t, api.ReasonNotFound, api.ErrorOf(err).Data.Reason)
}

// TestFastAgent: an agent that sends updates faster than the daemon takes
// them waits for the daemon (its writes wait on the pipe): none is lost,
// they come in order, and the turn ends as the agent said. (Left to the
// SDK's queue of 1,024, such a burst closed the connection.)
func TestFastAgent(t *testing.T) {
	e := newEnv(t, "build")
	e.agent("a", "build")
	const n = 20_000
	ups := e.prompt("a", fmt.Sprintf("chunks %d", n))
	end := last(t, ups, "turn_ended")
	assert.Equal(t, "end_turn", end.StopReason)
	chunks := 0
	for _, u := range ups {
		if u.Kind == "agent_message_chunk" {
			chunks++
			require.Equal(t, fmt.Sprintf("chunk %d ", chunks), u.Text, "in order")
		}
	}
	assert.Equal(t, n, chunks)
	require.Len(t, e.runs("build"), 1)
	assert.Equal(t, reducer.RunSucceeded, e.runs("build")[0].Status)
}

// TestForeignSession: what a live agent sends about a session the daemon
// did not open for it is no part of its turn. Its updates about another
// session are dropped and its requests about one refused, each with a
// warning that names the agent and the session.
func TestForeignSession(t *testing.T) {
	e := newEnv(t, "build")
	e.agent("a", "build")
	secret := filepath.Join(e.ws, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("the secret"), 0o644))
	ups := e.prompt("a", "say mine\nas sess-other say theirs\nas sess-other tool t9 Theirs\n"+
		"as sess-other read "+secret+"\nsay done")
	assert.Equal(t, []string{"turn_started", "agent_message_chunk", "agent_message_chunk", "turn_ended"}, kinds(ups))
	assert.Equal(t, "minedone", said(ups))
	runs := e.runs("build")
	require.Len(t, runs, 1)
	require.NotNil(t, runs[0].Progress)
	assert.Equal(t, "minedone", *runs[0].Progress, "the other session's tool call is not the run's progress")

	dropped := e.logs.lines("agent sent an update about a session the daemon did not open; dropped")
	require.Len(t, dropped, 3, "theirs, the tool call, and what the agent said of the refused read")
	for _, l := range dropped {
		assert.Contains(t, l, "level=WARN")
		assert.Contains(t, l, " agent=a ")
		assert.Contains(t, l, " session=sess-other ")
	}
	refused := e.logs.lines("agent asked about a session the daemon did not open; refused")
	require.Len(t, refused, 1)
	assert.Contains(t, refused[0], "level=WARN")
	assert.Contains(t, refused[0], " agent=a ")
	assert.Contains(t, refused[0], " session=sess-other ")
	assert.Contains(t, refused[0], " method=fs/read_text_file")
}

// TestTurnEndedLog: the log line of a turn's end carries its run's status
// only when the turn is a run: an agent of no project has none.
func TestTurnEndedLog(t *testing.T) {
	e := newEnv(t, "build")
	e.agent("free", "")
	e.agent("worker", "build")
	e.prompt("free", "say hi")
	e.prompt("worker", "say hi")
	ended := e.logs.lines("turn ended")
	require.Len(t, ended, 2)
	for _, l := range ended {
		if strings.Contains(l, " agent=free ") {
			assert.Contains(t, l, " stop_reason=end_turn")
			assert.NotContains(t, l, "run_status", "a turn that is no run has no run status")
		} else {
			assert.Contains(t, l, " agent=worker ")
			assert.Contains(t, l, " run_status=succeeded")
		}
	}
}
