package control_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/control/rpc"
)

// want is what one response of a batch must be: a result (reason "") or
// an error with that reason, for the request with id (raw JSON).
type want struct {
	id     string
	reason string
}

// batchReply reads a batch's reply line: an array of responses.
func batchReply(t *testing.T, line []byte) []reply {
	t.Helper()
	var elems []json.RawMessage
	require.NoError(t, json.Unmarshal(line, &elems), "a batch's reply is an array: %s", line)
	require.NotEmpty(t, elems, "an empty array is never a reply: %s", line)
	out := make([]reply, len(elems))
	for i, e := range elems {
		out[i] = parseReply(t, e)
	}
	return out
}

// taskCount is how many tasks project acme has.
func taskCount(t *testing.T, c *rpc.Client) uint64 {
	t.Helper()
	st, err := c.Call(testCtx(t), api.CmdProjectStatus{Project: "acme"})
	require.NoError(t, err)
	return st.Project.Project.TaskCount
}

// TestBatch: the rules of JSON-RPC 2.0 batches (docs/protocol.md), over a
// real socket. Each case sends one line on a connection and checks the
// reply (an array of responses in the order of the requests, one error
// object when the batch is refused whole, or no line at all), the tasks it
// added, and that the connection still answers.
func TestBatch(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	_, err := c.Call(testCtx(t), api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	require.NoError(t, err)

	add := func(id, title string) string {
		return request(id, `{"action":"project_task_add","project":"acme","title":"`+title+`","depends_on":[],"max_retries":0}`)
	}
	status := `{"action":"status"}`
	batch := func(elems ...string) string { return "[" + strings.Join(elems, ",") + "]" }
	many := func(n int) string {
		elems := make([]string, n)
		for i := range elems {
			elems[i] = add(fmt.Sprint(i), fmt.Sprint("t", i))
		}
		return batch(elems...)
	}

	for _, tc := range []struct {
		name    string
		line    string
		replies []want // nil: no reply line (unless whole is set)
		whole   *want  // the batch refused whole: one error object
		added   uint64 // tasks the batch added
	}{
		{
			name: "mixed valid and invalid",
			line: batch(
				add("1", "a"),
				`42`,
				request("2", status),
				request("3", `{"action":"project_task_add","project":"nowhere","title":"x","depends_on":[],"max_retries":0}`),
				`{"foo":1}`,
				request("4", `{"action":"bogus"}`),
				add("", "b"), // a notification: runs, no response
				batch(request("5", status)),
				`{"jsonrpc":"2.0","id":6,"method":"daemon.other","params":{"action":"status"}}`,
				add(`"x"`, "c"),
			),
			replies: []want{{`1`, ""}, {`null`, "invalid_request"}, {`2`, ""}, {`3`, "not_found"},
				{`null`, "invalid_request"}, {`4`, "invalid_params"}, {`null`, "invalid_request"},
				{`6`, "method_not_found"}, {`"x"`, ""}},
			added: 3,
		},
		{name: "one request", line: batch(request(`"one"`, status)), replies: []want{{`"one"`, ""}}},
		{name: "notifications only", line: batch(add("", "n1"), request("", status), add("", "n2")), added: 2},
		{name: "a notification refused gets no response",
			line:    batch(request("", `{"action":"project_status","project":"nowhere"}`), request("7", status)),
			replies: []want{{`7`, ""}}},
		{name: "elements not objects", line: `[1,"a",null,true,{}]`,
			replies: []want{{`null`, "invalid_request"}, {`null`, "invalid_request"}, {`null`, "invalid_request"},
				{`null`, "invalid_request"}, {`null`, "invalid_request"}}},
		{name: "nested arrays", line: `[[],[[` + add("8", "nested") + `]]]`,
			replies: []want{{`null`, "invalid_request"}, {`null`, "invalid_request"}}},
		{name: "empty", line: `[]`, whole: &want{`null`, "invalid_request"}},
		{name: "empty, with white space", line: " [ \t ] ", whole: &want{`null`, "invalid_request"}},
		{name: "at the limit", line: many(control.MaxBatch), replies: make([]want, control.MaxBatch), added: control.MaxBatch},
		{name: "over the limit", line: many(control.MaxBatch + 1), whole: &want{`null`, "too_large"}},
		{name: "cut off", line: batch(add("9", "cut"), request("10", status))[:150], whole: &want{`null`, "parse_error"}},
		{name: "trailing characters", line: batch(add("11", "trailing")) + ` x`, whole: &want{`null`, "parse_error"}},
		{name: "invalid UTF-8", line: batch(add("12", "\xff")), whole: &want{`null`, "parse_error"}},
		{name: "longer than a request line", line: batch(add("13", "long")) + strings.Repeat(" ", control.MaxLine),
			replies: []want{{`13`, ""}}, added: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "at the limit" {
				for i := range tc.replies {
					tc.replies[i] = want{fmt.Sprint(i), ""}
				}
			}
			before := taskCount(t, c)
			rc := d.raw(t)
			rc.write([]byte(tc.line + "\n"))
			rc.write([]byte(request(`"after"`, status) + "\n"))
			line := rc.readLine()
			switch {
			case tc.whole != nil:
				assertError(t, parseReply(t, line), tc.whole.id, errorCode(tc.whole.reason), tc.whole.reason)
				line = rc.readLine()
			case tc.replies != nil:
				got := batchReply(t, line)
				require.Len(t, got, len(tc.replies), "%s", line)
				for i, w := range tc.replies {
					if w.reason == "" {
						assert.Nil(t, got[i].err, "response %d: %s", i, got[i].raw)
						assert.JSONEq(t, w.id, string(got[i].id), "response %d: %s", i, got[i].raw)
					} else {
						assertError(t, got[i], w.id, errorCode(w.reason), w.reason)
					}
				}
				line = rc.readLine()
			}
			// The connection is kept: the next line's reply comes next.
			after := parseReply(t, line)
			assert.Nil(t, after.err, "%s", line)
			assert.JSONEq(t, `"after"`, string(after.id))
			assert.Equal(t, before+tc.added, taskCount(t, c), "tasks added")
		})
	}
}

// errorCode is the code of the errors with reason, as this test meets them.
func errorCode(reason string) int {
	return map[string]int{"parse_error": -32700, "invalid_request": -32600, "too_large": -32600,
		"method_not_found": -32601, "invalid_params": -32602, "not_found": -32001}[reason]
}

// A batch line longer than MaxBatchLine is refused, too_large, and the
// connection closed: the rest of the line is not read.
func TestBatchLineTooLong(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	go rc.c.Write([]byte("[" + strings.Repeat(" ", control.MaxBatchLine) + "]\n"))
	assertError(t, parseReply(t, rc.readLine()), `null`, -32600, "too_large")
	_, err := rc.r.ReadBytes('\n')
	assert.True(t, closedByPeer(err), "the connection is closed: %v", err)
}

// A batch cut off by the end of the connection, without its newline, is
// answered a parse error.
func TestBatchCutOffAtEOF(t *testing.T) {
	d := startDaemon(t, nil)
	rc := d.raw(t)
	rc.write([]byte(`[` + request("1", `{"action":"status"}`) + `,{"jsonrpc":"2.0","id":2,"meth`))
	require.NoError(t, rc.c.(interface{ CloseWrite() error }).CloseWrite())
	assertError(t, parseReply(t, rc.readLine()), `null`, -32700, "parse_error")
}

// CallBatch against a real daemon: the answers come back in the order of
// the commands, each decided on its own; a batch refused whole is the
// call's error.
func TestCallBatch(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	ctx := testCtx(t)
	res, err := c.CallBatch(ctx, []api.Command{
		api.CmdProjectCreate{Name: "acme", Workspace: d.workspace},
		api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}},
		api.CmdProjectTaskAdd{Project: "nowhere", Title: "lost", DependsOn: []string{}},
		api.CmdStatus{},
		api.CmdProjectStatus{Project: "acme"},
	})
	require.NoError(t, err)
	require.Len(t, res, 5)
	created, err := res[0].Status()
	require.NoError(t, err)
	assert.Equal(t, "acme", created.Project.Project.Name)
	added, err := res[1].Status()
	require.NoError(t, err)
	assert.NotEmpty(t, added.Project.TaskID)
	var e *api.Error
	require.ErrorAs(t, res[2].Err, &e)
	assert.Equal(t, api.ReasonNotFound, e.Data.Reason)
	assert.Nil(t, res[2].Raw)
	st, err := res[3].Status()
	require.NoError(t, err)
	assert.Nil(t, st.Project)
	read, err := res[4].Status()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), read.Project.Project.TaskCount, "the read sees the batch's writes")

	// The same connection goes on: single calls, and the ids after the
	// batch's.
	_, err = c.Call(ctx, api.CmdStatus{})
	require.NoError(t, err)

	res, err = c.CallBatch(ctx, nil)
	assert.NoError(t, err)
	assert.Nil(t, res, "no commands, nothing sent")

	tooMany := make([]api.Command, control.MaxBatch+1)
	for i := range tooMany {
		tooMany[i] = api.CmdStatus{}
	}
	_, err = c.CallBatch(ctx, tooMany)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, api.ReasonTooLarge, e.Data.Reason)
	_, err = c.Call(ctx, api.CmdStatus{})
	assert.NoError(t, err, "the connection is kept")
}

// The writes of one project in a batch answer with its state after the
// batch; those that mint no ID answer alike, byte for byte.
func TestBatchRepliesAlike(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	ctx := testCtx(t)
	_, err := c.Call(ctx, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	require.NoError(t, err)
	_, err = c.Call(ctx, api.CmdProjectCreate{Name: "beta", Workspace: d.workspace})
	require.NoError(t, err)
	res, err := c.CallBatch(ctx, []api.Command{
		api.CmdProjectHeartbeat{Project: "acme"},
		api.CmdProjectTaskAdd{Project: "acme", Title: "one", DependsOn: []string{}},
		api.CmdProjectHeartbeat{Project: "acme"},
		api.CmdProjectHeartbeat{Project: "acme"},
		api.CmdProjectHeartbeat{Project: "beta"},
		api.CmdProjectHeartbeat{Project: "acme"},
		api.CmdProjectTaskAdd{Project: "acme", Title: "two", DependsOn: []string{}},
	})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	for _, i := range []int{2, 3, 5} {
		assert.Equal(t, string(res[0].Raw), string(res[i].Raw), "reply %d", i)
	}
	assert.Contains(t, string(res[0].Raw), `"task_count":2`, "the state after the batch")
	assert.Contains(t, string(res[4].Raw), `"name":"beta"`)
	one, err := res[1].Status()
	require.NoError(t, err)
	two, err := res[6].Status()
	require.NoError(t, err)
	assert.NotEqual(t, one.Project.TaskID, two.Project.TaskID, "each task_add its own ID")
	assert.Equal(t, uint64(2), one.Project.Project.TaskCount)
}
