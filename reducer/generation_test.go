package reducer_test

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// TestEvolveLeavesTheOldProject: Evolve returns a new project and never
// changes the one it was given, nor its tasks and runs; the tasks and runs
// an event does not touch are shared, not copied.
func TestEvolveLeavesTheOldProject(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 1), add("b", 0), add("c", 0, "b"), start("a", "r1"))
	old := l.project()
	oldDump := dumpProject(old)
	oldA, _ := old.Task("a")
	oldB, _ := old.Task("b")
	oldR1, _ := old.Run("r1")

	l.do(progress("r1", "x"))
	cur := l.project()
	assert.NotSame(t, old, cur, "an event makes a new project")
	curA, _ := cur.Task("a")
	curB, _ := cur.Task("b")
	curR1, _ := cur.Run("r1")
	assert.NotSame(t, oldA, curA, "a changed task is a new one")
	assert.NotSame(t, oldR1, curR1, "a changed run is a new one")
	assert.Same(t, oldB, curB, "a task the event does not touch is shared")

	l.do(beat("", ""), upd("b", done), start("c", "r9"))
	curC, _ := l.project().Task("c")
	oldC, _ := old.Task("c")
	assert.NotSame(t, oldC, curC, "an unblocked dependant is a new task")
	assert.Equal(t, oldDump, dumpProject(old), "the old project did not change")
	assert.Equal(t, reducer.TaskReady, oldB.Status)
	assert.Nil(t, oldR1.Progress)
	assert.Equal(t, "a:running@r1 b:ready c:pending | r1:running#1", render(old))

	// What a later event adds is not found through an older project.
	l.do(add("d", 0), start("d", "r2"))
	_, found := old.Task("d")
	assert.False(t, found, "the old project finds a later task")
	_, found = old.Run("r9")
	assert.False(t, found, "the old project finds a later run")
	_, found = cur.Run("r2")
	assert.False(t, found, "the old project finds a later run")
	assert.Equal(t, oldDump, dumpProject(old))
	assert.Equal(t, 1, old.RunningCount())
	assert.Equal(t, 3, l.project().RunningCount())
}

// TestCountsFollowEvents: the counts a reply carries (tasks by status,
// running runs) are kept as events arrive and always equal a recount.
func TestCountsFollowEvents(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 1), add("b", 0, "a"), add("c", 0), start("a", "r1"), finish("r1", runFailed),
		start("a", "r2"), finish("r2", succeeded), upd("c", blocked), start("b", "r3"))
	p := l.project()
	count := map[reducer.TaskStatus]int{}
	for _, tk := range p.Tasks() {
		count[tk.Status]++
	}
	for _, s := range allTaskStatuses {
		assert.Equal(t, count[s], p.CountOf(s), "tasks %s", s)
	}
	assert.Equal(t, 1, p.DoneCount())
	assert.Equal(t, 1, p.RunningCount())
	assert.Equal(t, 3, p.TaskCount())
	assert.Equal(t, 3, p.RunCount())
}

// TestProjectsAreReadConcurrently reads a project from other goroutines
// while later versions evolve from it; run with -race.
func TestProjectsAreReadConcurrently(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 5), add("b", 5), add("c", 0, "a", "b"), start("a", "r1"), start("b", "r2"))
	shared := l.project()
	want := dumpProject(shared)

	var mismatches, reads atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !reflect.DeepEqual(want, dumpProject(shared)) {
					mismatches.Add(1)
				}
				reads.Add(1)
				for _, tk := range shared.Tasks() {
					if got, ok := shared.Task(tk.ID); !ok || got != tk {
						mismatches.Add(1)
					}
				}
			}
		})
	}
	for reads.Load() < 4 {
		runtime.Gosched() // let the readers start before the writes
	}
	runA, runB := "r1", "r2"
	for i := range 60 {
		nextA, nextB := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		l.do(progress(runA, "p"), beat("b", runB), beat("c", ""), beat("", ""),
			finish(runA, cancelled), start("a", nextA),
			finish(runB, cancelled), start("b", nextB),
			reducer.AddTask{Project: projID, TaskID: fmt.Sprintf("t%d", i), Title: "t", DependsOn: []string{"c"}})
		runA, runB = nextA, nextB
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, mismatches.Load(), "a project changed while it was read")
	t.Logf("%d concurrent reads", reads.Load())
	assert.Equal(t, want, dumpProject(shared))
}

// TestStateDoesNotAliasCommands: a project must not change when the
// caller reuses the slice or string pointer it passed in a command.
func TestStateDoesNotAliasCommands(t *testing.T) {
	l := newLedger(t)
	deps := []string{"a"}
	note := "first"
	l.do(baseProject, add("a", 0), reducer.AddTask{Project: projID, TaskID: "b", Title: "b", DependsOn: deps},
		reducer.UpdateTask{Project: projID, TaskID: "b", Status: reducer.TaskPending, Progress: &note})
	want := dumpProject(l.project())

	deps[0] = "zzz"
	note = "second"
	assert.Equal(t, want, dumpProject(l.project()))
}

// TestEvolveRefusesAnotherProject: an event evolved into a project it is
// not of, or a second creation, is a bug and panics.
func TestEvolveRefusesAnotherProject(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject)
	p := l.project()
	require.Panics(t, func() { reducer.Evolve(p, reducer.Event{ProjectID: "other", Body: reducer.Heartbeat{}}) })
	require.Panics(t, func() { reducer.Evolve(nil, reducer.Event{ProjectID: projID, Body: reducer.Heartbeat{}}) })
	require.Panics(t, func() {
		reducer.Evolve(p, reducer.Event{ProjectID: projID, Body: reducer.ProjectCreated{Name: "again", Workspace: "/x"}})
	})
}

// fold evolves events into a new world; every snapEvery events (never
// when it is 0) each project is replaced by its snapshot restored, as a
// ledger that loads projects from snapshots does.
func fold(t testing.TB, events []reducer.Event, snapEvery int) *world {
	w := newWorld()
	for i, e := range events {
		w.evolve(e)
		if snapEvery > 0 && (i+1)%snapEvery == 0 {
			for id, p := range w.projects {
				b, err := reducer.Snapshot(p)
				require.NoError(t, err)
				w.projects[id], err = reducer.Restore(b)
				require.NoError(t, err)
			}
		}
	}
	return w
}
