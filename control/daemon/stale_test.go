package daemon

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// TestStaleAfterTwoSeconds runs a daemon with a stale window of 2 s: a
// silent run is stale within 3 seconds with its retry counted, the
// zombie's heartbeat is refused, a burst of 300 heartbeats from a live run
// appends a handful of events, and a second stale attempt past max_retries
// fails the task and the project.
func TestStaleAfterTwoSeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the stale window")
	}
	// The heartbeats coalesced as `scv daemon` has them by default: a
	// tenth of the window.
	d, _ := serve(t, Config{StaleAfter: 2 * time.Second, HeartbeatEvery: -1})
	dir := filepath.Dir(d.Config().Socket)
	ctx := context.Background()
	c := dial(t, d.Config().Socket)
	call := func(cmd api.Command) *api.DaemonStatus {
		t.Helper()
		return must(t, c, cmd)
	}
	task := func(p, id string) api.ProjectTask {
		t.Helper()
		for _, tk := range call(api.CmdProjectTasks{Project: p}).Project.Tasks {
			if tk.ID == id {
				return tk
			}
		}
		t.Fatalf("task %s not found", id)
		return api.ProjectTask{}
	}
	events := func(p string) int {
		t.Helper()
		return len(call(api.CmdProjectEvents{Project: p}).Project.Events)
	}

	call(api.CmdProjectCreate{Name: "acme", Workspace: dir})
	silent := call(api.CmdProjectTaskAdd{Project: "acme", Title: "silent", DependsOn: []string{}, MaxRetries: 1}).Project.TaskID
	live := call(api.CmdProjectTaskAdd{Project: "acme", Title: "live", DependsOn: []string{}, MaxRetries: 0}).Project.TaskID

	// A silent run: stale within 3 seconds of its last word.
	run := call(api.CmdProjectRunStart{Project: "acme", Task: silent, Agent: "codex"}).Project.RunID
	call(api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: "started"})
	lastWord := time.Now()
	require.Eventually(t, func() bool { return task("acme", silent).Status == reducer.TaskStale },
		5*time.Second, 20*time.Millisecond)
	took := time.Since(lastWord)
	t.Logf("silent run marked stale %v after its last progress", took.Round(time.Millisecond))
	assert.Less(t, took, 3*time.Second)
	assert.Equal(t, uint32(1), task("acme", silent).Retries)

	// The zombie is fenced.
	_, err := c.Call(ctx, api.CmdProjectHeartbeat{Project: "acme", Run: &run})
	var e *api.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, api.ReasonRunNotRunning, e.Data.Reason)

	// A burst of 300 heartbeats from a live run appends a handful: at
	// most one per interval (a tenth of the window) the burst lasted,
	// and one more for where the intervals fall.
	liveRun := call(api.CmdProjectRunStart{Project: "acme", Task: live, Agent: "codex"}).Project.RunID
	before := events("acme")
	began := time.Now()
	for range 300 {
		st := call(api.CmdProjectHeartbeat{Project: "acme", Run: &liveRun})
		require.Equal(t, api.KindUpdated, st.Project.Kind)
	}
	intervals := int(time.Since(began)/d.Config().HeartbeatEvery) + 1
	appended := events("acme") - before
	t.Logf("300 heartbeats in %d intervals of %s appended %d events", intervals, d.Config().HeartbeatEvery, appended)
	assert.GreaterOrEqual(t, appended, 1)
	assert.LessOrEqual(t, appended, intervals+1)

	// The silent task starts again and goes silent again: max_retries 1 is
	// spent, so the task and the project fail.
	call(api.CmdProjectRunStart{Project: "acme", Task: silent, Agent: "codex"})
	require.Eventually(t, func() bool { return task("acme", silent).Status == reducer.TaskFailed },
		5*time.Second, 20*time.Millisecond)
	assert.Equal(t, uint32(2), task("acme", silent).Retries)
	assert.Equal(t, reducer.ProjectFailed, call(api.CmdProjectStatus{Project: "acme"}).Project.Project.Status)
}
