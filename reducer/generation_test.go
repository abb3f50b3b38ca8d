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

func projectIDs(ps []*reducer.Project) []string {
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	return ids
}

// TestSealReturnsChangedProjects: Seal hands out the projects the
// generation changed or created, and only those.
func TestSealReturnsChangedProjects(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, createNamed("other"), add("a", 0))
	assert.ElementsMatch(t, []string{projID, "P2"}, projectIDs(l.s.Seal()))
	assert.Empty(t, l.s.Seal(), "an empty generation changes nothing")

	l.do(start("a", "r1"))
	sealed := l.s.Seal()
	require.Len(t, sealed, 1)
	assert.Same(t, l.project(), sealed[0])
	other, _ := l.s.Project("P2")
	assert.NotContains(t, projectIDs(sealed), other.ID)
}

// TestCopyOnWrite: a sealed project and its tasks and runs are never
// modified; the next generation clones a project once, and only the tasks
// and runs it changes.
func TestCopyOnWrite(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 1), add("b", 0), add("c", 0, "b"), start("a", "r1"))
	l.s.Seal()
	old := l.project()
	oldDump := dumpProject(old)
	oldA, _ := old.Task("a")
	oldB, _ := old.Task("b")
	oldR1, _ := old.Run("r1")

	l.do(progress("r1", "x"))
	cur := l.project()
	assert.NotSame(t, old, cur, "the first change of a generation clones the project")
	l.do(beat("", ""), upd("b", done), start("c", "r9"))
	assert.Same(t, cur, l.project(), "a project is cloned at most once per generation")

	curA, _ := cur.Task("a")
	curC, _ := cur.Task("c")
	oldC, _ := old.Task("c")
	curR1, _ := cur.Run("r1")
	assert.NotSame(t, oldA, curA, "a changed task is cloned")
	assert.NotSame(t, oldR1, curR1, "a changed run is cloned")
	assert.NotSame(t, oldC, curC, "an unblocked dependant is cloned")
	assert.Equal(t, oldDump, dumpProject(old), "the sealed project did not change")
	assert.Equal(t, reducer.TaskReady, oldB.Status)
	assert.Nil(t, oldR1.Progress)
	assert.Equal(t, "a:running@r1 b:ready c:pending | r1:running#1", render(old))

	l.s.Seal()
	l.do(finish("r1", succeeded))
	again, _ := l.project().Task("c")
	assert.Same(t, curC, again, "a task the generation does not touch is shared, not cloned")

	// What a later generation adds is not found through a sealed project.
	l.do(add("d", 0), start("d", "r2"))
	_, found := old.Task("d")
	assert.False(t, found, "the sealed project finds a later task")
	_, found = old.Run("r9")
	assert.False(t, found, "the sealed project finds a later run")
	_, found = cur.Run("r2")
	assert.False(t, found, "the sealed project finds a later run")
	assert.Equal(t, oldDump, dumpProject(old))
}

// TestRollback: Rollback restores the sealed pointers, forgets projects
// created in the generation (by ID and by name) and leaves the state as
// the history without the rolled-back events.
func TestRollback(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 0), add("b", 0, "a"))
	l.s.Seal()
	sealedPtrs, sealedDump := pointers(l.s), dumpState(l.s, "other", "P2")
	kept := len(l.events)

	l.do(start("a", "r1"), finish("r1", succeeded), createNamed("other"), reducer.AddTask{Project: "other", TaskID: "x", Title: "x"})
	require.Equal(t, "a:done b:ready | r1:succeeded#1", render(l.project()))
	l.s.Rollback()

	assert.Equal(t, sealedPtrs, pointers(l.s))
	assert.Equal(t, sealedDump, dumpState(l.s, "other", "P2"))
	_, ok := l.s.Project("other")
	assert.False(t, ok, "the rolled-back project's name is forgotten")
	_, ok = l.s.Project("P2")
	assert.False(t, ok, "the rolled-back project's ID is forgotten")

	// The rolled-back IDs and name are free again, and the state goes on
	// as if the batch never happened.
	l.events = l.events[:kept]
	l.do(createNamed("other"), start("a", "r1"))
	assert.Equal(t, "a:running@r1 b:pending | r1:running#1", render(l.project()))
	assert.Equal(t, dumpState(fold(l.events, 0)), dumpState(l.s))

	// Rolling back an empty generation changes nothing.
	l.s.Seal()
	before := dumpState(l.s)
	l.s.Rollback()
	assert.Equal(t, before, dumpState(l.s))
}

// TestSealedProjectsAreReadConcurrently reads sealed projects from other
// goroutines while the next generations evolve; run with -race.
func TestSealedProjectsAreReadConcurrently(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 5), add("b", 5), add("c", 0, "a", "b"), start("a", "r1"), start("b", "r2"))
	l.s.Seal()
	sealed := l.project()
	want := dumpProject(sealed)

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
				if !reflect.DeepEqual(want, dumpProject(sealed)) {
					mismatches.Add(1)
				}
				reads.Add(1)
				for _, tk := range sealed.Tasks() {
					if got, ok := sealed.Task(tk.ID); !ok || got != tk {
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
		if i%3 == 0 {
			l.s.Seal()
		}
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, mismatches.Load(), "a sealed project changed while it was read")
	t.Logf("%d concurrent reads", reads.Load())
	assert.Equal(t, want, dumpProject(sealed))
}

// TestStateDoesNotAliasCommands: a sealed state must not change when the
// caller reuses the slice or string pointer it passed in a command.
func TestStateDoesNotAliasCommands(t *testing.T) {
	l := newLedger(t)
	deps := []string{"a"}
	note := "first"
	l.do(baseProject, add("a", 0), reducer.AddTask{Project: projID, TaskID: "b", Title: "b", DependsOn: deps},
		reducer.UpdateTask{Project: projID, TaskID: "b", Status: reducer.TaskPending, Progress: &note})
	l.s.Seal()
	want := dumpProject(l.project())

	deps[0] = "zzz"
	note = "second"
	assert.Equal(t, want, dumpProject(l.project()))
}

// fold evolves events into a new state, sealing after every sealEvery
// events (never when it is 0).
func fold(events []reducer.Event, sealEvery int) *reducer.State {
	s := reducer.NewState()
	for i, e := range events {
		s = reducer.Evolve(s, e)
		if sealEvery > 0 && (i+1)%sealEvery == 0 {
			s.Seal()
		}
	}
	return s
}
