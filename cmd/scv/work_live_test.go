package main

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/control/work"
	"scv/reducer"
)

// events is every event of the project, oldest first.
func (e *liveEnv) events(project string) []api.ProjectEvent {
	e.t.Helper()
	var all []api.ProjectEvent
	after := uint64(0)
	for {
		page := e.jsonOf("project", "events", project, "--after", strconv.FormatUint(after, 10)).Project.Events
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Sequence
	}
}

// workLines is the work's JSON lines: its log's entries, then the work.
func workLines(t *testing.T, out string) ([]api.WorkEntry, api.WorkInfo) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	var entries []api.WorkEntry
	for _, l := range lines[:len(lines)-1] {
		var e api.WorkEntry
		require.NoError(t, json.Unmarshal([]byte(l), &e), l)
		entries = append(entries, e)
	}
	var w api.WorkInfo
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &w))
	return entries, w
}

// gatedTemplate writes a prompt template whose turns say their task's
// title, then wait until the gate opens: until open is called.
func (e *liveEnv) gatedTemplate() (tmpl string, open func()) {
	e.t.Helper()
	gate := filepath.Join(e.dir, "open")
	script := filepath.Join(e.dir, "gate.sh")
	require.NoError(e.t, os.WriteFile(script, []byte("while [ ! -e "+gate+" ]; do sleep 0.02; done\n"), 0o600))
	tmpl = filepath.Join(e.dir, "prompt.tmpl")
	require.NoError(e.t, os.WriteFile(tmpl, []byte("say {{.Task.Title}}\nexec sh "+script+"\n"), 0o600))
	return tmpl, func() { require.NoError(e.t, os.WriteFile(gate, nil, 0o600)) }
}

// TestWorkPlanOfEightTasks works a plan of 8 tasks with dependencies with
// 2 agents, with the real binaries: every task done, each run started
// after its task's dependencies were done, never more than 2 runs at once
// and never 2 on one task (from the runs' start and end events), and the
// summary's numbers the ledger's.
func TestWorkPlanOfEightTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "work-test"), "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	deps := map[string][]string{
		"a": nil, "b": {"a"}, "c": {"a"}, "d": {"b", "c"},
		"e": nil, "f": {"e"}, "g": {"d", "f"}, "h": {"g"},
	}
	ids := map[string]string{}
	daemon := &control.Remote{Socket: e.d.sock}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		// The description is the scripted agent's script (the default
		// prompt has it on lines of its own).
		desc := "say working on " + k + "\nsleep 150ms"
		on := []string{}
		for _, dep := range deps[k] {
			on = append(on, ids[dep])
		}
		st, err := daemon.Handle(context.Background(), api.CmdProjectTaskAdd{Project: "acme", Title: k, Description: &desc, DependsOn: on})
		require.NoError(t, err)
		ids[k] = st.Project.TaskID
	}
	title := map[string]string{}
	for k, id := range ids {
		title[id] = k
	}

	r := e.scv("--json", "project", "work", "acme", "--agents", "2", "--", "acpagent")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s\ndaemon: %s", r.stdout, r.stderr, e.d.logs())
	entries, w := workLines(t, r.stdout)
	assert.Equal(t, api.WorkEnded, w.State)
	assert.Contains(t, w.Why, "all 8 tasks of project acme are done")

	// From the ledger's events: the runs' starts and ends in order.
	done := map[string]bool{}
	live := map[string]string{} // run → task
	onTask := map[string]bool{}
	most, started, succeeded := 0, 0, 0
	agents := map[string]bool{}
	for _, ev := range e.events("acme") {
		var d struct {
			RunID  string `json:"run_id"`
			TaskID string `json:"task_id"`
			Agent  string `json:"agent"`
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		switch ev.Kind {
		case "run_started":
			started++
			k := title[d.TaskID]
			for _, dep := range deps[k] {
				assert.True(t, done[dep], "task %s started before its dependency %s was done", k, dep)
			}
			assert.False(t, onTask[d.TaskID], "two runs at once on task %s", k)
			onTask[d.TaskID] = true
			live[d.RunID] = d.TaskID
			most = max(most, len(live))
			agents[d.Agent] = true
		case "run_finished":
			task, ok := live[d.RunID]
			require.True(t, ok, "run %s finished without starting", d.RunID)
			delete(live, d.RunID)
			onTask[task] = false
			if d.Status == "succeeded" {
				succeeded++
				done[title[task]] = true
			}
		}
	}
	assert.Empty(t, live, "runs left running")
	assert.LessOrEqual(t, most, 2, "more than 2 runs at once")
	assert.Len(t, done, 8, "every task done")
	assert.Equal(t, map[string]bool{"acme-1": true, "acme-2": true}, agents)

	// The summary is the ledger's.
	assert.Equal(t, uint64(8), w.Summary.TasksDone)
	assert.Zero(t, w.Summary.TasksFailed)
	assert.Zero(t, w.Summary.TasksLeft)
	assert.Equal(t, uint64(started), w.Summary.Runs)
	assert.Equal(t, uint64(started), w.Turns.Started)
	assert.Equal(t, uint64(succeeded), w.Turns.Succeeded)
	assert.Len(t, e.runs("acme"), started)
	var turns int
	for _, en := range entries {
		if en.Kind == "turn_started" {
			turns++
		}
	}
	assert.Equal(t, started, turns, "a log line for each turn's start")

	// Its agents are stopped; the work is seen ended.
	list := e.jsonOf("agent", "list").Agents
	assert.Empty(t, *list)
	assert.Contains(t, e.ok("project", "work", "acme", "--status"), "8 done, 0 failed, 0 left")
}

// TestWorkRetriesAndRefusals: a task whose first turn refuses is retried
// and done on its second; bad requests start nothing; the agents are
// handed `scv mcp --project P` in session/new.
func TestWorkRetriesAndRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "work-test"), "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	e.ok("project", "task", "add", "acme", "flaky", "--max-retries", "1")
	e.ok("project", "task", "add", "acme", "after", "--depends-on", "flaky")
	tmpl := filepath.Join(e.dir, "prompt.tmpl")
	require.NoError(t, os.WriteFile(tmpl, []byte("say {{.Task.Title}} attempt {{.Task.Attempt}}\n{{if and (eq .Task.Title \"flaky\") (eq .Task.Attempt 1)}}refuse{{end}}\n{{if eq .Task.Title \"after\"}}mcp{{end}}\n"), 0o600))

	// Refused before anything starts.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"project", "work", "acme", "--agents", "0", "--", "acpagent"}, "agents: want 1 to 64"},
		{[]string{"project", "work", "acme", "--agents", "65", "--", "acpagent"}, "agents: want 1 to 64"},
		{[]string{"project", "work", "nope", "--agents", "1", "--", "acpagent"}, "nope"},
		{[]string{"project", "work", "acme", "--agents", "1", "--", "true"}, "before it answered initialize"},
	} {
		r := e.scv(c.args...)
		assert.Equal(t, 1, r.code, "%v: %s %s", c.args, r.stdout, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%v", c.args)
	}
	bad := filepath.Join(e.dir, "bad.tmpl")
	require.NoError(t, os.WriteFile(bad, []byte("{{.Nope}}"), 0o600))
	r := e.scv("project", "work", "acme", "--agents", "1", "--prompt-template", bad, "--", "acpagent")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "prompt_template")
	assert.Empty(t, *e.jsonOf("agent", "list").Agents, "nothing left running")
	assert.Empty(t, e.runs("acme"), "nothing claimed")

	r = e.scv("project", "work", "acme", "--agents", "2", "--prompt-template", tmpl, "--", "acpagent")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s\ndaemon: %s", r.stdout, r.stderr, e.d.logs())
	assert.Contains(t, r.stdout, "ended flaky: refusal (run failed)")
	assert.Contains(t, r.stdout, "ended flaky: end_turn (run succeeded)")
	assert.Contains(t, r.stdout, "ended after: end_turn (run succeeded)")
	assert.Regexp(t, `tasks +2 done, 0 failed, 0 left`, r.stdout)
	assert.Regexp(t, `runs +3 \(turns: 3 started, 2 succeeded, 1 failed, 0 cancelled\)`, r.stdout)
	runs := e.runs("acme")
	assert.Len(t, runs, 3)
	// The agents were handed the ledger's tools: scv mcp --project P.
	last := runs[len(runs)-1]
	require.NotNil(t, last.Progress)
	assert.Regexp(t, `mcp: scv: /\S+/scv mcp --project [0-9A-Z]{26}$`, *last.Progress)
}

// TestWorkCrashingAgentAndApproval: an agent that crashes every turn is
// started again 3 times, then its slot stops (the other's turns are slow,
// so that the crashing one takes tasks), and the other finishes the plan; a task behind the owner's approval is not taken until it is
// approved, and the work waits for it, as the web UI's project page says.
func TestWorkCrashingAgentAndApproval(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "work-test"), "--heartbeat-every", "100ms", "--http", "127.0.0.1:0")
	e.ok("channel", "set", "local:owner", "--enable")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		e.ok("project", "task", "add", "acme", k, "--max-retries", "5")
	}
	deploy := e.jsonOf("project", "task", "add", "acme", "deploy").Project.TaskID
	q := e.jsonOf("confirm", "ask", "deploy?", "--project", "acme", "--task", "deploy", "--timeout", "10m").Confirm.ID
	tmpl := filepath.Join(e.dir, "prompt.tmpl")
	require.NoError(t, os.WriteFile(tmpl, []byte("say {{.Task.Title}}\n{{if eq .Agent \"acme-2\"}}crash{{else}}sleep 300ms{{end}}\n"), 0o600))

	wait := e.background("--json", "project", "work", "acme", "--agents", "2", "--prompt-template", tmpl, "--", "acpagent")
	// The work waits for the owner, and says so.
	var w api.WorkInfo
	require.Eventually(t, func() bool {
		r := e.scv("--json", "project", "work", "acme", "--status")
		if r.code != 0 { // not yet started
			return false
		}
		var st api.DaemonStatus
		if json.Unmarshal([]byte(r.stdout), &st) != nil || st.Work == nil {
			return false
		}
		w = *st.Work
		return strings.Contains(w.Waiting, "waits for the owner's approval")
	}, 60*time.Second, 50*time.Millisecond, "the work waits for the approval")
	assert.Equal(t, api.WorkRunning, w.State)
	page := webPage(t, e.d.sock, "/p/acme")
	assert.Contains(t, page, `<section id="work" class="work">`)
	assert.Contains(t, page, "Waiting: "+html.EscapeString(w.Waiting))
	assert.Contains(t, page, `<tr class="slot" data-agent="acme-1">`)
	for _, r := range e.runs("acme") {
		assert.NotEqual(t, deploy, r.TaskID, "deploy taken before it was approved")
	}
	e.ok("confirm", "answer", q, "yes")

	r := wait()
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s\ndaemon: %s", r.stdout, r.stderr, e.d.logs())
	entries, w := workLines(t, r.stdout)
	assert.Equal(t, uint64(7), w.Summary.TasksDone)
	require.Len(t, w.Slots, 2)
	assert.Equal(t, "stopped", w.Slots[1].State)
	assert.Equal(t, uint64(1+work.MaxRestarts), w.Slots[1].Starts, "acme-2 started, then again %d times", work.MaxRestarts)
	assert.Contains(t, w.Slots[1].Why, "its agent ended 4 times")
	assert.Equal(t, uint64(1), w.Slots[0].Starts)
	var crashed, stopped int
	for _, en := range entries {
		switch {
		case en.Kind == "turn_ended" && en.Agent == "acme-2":
			assert.Equal(t, "crashed", en.StopReason)
			assert.Equal(t, "failed", en.Status)
			crashed++
		case en.Kind == "slot_stopped":
			stopped++
		}
	}
	assert.Equal(t, 1+work.MaxRestarts, crashed)
	assert.Equal(t, 1, stopped)
	assert.Equal(t, uint64(1+work.MaxRestarts), w.Turns.Failed)
	assert.Empty(t, *e.jsonOf("agent", "list").Agents)
}

// claimedTwice counts the runs started, from the project's events, on a
// task whose run was still running: a task claimed twice.
func claimedTwice(t *testing.T, events []api.ProjectEvent) int {
	t.Helper()
	live := map[string]string{} // run → task
	onTask := map[string]bool{}
	twice := 0
	for _, ev := range events {
		var d struct {
			RunID  string `json:"run_id"`
			TaskID string `json:"task_id"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		switch ev.Kind {
		case "run_started":
			if onTask[d.TaskID] {
				twice++
			}
			onTask[d.TaskID], live[d.RunID] = true, d.TaskID
		case "run_finished", "run_stale":
			onTask[live[d.RunID]] = false
			delete(live, d.RunID)
		}
	}
	return twice
}

// TestClaimedTwice: a run started on a task whose run is still running
// counts; one after its run finished or was marked stale does not.
func TestClaimedTwice(t *testing.T) {
	ev := func(kind, run, task string) api.ProjectEvent {
		return api.ProjectEvent{Kind: kind, Data: json.RawMessage(`{"run_id":"` + run + `","task_id":"` + task + `"}`)}
	}
	assert.Zero(t, claimedTwice(t, []api.ProjectEvent{
		ev("run_started", "r1", "a"), ev("run_started", "r2", "b"), ev("run_finished", "r1", ""),
		ev("run_started", "r3", "a"), ev("run_stale", "r3", ""), ev("run_started", "r4", "a"),
	}))
	assert.Equal(t, 1, claimedTwice(t, []api.ProjectEvent{
		ev("run_started", "r1", "a"), ev("run_finished", "r1", ""), ev("run_started", "r2", "a"), ev("run_started", "r3", "a"),
	}))
}

// TestWorkResumesAfterSIGKILL: the daemon killed in the middle of the
// work's turns and started again resumes the work (its settings in the
// local store): every task done once, no run left running, the turns the
// kill cut failed, no task claimed twice. It logs its figures (docs/work.md
// quotes a run's): the runs before and after the kill, and how long after
// the kill the next daemon answered and began its first turn.
func TestWorkResumesAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "work-test"), "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	for _, k := range []string{"a", "b", "c", "d"} {
		e.ok("project", "task", "add", "acme", k, "--max-retries", "2")
	}
	tmpl := filepath.Join(e.dir, "prompt.tmpl")
	require.NoError(t, os.WriteFile(tmpl, []byte("say {{.Task.Title}}\nsleep 1s\n"), 0o600))
	follower := e.background("--json", "project", "work", "acme", "--agents", "2", "--prompt-template", tmpl, "--", "acpagent")
	require.Eventually(t, func() bool {
		n := 0
		for _, r := range e.runs("acme") {
			if r.Status == "running" {
				n++
			}
		}
		return n == 2
	}, 30*time.Second, 20*time.Millisecond, "two turns under way")

	atKill := len(e.runs("acme"))
	killed := time.Now()
	require.True(t, e.d.p.Kill(), "SIGKILL the daemon")
	<-e.d.p.Exited()
	e.d = startTestDaemon(t, e.d.bin, e.d.db, e.d.sock, "", "--heartbeat-every", "100ms")
	answered := time.Since(killed)
	require.Eventually(t, func() bool { return len(e.runs("acme")) > atKill }, 30*time.Second, 10*time.Millisecond, "a turn after the restart")
	resumed := time.Since(killed)

	r := follower()
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s\ndaemon: %s", r.stdout, r.stderr, e.d.logs())
	_, w := workLines(t, r.stdout)
	assert.Equal(t, api.WorkEnded, w.State)
	assert.Equal(t, uint64(4), w.Summary.TasksDone)

	succeeded := map[string]int{}
	cut := 0
	for _, run := range e.runs("acme") {
		switch run.Status {
		case "succeeded":
			succeeded[run.TaskID]++
		case "failed":
			require.NotNil(t, run.Progress)
			assert.Contains(t, *run.Progress, "the daemon ended in the middle of turn")
			cut++
		default:
			t.Errorf("run %s left %s", run.ID, run.Status)
		}
	}
	assert.Len(t, succeeded, 4, "every task done")
	for task, n := range succeeded {
		assert.Equal(t, 1, n, "task %s done once", task)
	}
	assert.Equal(t, 2, cut, "the two turns the kill cut failed")
	twice := claimedTwice(t, e.events("acme"))
	assert.Zero(t, twice, "no task claimed twice")
	assert.Contains(t, e.d.logs(), `msg="work resumed"`)
	assert.Empty(t, *e.jsonOf("agent", "list").Agents)
	runs := e.runs("acme")
	t.Logf("kill and resume: %d tasks, %d runs (%d succeeded, %d cut by the kill and failed); %d turns begun before the kill, %d after; "+
		"the next daemon answered %v after the kill and began its first turn %v after it; tasks claimed twice: %d",
		len(succeeded), len(runs), len(runs)-cut, cut, atKill, len(runs)-atKill,
		answered.Round(time.Millisecond), resumed.Round(time.Millisecond), twice)
}

// TestWorkThroughRestartWhenIdle: restart_when_idle with work running, on
// the real binaries. The restart waits for the work's turns (as for any
// live agent's turn), and no task is claimed while it waits; the next
// daemon resumes the work (its agents taken back after session/load), the
// follower rides through, and every task is done once: nothing claimed
// twice, no run cut.
func TestWorkThroughRestartWhenIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	oldBin, newBin := buildOldNew(t)
	e := newLiveEnv(t, oldBin, "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	tasks := []string{"a", "b", "c", "d", "e", "f"}
	for _, k := range tasks {
		e.ok("project", "task", "add", "acme", k)
	}
	// Each turn waits for the gate to open: the first two are under way
	// when the restart is asked for, and end only after.
	tmpl, gate := e.gatedTemplate()
	follower := e.background("--json", "project", "work", "acme", "--agents", "2", "--prompt-template", tmpl, "--", "acpagent")
	require.Eventually(t, func() bool { return len(e.runs("acme")) == 2 }, 30*time.Second, 20*time.Millisecond, "two turns under way")

	install(t, newBin, e.d.bin)
	st := e.d.must(t, api.CmdRestartWhenIdle{Version: ptr("2.0.0-new"), MaxWaitSeconds: ptr(uint64(120))})
	require.NotNil(t, st.Restart)
	require.NotNil(t, st.Restart.WaitingFor, "the restart waits for the work's turns")
	assert.Regexp(t, `agent acme-\d \(turn 1\), agent acme-\d \(turn 1\)`, *st.Restart.WaitingFor)
	gate()
	require.NoError(t, e.d.waitExit(t), "the old daemon handed over once the turns ended")
	// The old daemon ran its two turns to their end and claimed nothing
	// while it waited.
	before := e.runs("acme")
	require.Len(t, before, 2, "no task claimed while the restart waited")
	for _, r := range before {
		assert.Equal(t, "succeeded", string(r.Status), "the turn ran to its end")
	}
	require.Eventually(t, func() bool {
		st, err := e.d.call(api.CmdStatus{})
		return err == nil && st.Version == "2.0.0-new"
	}, 20*time.Second, 20*time.Millisecond, "the new daemon answers")

	r := follower()
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s\ndaemon: %s", r.stdout, r.stderr, e.d.logs())
	entries, w := workLines(t, r.stdout)
	assert.Equal(t, api.WorkEnded, w.State)
	assert.Equal(t, uint64(len(tasks)), w.Summary.TasksDone)
	// The follower rode through: the old daemon's log, then the next
	// one's from its start, where both agents were taken back.
	resumed, anew := 0, 0
	for _, en := range entries {
		if en.Kind == "agent_started" && en.Text == "resumed after the daemon's restart" {
			resumed++
		}
		if en.Seq == 1 {
			anew++
		}
	}
	assert.Equal(t, 2, resumed, "both agents taken back after the restart")
	assert.Equal(t, 2, anew, "the log of each daemon, from its start")

	done := map[string]int{}
	for _, run := range e.runs("acme") {
		assert.Equal(t, "succeeded", string(run.Status), "run %s", run.ID)
		done[run.TaskID]++
	}
	assert.Len(t, done, len(tasks), "every task done")
	for task, n := range done {
		assert.Equal(t, 1, n, "task %s claimed once", task)
	}
	assert.Zero(t, claimedTwice(t, e.events("acme")), "no task claimed twice")
	assert.Contains(t, e.d.logs(), `msg="work resumed"`)
	assert.Empty(t, *e.jsonOf("agent", "list").Agents)
}

// TestWorkCtrlCStopsFollowing: SIGINT to `scv project work` while it
// follows stops the following only: it exits 130 with a note, and the
// work goes on in the daemon to the plan's end.
func TestWorkCtrlCStopsFollowing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "work-test"), "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	e.ok("project", "task", "add", "acme", "a")
	e.ok("project", "task", "add", "acme", "b")
	e.ok("project", "task", "add", "acme", "c", "--depends-on", "a")
	// The turns wait for the gate to open: the work is under way when
	// the follower is interrupted, and ends only after.
	tmpl, gate := e.gatedTemplate()

	c := e.cmd("project", "work", "acme", "--agents", "2", "--prompt-template", tmpl, "--", "acpagent")
	var out, errb syncBuffer
	c.Stdout, c.Stderr = &out, &errb
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	// It follows: the turns' starts are printed.
	turns := regexp.MustCompile(`(?m)^acme-\d  started `)
	require.Eventually(t, func() bool { return len(turns.FindAllString(out.String(), -1)) == 2 }, 30*time.Second, 20*time.Millisecond,
		"stdout: %s", &out)

	require.NoError(t, c.Process.Signal(syscall.SIGINT))
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the follower did not end: %s %s", &out, &errb)
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", &errb)
	assert.Equal(t, exitInterrupted, exit.ExitCode(), "stderr: %s", &errb)
	assert.Equal(t, "scv: stopped following; the work goes on in the daemon (scv project work acme --status, --stop)\n", errb.String())
	assert.NotContains(t, out.String(), "ended", "no turn ended yet, and no summary")

	// The work goes on without its follower, to the plan's end.
	st := e.jsonOf("project", "work", "acme", "--status").Work
	require.NotNil(t, st)
	assert.Equal(t, api.WorkRunning, st.State)
	gate()
	require.Eventually(t, func() bool {
		st = e.jsonOf("project", "work", "acme", "--status").Work
		return st != nil && st.State == api.WorkEnded
	}, 30*time.Second, 20*time.Millisecond, "the work ends")
	assert.Equal(t, uint64(3), st.Summary.TasksDone)
	assert.Equal(t, uint64(3), st.Turns.Succeeded)
	assert.Contains(t, e.ok("project", "work", "acme", "--status"), "3 done, 0 failed, 0 left")
	assert.Empty(t, *e.jsonOf("agent", "list").Agents)
}

// TestWorkStop: --stop --now cancels the running turns (their runs
// cancelled, no retry spent), the work ends, its follower exits 1 with
// tasks left; a second work of the project while one runs is a conflict.
func TestWorkStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "work-test"), "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	for _, k := range []string{"a", "b", "c"} {
		e.ok("project", "task", "add", "acme", k)
	}
	tmpl := filepath.Join(e.dir, "prompt.tmpl")
	require.NoError(t, os.WriteFile(tmpl, []byte("say {{.Task.Title}}\nsleep 60s\n"), 0o600))
	follower := e.background("project", "work", "acme", "--agents", "2", "--prompt-template", tmpl, "--", "acpagent")
	require.Eventually(t, func() bool { return len(e.runs("acme")) == 2 }, 30*time.Second, 20*time.Millisecond, "two turns under way")

	r := e.scv("project", "work", "acme", "--agents", "1", "--", "acpagent")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "project acme has work running already (2 agents")

	assert.Contains(t, e.ok("project", "work", "acme", "--stop", "--now"), "its running turns are cancelled")
	r = follower()
	assert.Equal(t, 1, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "-- stopping: stopped by request")
	assert.Regexp(t, `tasks +0 done, 0 failed, 3 left`, r.stdout)
	assert.Contains(t, r.stderr, "ended with tasks not done: 0 failed, 3 left")
	runs := e.runs("acme")
	require.Len(t, runs, 2, "no task taken after the stop")
	for _, run := range runs {
		assert.Equal(t, "cancelled", string(run.Status))
	}
	assert.Empty(t, *e.jsonOf("agent", "list").Agents)
	r = e.scv("project", "work", "acme", "--stop")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "has ended already")
}

// TestWorkBudgetReached: once the project's spend reaches its budget the
// work takes no more tasks and says why, and exits 1 with tasks left;
// with the budget raised, the work started again finishes the plan.
func TestWorkBudgetReached(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "work-test"), "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	for _, k := range []string{"a", "b", "c", "d"} {
		e.ok("project", "task", "add", "acme", k)
	}
	// Each turn spends 1500 tokens: the second reaches the budget.
	tmpl := filepath.Join(e.dir, "prompt.tmpl")
	require.NoError(t, os.WriteFile(tmpl, []byte("say {{.Task.Title}}\nusage 1000 500\n"), 0o600))
	e.ok("project", "budget", "acme", "--tokens", "3000")

	r := e.scv("project", "work", "acme", "--agents", "1", "--prompt-template", tmpl, "--", "acpagent")
	require.Equal(t, 1, r.code, "stdout: %s\nstderr: %s\ndaemon: %s", r.stdout, r.stderr, e.d.logs())
	assert.Contains(t, r.stdout, "-- stopping: budget reached: project acme: 3000 tokens spent of a budget of 3000")
	assert.Regexp(t, `tasks +2 done, 0 failed, 2 left`, r.stdout)
	assert.Regexp(t, `tokens +3000`, r.stdout)
	assert.Contains(t, r.stderr, "ended with tasks not done: 0 failed, 2 left")
	assert.Len(t, e.runs("acme"), 2, "no run started past the budget")
	assert.Empty(t, *e.jsonOf("agent", "list").Agents)

	e.ok("project", "budget", "acme", "--tokens", "10000")
	r = e.scv("project", "work", "acme", "--agents", "1", "--prompt-template", tmpl, "--", "acpagent")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s\ndaemon: %s", r.stdout, r.stderr, e.d.logs())
	assert.NotContains(t, r.stdout, "budget reached")
	assert.Regexp(t, `tasks +4 done, 0 failed, 0 left`, r.stdout)
	assert.Regexp(t, `tokens +6000`, r.stdout)
	assert.Len(t, e.runs("acme"), 4)
}

// TestWorkTaskFailedForGood: a task whose every turn refuses spends its
// retries and fails for good; the work finishes what it can and ends with
// exit 1; the tasks that depend on it are untouched (pending, no run).
func TestWorkTaskFailedForGood(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	e := newLiveEnv(t, buildScv(t, shortDir(t), "work-test"), "--heartbeat-every", "100ms")
	e.ok("project", "create", "acme", "--workspace", e.ws)
	e.ok("project", "task", "add", "acme", "doomed", "--max-retries", "1")
	e.ok("project", "task", "add", "acme", "after", "--depends-on", "doomed")
	e.ok("project", "task", "add", "acme", "later", "--depends-on", "after")
	e.ok("project", "task", "add", "acme", "other")
	tmpl := filepath.Join(e.dir, "prompt.tmpl")
	require.NoError(t, os.WriteFile(tmpl, []byte("say {{.Task.Title}} attempt {{.Task.Attempt}}\n{{if eq .Task.Title \"doomed\"}}refuse{{end}}\n"), 0o600))

	r := e.scv("project", "work", "acme", "--agents", "2", "--prompt-template", tmpl, "--", "acpagent")
	require.Equal(t, 1, r.code, "stdout: %s\nstderr: %s\ndaemon: %s", r.stdout, r.stderr, e.d.logs())
	assert.Equal(t, 2, strings.Count(r.stdout, "ended doomed: refusal (run failed)"), r.stdout)
	assert.Contains(t, r.stdout, "ended other: end_turn (run succeeded)")
	assert.Regexp(t, `tasks +1 done, 1 failed, 2 left`, r.stdout)
	assert.Regexp(t, `runs +3 \(turns: 3 started, 1 succeeded, 2 failed, 0 cancelled\)`, r.stdout)
	assert.Contains(t, r.stderr, "ended with tasks not done: 1 failed, 2 left")

	status := map[string]reducer.TaskStatus{}
	for _, task := range e.jsonOf("project", "tasks", "acme").Project.Tasks {
		status[task.Title] = task.Status
	}
	assert.Equal(t, map[string]reducer.TaskStatus{
		"doomed": reducer.TaskFailed, "after": reducer.TaskPending,
		"later": reducer.TaskPending, "other": reducer.TaskDone,
	}, status)
	ran := map[string]int{}
	title := map[string]string{}
	for _, task := range e.jsonOf("project", "tasks", "acme").Project.Tasks {
		title[task.ID] = task.Title
	}
	for _, run := range e.runs("acme") {
		ran[title[run.TaskID]]++
	}
	assert.Equal(t, map[string]int{"doomed": 2, "other": 1}, ran, "no run of the dependants")
	assert.Empty(t, *e.jsonOf("agent", "list").Agents)
}

// webPage is the body of the daemon's web UI page at path, asked with its
// token.
func webPage(t *testing.T, sock, path string) string {
	t.Helper()
	base, token := webAddress(t, sock)
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return string(body)
}
