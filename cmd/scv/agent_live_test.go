package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/proc"
	"scv/reducer"
)

// These tests run the real binaries: `scv daemon`, the `scv` client, and
// the scripted ACP agent of cmd/internal/acpagent, on a real socket and a
// real ledger file. A prompt's text is the agent's script (acpagent's
// package doc lists its verbs).

// liveEnv is a daemon process, its folder, and the scv binary and the
// test agent on the PATH its commands (and its agents) run with.
type liveEnv struct {
	t           *testing.T
	d           *testDaemon
	dir, ws     string
	binDir      string
	env         []string
	agentBinary string
}

// newLiveEnv starts bin as a daemon with args, in a folder of its own
// whose bin holds scv and acpagent.
func newLiveEnv(t *testing.T, bin string, args ...string) *liveEnv {
	t.Helper()
	dir := shortDir(t)
	e := &liveEnv{t: t, dir: dir, ws: filepath.Join(dir, "ws"), binDir: filepath.Join(dir, "bin")}
	require.NoError(t, os.MkdirAll(e.ws, 0o755))
	require.NoError(t, os.MkdirAll(e.binDir, 0o755))
	e.agentBinary = filepath.Join(e.binDir, "acpagent")
	out, err := exec.Command("go", "build", "-o", e.agentBinary, "scv/cmd/internal/acpagent").CombinedOutput()
	require.NoError(t, err, "build the test agent: %s", out)
	if filepath.Dir(bin) != e.binDir {
		install(t, bin, filepath.Join(e.binDir, "scv"))
	}
	e.d = startTestDaemon(t, filepath.Join(e.binDir, "scv"), filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock"), "", args...)
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PATH", "SCV_SOCKET", "SCV_PARENT", "SCV_DELEGATION", "SCV_CHAT", "NO_COLOR", "TZ":
		default:
			e.env = append(e.env, kv)
		}
	}
	e.env = append(e.env, "PATH="+e.binDir+":"+os.Getenv("PATH"), "SCV_SOCKET="+e.d.sock,
		"ACPAGENT_STATE="+filepath.Join(dir, "agent-state"), "NO_COLOR=1", "TZ=UTC")
	return e
}

// result is what one scv command did.
type result struct {
	stdout, stderr string
	code           int
}

func (e *liveEnv) cmd(args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(e.binDir, "scv"), args...)
	c.Env, c.Dir = e.env, e.ws
	return c
}

// scv runs one command to its end.
func (e *liveEnv) scv(args ...string) result {
	e.t.Helper()
	c := e.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		require.NoError(e.t, err, "scv %s", strings.Join(args, " "))
	}
	return r
}

// ok runs one command, which must exit 0, and returns its stdout.
func (e *liveEnv) ok(args ...string) string {
	e.t.Helper()
	r := e.scv(args...)
	require.Equal(e.t, 0, r.code, "scv %s\nstdout: %s\nstderr: %s\ndaemon: %s", strings.Join(args, " "), r.stdout, r.stderr, e.d.logs())
	return r.stdout
}

// jsonOf runs a command with --json and decodes its reply.
func (e *liveEnv) jsonOf(args ...string) *api.DaemonStatus {
	e.t.Helper()
	var st api.DaemonStatus
	require.NoError(e.t, json.Unmarshal([]byte(e.ok(append([]string{"--json"}, args...)...)), &st))
	return &st
}

// delegation is the live agent name's entry of `scv delegations`.
func (e *liveEnv) delegation(name string) api.DelegationInfo {
	e.t.Helper()
	for _, d := range e.jsonOf("delegations").Delegations.Entries {
		if d.Agent == name {
			return d
		}
	}
	e.t.Fatalf("no delegation of agent %s", name)
	return api.DelegationInfo{}
}

// agent is the live agent name of `scv agent list`, if it is listed.
func (e *liveEnv) agent(name string) (api.AgentInfo, bool) {
	e.t.Helper()
	for _, a := range *e.jsonOf("agent", "list").Agents {
		if a.Name == name {
			return a, true
		}
	}
	return api.AgentInfo{}, false
}

// background starts a command that runs on while the test goes on; wait
// returns what it did.
func (e *liveEnv) background(args ...string) (wait func() result) {
	e.t.Helper()
	c := e.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	require.NoError(e.t, c.Start())
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	e.t.Cleanup(func() { c.Process.Kill() })
	return func() result {
		e.t.Helper()
		var err error
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			e.t.Fatalf("scv %s did not end: %s %s", strings.Join(args, " "), &out, &errb)
		}
		r := result{stdout: out.String(), stderr: errb.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			r.code = exit.ExitCode()
		}
		return r
	}
}

// pendingQuestion waits for a question to the owner and returns it.
func (e *liveEnv) pendingQuestion() api.Question {
	e.t.Helper()
	var q api.Question
	require.Eventually(e.t, func() bool {
		qs := e.jsonOf("confirm", "list", "--pending").Questions
		if len(qs) > 0 {
			q = qs[0]
		}
		return len(qs) > 0
	}, 20*time.Second, 20*time.Millisecond, "a question to the owner")
	return q
}

// runs is the project's runs, oldest first.
func (e *liveEnv) runs(project string) []api.ProjectRun {
	e.t.Helper()
	return e.jsonOf("project", "report", project).Project.Report.Runs
}

// TestLiveAgentsEndToEnd drives a live agent with the real binaries: the
// turn count, idle time set and cleared, updates streamed in order, each
// turn a run with the status its end gives, permission through a question
// to the owner, file access outside the workspace refused, and a crashing
// agent a failed run with no process left.
func TestLiveAgentsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "agents-test"), "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	for _, task := range []string{"build", "test", "docs", "lint", "fragile"} {
		e.ok("project", "task", "add", "acme", task, "--max-retries", "1")
	}
	e.ok("channel", "set", "local:owner", "--enable")

	out := e.ok("agent", "start", "--name", "gem", "--project", "acme", "--task", "build", "--ask", "--", "acpagent")
	assert.Regexp(t, `^agent gem started \(conversation sess-[0-9a-f]{16}\)\n`, out)
	d := e.delegation("gem")
	require.NotNil(t, d.Conversation)
	require.NotNil(t, d.Turn)
	assert.Zero(t, *d.Turn, "no turn yet")
	require.NotNil(t, d.IdleSinceUnixSeconds, "idle from the start")
	assert.Equal(t, uint32(e.d.cmd.Process.Pid), d.OwnerPID, "the daemon owns it")
	assert.Equal(t, e.ws, d.Cwd)
	st := e.jsonOf("status")
	require.NotNil(t, st.Delegations.Idle)
	assert.Equal(t, uint64(1), *st.Delegations.Idle)

	// Turn 1: the updates in the order the agent sent them.
	out = e.ok("agent", "prompt", "gem", "say hello \nchunks 2\ntool t1 Reading go.mod\ntooldone t1\nplan compile;link")
	assert.Equal(t, "hello chunk 1 chunk 2 \n[tool] Reading go.mod (pending)\n[tool] t1 completed\n[plan]\n  [in_progress] compile\n  [pending] link\n-- turn 1 ended: end_turn (run succeeded)\n", out)
	d = e.delegation("gem")
	assert.Equal(t, uint32(1), *d.Turn)
	require.NotNil(t, d.IdleSinceUnixSeconds, "idle again")

	// Turn 2, of task test, waits for the owner's permission: mid-turn
	// the agent works (no idle time) until the owner answers yes.
	turn := e.background("agent", "prompt", "gem", "--task", "test", "permission deploy to staging\nsay deployed")
	q := e.pendingQuestion()
	assert.Contains(t, q.Question, "Agent gem (turn 2) asks for permission: deploy to staging")
	d = e.delegation("gem")
	assert.Equal(t, uint32(2), *d.Turn)
	assert.Nil(t, d.IdleSinceUnixSeconds, "no idle time while the turn runs")
	assert.Zero(t, *e.jsonOf("status").Delegations.Idle)
	e.ok("confirm", "answer", q.ID, "yes")
	r := turn()
	require.Equal(t, 0, r.code, "%s %s", r.stdout, r.stderr)
	assert.Equal(t, "[permission] deploy to staging: asked (question "+q.ID+")\n[permission] deploy to staging: allowed (the owner answered yes)\npermission: alloweddeployed\n-- turn 2 ended: end_turn (run succeeded)\n", r.stdout)
	d = e.delegation("gem")
	require.NotNil(t, d.IdleSinceUnixSeconds)

	// Turn 3, of task docs: a file outside the workspace is refused; the
	// updates come as JSON lines, in order.
	r = e.scv("--json", "agent", "prompt", "gem", "--task", "docs", "read /etc/hostname\nsay checked")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Greater(t, len(lines), 2)
	var kinds []string
	var refused api.AgentUpdate
	for _, l := range lines[1:] {
		var u api.AgentUpdate
		require.NoError(t, json.Unmarshal([]byte(l), &u), l)
		kinds = append(kinds, u.Kind)
		if u.Kind == "file" {
			refused = u
		}
	}
	assert.Equal(t, []string{"turn_started", "file", "agent_message_chunk", "agent_message_chunk", "turn_ended"}, kinds)
	assert.Equal(t, "refused", refused.Status)
	assert.Contains(t, refused.Text, "/etc/hostname is outside the agent's workspace")

	// Turn 4 is cancelled, turn 5 refused: cancelled and failed runs.
	turn = e.background("agent", "prompt", "gem", "--task", "lint", "say working\nsleep 30s")
	require.Eventually(t, func() bool {
		a, _ := e.agent("gem")
		return a.State == api.AgentWorking && a.Turn == 4
	}, 10*time.Second, 20*time.Millisecond)
	e.ok("agent", "cancel", "gem")
	r = turn()
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "-- turn 4 ended: cancelled (run cancelled)\n")
	r = e.scv("agent", "prompt", "gem", "refuse")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "-- turn 5 ended: refusal (run failed)\n")
	assert.Equal(t, "scv: turn 5 ended: refusal\n", r.stderr)

	var statuses []string
	for _, run := range e.runs("acme") {
		assert.Equal(t, "gem", run.Agent)
		statuses = append(statuses, string(run.Status))
	}
	assert.Equal(t, []string{"succeeded", "succeeded", "succeeded", "cancelled", "failed"}, statuses)
	a, ok := e.agent("gem")
	require.True(t, ok)
	assert.Equal(t, uint32(5), a.Turn)

	// A second agent crashes in its first turn: its run failed (a retry
	// spent), and neither it nor what it started is left.
	e.ok("agent", "start", "--name", "crashy", "--project", "acme", "--task", "fragile", "--", "acpagent")
	handle := e.delegation("crashy").Handle
	r = e.scv("agent", "prompt", "crashy", "spawn sleep 300\nsay going down\ncrash")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "-- turn 1 ended: crashed (run failed)\nagent crashed (exit status 3): acpagent: crashing\n")
	require.Eventually(t, func() bool {
		_, listed := e.agent("crashy")
		return !listed && (proc.Tree{Handle: handle}).Count() == 0
	}, 10*time.Second, 20*time.Millisecond, "the crashed agent and its processes are gone")
	runs := e.runs("acme")
	crashed := runs[len(runs)-1]
	assert.Equal(t, reducer.RunFailed, crashed.Status)
	require.NotNil(t, crashed.Progress)
	assert.Contains(t, *crashed.Progress, "agent crashed (exit status 3)")
	for _, task := range e.jsonOf("project", "tasks", "acme").Project.Tasks {
		if task.Title == "fragile" {
			assert.Equal(t, uint32(1), task.Retries)
			assert.Equal(t, reducer.TaskReady, task.Status)
		}
	}

	// A prompt to an agent that does not exist is not_found.
	r = e.scv("--json", "agent", "prompt", "nobody", "hello")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `"reason":"not_found"`)

	// Stopping the agent stops its tree and forgets it.
	gem := e.delegation("gem").Handle
	assert.Equal(t, "agent gem stopped\n", e.ok("agent", "stop", "gem"))
	assert.Zero(t, (proc.Tree{Handle: gem}).Count())
	assert.Equal(t, "no live agents\n", e.ok("agent", "list"))
}

// TestLiveAgentsThroughRestarts: restart_when_idle with live agents, on
// the real binaries. It waits while an agent's background jobs run and
// restarts once they are reported done; it never restarts in the middle
// of a turn; after each restart the agents are started again and their
// conversations loaded (session/load), turn counts kept, and an agent
// that does not offer session/load has ended. At the deadline, a turn
// still under way is cut short (cancelled, and recorded so) before the
// hand-over.
func TestLiveAgentsThroughRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	oldBin, newBin := buildOldNew(t)
	e := newLiveEnv(t, oldBin)
	e.ok("project", "create", "acme", "--workspace", e.ws)
	for _, task := range []string{"build", "test", "docs", "lint"} {
		e.ok("project", "task", "add", "acme", task)
	}
	e.ok("agent", "start", "--name", "gem", "--project", "acme", "--task", "build", "--", "acpagent")
	e.ok("agent", "start", "--name", "forgetful", "--", "acpagent", "--no-load")
	before, _ := e.agent("gem")
	assert.True(t, before.LoadSession)

	// Background jobs: a process of the agent (scv itself, run by the
	// agent in its turn) reports two; the restart waits for them.
	out := e.ok("agent", "prompt", "gem", "exec scv delegations update --background-jobs 2")
	assert.Contains(t, out, "exec: HANDLE")
	d := e.delegation("gem")
	require.NotNil(t, d.BackgroundJobs)
	assert.Equal(t, uint32(2), *d.BackgroundJobs)
	assert.NotNil(t, d.IdleSinceUnixSeconds, "between turns")
	assert.Equal(t, uint64(1), *e.jsonOf("status").Delegations.Idle, "only forgetful counts as idle")
	status := e.ok("status")
	assert.Contains(t, status, "delegations      2 active (1 idle), 0 reaped\n")
	assert.Regexp(t, `(?m)^agent gem +turn 1, idle since [^,]+, 2 background jobs$`, status)
	assert.Regexp(t, `(?m)^agent forgetful +turn 0, idle since [^,]+$`, status)

	install(t, newBin, e.d.bin)
	st := e.d.must(t, api.CmdRestartWhenIdle{Version: ptr("2.0.0-new"), MaxWaitSeconds: ptr(uint64(120))})
	require.NotNil(t, st.Restart)
	require.NotNil(t, st.Restart.WaitingFor)
	assert.Equal(t, "agent gem (2 background jobs)", *st.Restart.WaitingFor)
	time.Sleep(300 * time.Millisecond) // the restart would be done by now, were it not waiting
	st = e.d.must(t, api.CmdStatus{})
	assert.Equal(t, "1.0.0-old", st.Version, "still waiting")
	e.ok("agent", "prompt", "gem", "--task", "test", "exec scv delegations update --background-jobs 0")
	require.NoError(t, e.d.waitExit(t), "the old daemon handed over")
	require.Eventually(t, func() bool {
		st, err := e.d.call(api.CmdStatus{})
		return err == nil && st.Version == "2.0.0-new"
	}, 20*time.Second, 20*time.Millisecond)

	// gem is back with its conversation; forgetful has ended.
	var after api.AgentInfo
	require.Eventually(t, func() bool {
		a, ok := e.agent("gem")
		after = a
		return ok && a.State == api.AgentIdle
	}, 20*time.Second, 20*time.Millisecond, "gem is resumed")
	assert.Equal(t, before.Conversation, after.Conversation)
	assert.Equal(t, before.Handle, after.Handle)
	assert.Equal(t, uint32(2), after.Turn)
	assert.NotEqual(t, before.PID, after.PID, "a new process")
	require.Eventually(t, func() bool {
		_, listed := e.agent("forgetful")
		return !listed
	}, 20*time.Second, 20*time.Millisecond, "an agent without session/load has ended")
	logs := e.d.logs()
	assert.Contains(t, logs, `msg="live agent ended: it could not be resumed after the restart"`)
	assert.Contains(t, logs, "does not offer session/load")
	// The agent only knows sessions it created or loaded: this turn runs,
	// so session/load did.
	out = e.ok("agent", "prompt", "gem", "--task", "docs", "say resumed")
	assert.Equal(t, "resumed\n-- turn 3 ended: end_turn (run succeeded)\n", out)

	// A turn under way holds the restart back until it ends.
	install(t, oldBin, e.d.bin)
	turn := e.background("agent", "prompt", "gem", "--task", "lint", "say long\nsleep 1s\nsay done")
	require.Eventually(t, func() bool {
		a, _ := e.agent("gem")
		return a.State == api.AgentWorking && a.Turn == 4
	}, 10*time.Second, 20*time.Millisecond)
	assert.Regexp(t, `(?m)^agent gem +turn 4 under way$`, e.ok("status"))
	st = e.d.must(t, api.CmdRestartWhenIdle{Version: ptr("1.0.0-old")})
	require.NotNil(t, st.Restart.WaitingFor)
	assert.Contains(t, *st.Restart.WaitingFor, "agent gem (turn 4)", "(the prompt's own requests may be in flight too)")
	r := turn()
	require.Equal(t, 0, r.code, "the turn ran to its end: %s %s", r.stdout, r.stderr)
	assert.Equal(t, "longdone\n-- turn 4 ended: end_turn (run succeeded)\n", r.stdout)
	require.Eventually(t, func() bool {
		st, err := e.d.call(api.CmdStatus{})
		return err == nil && st.Version == "1.0.0-old"
	}, 20*time.Second, 20*time.Millisecond, "restarted once the turn ended")
	require.Eventually(t, func() bool {
		a, ok := e.agent("gem")
		return ok && a.State == api.AgentIdle && a.Turn == 4
	}, 20*time.Second, 20*time.Millisecond)

	// At the deadline, a turn still under way is cut short before the
	// hand-over: cancelled, its run cancelled with the reason, its
	// follower told; the conversation goes on after the restart.
	e.ok("project", "task", "add", "acme", "bench")
	install(t, newBin, e.d.bin)
	turn = e.background("agent", "prompt", "gem", "--task", "bench", "say long\nsleep 60s\nsay never")
	require.Eventually(t, func() bool {
		a, _ := e.agent("gem")
		return a.State == api.AgentWorking && a.Turn == 5
	}, 10*time.Second, 20*time.Millisecond)
	e.d.must(t, api.CmdRestartWhenIdle{Version: ptr("2.0.0-new"), MaxWaitSeconds: ptr(uint64(1))})
	r = turn()
	assert.Equal(t, 1, r.code, "the turn did not end its own way")
	assert.Equal(t, "long\n-- turn 5 ended: cancelled (run cancelled)\ncancelled: the daemon restarts into 2.0.0-new\n", r.stdout)
	assert.Equal(t, "scv: turn 5 ended: cancelled\n", r.stderr)
	require.Eventually(t, func() bool {
		st, err := e.d.call(api.CmdStatus{})
		return err == nil && st.Version == "2.0.0-new"
	}, 20*time.Second, 20*time.Millisecond, "restarted at the deadline")
	require.Eventually(t, func() bool {
		a, ok := e.agent("gem")
		return ok && a.State == api.AgentIdle && a.Turn == 5
	}, 20*time.Second, 20*time.Millisecond)
	assert.Contains(t, e.d.logs(), `msg="restarting at the deadline"`)

	var statuses []string
	var last string
	for _, run := range e.runs("acme") {
		statuses = append(statuses, string(run.Status))
		if run.Progress != nil {
			last = *run.Progress
		}
	}
	assert.Equal(t, []string{"succeeded", "succeeded", "succeeded", "succeeded", "cancelled"}, statuses,
		"each turn a run, none lost through three restarts")
	assert.Equal(t, "cancelled: the daemon restarts into 2.0.0-new", last)
}
