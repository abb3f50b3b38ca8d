package reducer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// encodingCases hold every body kind with its stored `data`, written out
// literally: a change of the stored format must fail here, since events
// already in a ledger are decoded with today's code.
var encodingCases = []struct {
	name string
	body reducer.Body
	json string
}{
	{"project created", reducer.ProjectCreated{Name: "alpha", Workspace: "/work/alpha"},
		`{"name":"alpha","workspace":"/work/alpha"}`},
	{"project created, non-ASCII and HTML characters", reducer.ProjectCreated{Name: "café <&> \"q\"", Workspace: "/w/é"},
		`{"name":"café <&> \"q\"","workspace":"/w/é"}`},
	{"task added", reducer.TaskAdded{TaskID: "T2", Title: "build", DependsOn: []string{"T0", "T1"}, MaxRetries: 2},
		`{"task_id":"T2","title":"build","depends_on":["T0","T1"],"max_retries":2}`},
	{"task added without dependencies", reducer.TaskAdded{TaskID: "T0", Title: "plan", DependsOn: []string{}},
		`{"task_id":"T0","title":"plan","depends_on":[],"max_retries":0}`},
	{"task updated with progress", reducer.TaskUpdated{TaskID: "T1", Status: reducer.TaskBlocked, Progress: ptr("waiting")},
		`{"task_id":"T1","status":"blocked","progress":"waiting"}`},
	{"task updated with empty progress", reducer.TaskUpdated{TaskID: "T1", Status: reducer.TaskReady, Progress: ptr("")},
		`{"task_id":"T1","status":"ready","progress":""}`},
	{"task updated without progress", reducer.TaskUpdated{TaskID: "T1", Status: reducer.TaskDone},
		`{"task_id":"T1","status":"done"}`},
	{"run started", reducer.RunStarted{RunID: "R1", TaskID: "T1", Agent: "claude"},
		`{"run_id":"R1","task_id":"T1","agent":"claude"}`},
	{"run progress", reducer.RunProgress{RunID: "R1", Progress: "3/5 files"},
		`{"run_id":"R1","progress":"3/5 files"}`},
	{"run progress with line separators and a literal backslash-u", reducer.RunProgress{RunID: "R1", Progress: "a\u2028b\u2029c \\u2028"},
		`{"run_id":"R1","progress":"a` + "\u2028" + `b` + "\u2029" + `c \\u2028"}`},
	{"run finished succeeded", reducer.RunFinished{RunID: "R1", Status: reducer.RunSucceeded},
		`{"run_id":"R1","status":"succeeded"}`},
	{"run finished failed", reducer.RunFinished{RunID: "R1", Status: reducer.RunFailed},
		`{"run_id":"R1","status":"failed"}`},
	{"run finished cancelled", reducer.RunFinished{RunID: "R1", Status: reducer.RunCancelled},
		`{"run_id":"R1","status":"cancelled"}`},
	{"run stale", reducer.RunStaleMarked{RunID: "R1"},
		`{"run_id":"R1"}`},
	{"heartbeat of a run", reducer.Heartbeat{TaskID: "T1", RunID: "R1"},
		`{"task_id":"T1","run_id":"R1"}`},
	{"heartbeat of a task", reducer.Heartbeat{TaskID: "T1"},
		`{"task_id":"T1"}`},
	{"heartbeat of the project", reducer.Heartbeat{},
		`{}`},
	{"task retried keeping its budget", reducer.TaskRetried{TaskID: "T1", By: "uid 1000 pid 42"},
		`{"task_id":"T1","by":"uid 1000 pid 42"}`},
	{"task retried with a new budget", reducer.TaskRetried{TaskID: "T1", MaxRetries: ptrU32(3), By: "web UI"},
		`{"task_id":"T1","max_retries":3,"by":"web UI"}`},
	{"approval asked for a task", reducer.ApprovalAsked{QuestionID: "Q1", TaskID: "T1", Question: "ship <it> & go?", Deadline: 1700000000123, By: "uid 1000 pid 42"},
		`{"question_id":"Q1","task_id":"T1","question":"ship <it> & go?","deadline_ms":1700000000123,"by":"uid 1000 pid 42"}`},
	{"approval asked for the project", reducer.ApprovalAsked{QuestionID: "Q1", Question: "go?", Deadline: 1},
		`{"question_id":"Q1","question":"go?","deadline_ms":1}`},
	{"approval decided yes", reducer.ApprovalDecided{QuestionID: "Q1", Outcome: reducer.ApprovalYes, By: "local:owner"},
		`{"question_id":"Q1","outcome":"yes","by":"local:owner"}`},
	{"approval decided failed", reducer.ApprovalDecided{QuestionID: "Q1", Outcome: reducer.ApprovalFailed, By: "daemon"},
		`{"question_id":"Q1","outcome":"failed","by":"daemon"}`},
	{"project released", reducer.Released{By: "uid 1000 pid 42"},
		`{"by":"uid 1000 pid 42"}`},
	{"project archived", reducer.Archived{By: "uid 1000 pid 42"},
		`{"by":"uid 1000 pid 42"}`},
}

func TestEventEncodingGolden(t *testing.T) {
	for _, tc := range encodingCases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := reducer.EncodeBody(tc.body)
			require.NoError(t, err)
			assert.Equal(t, tc.json, string(data))
		})
	}
}

func TestEventEncodingRoundTrip(t *testing.T) {
	kinds := map[string]bool{}
	for _, tc := range encodingCases {
		t.Run(tc.name, func(t *testing.T) {
			kinds[tc.body.Kind()] = true
			data, err := reducer.EncodeBody(tc.body)
			require.NoError(t, err)
			got, err := reducer.DecodeBody(tc.body.Kind(), data)
			require.NoError(t, err)
			assert.Equal(t, tc.body, got)
			assert.Equal(t, tc.body.Kind(), got.Kind())

			// The golden text decodes to the same value too.
			got, err = reducer.DecodeBody(tc.body.Kind(), []byte(tc.json))
			require.NoError(t, err)
			assert.Equal(t, tc.body, got)
		})
	}
	assert.Equal(t, map[string]bool{
		reducer.KindProjectCreated: true, reducer.KindTaskAdded: true, reducer.KindTaskUpdated: true,
		reducer.KindRunStarted: true, reducer.KindRunProgress: true, reducer.KindRunFinished: true,
		reducer.KindRunStale: true, reducer.KindHeartbeat: true, reducer.KindTaskRetried: true,
		reducer.KindApprovalAsked: true, reducer.KindApprovalDecided: true, reducer.KindProjectReleased: true,
		reducer.KindProjectArchived: true,
	}, kinds, "every kind has a case")
}

// TestEventKinds pins the stored kind names.
func TestEventKinds(t *testing.T) {
	assert.Equal(t, "project_created", reducer.ProjectCreated{}.Kind())
	assert.Equal(t, "task_added", reducer.TaskAdded{}.Kind())
	assert.Equal(t, "task_updated", reducer.TaskUpdated{}.Kind())
	assert.Equal(t, "run_started", reducer.RunStarted{}.Kind())
	assert.Equal(t, "run_progress", reducer.RunProgress{}.Kind())
	assert.Equal(t, "run_finished", reducer.RunFinished{}.Kind())
	assert.Equal(t, "run_stale", reducer.RunStaleMarked{}.Kind())
	assert.Equal(t, "heartbeat", reducer.Heartbeat{}.Kind())
	assert.Equal(t, "task_retried", reducer.TaskRetried{}.Kind())
	assert.Equal(t, "approval_asked", reducer.ApprovalAsked{}.Kind())
	assert.Equal(t, "approval_decided", reducer.ApprovalDecided{}.Kind())
	assert.Equal(t, "project_released", reducer.Released{}.Kind())
	assert.Equal(t, "project_archived", reducer.Archived{}.Kind())
}

func TestDecodeBodyRefuses(t *testing.T) {
	cases := []struct {
		name string
		kind string
		data string
	}{
		{"unknown kind", "task_deleted", `{"task_id":"T1"}`},
		{"empty kind", "", `{}`},
		{"kind in the wrong case", "Task_Added", `{"task_id":"T1"}`},
		{"not JSON", reducer.KindTaskAdded, `{"task_id":`},
		{"wrong type", reducer.KindTaskAdded, `{"task_id":"T1","max_retries":"two"}`},
		{"negative retries", reducer.KindTaskAdded, `{"task_id":"T1","max_retries":-1}`},
		{"unknown task status", reducer.KindTaskUpdated, `{"task_id":"T1","status":"bogus"}`},
		{"unknown run status", reducer.KindRunFinished, `{"run_id":"R1","status":"done"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := reducer.DecodeBody(tc.kind, []byte(tc.data))
			assert.Error(t, err)
			assert.Nil(t, b)
		})
	}
}
