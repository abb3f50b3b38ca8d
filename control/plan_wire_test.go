package control_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
)

func u32(n uint32) *uint32 { return &n }

// TestPlanOverTheWire applies a plan, reads the ready work, claims the
// next task and shows it, through a real socket.
func TestPlanOverTheWire(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	ctx := context.Background()
	_, err := c.Call(ctx, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	require.NoError(t, err)

	plan := api.CmdProjectPlanApply{Project: "acme", Tasks: []api.PlanTask{
		{Key: "tests", Title: "Tests", DependsOn: []string{"impl"}, Parent: "epic"},
		{Key: "epic", Title: "The epic"},
		{Key: "impl", Title: "Implement", Description: "Write it.", Acceptance: "go test passes", Priority: u32(0), Parent: "epic", Labels: []string{"go"}},
		{Key: "docs", Title: "Docs", Priority: u32(3)},
	}}
	st, err := c.Call(ctx, plan)
	require.NoError(t, err)
	require.NotNil(t, st.Plan)
	assert.Equal(t, 4, st.Plan.Added)
	assert.Len(t, st.Plan.Tasks, 4)
	st, err = c.Call(ctx, plan)
	require.NoError(t, err)
	assert.Equal(t, api.PlanApplied{Unchanged: 4, Tasks: st.Plan.Tasks}, *st.Plan)
	keys := st.Plan.Tasks

	st, err = c.Call(ctx, api.CmdProjectReady{Project: "acme"})
	require.NoError(t, err)
	var ready []string
	for _, task := range st.Project.Tasks {
		ready = append(ready, task.Title)
	}
	assert.Equal(t, []string{"Implement", "Docs"}, ready)

	st, err = c.Call(ctx, api.CmdProjectTaskNext{Project: "acme", Agent: "codex", Labels: []string{"go"}})
	require.NoError(t, err)
	require.NotNil(t, st.Task)
	assert.Equal(t, "Implement", st.Task.Title)
	assert.Equal(t, "Write it.", st.Task.Description)
	assert.Equal(t, "go test passes", st.Task.Acceptance)
	require.Len(t, st.Task.Runs, 1)
	assert.Equal(t, st.Project.RunID, st.Task.Runs[0].ID)

	_, err = c.Call(ctx, api.CmdProjectTaskNext{Project: "acme", Agent: "codex", Labels: []string{"go"}})
	var werr *api.Error
	require.True(t, errors.As(err, &werr), "%v", err)
	assert.Equal(t, api.CodeInvalidTransition, werr.Code)
	assert.Equal(t, api.ReasonNothingReady, werr.Data.Reason)

	_, err = c.Call(ctx, api.CmdProjectRunStart{Project: "acme", Task: keys["epic"], Agent: "codex"})
	require.Error(t, err)

	title := "Docs, all of them"
	_, err = c.Call(ctx, api.CmdProjectTaskEdit{Project: "acme", Task: "Docs", Title: &title, Priority: u32(1)})
	require.NoError(t, err)
	st, err = c.Call(ctx, api.CmdProjectTaskShow{Project: "acme", Task: title})
	require.NoError(t, err)
	require.NotNil(t, st.Task)
	require.NotNil(t, st.Task.Priority)
	assert.Equal(t, 1, *st.Task.Priority)
	var kinds []string
	for _, e := range st.Task.Events {
		kinds = append(kinds, e.Kind)
	}
	assert.Equal(t, []string{"task_added", "task_edited"}, kinds)
}

// TestTaskNextConcurrentClaims: 32 claimers at once over 100 ready tasks
// on one daemon: 100 distinct claims, none twice, none missed.
func TestTaskNextConcurrentClaims(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := context.Background()
	_, err := d.client(t).Call(ctx, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	require.NoError(t, err)
	plan := api.CmdProjectPlanApply{Project: "acme"}
	for i := range 100 {
		plan.Tasks = append(plan.Tasks, api.PlanTask{Key: fmt.Sprint("t", i), Title: fmt.Sprint("task ", i), Priority: u32(uint32(i % 5))})
	}
	_, err = d.client(t).Call(ctx, plan)
	require.NoError(t, err)
	claimAll(t, []*daemon{d}, 32, 100)
}

// claimAll runs claimers over daemons (round robin) until nothing is
// ready, and checks that they claimed want distinct tasks.
func claimAll(t *testing.T, daemons []*daemon, claimers, want int) {
	t.Helper()
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
	)
	clients := make([]interface {
		Call(context.Context, api.Command) (*api.DaemonStatus, error)
	}, claimers)
	for i := range clients {
		clients[i] = daemons[i%len(daemons)].client(t)
	}
	errs := make(chan error, claimers)
	begin := time.Now()
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				st, err := clients[i].Call(context.Background(), api.CmdProjectTaskNext{Project: "acme", Agent: fmt.Sprint("agent-", i)})
				var werr *api.Error
				if errors.As(err, &werr) && werr.Data.Reason == api.ReasonNothingReady {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				claimed[st.Task.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Len(t, claimed, want)
	twice := 0
	for id, n := range claimed {
		assert.Equal(t, 1, n, "task %s claimed %d times", id, n)
		twice += n - 1
	}
	t.Logf("%d claimers on %d daemon(s): %d distinct tasks claimed of %d, %d claimed twice, in %v",
		claimers, len(daemons), len(claimed), want, twice, time.Since(begin).Round(time.Millisecond))
}
