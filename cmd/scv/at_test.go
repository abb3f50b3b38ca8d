package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/reducer"
)

// TestProjectAt: `project tasks|status|report acme --at SEQ --db PATH`
// answers from the database file as the ledger stood after SEQ, while the
// live answer has moved on; at the newest sequence it is the live answer;
// it needs no daemon; the report is reproducible.
func TestProjectAt(t *testing.T) {
	d, stop := inDaemonStop(t, daemon.Config{})
	sock, db := d.Config().Socket, d.Config().DB

	cliOK(t, sock, "project", "create", "acme", "--workspace", t.TempDir())
	task := cliNewID(t, cliOK(t, sock, "project", "task", "add", "acme", "build"), "task", "added")
	run := cliNewID(t, cliOK(t, sock, "project", "run", "start", "acme", task, "--agent", "codex"), "run", "started")

	var events api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, sock, "--json", "project", "events", "acme")), &events))
	require.NotEmpty(t, events.Project.Events)
	running := events.Project.Events[len(events.Project.Events)-1]
	require.Equal(t, "run_started", running.Kind)
	seq := strconv.FormatUint(running.Sequence, 10)

	cliOK(t, sock, "project", "run", "finish", "acme", run, "succeeded")
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, sock, "--json", "project", "events", "acme")), &events))
	newest := strconv.FormatUint(events.Project.Events[len(events.Project.Events)-1].Sequence, 10)

	taskStatus := func(out string) reducer.TaskStatus {
		t.Helper()
		var st api.DaemonStatus
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		require.NotNil(t, st.Project)
		require.Equal(t, api.KindTasks, st.Project.Kind)
		require.Len(t, st.Project.Tasks, 1)
		assert.Equal(t, task, st.Project.Tasks[0].ID)
		return st.Project.Tasks[0].Status
	}
	then := cliOK(t, sock, "project", "tasks", "acme", "--at", seq, "--db", db, "--json")
	assert.Equal(t, reducer.TaskRunning, taskStatus(then), "at %s", seq)
	assert.Equal(t, reducer.TaskDone, taskStatus(cliOK(t, sock, "project", "tasks", "acme", "--json")), "live")

	// At the newest sequence (or past it) the views are the live ones.
	projectJSON := func(out string) string {
		t.Helper()
		var st api.DaemonStatus
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		b, err := json.Marshal(st.Project)
		require.NoError(t, err)
		return string(b)
	}
	for _, what := range []string{"status", "tasks"} {
		live := projectJSON(cliOK(t, sock, "--json", "project", what, "acme"))
		assert.JSONEq(t, live, projectJSON(cliOK(t, sock, "--json", "project", what, "acme", "--at", newest, "--db", db)), what)
		// Past the head: refused, naming the head, not today's state.
		r := cliRun(t, sock, "project", what, "acme", "--at", "999999", "--db", db)
		assert.Equal(t, 1, r.code, what)
		assert.Contains(t, r.stderr, "sequence 999999 is past the ledger's head, "+newest, what)
		assert.Empty(t, r.stdout, what)
	}

	// Human output through the usual printers.
	out := cliOK(t, sock, "project", "tasks", "acme", "--at", seq, "--db", db)
	assert.Equal(t, string(reducer.TaskRunning), cliRow(t, out, task)[2], out)
	assert.Contains(t, cliOK(t, sock, "project", "status", "acme", "--at", seq, "--db", db), "acme")

	// No daemon needed, and the report is reproducible.
	report := cliOK(t, sock, "--json", "project", "report", "acme", "--at", seq, "--db", db)
	stop()
	nowhere := filepath.Join(cliShortDir(t), "none.sock")
	assert.Equal(t, then, cliOK(t, nowhere, "project", "tasks", "acme", "--at", seq, "--db", db, "--json"))
	assert.Equal(t, report, cliOK(t, nowhere, "--json", "project", "report", "acme", "--at", seq, "--db", db))
	var rep api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(report), &rep))
	require.NotNil(t, rep.Project.Report)
	assert.Equal(t, rep.Project.Report.Project.UpdatedUnixSeconds, rep.Project.Report.GeneratedUnixSeconds)
	assert.Equal(t, version, rep.Version)

	// Before the project existed, an unknown project, --db without --at.
	r := cliRun(t, nowhere, "project", "status", "acme", "--at", "0", "--db", db)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "not found")
	r = cliRun(t, nowhere, "project", "status", "nope", "--at", seq, "--db", db)
	assert.Equal(t, 1, r.code)
	r = cliRun(t, nowhere, "project", "status", "acme", "--db", db)
	assert.Equal(t, 2, r.code, r.stderr)
}
