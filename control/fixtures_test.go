package control_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/reducer"
)

var update = flag.Bool("update", false, "rewrite testdata/fixtures/*.jsonl from what the daemon answers")

// fixtureDir holds one file per action and per reply shape the daemon
// produces: the request line the CLI's client sends and the reply line the
// daemon wrote, byte for byte, as the scenario of TestFixtures runs them
// against a real daemon with a fixed clock. Regenerate with
//
//	go test ./control/ -run TestFixtures -update
//
// IDs are the real random ULIDs of the run that wrote the files; the
// comparison replaces each distinct ULID by <ULID-n> in order of first
// appearance across the whole scenario, so a reply naming the wrong task
// still fails. The temporary workspace is written as fixtureWorkspace.
const fixtureDir = "testdata/fixtures"

const fixtureWorkspace = "/home/me/acme"

// fixtureIDs carries the IDs the daemon minted to later steps.
type fixtureIDs struct{ build, test, run string }

type fixtureStep struct {
	name string // file name without .jsonl
	line func(ids *fixtureIDs) string
	// after reads what a later step needs from the reply.
	after func(t *testing.T, ids *fixtureIDs, st *api.DaemonStatus)
}

func cmdStep(name string, cmd func(ids *fixtureIDs) api.Command) fixtureStep {
	return fixtureStep{name: name, line: func(ids *fixtureIDs) string {
		b, err := api.EncodeCommand(cmd(ids))
		if err != nil {
			panic(err)
		}
		return string(b)
	}}
}

func fixtureScenario(workspace string) []fixtureStep {
	steps := []fixtureStep{
		cmdStep("status", func(*fixtureIDs) api.Command { return api.CmdStatus{} }),
		cmdStep("reload", func(*fixtureIDs) api.Command { return api.CmdReload{} }),
		cmdStep("project_create", func(*fixtureIDs) api.Command {
			return api.CmdProjectCreate{Name: "acme", Workspace: workspace}
		}),
		cmdStep("project_status", func(*fixtureIDs) api.Command { return api.CmdProjectStatus{Project: "acme"} }),
		cmdStep("project_task_add", func(*fixtureIDs) api.Command {
			return api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 2}
		}),
		cmdStep("project_task_add-depends_on", func(ids *fixtureIDs) api.Command {
			return api.CmdProjectTaskAdd{Project: "acme", Title: "test", DependsOn: []string{ids.build}, MaxRetries: 0}
		}),
		cmdStep("project_run_start", func(ids *fixtureIDs) api.Command {
			return api.CmdProjectRunStart{Project: "acme", Task: ids.build, Agent: "codex"}
		}),
		cmdStep("project_run_progress", func(ids *fixtureIDs) api.Command {
			return api.CmdProjectRunProgress{Project: "acme", Run: ids.run, Progress: "tests pass"}
		}),
		cmdStep("project_heartbeat", func(*fixtureIDs) api.Command { return api.CmdProjectHeartbeat{Project: "acme"} }),
		cmdStep("project_heartbeat-run", func(ids *fixtureIDs) api.Command {
			return api.CmdProjectHeartbeat{Project: "acme", Task: &ids.build, Run: &ids.run}
		}),
		cmdStep("project_tasks", func(*fixtureIDs) api.Command { return api.CmdProjectTasks{Project: "acme"} }),
		cmdStep("project_run_finish", func(ids *fixtureIDs) api.Command {
			return api.CmdProjectRunFinish{Project: "acme", Run: ids.run, Status: reducer.RunSucceeded}
		}),
		cmdStep("project_task_update", func(ids *fixtureIDs) api.Command {
			return api.CmdProjectTaskUpdate{Project: "acme", Task: ids.test, Status: reducer.TaskBlocked, Progress: ptr("waiting for CI")}
		}),
		cmdStep("project_events", func(*fixtureIDs) api.Command { return api.CmdProjectEvents{Project: "acme"} }),
		cmdStep("project_events-after", func(*fixtureIDs) api.Command {
			return api.CmdProjectEvents{Project: "acme", After: ptr(uint64(6))}
		}),
		cmdStep("project_report", func(*fixtureIDs) api.Command { return api.CmdProjectReport{Project: "acme"} }),
		cmdStep("error-not_found", func(*fixtureIDs) api.Command { return api.CmdProjectStatus{Project: "nope"} }),
		cmdStep("error-conflict", func(*fixtureIDs) api.Command {
			return api.CmdProjectCreate{Name: "acme", Workspace: workspace}
		}),
		cmdStep("error-unavailable", func(*fixtureIDs) api.Command { return api.CmdRestartWhenIdle{} }),
		{name: "error-invalid_params", line: func(*fixtureIDs) string {
			return `{"action":"project_task_add","project":"acme","title":"t","depends_on":[]}`
		}},
	}
	for i := range steps {
		switch steps[i].name {
		case "project_task_add":
			steps[i].after = func(t *testing.T, ids *fixtureIDs, st *api.DaemonStatus) {
				require.NotNil(t, st.Project)
				ids.build = st.Project.TaskID
			}
		case "project_task_add-depends_on":
			steps[i].after = func(t *testing.T, ids *fixtureIDs, st *api.DaemonStatus) {
				require.NotNil(t, st.Project)
				ids.test = st.Project.TaskID
			}
		case "project_run_start":
			steps[i].after = func(t *testing.T, ids *fixtureIDs, st *api.DaemonStatus) {
				require.NotNil(t, st.Project)
				ids.run = st.Project.RunID
			}
		}
	}
	return steps
}

// TestFixtures runs the scenario against a real daemon and compares every
// request and reply with its golden file.
func TestFixtures(t *testing.T) {
	const t0 = 1764400000
	clock := newTestClock(t0)
	d := startDaemon(t, clock.Now)
	c := d.client(t)

	wsJSON, err := json.Marshal(d.workspace)
	require.NoError(t, err)
	stable := func(b []byte) []byte {
		return bytes.ReplaceAll(b, wsJSON, []byte(`"`+fixtureWorkspace+`"`))
	}

	steps := fixtureScenario(d.workspace)
	var ids fixtureIDs
	got := make([][]byte, len(steps))
	for i, step := range steps {
		clock.Set(t0 + 10*int64(i))
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"daemon.control","params":%s}`, i+1, step.line(&ids))
		resp, err := c.Send(testCtx(t), []byte(req+"\n"))
		require.NoError(t, err, step.name)
		r := parseReply(t, resp)
		assert.Equal(t, fmt.Sprint(i+1), string(r.id), step.name)
		isError := strings.HasPrefix(step.name, "error-")
		require.Equal(t, isError, r.err != nil, "%s: %s", step.name, resp)
		if !isError {
			// What the daemon wrote is exactly what its own types write.
			var st api.DaemonStatus
			require.NoError(t, json.Unmarshal(r.result, &st), step.name)
			again, err := json.Marshal(st)
			require.NoError(t, err)
			assert.Equal(t, string(r.result), string(again), "%s: result round trip", step.name)
			if step.after != nil {
				step.after(t, &ids, &st)
			}
		}
		got[i] = stable([]byte(req + "\n" + string(resp) + "\n"))
	}

	if *update {
		require.NoError(t, os.RemoveAll(fixtureDir))
		require.NoError(t, os.MkdirAll(fixtureDir, 0o755))
		for i, step := range steps {
			require.NoError(t, os.WriteFile(filepath.Join(fixtureDir, step.name+".jsonl"), got[i], 0o644))
		}
		t.Logf("rewrote %d files in %s", len(steps), fixtureDir)
		return
	}

	// No stale or missing golden files.
	files, err := filepath.Glob(filepath.Join(fixtureDir, "*.jsonl"))
	require.NoError(t, err)
	var names, want []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".jsonl"))
	}
	for _, s := range steps {
		want = append(want, s.name)
	}
	sort.Strings(names)
	sort.Strings(want)
	assert.Equal(t, want, names, "golden files in %s (run with -update to rewrite)", fixtureDir)

	goldNorm, gotNorm := ulidNormalizer{}, ulidNormalizer{}
	for i, step := range steps {
		gold, err := os.ReadFile(filepath.Join(fixtureDir, step.name+".jsonl"))
		if !assert.NoError(t, err, "run with -update to write it") {
			continue
		}
		assert.Equal(t, string(goldNorm.normalize(gold)), string(gotNorm.normalize(got[i])),
			"%s differs from the golden file (run with -update to rewrite)", step.name)
	}
	assert.Equal(t, len(goldNorm), len(gotNorm), "as many distinct IDs as the golden files")
}

// TestFixturesCoverEveryShape checks that the golden files hold every
// action the daemon implements and every reply kind it can produce, and
// that each golden reply is a DaemonStatus the seed's types read and write
// back byte for byte.
func TestFixturesCoverEveryShape(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtureDir, "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	actions, kinds, reasons := map[string]bool{}, map[api.ResponseKind]bool{}, map[string]bool{}
	bare := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		require.Len(t, lines, 2, "%s: a request and its reply", f)
		var req struct {
			Params json.RawMessage `json:"params"`
		}
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &req), f)
		if cmd, err := control.DecodeCommand(req.Params); err == nil {
			actions[cmd.Action()] = true
		}
		r := parseReply(t, []byte(lines[1]))
		if r.err != nil {
			reasons[r.err.Data.Reason] = true
			assert.NotContains(t, r.members, "result", f)
			continue
		}
		var st api.DaemonStatus
		require.NoError(t, json.Unmarshal(r.result, &st), f)
		again, err := json.Marshal(st)
		require.NoError(t, err)
		assert.Equal(t, string(r.result), string(again), f)
		if st.Project == nil {
			bare = true
		} else {
			kinds[st.Project.Kind] = true
		}
	}
	for _, a := range []string{"status", "reload", "project_create", "project_status", "project_events",
		"project_tasks", "project_report", "project_task_add", "project_task_update", "project_run_start",
		"project_run_progress", "project_run_finish", "project_heartbeat"} {
		assert.True(t, actions[a], "no fixture of action %s", a)
	}
	for _, k := range []api.ResponseKind{api.KindCreated, api.KindStatus, api.KindEvents,
		api.KindTasks, api.KindReport, api.KindUpdated, api.KindTaskAdded, api.KindRunStarted} {
		assert.True(t, kinds[k], "no fixture of reply kind %s", k)
	}
	assert.True(t, bare, "no fixture of a reply without project")
	for _, r := range []string{"not_found", "conflict", "invalid_params", "unavailable"} {
		assert.True(t, reasons[r], "no fixture of error %s", r)
	}
}
