package control_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// TestLimits sends, over the socket, each text and list past its limit
// (reducer/limits.go). Each is refused -32602 invalid_argument with a
// message naming the field, its length and the limit, never the text, and
// nothing is appended to the ledger or the question log.
func TestLimits(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	task := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}}).TaskID
	call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "test", DependsOn: []string{}})
	run := call(t, c, api.CmdProjectRunStart{Project: "acme", Task: task, Agent: "codex"}).RunID
	text := strings.Repeat("x", 5000)
	deps := []string{task} // 100 tasks, then one too many
	for i := range reducer.MaxDependsOn - 1 {
		deps = append(deps, call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: fmt.Sprint("d", i), DependsOn: []string{}}).TaskID)
	}
	deps = append(deps, task)

	for _, tc := range []struct {
		name string
		cmd  api.Command
		want string
	}{
		{"run progress of 5,000 characters", api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: text},
			"progress is 5000 characters, more than 2000"},
		{"task progress of 5,000 characters", api.CmdProjectTaskUpdate{Project: "acme", Task: "test", Status: reducer.TaskBlocked, Progress: &text},
			"progress is 5000 characters, more than 2000"},
		{"a question of 5,000 characters", api.CmdConfirmAsk{Question: text},
			"question is 5000 characters, more than 2000"},
		{"an approval's question of 5,000 characters", api.CmdConfirmAsk{Question: text, Project: ptr("acme")},
			"question is 5000 characters, more than 2000"},
		{"a question of spaces", api.CmdConfirmAsk{Question: "  \n"}, "question is only white space"},
		{"depends_on of 101 entries", api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: deps},
			"depends_on has 101 entries, more than 100"},
		{"a depends_on entry of 5,000 characters", api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: []string{task, text}},
			"depends_on[1] is 5000 characters, more than 200"},
		{"a title of 5,000 characters", api.CmdProjectTaskAdd{Project: "acme", Title: text, DependsOn: []string{}},
			"title is 5000 characters, more than 200"},
		{"a title of spaces", api.CmdProjectTaskAdd{Project: "acme", Title: "     ", DependsOn: []string{}},
			"title is only white space"},
		{"a project name of spaces", api.CmdProjectCreate{Name: " ", Workspace: d.workspace}, "name is only white space"},
		{"an agent of 5,000 characters", api.CmdProjectRunStart{Project: "acme", Task: "test", Agent: text},
			"agent is 5000 characters, more than 200"},
		{"a task reference of 5,000 characters", api.CmdProjectTaskUpdate{Project: "acme", Task: text, Status: reducer.TaskBlocked},
			"task is 5000 characters, more than 200"},
		{"a run reference of 5,000 characters", api.CmdProjectRunFinish{Project: "acme", Run: text, Status: reducer.RunSucceeded},
			"run is 5000 characters, more than 200"},
		{"a project reference of 5,000 characters, in a write", api.CmdProjectTaskAdd{Project: text, Title: "t", DependsOn: []string{}},
			"project is 5000 characters, more than 200"},
		{"a project reference of 5,000 characters, in a read", api.CmdProjectStatus{Project: text},
			"project is 5000 characters, more than 200"},
	} {
		before := lastSequence(t, d)
		e := callErr(t, c, tc.cmd)
		assertCode(t, e, api.CodeInvalidParams, api.ReasonInvalidArgument, tc.name)
		assert.Equal(t, "invalid argument: "+tc.want, e.Message, tc.name)
		assert.Equal(t, before, lastSequence(t, d), "%s: nothing appended", tc.name)
	}

	st, err := c.Call(testCtx(t), api.CmdConfirmList{})
	require.NoError(t, err)
	assert.Empty(t, st.Questions, "no question recorded")
	p, err := c.Call(testCtx(t), api.CmdProjectTasks{Project: "acme"})
	require.NoError(t, err)
	assert.Len(t, p.Project.Tasks, 1+reducer.MaxDependsOn, "no task added")
	for _, tk := range p.Project.Tasks {
		assert.Nil(t, tk.Progress, "no progress recorded on %s", tk.Title)
	}

	// At each limit, accepted.
	at := strings.Repeat("é", reducer.MaxProgressLen)
	call(t, c, api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: at})
	call(t, c, api.CmdProjectTaskUpdate{Project: "acme", Task: "test", Status: reducer.TaskBlocked, Progress: &at})
	call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: strings.Repeat("é", reducer.MaxNameLen), DependsOn: deps[:reducer.MaxDependsOn]})
	_, err = c.Call(testCtx(t), api.CmdConfirmAsk{Question: strings.Repeat("é", reducer.MaxQuestionLen), Project: ptr("acme")})
	require.NoError(t, err, "a question at the limit")
}
