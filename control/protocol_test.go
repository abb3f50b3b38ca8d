package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/reducer"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	t.Cleanup(cancel)
	return ctx
}

// call runs cmd through the CLI's client and returns the project payload.
func call(t *testing.T, c *control.Client, cmd api.Command) *api.ProjectResponse {
	t.Helper()
	st, err := c.Call(testCtx(t), cmd)
	require.NoError(t, err, "%s", encode(t, cmd))
	assert.Equal(t, "test", st.Version)
	assert.Equal(t, uint32(1), st.PID)
	require.NotNil(t, st.Project, "%s: reply without project", cmd.Action())
	return st.Project
}

// callErr runs cmd and returns the daemon's error, which must be one.
func callErr(t *testing.T, c *control.Client, cmd api.Command) *api.Error {
	t.Helper()
	st, err := c.Call(testCtx(t), cmd)
	require.Error(t, err, "%s: want an error, got %+v", encode(t, cmd), st)
	var e *api.Error
	require.True(t, errors.As(err, &e), "%s: not a daemon error: %v", encode(t, cmd), err)
	return e
}

func assertCode(t *testing.T, e *api.Error, code int, reason string, what string) {
	t.Helper()
	assert.Equal(t, code, e.Code, "%s: code (%s)", what, e.Message)
	assert.Equal(t, reason, e.Data.Reason, "%s: reason (%s)", what, e.Message)
	assert.NotEmpty(t, e.Message, what)
}

func taskByID(t *testing.T, tasks []api.ProjectTask, id string) api.ProjectTask {
	t.Helper()
	for _, task := range tasks {
		if task.ID == id {
			return task
		}
	}
	require.Failf(t, "task not listed", "task %s not in %+v", id, tasks)
	return api.ProjectTask{}
}

// TestProtocolLifecycle drives every project action through the CLI's
// client on a real socket and checks what each reply says.
func TestProtocolLifecycle(t *testing.T) {
	const t0 = 1764400000
	clock := newTestClock(t0)
	d := startDaemon(t, clock.Now)
	c := d.client(t)

	// A workspace is stored cleaned.
	created := call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace + "/./x/.."})
	require.Equal(t, api.KindCreated, created.Kind)
	require.NotNil(t, created.Project)
	p := *created.Project
	assert.True(t, isULID(p.ID), "project id %q is a ULID", p.ID)
	assert.Equal(t, "acme", p.Name)
	assert.Equal(t, d.workspace, p.Workspace)
	assert.Equal(t, reducer.PhaseDiscovery, p.Phase)
	assert.Equal(t, reducer.ProjectActive, p.Status)
	assert.Equal(t, uint64(t0), p.CreatedUnixSeconds)
	assert.Equal(t, uint64(0), p.TaskCount)
	assert.Nil(t, p.LastHeartbeatUnixSeconds)

	// project accepts the ID or the name.
	for _, ref := range []string{"acme", p.ID} {
		st := call(t, c, api.CmdProjectStatus{Project: ref})
		assert.Equal(t, api.KindStatus, st.Kind)
		assert.Equal(t, p, *st.Project, "status by %s", ref)
	}

	clock.Set(t0 + 10)
	added := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 2})
	require.Equal(t, api.KindTaskAdded, added.Kind)
	build := added.TaskID
	assert.True(t, isULID(build), "task id %q", build)
	assert.Equal(t, uint64(1), added.Project.TaskCount)
	assert.Equal(t, reducer.PhasePlanning, added.Project.Phase)

	added = call(t, c, api.CmdProjectTaskAdd{Project: p.ID, Title: "test", DependsOn: []string{build}, MaxRetries: 0})
	require.Equal(t, api.KindTaskAdded, added.Kind)
	test := added.TaskID
	assert.True(t, isULID(test))
	assert.NotEqual(t, build, test)

	tasks := call(t, c, api.CmdProjectTasks{Project: "acme"})
	require.Equal(t, api.KindTasks, tasks.Kind)
	assert.Equal(t, p.ID, tasks.ProjectID)
	require.Len(t, tasks.Tasks, 2)
	assert.Equal(t, reducer.TaskReady, taskByID(t, tasks.Tasks, build).Status)
	assert.Equal(t, []string{}, taskByID(t, tasks.Tasks, build).DependsOn)
	assert.Equal(t, uint32(2), taskByID(t, tasks.Tasks, build).MaxRetries)
	assert.Equal(t, reducer.TaskPending, taskByID(t, tasks.Tasks, test).Status)
	assert.Equal(t, []string{build}, taskByID(t, tasks.Tasks, test).DependsOn)

	clock.Set(t0 + 20)
	started := call(t, c, api.CmdProjectRunStart{Project: "acme", Task: build, Agent: "codex"})
	require.Equal(t, api.KindRunStarted, started.Kind)
	run := started.RunID
	assert.True(t, isULID(run), "run id %q", run)
	assert.Equal(t, reducer.PhaseImplementation, started.Project.Phase)

	clock.Set(t0 + 30)
	up := call(t, c, api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: "compiling"})
	assert.Equal(t, api.KindUpdated, up.Kind)
	require.NotNil(t, up.Project.LastHeartbeatUnixSeconds, "run progress counts as a heartbeat")
	assert.Equal(t, uint64(t0+30), *up.Project.LastHeartbeatUnixSeconds)

	for i, hb := range []api.CmdProjectHeartbeat{
		{Project: "acme"},
		{Project: "acme", Task: &build},
		{Project: "acme", Task: &build, Run: &run},
		{Project: "acme", Run: &run},
	} {
		clock.Set(t0 + 40 + int64(i))
		up := call(t, c, hb)
		assert.Equal(t, api.KindUpdated, up.Kind)
		require.NotNil(t, up.Project.LastHeartbeatUnixSeconds)
		assert.Equal(t, uint64(t0+40+int64(i)), *up.Project.LastHeartbeatUnixSeconds, "heartbeat %d", i)
	}

	tasks = call(t, c, api.CmdProjectTasks{Project: "acme"})
	b := taskByID(t, tasks.Tasks, build)
	assert.Equal(t, reducer.TaskRunning, b.Status)
	if assert.NotNil(t, b.RunID) {
		assert.Equal(t, run, *b.RunID)
	}
	if assert.NotNil(t, b.Progress) {
		assert.Equal(t, "compiling", *b.Progress)
	}

	clock.Set(t0 + 50)
	up = call(t, c, api.CmdProjectRunFinish{Project: "acme", Run: run, Status: reducer.RunSucceeded})
	assert.Equal(t, api.KindUpdated, up.Kind)
	assert.Equal(t, uint64(1), up.Project.CompletedTasks)
	tasks = call(t, c, api.CmdProjectTasks{Project: "acme"})
	assert.Equal(t, reducer.TaskDone, taskByID(t, tasks.Tasks, build).Status)
	assert.Equal(t, reducer.TaskReady, taskByID(t, tasks.Tasks, test).Status, "the last dependency is done")

	clock.Set(t0 + 60)
	up = call(t, c, api.CmdProjectTaskUpdate{Project: "acme", Task: test, Status: reducer.TaskBlocked, Progress: ptr("waiting for CI")})
	assert.Equal(t, api.KindUpdated, up.Kind)
	assert.Equal(t, reducer.ProjectBlocked, up.Project.Status)
	tasks = call(t, c, api.CmdProjectTasks{Project: "acme"})
	tt := taskByID(t, tasks.Tasks, test)
	assert.Equal(t, reducer.TaskBlocked, tt.Status)
	if assert.NotNil(t, tt.Progress) {
		assert.Equal(t, "waiting for CI", *tt.Progress)
	}

	clock.Set(t0 + 70)
	up = call(t, c, api.CmdProjectTaskUpdate{Project: "acme", Task: test, Status: reducer.TaskDone})
	assert.Equal(t, reducer.ProjectCompleted, up.Project.Status)
	assert.Equal(t, reducer.PhaseStaging, up.Project.Phase)
	assert.Equal(t, uint64(2), up.Project.CompletedTasks)
	assert.Equal(t, uint64(t0+70), up.Project.UpdatedUnixSeconds)

	clock.Set(t0 + 80)
	rep := call(t, c, api.CmdProjectReport{Project: "acme"})
	require.Equal(t, api.KindReport, rep.Kind)
	require.NotNil(t, rep.Report)
	assert.Equal(t, uint64(t0+80), rep.Report.GeneratedUnixSeconds, "the report is stamped with the service clock")
	assert.Equal(t, *up.Project, rep.Report.Project)
	assert.Len(t, rep.Report.Tasks, 2)
	require.Len(t, rep.Report.Runs, 1)
	assert.Equal(t, api.ProjectRun{
		ID: run, TaskID: build, Agent: "codex", Status: reducer.RunSucceeded, Attempt: 1,
		StartedUnixSeconds: t0 + 20, UpdatedUnixSeconds: t0 + 50, Progress: ptr("compiling"),
	}, rep.Report.Runs[0])
	assert.NotEmpty(t, rep.Report.Evidence)

	ev := call(t, c, api.CmdProjectEvents{Project: "acme"})
	require.Equal(t, api.KindEvents, ev.Kind)
	assert.Equal(t, p.ID, ev.ProjectID)
	assert.Nil(t, ev.CompactedBefore)
	var kinds []string
	for i, e := range ev.Events {
		kinds = append(kinds, e.Kind)
		assert.Equal(t, p.ID, e.ProjectID)
		assert.True(t, json.Valid(e.Data), "event data is JSON")
		if i > 0 {
			assert.Greater(t, e.Sequence, ev.Events[i-1].Sequence, "sequences increase")
			assert.GreaterOrEqual(t, e.TimestampUnixSeconds, ev.Events[i-1].TimestampUnixSeconds)
		}
	}
	assert.Equal(t, []string{
		"project_created", "task_added", "task_added", "run_started", "run_progress",
		"heartbeat", "heartbeat", "heartbeat", "heartbeat", "run_finished", "task_updated", "task_updated",
	}, kinds)
	require.NotEmpty(t, ev.Events)
	assert.Equal(t, uint64(t0), ev.Events[0].TimestampUnixSeconds)

	// Paging with after.
	mid := ev.Events[4].Sequence
	page := call(t, c, api.CmdProjectEvents{Project: p.ID, After: &mid})
	assert.Equal(t, ev.Events[5:], page.Events)
	last := ev.Events[len(ev.Events)-1].Sequence
	raw, err := c.CallRaw(testCtx(t), api.CmdProjectEvents{Project: "acme", After: &last})
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"events":[]`, "no events is an empty list, never null")
	assert.NotContains(t, string(raw), "compacted_before")
}

// TestProtocolStatusHasNoProject: status and reload answer a bare
// DaemonStatus, exactly as serde writes it.
func TestProtocolStatusHasNoProject(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	for _, cmd := range []api.Command{api.CmdStatus{}, api.CmdReload{}} {
		raw, err := c.CallRaw(testCtx(t), cmd)
		require.NoError(t, err)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m))
		assert.NotContains(t, m, "project", "%s reply: %s", cmd.Action(), raw)
		assert.Equal(t, `{"version":"test","pid":1,"components":[],"delegations":{"active":0,"idle":0,"reaped":0}}`, string(raw))
		st, err := c.Call(testCtx(t), cmd)
		require.NoError(t, err)
		assert.Nil(t, st.Project)
	}
}

// TestProtocolSerdeEscaping: replies escape strings as serde_json does:
// <, > and & and U+2028/U+2029 are written as themselves.
func TestProtocolSerdeEscaping(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	name := "R&D <ops> \u2028\u2029 \"q\" \\ é"
	raw, err := c.CallRaw(testCtx(t), api.CmdProjectCreate{Name: name, Workspace: d.workspace})
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"name":"R&D <ops> `+"\u2028\u2029"+` \"q\" \\ é"`)
}

// TestProtocolErrors provokes every protocol-level error code on a raw
// connection and checks code, reason and the echoed id.
func TestProtocolErrors(t *testing.T) {
	d := startDaemon(t, nil)
	status := `{"action":"status"}`
	for _, tc := range []struct {
		name   string
		line   string
		id     string // the id the reply must carry, as JSON
		code   int
		reason string
	}{
		// -32700: not JSON at all.
		{"not JSON", `not json`, `null`, -32700, "parse_error"},
		{"truncated object", `{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":{"action":"status"}`, `null`, -32700, "parse_error"},
		{"trailing comma", `{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":{"action":"status"},}`, `null`, -32700, "parse_error"},
		{"invalid UTF-8 in a string", request("1", "{\"action\":\"project_status\",\"project\":\"a\xffb\"}"), `null`, -32700, "parse_error"},
		{"invalid UTF-8 outside a string", "\xfe\xff" + request("1", status), `null`, -32700, "parse_error"},
		{"overlong UTF-8", request("1", "{\"action\":\"project_status\",\"project\":\"\xc0\xaf\"}"), `null`, -32700, "parse_error"},
		{"UTF-16 surrogate as UTF-8", request("1", "{\"action\":\"project_status\",\"project\":\"\xed\xa0\x80\"}"), `null`, -32700, "parse_error"},
		{"single quotes", `{'jsonrpc':'2.0'}`, `null`, -32700, "parse_error"},

		// -32600: JSON, but not a JSON-RPC 2.0 request.
		{"empty batch", `[]`, `null`, -32600, "invalid_request"},
		{"batch cut off", `[` + request("1", status), `null`, -32700, "parse_error"},
		{"string", `"daemon.control"`, `null`, -32600, "invalid_request"},
		{"number", `42`, `null`, -32600, "invalid_request"},
		{"null", `null`, `null`, -32600, "invalid_request"},
		{"jsonrpc missing", `{"id":1,"method":"daemon.control","params":{"action":"status"}}`, `1`, -32600, "invalid_request"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"daemon.control","params":{"action":"status"}}`, `1`, -32600, "invalid_request"},
		{"jsonrpc a number", `{"jsonrpc":2.0,"id":1,"method":"daemon.control","params":{"action":"status"}}`, `1`, -32600, "invalid_request"},
		{"jsonrpc null", `{"jsonrpc":null,"id":"x","method":"daemon.control","params":{"action":"status"}}`, `"x"`, -32600, "invalid_request"},
		{"id an object", `{"jsonrpc":"2.0","id":{"a":1},"method":"daemon.control","params":{"action":"status"}}`, `null`, -32600, "invalid_request"},
		{"id an array", `{"jsonrpc":"2.0","id":[1],"method":"daemon.control","params":{"action":"status"}}`, `null`, -32600, "invalid_request"},
		{"id a boolean", `{"jsonrpc":"2.0","id":true,"method":"daemon.control","params":{"action":"status"}}`, `null`, -32600, "invalid_request"},
		{"method missing", `{"jsonrpc":"2.0","id":1,"params":{"action":"status"}}`, `1`, -32600, "invalid_request"},
		{"method a number", `{"jsonrpc":"2.0","id":1,"method":1,"params":{"action":"status"}}`, `1`, -32600, "invalid_request"},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null,"params":{"action":"status"}}`, `1`, -32600, "invalid_request"},

		// -32601: another method.
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"action":"status"}}`, `1`, -32601, "method_not_found"},
		{"method in another case", `{"jsonrpc":"2.0","id":"m","method":"Daemon.Control","params":{"action":"status"}}`, `"m"`, -32601, "method_not_found"},
		{"empty method", `{"jsonrpc":"2.0","id":2,"method":"","params":{"action":"status"}}`, `2`, -32601, "method_not_found"},

		// -32602: params the seed's serde types refuse.
		{"params missing", `{"jsonrpc":"2.0","id":1,"method":"daemon.control"}`, `1`, -32602, "invalid_params"},
		{"params null", request("1", `null`), `1`, -32602, "invalid_params"},
		{"params a string", request("1", `"status"`), `1`, -32602, "invalid_params"},
		{"unknown action", request("1", `{"action":"project_delete","project":"a"}`), `1`, -32602, "invalid_params"},
		{"missing action", request("1", `{"project":"a"}`), `1`, -32602, "invalid_params"},
		{"missing field", request("1", `{"action":"project_task_add","project":"a","title":"t","depends_on":[]}`), `1`, -32602, "invalid_params"},
		{"wrong type", request(`"w"`, `{"action":"project_status","project":7}`), `"w"`, -32602, "invalid_params"},
		{"negative u32", request("1", `{"action":"project_task_add","project":"a","title":"t","depends_on":[],"max_retries":-1}`), `1`, -32602, "invalid_params"},
		{"fractional u64", request("1", `{"action":"project_events","project":"a","after":1.5}`), `1`, -32602, "invalid_params"},
		{"unknown enum value", request("1", `{"action":"project_task_update","project":"a","task":"t","status":"paused"}`), `1`, -32602, "invalid_params"},
		{"duplicate field", request("1", `{"action":"project_status","project":"a","project":"b"}`), `1`, -32602, "invalid_params"},
		{"lone surrogate", request("1", `{"action":"project_status","project":"\ud800"}`), `1`, -32602, "invalid_params"},
		{"lone surrogate in an unknown field", request("1", `{"action":"status","note":"\ud800"}`), `1`, -32602, "invalid_params"},
		{"trailing characters", request("1", status) + ` x`, `1`, -32602, "invalid_params"},
		{"two objects on a line", request("1", status) + request("2", status), `1`, -32602, "invalid_params"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := d.raw(t)
			r := rc.roundTrip(tc.line)
			assertError(t, r, tc.id, tc.code, tc.reason)
			// The connection stays usable after a refused request.
			ok := rc.roundTrip(request(`"after"`, status))
			assert.Nil(t, ok.err, "a request after the refused one: %s", ok.raw)
			assert.JSONEq(t, `"after"`, string(ok.id))
		})
	}
}

// TestProtocolIDs: the reply echoes the request's id byte for byte; an id
// of null is still a request, not a notification.
func TestProtocolIDs(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	for _, id := range []string{`1`, `0`, `-7`, `"abc"`, `""`, `"a\"b\\c"`, `"\u00e9"`, `123456789012345678901234567890`, `null`} {
		r := rc.roundTrip(request(id, `{"action":"status"}`))
		assert.Nil(t, r.err, "id %s: %s", id, r.raw)
		assert.Equal(t, id, string(r.id), "id echoed byte for byte")
	}
}

// TestProtocolFraming: blank lines are skipped, CRLF line ends are fine.
func TestProtocolFraming(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	rc.write([]byte("\n  \n\t\n" + request("1", `{"action":"status"}`) + "\r\n"))
	r := parseReply(t, rc.readLine())
	assert.Nil(t, r.err, "%s", r.raw)
	assert.Equal(t, `1`, string(r.id))
	// A request split across writes is read as one line.
	line := request("2", `{"action":"status"}`) + "\n"
	rc.write([]byte(line[:10]))
	time.Sleep(20 * time.Millisecond)
	rc.write([]byte(line[10:]))
	r = parseReply(t, rc.readLine())
	assert.Equal(t, `2`, string(r.id))
	assert.Nil(t, r.err)
}

// TestProtocolApplicationErrors provokes every application error and
// checks that no refused request appended anything.
func TestProtocolApplicationErrors(t *testing.T) {
	const t0 = 1764400000
	clock := newTestClock(t0)
	d := startDaemon(t, clock.Now)
	c := d.client(t)

	p := call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace}).Project
	build := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 0}).TaskID
	test := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "test", DependsOn: []string{build}, MaxRetries: 0}).TaskID
	done := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "docs", DependsOn: []string{}, MaxRetries: 0}).TaskID
	call(t, c, api.CmdProjectTaskUpdate{Project: "acme", Task: done, Status: reducer.TaskDone})
	finished := call(t, c, api.CmdProjectRunStart{Project: "acme", Task: build, Agent: "codex"}).RunID
	call(t, c, api.CmdProjectRunFinish{Project: "acme", Run: finished, Status: reducer.RunCancelled})
	running := call(t, c, api.CmdProjectRunStart{Project: "acme", Task: build, Agent: "codex"}).RunID
	other := call(t, c, api.CmdProjectCreate{Name: "other", Workspace: d.workspace}).Project

	// What the ledger holds before the refusals; the clock moves on so that
	// a refused command that touched anything would show.
	snapshot := func() string {
		var b strings.Builder
		for _, ref := range []string{p.ID, other.ID} {
			for _, cmd := range []api.Command{
				api.CmdProjectEvents{Project: ref}, api.CmdProjectStatus{Project: ref},
				api.CmdProjectTasks{Project: ref},
			} {
				raw, err := c.CallRaw(testCtx(t), cmd)
				require.NoError(t, err)
				b.Write(raw)
				b.WriteByte('\n')
			}
		}
		return b.String()
	}
	before := snapshot()
	clock.Set(t0 + 1000)

	file := filepath.Join(d.dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	long := strings.Repeat("n", 201)
	for _, tc := range []struct {
		name   string
		cmd    api.Command
		code   int
		reason string
	}{
		{"workspace relative", api.CmdProjectCreate{Name: "x1", Workspace: "acme"}, -32602, "invalid_argument"},
		{"workspace empty", api.CmdProjectCreate{Name: "x2", Workspace: ""}, -32602, "invalid_argument"},
		{"workspace missing", api.CmdProjectCreate{Name: "x3", Workspace: filepath.Join(d.dir, "nope")}, -32602, "invalid_argument"},
		{"workspace a file", api.CmdProjectCreate{Name: "x4", Workspace: file}, -32602, "invalid_argument"},
		{"name of 201 characters", api.CmdProjectCreate{Name: long, Workspace: d.workspace}, -32602, "invalid_argument"},
		{"name of 201 two-byte characters", api.CmdProjectCreate{Name: strings.Repeat("é", 201), Workspace: d.workspace}, -32602, "invalid_argument"},
		{"empty name", api.CmdProjectCreate{Name: "", Workspace: d.workspace}, -32602, "invalid_argument"},
		{"name with a control character", api.CmdProjectCreate{Name: "a\u0007b", Workspace: d.workspace}, -32602, "invalid_argument"},
		{"name with a newline", api.CmdProjectCreate{Name: "a\nb", Workspace: d.workspace}, -32602, "invalid_argument"},
		{"title of 201 characters", api.CmdProjectTaskAdd{Project: "acme", Title: long, DependsOn: []string{}}, -32602, "invalid_argument"},
		{"empty title", api.CmdProjectTaskAdd{Project: "acme", Title: "", DependsOn: []string{}}, -32602, "invalid_argument"},
		{"dependency named twice", api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: []string{build, build}}, -32602, "invalid_argument"},
		{"run finish running", api.CmdProjectRunFinish{Project: "acme", Run: running, Status: reducer.RunRunning}, -32602, "invalid_argument"},
		{"run finish stale", api.CmdProjectRunFinish{Project: "acme", Run: running, Status: reducer.RunStale}, -32602, "invalid_argument"},
		{"heartbeat of a run of another task", api.CmdProjectHeartbeat{Project: "acme", Task: &test, Run: &running}, -32602, "invalid_argument"},

		{"status of an unknown project", api.CmdProjectStatus{Project: "nope"}, -32001, "not_found"},
		{"name in another case", api.CmdProjectStatus{Project: "ACME"}, -32001, "not_found"},
		{"events of an unknown project", api.CmdProjectEvents{Project: "nope"}, -32001, "not_found"},
		{"tasks of an unknown project", api.CmdProjectTasks{Project: "nope"}, -32001, "not_found"},
		{"report of an unknown project", api.CmdProjectReport{Project: "nope"}, -32001, "not_found"},
		{"task add to an unknown project", api.CmdProjectTaskAdd{Project: "nope", Title: "t", DependsOn: []string{}}, -32001, "not_found"},
		{"unknown dependency", api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: []string{"01J0NOPE0000000000000000000"}}, -32001, "not_found"},
		{"dependency from another project", api.CmdProjectTaskAdd{Project: "other", Title: "t", DependsOn: []string{build}}, -32001, "not_found"},
		{"update an unknown task", api.CmdProjectTaskUpdate{Project: "acme", Task: "nope", Status: reducer.TaskBlocked}, -32001, "not_found"},
		{"start an unknown task", api.CmdProjectRunStart{Project: "acme", Task: "nope", Agent: "codex"}, -32001, "not_found"},
		{"start a task of another project", api.CmdProjectRunStart{Project: "other", Task: test, Agent: "codex"}, -32001, "not_found"},
		{"progress of an unknown run", api.CmdProjectRunProgress{Project: "acme", Run: "nope", Progress: "p"}, -32001, "not_found"},
		{"finish an unknown run", api.CmdProjectRunFinish{Project: "acme", Run: "nope", Status: reducer.RunSucceeded}, -32001, "not_found"},
		{"finish a run of another project", api.CmdProjectRunFinish{Project: "other", Run: running, Status: reducer.RunSucceeded}, -32001, "not_found"},
		{"heartbeat of an unknown task", api.CmdProjectHeartbeat{Project: "acme", Task: ptr("nope")}, -32001, "not_found"},
		{"heartbeat of an unknown run", api.CmdProjectHeartbeat{Project: "acme", Run: ptr("nope")}, -32001, "not_found"},

		{"duplicate project name", api.CmdProjectCreate{Name: "acme", Workspace: d.workspace}, -32002, "conflict"},
		{"duplicate name of the other project", api.CmdProjectCreate{Name: "other", Workspace: t.TempDir()}, -32002, "conflict"},

		{"start a pending task", api.CmdProjectRunStart{Project: "acme", Task: test, Agent: "codex"}, -32003, "invalid_transition"},
		{"start a running task", api.CmdProjectRunStart{Project: "acme", Task: build, Agent: "codex"}, -32003, "invalid_transition"},
		{"start a done task", api.CmdProjectRunStart{Project: "acme", Task: done, Agent: "codex"}, -32003, "invalid_transition"},
		{"update a done task", api.CmdProjectTaskUpdate{Project: "acme", Task: done, Status: reducer.TaskReady}, -32003, "invalid_transition"},
		{"update a running task", api.CmdProjectTaskUpdate{Project: "acme", Task: build, Status: reducer.TaskDone}, -32003, "invalid_transition"},
		{"set running by update", api.CmdProjectTaskUpdate{Project: "acme", Task: test, Status: reducer.TaskRunning}, -32003, "invalid_transition"},
		{"set stale by update", api.CmdProjectTaskUpdate{Project: "acme", Task: test, Status: reducer.TaskStale}, -32003, "invalid_transition"},
		{"ready from pending", api.CmdProjectTaskUpdate{Project: "acme", Task: test, Status: reducer.TaskReady}, -32003, "invalid_transition"},

		{"progress of a finished run", api.CmdProjectRunProgress{Project: "acme", Run: finished, Progress: "late"}, -32004, "run_not_running"},
		{"finish a finished run", api.CmdProjectRunFinish{Project: "acme", Run: finished, Status: reducer.RunSucceeded}, -32004, "run_not_running"},
		{"heartbeat of a finished run", api.CmdProjectHeartbeat{Project: "acme", Run: &finished}, -32004, "run_not_running"},

		{"channel_set of an unknown channel", api.CmdChannelSet{Channel: "carrier-pigeon", Account: "main", Enabled: true}, -32602, "invalid_argument"},
		{"channel_logout of an unknown account", api.CmdChannelLogout{Channel: "wechat", Account: "main"}, -32001, "not_found"},
		{"channel_login of a chat channel", api.CmdChannelLogin{Channel: "wechat", Account: "main", IMAP: "imaps://mail.example.com", User: "me", Password: "pw"}, -32602, "invalid_argument"},
		{"channel_login to a mail chat that does not exist", api.CmdChannelLogin{Channel: "email", Account: "work", IMAP: "imaps://mail.example.com", User: "me", Password: "pw", MailChat: ptr("local:mail")}, -32602, "invalid_argument"},
		{"kill an unknown delegation", api.CmdDelegationKill{Handle: ptr("nope")}, -32001, "not_found"},
		{"kill neither handle nor orphans", api.CmdDelegationKill{}, -32602, "invalid_argument"},
		{"kill a handle and the orphans", api.CmdDelegationKill{Handle: ptr("nope"), Orphans: true}, -32602, "invalid_argument"},
		{"done of an unknown delegation", api.CmdDelegationDone{Handle: "nope"}, -32001, "not_found"},
		{"restart_when_idle without a known executable", api.CmdRestartWhenIdle{}, -32005, "unavailable"},
		{"confirm_ask of an empty question", api.CmdConfirmAsk{Question: ""}, -32602, "invalid_argument"},
		{"confirm_status of an unknown question", api.CmdConfirmStatus{ID: "q-1"}, -32001, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertCode(t, callErr(t, c, tc.cmd), tc.code, tc.reason, tc.name)
		})
	}

	assert.Equal(t, before, snapshot(), "refused requests appended nothing and changed nothing")

	// The edges that pass: 200 characters, counted as characters.
	call(t, c, api.CmdProjectCreate{Name: strings.Repeat("n", 200), Workspace: d.workspace})
	call(t, c, api.CmdProjectCreate{Name: strings.Repeat("é", 200), Workspace: d.workspace})
}

// TestProtocolUnavailable: once the ledger is closed, the server still
// answers, with -32005 unavailable.
func TestProtocolUnavailable(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	p := call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace}).Project
	task := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: []string{}}).TaskID
	require.NoError(t, d.ledger.Close())

	for _, cmd := range []api.Command{
		api.CmdProjectCreate{Name: "beta", Workspace: d.workspace},
		api.CmdProjectTaskAdd{Project: p.ID, Title: "u", DependsOn: []string{}},
		api.CmdProjectTaskUpdate{Project: "acme", Task: task, Status: reducer.TaskBlocked},
		api.CmdProjectRunStart{Project: "acme", Task: task, Agent: "codex"},
		api.CmdProjectHeartbeat{Project: "acme"},
		api.CmdProjectEvents{Project: "acme"},
	} {
		assertCode(t, callErr(t, c, cmd), -32005, "unavailable", cmd.Action())
	}
	// The server itself is fine.
	_, err := c.Call(testCtx(t), api.CmdStatus{})
	assert.NoError(t, err)
}

// TestProtocolNotifications: a request without id runs and gets no reply,
// not even when it fails.
func TestProtocolNotifications(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	create := encode(t, api.CmdProjectCreate{Name: "quiet", Workspace: d.workspace})
	rc.write([]byte(strings.Join([]string{
		request("", create),
		request("", `{"action":"project_status","project":"nope"}`),              // not_found
		request("", `{"action":"bogus"}`),                                        // invalid params
		`{"jsonrpc":"2.0","method":"daemon.other","params":{"action":"status"}}`, // unknown method
		request("", create), // conflict
		request("7", `{"action":"project_status","project":"quiet"}`),
	}, "\n") + "\n"))
	r := parseReply(t, rc.readLine())
	assert.Equal(t, `7`, string(r.id), "the first reply is the first request's: %s", r.raw)
	require.Nil(t, r.err, "the notification created the project: %s", r.raw)
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal(r.result, &st))
	require.NotNil(t, st.Project)
	assert.Equal(t, "quiet", st.Project.Project.Name)

	// Exactly one project_created: the second notification was refused.
	ev := rc.roundTrip(request("8", `{"action":"project_events","project":"quiet"}`))
	require.Nil(t, ev.err)
	require.NoError(t, json.Unmarshal(ev.result, &st))
	assert.Len(t, st.Project.Events, 1)

	// Nothing else is waiting on the connection.
	require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	_, err := rc.r.ReadByte()
	assert.True(t, errors.Is(err, os.ErrDeadlineExceeded), "no reply left over, got %v", err)
}

// TestProtocolPipeline: 50 requests in one write are answered in order,
// each seeing the effects of the ones before it.
func TestProtocolPipeline(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	type want struct {
		id   string
		kind api.ResponseKind // "" for an error
		code int
	}
	var lines []string
	var wants []want
	for i := range 50 {
		id := fmt.Sprint(i)
		if i%2 == 1 {
			id = fmt.Sprintf(`"r-%d"`, i)
		}
		name := fmt.Sprintf("pipe-%d", i/5)
		switch i % 5 {
		case 0:
			lines = append(lines, request(id, encode(t, api.CmdProjectCreate{Name: name, Workspace: d.workspace})))
			wants = append(wants, want{id, api.KindCreated, 0})
		case 1:
			lines = append(lines, request(id, encode(t, api.CmdProjectStatus{Project: name})))
			wants = append(wants, want{id, api.KindStatus, 0})
		case 2:
			lines = append(lines, request(id, encode(t, api.CmdProjectCreate{Name: name, Workspace: d.workspace})))
			wants = append(wants, want{id, "", -32002})
		case 3:
			lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"nope"}`)
			wants = append(wants, want{id, "", -32601})
		case 4:
			lines = append(lines, request(id, encode(t, api.CmdProjectTaskAdd{Project: name, Title: "t", DependsOn: []string{}})))
			wants = append(wants, want{id, api.KindTaskAdded, 0})
		}
	}
	rc.write([]byte(strings.Join(lines, "\n") + "\n"))
	for i, w := range wants {
		r := parseReply(t, rc.readLine())
		assert.Equal(t, w.id, string(r.id), "reply %d in order", i)
		if w.kind == "" {
			if assert.NotNil(t, r.err, "reply %d: %s", i, r.raw) {
				assert.Equal(t, w.code, r.err.Code, "reply %d", i)
			}
			continue
		}
		if assert.Nil(t, r.err, "reply %d: %s", i, r.raw) {
			var st api.DaemonStatus
			require.NoError(t, json.Unmarshal(r.result, &st))
			if assert.NotNil(t, st.Project) {
				assert.Equal(t, w.kind, st.Project.Kind, "reply %d", i)
			}
		}
	}
}

// bigRequest is a status request padded with an unknown field to exactly n
// bytes, newline excluded.
func bigRequest(t *testing.T, id string, params string, n int) []byte {
	prefix := `{"jsonrpc":"2.0","id":` + id + `,"method":"daemon.control","params":` + strings.TrimSuffix(params, "}") + `,"pad":"`
	suffix := `"}}`
	require.Greater(t, n, len(prefix)+len(suffix))
	b := []byte(prefix + strings.Repeat("x", n-len(prefix)-len(suffix)) + suffix)
	require.Len(t, b, n)
	return b
}

// TestProtocolTooLarge: a line longer than 1 MiB is refused with
// too_large, nothing of it runs, and the connection is closed; a line of
// exactly 1 MiB is fine.
func TestProtocolTooLarge(t *testing.T) {
	d := startDaemon(t, nil)
	create := encode(t, api.CmdProjectCreate{Name: "huge", Workspace: d.workspace})

	rc := d.raw(t)
	line := append(bigRequest(t, "1", create, control.MaxLine+1), '\n')
	writeErr := make(chan error, 1)
	go func() {
		// The daemon stops reading and closes: the write may fail.
		rc.c.SetWriteDeadline(time.Now().Add(ioTimeout))
		_, err := rc.c.Write(line)
		writeErr <- err
	}()
	r := parseReply(t, rc.readLine())
	assertError(t, r, `null`, -32600, "too_large")
	require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(ioTimeout)))
	_, err := rc.r.ReadByte()
	// End of file, or a reset because the daemon never read all we wrote.
	assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET),
		"the daemon closed the connection, got %v", err)
	<-writeErr

	c := d.client(t)
	e := callErr(t, c, api.CmdProjectStatus{Project: "huge"})
	assertCode(t, e, -32001, "not_found", "the too-large request did not run")

	// Exactly MaxLine bytes, newline excluded, is a request like any other.
	rc = d.raw(t)
	line = append(bigRequest(t, `"max"`, create, control.MaxLine), '\n')
	go func() {
		rc.c.SetWriteDeadline(time.Now().Add(ioTimeout))
		_, err := rc.c.Write(line)
		writeErr <- err
	}()
	r = parseReply(t, rc.readLine())
	assert.Nil(t, r.err, "%.300s", r.raw)
	assert.Equal(t, `"max"`, string(r.id))
	assert.NoError(t, <-writeErr)
	call(t, c, api.CmdProjectStatus{Project: "huge"})
}

// TestProtocolTooLargeWithoutNewline: the limit holds for a line that never
// ends, too.
func TestProtocolTooLargeWithoutNewline(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	go func() {
		rc.c.SetWriteDeadline(time.Now().Add(ioTimeout))
		rc.c.Write([]byte(strings.Repeat(" ", 2*control.MaxLine)))
	}()
	r := parseReply(t, rc.readLine())
	assertError(t, r, `null`, -32600, "too_large")
}

// TestProtocolManyClients: concurrent connections each get their own
// replies, in order.
func TestProtocolManyClients(t *testing.T) {
	d := startDaemon(t, nil)
	errs := make(chan error, 8)
	for i := range 8 {
		c := d.client(t)
		go func() {
			for j := range 20 {
				name := fmt.Sprintf("c%d-%d", i, j)
				st, err := c.Call(context.Background(), api.CmdProjectCreate{Name: name, Workspace: d.workspace})
				if err != nil {
					errs <- err
					return
				}
				if st.Project == nil || st.Project.Project.Name != name {
					errs <- fmt.Errorf("reply to %s: %+v", name, st.Project)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		assert.NoError(t, <-errs)
	}
}

// TestProtocolShutdownWhileIdle: Shutdown closes idle connections and
// returns; a client sees the connection end.
func TestProtocolShutdownWhileIdle(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	r := rc.roundTrip(request("1", `{"action":"status"}`))
	require.Nil(t, r.err)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	require.NoError(t, d.srv.Shutdown(ctx))
	require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(ioTimeout)))
	_, err := rc.r.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
}

// TestProtocolEventsAfterAnyU64: after is a u64 in the seed; any value the
// decoder accepts is answered, one beyond every sequence with no events.
func TestProtocolEventsAfterAnyU64(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	for _, after := range []uint64{1<<63 - 1, 1 << 63, 1<<64 - 1} {
		raw, err := c.CallRaw(testCtx(t), api.CmdProjectEvents{Project: "acme", After: &after})
		if assert.NoError(t, err, "after %d", after) {
			assert.Contains(t, string(raw), `"events":[]`, "after %d", after)
		}
	}
}

// TestProtocolEventsPaging: one reply holds at most reducer.MaxEventsPage events;
// a client pages with after and sees every event once, in order.
func TestProtocolEventsPaging(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	const clients, each = 10, 101
	errs := make(chan error, clients)
	for range clients {
		cl := d.client(t)
		go func() {
			for range each {
				if _, err := cl.Call(context.Background(), api.CmdProjectHeartbeat{Project: "acme"}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		require.NoError(t, <-errs)
	}
	total := 1 + clients*each
	require.Greater(t, total, reducer.MaxEventsPage)

	var all []api.ProjectEvent
	var after *uint64
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging ends")
		ev := call(t, c, api.CmdProjectEvents{Project: "acme", After: after})
		assert.LessOrEqual(t, len(ev.Events), reducer.MaxEventsPage)
		if len(ev.Events) == 0 {
			break
		}
		all = append(all, ev.Events...)
		after = &ev.Events[len(ev.Events)-1].Sequence
	}
	require.Len(t, all, total)
	for i := 1; i < len(all); i++ {
		assert.Greater(t, all[i].Sequence, all[i-1].Sequence)
	}
}

// TestProtocolLimits: the largest u32 survives the trip through the
// ledger and back.
func TestProtocolLimits(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	id := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: []string{}, MaxRetries: 4294967295}).TaskID
	tasks := call(t, c, api.CmdProjectTasks{Project: "acme"})
	assert.Equal(t, uint32(4294967295), taskByID(t, tasks.Tasks, id).MaxRetries)
}

// TestProtocolTooLargeLastLine: the limit holds for a last line that ends
// at end of file instead of a newline.
func TestProtocolTooLargeLastLine(t *testing.T) {
	d := startDaemon(t, nil)
	create := encode(t, api.CmdProjectCreate{Name: "huge", Workspace: d.workspace})
	rc := d.raw(t)
	line := bigRequest(t, "1", create, control.MaxLine+1)
	go func() {
		rc.c.SetWriteDeadline(time.Now().Add(ioTimeout))
		rc.c.Write(line)
		rc.c.(*net.UnixConn).CloseWrite()
	}()
	r := parseReply(t, rc.readLine())
	assertError(t, r, `null`, -32600, "too_large")

	c := d.client(t)
	e := callErr(t, c, api.CmdProjectStatus{Project: "huge"})
	assertCode(t, e, -32001, "not_found", "the too-large request did not run")

	// A last line within the limit is answered.
	rc = d.raw(t)
	rc.write([]byte(request("2", `{"action":"status"}`)))
	require.NoError(t, rc.c.(*net.UnixConn).CloseWrite())
	r = parseReply(t, rc.readLine())
	assert.Nil(t, r.err)
	assert.Equal(t, `2`, string(r.id))
}
