package control_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// projectOf builds a project of n tasks, one running run, with the
// reducer.
func projectOf(t *testing.T, n int) *reducer.Project {
	t.Helper()
	var p *reducer.Project
	apply := func(c reducer.Command) {
		evs, err := reducer.Decide(p, c)
		require.NoError(t, err)
		for _, e := range evs {
			p = reducer.Evolve(p, e)
		}
	}
	apply(reducer.CreateProject{ProjectID: "P", Name: "big", Workspace: "/w", Now: 1})
	for i := range n {
		apply(reducer.AddTask{Project: "P", TaskID: fmt.Sprint("T", i), Title: fmt.Sprint("task ", i), Now: 2})
	}
	apply(reducer.StartRun{Project: "P", TaskID: "T0", RunID: "R", Agent: "a", Now: 3})
	return p
}

// A write's reply carries the project's summary: building it costs the
// same whatever the project holds (the reducer keeps the counts), so that
// a write's cost does not grow with the project.
func TestSummaryCostIndependentOfSize(t *testing.T) {
	small, big := projectOf(t, 10), projectOf(t, 20_000)
	s := api.ProjectSummaryOf(big)
	assert.Equal(t, uint64(20_000), s.TaskCount)
	assert.Equal(t, reducer.PhaseImplementation, s.Phase)
	// Bytes allocated per summary: a copy of 20,000 task pointers alone
	// would be 160 KB.
	bytes := func(p *reducer.Project) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range 20 {
			api.ProjectSummaryOf(p)
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 20
	}
	assert.Less(t, bytes(big), bytes(small)+16<<10, "bytes allocated by a summary, 20,000 tasks against 10")
}
