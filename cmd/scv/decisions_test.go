package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// TestOwnerDecisions: the owner lists the projects (by status, archived
// ones with --all), retries a failed task (by title) to done, releases
// the project and archives it, after which it takes no more writes; the
// tables name tasks by title.
func TestOwnerDecisions(t *testing.T) {
	t.Parallel()
	sock := cliDaemon(t)
	ws := t.TempDir()
	cliOK(t, sock, "project", "create", "acme", "--workspace", ws)
	cliOK(t, sock, "project", "create", "beta", "--workspace", ws)
	build := cliNewID(t, cliOK(t, sock, "project", "task", "add", "acme", "build"), "task", "added")
	test := cliNewID(t, cliOK(t, sock, "project", "task", "add", "acme", "test", "--depends-on", "build"), "task", "added")
	cliOK(t, sock, "project", "task", "add", "beta", "draft")

	out := cliOK(t, sock, "project", "tasks", "acme")
	assert.Equal(t, "build", cliRow(t, out, test)[4], "DEPENDS ON by title:\n%s", out)

	r1 := cliNewID(t, cliOK(t, sock, "project", "run", "start", "acme", "build", "--agent", "codex"), "run", "started")
	cliOK(t, sock, "project", "run", "finish", "acme", r1, "failed")

	out = cliOK(t, sock, "project", "list")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^NAME\s+STATUS\s+PHASE\s+TASKS\s+RUNNING\s+LAST ACTIVITY$`, lines[0])
	assert.Equal(t, []string{"acme", "failed", "verification", "0/2", "0"}, cliRow(t, out, "acme")[:5])
	assert.Regexp(t, cliAgo, cliRow(t, out, "acme")[5])
	assert.Equal(t, []string{"beta", "active", "planning", "0/1", "0"}, cliRow(t, out, "beta")[:5])

	out = cliOK(t, sock, "project", "list", "--status", "failed")
	assert.Regexp(t, `(?m)^acme\s`, out)
	assert.NotContains(t, out, "beta")
	assert.Equal(t, "no projects with status completed\n", cliOK(t, sock, "project", "list", "--status", "completed"))
	r := cliRun(t, sock, "project", "list", "--status", "finished")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stderr, "unknown variant `finished`, expected one of `active`, `blocked`, `waiting_approval`, `completed`, `failed`, `archived`")

	// --json: the daemon's reply, its projects filtered by --status and
	// everything else as it came.
	var all, failed map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, sock, "--json", "project", "list")), &all))
	raw := cliOK(t, sock, "--json", "project", "list", "--status", "failed")
	require.NoError(t, json.Unmarshal([]byte(raw), &failed))
	assert.Regexp(t, `^\{"version":"[^"]+","pid":\d+,"components":\[\],"delegations":\{"active":0,"idle":0,"reaped":0\},"projects":\[\{"id":"[0-9A-Z]{26}","name":"acme",`, raw)
	for k, v := range all {
		if k != "projects" {
			assert.Equal(t, string(v), string(failed[k]), k)
		}
	}
	var items []api.ProjectListItem
	require.NoError(t, json.Unmarshal(failed["projects"], &items))
	require.Len(t, items, 1)
	assert.Equal(t, "acme", items[0].Name)
	assert.Equal(t, `{"version"`, cliOK(t, sock, "--json", "project", "list", "--status", "completed")[:10])
	assert.Contains(t, cliOK(t, sock, "--json", "project", "list", "--status", "completed"), `"projects":[]}`)

	// A failed task retried, by title, with a new budget.
	out = cliOK(t, sock, "project", "task", "retry", "acme", "build", "--max-retries", "1")
	assert.True(t, strings.HasPrefix(out, "task build retried (max retries 1)\nproject    acme\n"), out)
	assert.Regexp(t, `(?m)^status\s+active$`, out)
	assert.Equal(t, []string{build, "build", "ready", "0/1"}, cliRow(t, cliOK(t, sock, "project", "tasks", "acme"), build)[:4])
	r = cliRun(t, sock, "project", "task", "retry", "acme", "build")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "only a failed task is retried [invalid_transition]")

	// Release takes every task done.
	r = cliRun(t, sock, "project", "release", "acme")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "release takes every task done [invalid_transition]")
	for _, task := range []string{"build", test} {
		run := cliNewID(t, cliOK(t, sock, "project", "run", "start", "acme", task, "--agent", "codex"), "run", "started")
		cliOK(t, sock, "project", "run", "finish", "acme", run, "succeeded")
	}
	runs := strings.SplitN(cliOK(t, sock, "project", "report", "acme"), "\nRuns:\n", 2)[1]
	assert.Regexp(t, regexp.MustCompile(`(?m)^`+r1+`\s+build\s+codex\s+failed\s+1\s`), runs, "a run's task by title")
	assert.Regexp(t, `(?m)^[0-9A-Z]{26}\s+build\s+codex\s+succeeded\s+2\s`, runs)
	assert.Regexp(t, `(?m)^[0-9A-Z]{26}\s+test\s+codex\s+succeeded\s+1\s`, runs)
	out = cliOK(t, sock, "project", "release", "acme")
	assert.True(t, strings.HasPrefix(out, "project acme released\nproject    acme\n"), out)
	assert.Regexp(t, `(?m)^phase\s+production$`, out)
	assert.Regexp(t, `(?m)^status\s+completed$`, out)

	// Archived: out of the list but for --all and --status archived, and
	// no more writes.
	out = cliOK(t, sock, "project", "archive", "acme")
	assert.True(t, strings.HasPrefix(out, "project acme archived\n"), out)
	assert.Regexp(t, `(?m)^status\s+archived$`, out)
	assert.Regexp(t, `(?m)^phase\s+reporting$`, out)
	out = cliOK(t, sock, "project", "list")
	assert.NotContains(t, out, "acme")
	assert.Contains(t, out, "beta")
	assert.Equal(t, []string{"acme", "archived", "reporting", "2/2", "0"}, cliRow(t, cliOK(t, sock, "project", "list", "--all"), "acme")[:5])
	out = cliOK(t, sock, "project", "list", "--status", "archived")
	assert.Contains(t, out, "acme")
	assert.NotContains(t, out, "beta")
	r = cliRun(t, sock, "project", "task", "add", "acme", "more")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "it takes no more writes [invalid_transition]")
	cliOK(t, sock, "project", "archive", "beta")
	assert.Equal(t, "no projects (scv project list --all adds the archived ones)\n", cliOK(t, sock, "project", "list"))
}

// TestApproval: confirm ask --project P --task T asks for an approval:
// the project waits for it, a second one of the task is refused (exit
// 1), --task needs --project (exit 2), and yes lets the task run.
func TestApproval(t *testing.T) {
	t.Parallel()
	sock := cliDaemon(t)
	cliOK(t, sock, "channel", "set", "local:owner", "--enable")
	cliOK(t, sock, "project", "create", "acme", "--workspace", t.TempDir())
	cliOK(t, sock, "project", "task", "add", "acme", "deploy")

	out := cliOK(t, sock, "confirm", "ask", "deploy to staging?", "--project", "acme", "--task", "deploy", "--timeout", "10m")
	assert.Regexp(t, `^question [0-9A-Z]{26} pending in local:owner, deadline `, out)
	q := strings.Fields(out)[1]
	assert.Equal(t, "waiting_approval", cliRow(t, cliOK(t, sock, "project", "list"), "acme")[1])
	r := cliRun(t, sock, "project", "run", "start", "acme", "deploy", "--agent", "codex")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "approval "+q)
	r = cliRun(t, sock, "--json", "confirm", "ask", "again?", "--project", "acme", "--task", "deploy")
	assert.Equal(t, 1, r.code)
	var f failure
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &f), r.stderr)
	assert.Equal(t, "conflict", f.Reason)
	r = cliRun(t, sock, "confirm", "ask", "which?", "--task", "deploy")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--task goes with --project P")

	cliOK(t, sock, "confirm", "answer", q, "yes")
	assert.Equal(t, "active", cliRow(t, cliOK(t, sock, "project", "list"), "acme")[1])
	cliNewID(t, cliOK(t, sock, "project", "run", "start", "acme", "deploy", "--agent", "codex"), "run", "started")
	var ev api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, sock, "--json", "project", "events", "acme")), &ev))
	var kinds []string
	for _, e := range ev.Project.Events {
		kinds = append(kinds, e.Kind)
	}
	assert.Subset(t, kinds, []string{"approval_asked", "approval_decided"})
}

// TestTaskNames: a table names a task by its title only where that names
// it on a command line too: a title two tasks share, or one that is
// another task's ID, is shown as the ID.
func TestTaskNames(t *testing.T) {
	t.Parallel()
	tasks := []api.ProjectTask{
		{ID: "A", Title: "build", Status: reducer.TaskDone, DependsOn: []string{}},
		{ID: "B", Title: "twin", Status: reducer.TaskDone, DependsOn: []string{}},
		{ID: "C", Title: "twin", Status: reducer.TaskDone, DependsOn: []string{}},
		{ID: "D", Title: "A", Status: reducer.TaskDone, DependsOn: []string{}},
		{ID: "E", Title: "ship", Status: reducer.TaskPending, DependsOn: []string{"A", "B", "C", "D", "GONE"}},
	}
	var out bytes.Buffer
	require.NoError(t, printTasks(&printer{w: &out, now: time.Now()}, tasks))
	assert.Equal(t, "build, B, C, D, GONE", cliRow(t, out.String(), "E")[4])
	out.Reset()
	runs := []api.ProjectRun{{ID: "R1", TaskID: "B", Agent: "codex", Status: reducer.RunSucceeded, Attempt: 1},
		{ID: "R2", TaskID: "A", Agent: "codex", Status: reducer.RunSucceeded, Attempt: 1}}
	require.NoError(t, printRuns(&printer{w: &out, now: time.Now()}, runs, tasks))
	assert.Equal(t, "B", cliRow(t, out.String(), "R1")[1])
	assert.Equal(t, "build", cliRow(t, out.String(), "R2")[1])
}
