package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/rpc"
	"scv/reducer"
)

// TestLimitsAtEveryDoor: the same over-long input (a progress of 5,000
// characters, a question of 5,000, a depends_on of 101 entries, a title of
// 5,000) gets the same answer, message and reason, on the socket, from
// the command line and through `scv mcp`, and changes nothing: the
// daemon's one check (reducer/limits.go) answers all three.
func TestLimitsAtEveryDoor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildScv(t, shortDir(t), "limits-test")
	d := inDaemon(t, daemon.Config{})
	sock := d.Config().Socket
	ctx := context.Background()
	cl, err := rpc.Dial(ctx, sock)
	require.NoError(t, err)
	defer cl.Close()
	must := func(cmd api.Command) *api.DaemonStatus {
		t.Helper()
		st, err := cl.Call(ctx, cmd)
		require.NoError(t, err, cmd.Action())
		return st
	}
	must(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	must(api.CmdProjectCreate{Name: "acme", Workspace: t.TempDir()})
	build := must(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}}).Project.TaskID
	run := must(api.CmdProjectRunStart{Project: "acme", Task: build, Agent: "codex"}).Project.RunID

	long := strings.Repeat("é", 5000) // characters, not bytes
	deps := make([]string, reducer.MaxDependsOn+1)
	for i := range deps {
		deps[i] = build
	}
	for _, c := range []struct {
		name string
		cmd  api.Command // on the socket
		cli  []string
		tool string
		args map[string]any
	}{
		{"progress", api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: long},
			[]string{"project", "run", "progress", "acme", run, long},
			"run_progress", map[string]any{"project": "acme", "run": run, "progress": long}},
		{"question", api.CmdConfirmAsk{Question: long},
			[]string{"confirm", "ask", long},
			"owner_ask", map[string]any{"question": long}},
		{"depends_on", api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: deps},
			[]string{"project", "task", "add", "acme", "t", "--depends-on", strings.Join(deps, ",")},
			"task_add", map[string]any{"project": "acme", "title": "t", "depends_on": deps}},
		{"title", api.CmdProjectTaskAdd{Project: "acme", Title: long, DependsOn: []string{}},
			[]string{"project", "task", "add", "acme", long},
			"task_add", map[string]any{"project": "acme", "title": long}},
	} {
		t.Run(c.name, func(t *testing.T) {
			head := len(must(api.CmdProjectEvents{Project: "acme"}).Project.Events)

			_, err := cl.Call(ctx, c.cmd)
			var socket *api.Error
			require.True(t, errors.As(err, &socket), "the socket refuses: %v", err)
			assert.Equal(t, api.ReasonInvalidArgument, socket.Data.Reason)
			assert.Contains(t, socket.Message, c.name, "the message names the field")
			assert.NotContains(t, socket.Message, long[:20], "and never repeats the text")

			r := cliRun(t, sock, append([]string{"--json"}, c.cli...)...)
			assert.Equal(t, exitRefused, r.code)
			var cli failure
			require.NoError(t, json.Unmarshal([]byte(r.stderr), &cli), r.stderr)
			assert.Equal(t, failure{Exit: exitRefused, Code: socket.Code, Reason: socket.Data.Reason, Message: socket.Message}, cli,
				"the command line's answer is the socket's")

			answers, code := mcpPipe(t, bin, sock, initRequest+"\n"+toolCall(t, 2, c.tool, c.args)+"\n")
			assert.Equal(t, 0, code)
			assert.Equal(t, socket.Message+" ["+socket.Data.Reason+"]", answers[2].text(), "MCP's answer is the socket's")

			assert.Len(t, must(api.CmdProjectEvents{Project: "acme"}).Project.Events, head, "nothing written")
			assert.Empty(t, must(api.CmdConfirmList{}).Questions, "nobody asked")
		})
	}
}
