package render

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run is a finished run of task from minute start to minute end.
func run(id, task, status string, start, end int) Run {
	return Run{ID: id, TaskID: task, Status: status, Start: at(start), End: at(end)}
}

func TestCriticalPath(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Project
		want []string
	}{
		{"no runs", Project{Tasks: []Task{{ID: "a"}}}, nil},
		{
			"a chain",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}, {ID: "c", DependsOn: []string{"b"}}},
				Runs:  []Run{run("a1", "a", RunSucceeded, 0, 10), run("b1", "b", RunSucceeded, 11, 20), run("c1", "c", RunSucceeded, 21, 30)},
			},
			[]string{"a1", "b1", "c1"},
		},
		{
			"a diamond, the left branch longer",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}, {ID: "c", DependsOn: []string{"a"}}, {ID: "d", DependsOn: []string{"c", "b"}}},
				Runs: []Run{run("a1", "a", RunSucceeded, 0, 10), run("b1", "b", RunSucceeded, 10, 40), run("c1", "c", RunSucceeded, 10, 20),
					run("d1", "d", RunSucceeded, 41, 50)},
			},
			[]string{"a1", "b1", "d1"},
		},
		{
			"a diamond, the right branch longer",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}, {ID: "c", DependsOn: []string{"a"}}, {ID: "d", DependsOn: []string{"b", "c"}}},
				Runs: []Run{run("a1", "a", RunSucceeded, 0, 10), run("b1", "b", RunSucceeded, 10, 20), run("c1", "c", RunSucceeded, 10, 40),
					run("d1", "d", RunSucceeded, 41, 50)},
			},
			[]string{"a1", "c1", "d1"},
		},
		{
			"a retried task: its earlier runs belong to the chain",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}},
				Runs: []Run{run("a1", "a", RunSucceeded, 0, 10), run("b1", "b", RunFailed, 11, 15), run("b2", "b", RunStale, 16, 25),
					run("b3", "b", RunSucceeded, 26, 30)},
			},
			[]string{"a1", "b1", "b2", "b3"},
		},
		{
			"the diamond of the goldens",
			diamond(),
			[]string{"a1", "b1", "b2", "d1"},
		},
		{
			"a running run ends at Now, so it ends the chain",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b"}},
				Runs:  []Run{{ID: "a1", TaskID: "a", Status: RunRunning, Start: at(0)}, run("b1", "b", RunSucceeded, 5, 30)},
				Now:   at(40),
			},
			[]string{"a1"},
		},
		{
			"without Now a running run ends at its last beat",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b"}},
				Runs:  []Run{{ID: "a1", TaskID: "a", Status: RunRunning, Start: at(0), Beats: beats(10, 20)}, run("b1", "b", RunSucceeded, 5, 30)},
			},
			[]string{"b1"},
		},
		{
			"equal ends: the later run ends the chain, the first dependency listed is taken",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b"}, {ID: "c", DependsOn: []string{"b", "a"}}, {ID: "d"}},
				Runs: []Run{run("a1", "a", RunSucceeded, 0, 10), run("b1", "b", RunSucceeded, 2, 10), run("c1", "c", RunSucceeded, 10, 20),
					run("d1", "d", RunSucceeded, 12, 20)},
			},
			[]string{"d1"},
		},
		{
			"equal ends among the dependencies: the first listed",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b"}, {ID: "c", DependsOn: []string{"b", "a"}}},
				Runs:  []Run{run("a1", "a", RunSucceeded, 0, 10), run("b1", "b", RunSucceeded, 2, 10), run("c1", "c", RunSucceeded, 10, 20)},
			},
			[]string{"b1", "c1"},
		},
		{
			"a dependency done without a run is looked through",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}, {ID: "c", DependsOn: []string{"b"}}},
				Runs:  []Run{run("a1", "a", RunSucceeded, 0, 10), run("c1", "c", RunSucceeded, 12, 20)},
			},
			[]string{"a1", "c1"},
		},
		{
			"a dependency's run that ended after the task started is not a cause",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}},
				Runs:  []Run{run("a1", "a", RunSucceeded, 0, 10), run("b1", "b", RunSucceeded, 5, 20)},
			},
			[]string{"b1"},
		},
		{
			"of a dependency, the run that ended last in time",
			Project{
				Tasks: []Task{{ID: "a"}, {ID: "b"}, {ID: "c", DependsOn: []string{"a", "b"}}},
				Runs: []Run{run("a1", "a", RunFailed, 0, 5), run("b1", "b", RunSucceeded, 0, 8), run("a2", "a", RunSucceeded, 6, 9),
					run("c1", "c", RunSucceeded, 10, 20)},
			},
			[]string{"a1", "a2", "c1"},
		},
		{
			"a run of a task the project lacks",
			Project{
				Tasks: []Task{{ID: "a"}},
				Runs:  []Run{run("a1", "a", RunSucceeded, 0, 10), run("x1", "x", RunSucceeded, 11, 20)},
			},
			[]string{"x1"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, CriticalPath(c.p))
		})
	}
}

// TestCriticalPathChains checks, on random projects, what holds of every
// critical path: it ends with a run that ended last, it runs forward in
// time, and each step is either the same task's next run or goes from a
// task to one that depends on it, directly or through tasks without runs.
func TestCriticalPathChains(t *testing.T) {
	for seed := range uint64(30) {
		p := randomProject(seed, 40, 3, 8)
		path := CriticalPath(p)
		if !assert.NotEmpty(t, path) {
			continue
		}
		byID := map[string]Run{}
		for _, r := range p.Runs {
			byID[r.ID] = r
		}
		ends := runEnds(p)
		latest := ends[0]
		for _, e := range ends {
			latest = later(latest, e)
		}
		last := byID[path[len(path)-1]]
		assert.Equal(t, latest, last.End, "seed %d: the path ends with a run that ended last", seed)

		ix := indexTasks(p.Tasks)
		reaches := func(from, to string) bool { // to depends on from, possibly through run-less tasks
			hasRuns := map[string]bool{}
			for _, r := range p.Runs {
				hasRuns[r.TaskID] = true
			}
			stack := []int{ix.byID[to]}
			for len(stack) > 0 {
				v := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for _, d := range ix.deps[v] {
					if p.Tasks[d].ID == from {
						return true
					}
					if !hasRuns[p.Tasks[d].ID] {
						stack = append(stack, d)
					}
				}
			}
			return false
		}
		for k := 1; k < len(path); k++ {
			a, b := byID[path[k-1]], byID[path[k]]
			assert.False(t, b.Start.Before(a.Start), "seed %d: %s starts before %s", seed, b.ID, a.ID)
			if a.TaskID != b.TaskID {
				assert.True(t, reaches(a.TaskID, b.TaskID), "seed %d: %s's task does not depend on %s's", seed, b.ID, a.ID)
				assert.False(t, a.End.After(b.Start), "seed %d: %s ended after %s started", seed, a.ID, b.ID)
			}
		}
	}
}

// TestCriticalPathShort: a critical path shorter than a second says how
// long it took, in milliseconds, in the text and the SVG: not 0s.
func TestCriticalPathShort(t *testing.T) {
	ms := func(n int) time.Time { return at(0).Add(time.Duration(n) * time.Millisecond) }
	p := Project{
		Tasks: []Task{{ID: "a", Title: "build", Status: TaskDone}, {ID: "b", Title: "test", Status: TaskDone, DependsOn: []string{"a"}}},
		Runs: []Run{{ID: "a1", TaskID: "a", Status: RunSucceeded, Start: ms(0), End: ms(40)},
			{ID: "b1", TaskID: "b", Status: RunSucceeded, Start: ms(45), End: ms(120)}},
		Now: ms(130),
	}
	var text, svg bytes.Buffer
	require.NoError(t, TimelineText(&text, p, TextOptions{}))
	assert.Contains(t, text.String(), "critical path (120ms): build → test")
	require.NoError(t, TimelineSVG(&svg, p))
	assert.Contains(t, svg.String(), "critical path (120ms): build → test")
	assert.Contains(t, svg.String(), "(75ms)", "a run's tooltip")
}
