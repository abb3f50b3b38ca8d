package reducer_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

func prio(n int) *int { return &n }

// addP adds task id with a priority, labels and a parent.
func addP(id string, priority int, parent string, labels ...string) reducer.AddTask {
	return reducer.AddTask{Project: projID, TaskID: id, Title: "task " + id, Priority: prio(priority), Parent: parent, Labels: labels}
}

func next(run string, labels ...string) reducer.NextTask {
	return reducer.NextTask{Project: projID, RunID: run, Agent: "agent", Labels: labels}
}

func readyIDs(p *reducer.Project, labels ...string) []string {
	ids := []string{}
	for _, t := range reducer.ReadyTasks(p, labels) {
		ids = append(ids, t.ID)
	}
	return ids
}

func TestReadyAndNextOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  []reducer.Command
		labels []string
		want   []string
	}{
		{"none", nil, nil, []string{}},
		{"priority then age", cmds(addP("a", 2, ""), addP("b", 0, ""), addP("c", 2, ""), addP("d", 4, ""), addP("e", 0, "")),
			nil, []string{"b", "e", "a", "c", "d"}},
		{"default priority is 2", cmds(addP("a", 3, ""), add("b", 0), addP("c", 1, "")), nil, []string{"c", "b", "a"}},
		{"pending left out", cmds(addP("a", 2, ""), reducer.AddTask{Project: projID, TaskID: "b", Title: "b", Priority: prio(0), DependsOn: []string{"a"}}),
			nil, []string{"a"}},
		{"epics left out, their children in", cmds(addP("e", 0, ""), addP("c1", 3, "e"), addP("c2", 1, "e")), nil, []string{"c2", "c1"}},
		{"running and done left out", cmds(addP("a", 0, ""), addP("b", 1, ""), addP("c", 2, ""), start("a", "r1"), upd("b", reducer.TaskDone)),
			nil, []string{"c"}},
		{"approval left out", cmds(addP("a", 0, ""), addP("b", 1, ""),
			reducer.AskApproval{Project: projID, TaskID: "a", QuestionID: "q", Question: "ok?", Deadline: 1 << 40}), nil, []string{"b"}},
		{"labels: all of them", cmds(addP("a", 2, "", "go", "db"), addP("b", 1, "", "go"), addP("c", 0, "", "db", "go", "ui")),
			[]string{"go", "db"}, []string{"c", "a"}},
		{"priority edited", cmds(addP("a", 2, ""), addP("b", 2, ""), reducer.EditTask{Project: projID, TaskID: "b", Priority: prio(1), By: "me"}),
			nil, []string{"b", "a"}},
		{"cancelled run back in order", cmds(addP("a", 1, ""), addP("b", 2, ""), start("a", "r1"), finish("r1", reducer.RunCancelled)),
			nil, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.do(baseProject)
			l.do(tc.setup...)
			assert.Equal(t, tc.want, readyIDs(l.project(), tc.labels...))

			// next claims them in the same order, one run each.
			for i, id := range tc.want {
				evs, err := l.s.decide(withNow(next(fmt.Sprint("n", i), tc.labels...), cmdNow))
				require.NoError(t, err)
				require.Equal(t, []reducer.Body{reducer.RunStarted{RunID: fmt.Sprint("n", i), TaskID: id, Agent: "agent"}}, bodies(evs))
				l.evolve(evs...)
			}
			_, err := l.s.decide(withNow(next("last", tc.labels...), cmdNow))
			require.ErrorIs(t, err, reducer.ErrNothingReady)
		})
	}
}

func TestNothingReadySaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  []reducer.Command
		labels []string
		want   string
	}{
		{"no tasks", nil, nil, "nothing ready: project proj has no tasks"},
		{"all done", cmds(add("a", 0), upd("a", reducer.TaskDone)), nil, "nothing ready: all 1 task of project proj are done"},
		{"all done, an epic apart", cmds(addP("e", 0, ""), addP("c", 0, "e"), upd("c", reducer.TaskDone)), nil,
			"nothing ready: all 1 task of project proj are done, and its 1 epic"},
		{"all running", cmds(add("a", 0), add("b", 0, "a"), start("a", "r1")), nil,
			"nothing ready: nothing is ready in project proj: all running (1 running, 1 pending)"},
		{"approval", cmds(add("a", 0), reducer.AskApproval{Project: projID, TaskID: "a", QuestionID: "q", Question: "ok?", Deadline: 1 << 40}), nil,
			"nothing ready: nothing is ready in project proj: waiting for an approval (1 waiting for an approval)"},
		{"failed", cmds(add("a", 0), add("b", 0, "a"), start("a", "r1"), finish("r1", reducer.RunFailed)), nil,
			"nothing ready: nothing is ready in project proj: blocked by failed work (task a (task a) failed) (1 failed, 1 pending)"},
		{"labels", cmds(addP("a", 2, "", "go")), []string{"ui"},
			"nothing ready: no ready task of project proj has the labels ui (1 task ready without them)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.do(baseProject)
			l.do(tc.setup...)
			evs, err := l.s.decide(withNow(next("r9", tc.labels...), cmdNow))
			require.ErrorIs(t, err, reducer.ErrNothingReady)
			assert.Equal(t, tc.want, err.Error())
			assert.Empty(t, evs)
		})
	}
}

func TestEpicIsNeverRun(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, addP("e", 0, ""), addP("c", 2, "e"))
	for _, c := range []reducer.Command{
		start("e", "r1"),
		upd("e", reducer.TaskDone),
		reducer.AskApproval{Project: projID, TaskID: "e", QuestionID: "q", Question: "ok?", Deadline: 1 << 40},
	} {
		_, err := l.s.decide(withNow(c, cmdNow))
		require.ErrorIs(t, err, reducer.ErrInvalidTransition, "%#v", c)
		assert.Contains(t, err.Error(), "epic")
	}
	// A task that ran, or is done, takes no children.
	l.do(addP("x", 2, ""), start("x", "r2"), addP("y", 2, ""), upd("y", reducer.TaskDone))
	for _, parent := range []string{"x", "y"} {
		_, err := l.s.decide(withNow(addP("z", 2, parent), cmdNow))
		require.ErrorIs(t, err, reducer.ErrInvalidTransition)
		assert.Contains(t, err.Error(), "parent: task "+parent)
	}
	// A task depending on an epic waits for all its children.
	l.do(reducer.AddTask{Project: projID, TaskID: "after", Title: "after", DependsOn: []string{"e"}}, addP("c2", 2, "e"))
	p := l.project()
	requireStatus(t, p, "after", reducer.TaskPending)
	l.do(upd("c", reducer.TaskDone))
	requireStatus(t, l.project(), "e", reducer.TaskReady)
	requireStatus(t, l.project(), "after", reducer.TaskPending)
	l.do(upd("c2", reducer.TaskDone))
	requireStatus(t, l.project(), "e", reducer.TaskDone)
	requireStatus(t, l.project(), "after", reducer.TaskReady)
}

func requireStatus(t *testing.T, p *reducer.Project, id string, want reducer.TaskStatus) {
	t.Helper()
	task, ok := p.Task(id)
	require.True(t, ok, id)
	require.Equal(t, want, task.Status, "task %s", id)
}

func TestEpicDependenciesHoldItsChildren(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("first", 0), reducer.AddTask{Project: projID, TaskID: "e", Title: "e", DependsOn: []string{"first"}},
		addP("c", 2, "e"), addP("d", 2, "c"))
	requireStatus(t, l.project(), "d", reducer.TaskPending)
	requireStatus(t, l.project(), "e", reducer.TaskPending)
	l.do(upd("first", reducer.TaskDone))
	requireStatus(t, l.project(), "d", reducer.TaskReady)
	requireStatus(t, l.project(), "c", reducer.TaskReady)
	requireStatus(t, l.project(), "e", reducer.TaskReady)
	assert.Equal(t, []string{"d"}, readyIDs(l.project()))
}

func edit(task string) reducer.EditTask {
	return reducer.EditTask{Project: projID, TaskID: task, By: "owner"}
}

func TestEditTask(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, addP("a", 2, "", "x"), add("b", 0), add("c", 0, "b"), addP("e", 2, ""))

	decide := func(c reducer.EditTask) ([]reducer.Body, error) {
		evs, err := l.s.decide(withNow(c, cmdNow))
		return bodies(evs), err
	}
	// Only what changes is in the event.
	c := edit("a")
	c.Title, c.Priority, c.Labels, c.Description = ptr("task a"), prio(0), &[]string{"y", "x", "y"}, ptr("do it\n\tnow")
	got, err := decide(c)
	require.NoError(t, err)
	assert.Equal(t, []reducer.Body{reducer.TaskEdited{TaskID: "a", Priority: prio(0), Labels: &[]string{"x", "y"},
		Description: ptr("do it\n\tnow"), By: "owner"}}, got)

	// Nothing changed: no event, no error.
	c = edit("a")
	c.Title, c.Priority, c.Labels = ptr("task a"), prio(2), &[]string{"x"}
	got, err = decide(c)
	require.NoError(t, err)
	assert.Empty(t, got)

	for _, tc := range []struct {
		name string
		c    reducer.EditTask
		kind error
		msg  string
	}{
		{"no by", reducer.EditTask{Project: projID, TaskID: "a"}, reducer.ErrInvalidArgument, "by is empty"},
		{"priority", func() reducer.EditTask { c := edit("a"); c.Priority = prio(5); return c }(), reducer.ErrInvalidArgument, "priority is 5, not 0 to 4"},
		{"label space", func() reducer.EditTask { c := edit("a"); c.Labels = &[]string{"a b"}; return c }(), reducer.ErrInvalidArgument, "labels[0]"},
		{"label long", func() reducer.EditTask {
			c := edit("a")
			c.Labels = &[]string{string(make([]byte, reducer.MaxLabelLen+1))}
			return c
		}(), reducer.ErrInvalidArgument, "labels[0]"},
		{"own parent", func() reducer.EditTask { c := edit("a"); c.Parent = ptr("a"); return c }(), reducer.ErrInvalidArgument, "parent: task a cannot be its own parent"},
		{"unknown parent", func() reducer.EditTask { c := edit("a"); c.Parent = ptr("nope"); return c }(), reducer.ErrNotFound, "parent:"},
		{"own dependency", func() reducer.EditTask { c := edit("a"); c.DependsOn = &[]string{"a"}; return c }(), reducer.ErrInvalidArgument, "depends_on"},
		{"dependency cycle", func() reducer.EditTask { c := edit("b"); c.DependsOn = &[]string{"c"}; return c }(), reducer.ErrInvalidArgument,
			"cycle: b (task b) waits for c (task c) waits for b (task b)"},
		{"unknown run", func() reducer.EditTask { c := edit("a"); c.DiscoveredFrom = ptr("r9"); return c }(), reducer.ErrNotFound, "discovered_from"},
		{"description long", func() reducer.EditTask {
			c := edit("a")
			c.Description = ptr(string(make([]rune, reducer.MaxDescriptionLen+1)))
			return c
		}(), reducer.ErrInvalidArgument, "description"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decide(tc.c)
			require.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Empty(t, got)
		})
	}

	// A parent that makes a cycle: the epic under its own child.
	l.do(func() reducer.EditTask { c := edit("b"); c.Parent = ptr("e"); return c }())
	c = edit("e")
	c.Parent = ptr("b")
	_, err = decide(c)
	require.ErrorIs(t, err, reducer.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "cycle")
	// A child depending on its own epic.
	c = edit("b")
	c.DependsOn = &[]string{"e"}
	_, err = decide(c)
	require.ErrorIs(t, err, reducer.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "cycle")

	// Moving the child out: e is a task again, ready; c follows b.
	c = edit("b")
	c.Parent = ptr("")
	l.do(c)
	p := l.project()
	e, _ := p.Task("e")
	assert.Equal(t, 0, e.Children)
	requireStatus(t, p, "e", reducer.TaskReady)
	// New dependencies: c waits for a, done, then for b as well.
	l.do(upd("a", reducer.TaskDone))
	c = edit("c")
	c.DependsOn = &[]string{"a"}
	l.do(c)
	requireStatus(t, l.project(), "c", reducer.TaskReady)
	c = edit("c")
	c.DependsOn = &[]string{"a", "b"}
	l.do(c)
	requireStatus(t, l.project(), "c", reducer.TaskPending)
}

// naiveStatus is an epic's status recomputed from its children's.
func naiveEpicStatus(kids []reducer.TaskStatus) reducer.TaskStatus {
	has := func(s reducer.TaskStatus) bool { return slices.Contains(kids, s) }
	switch {
	case !slices.ContainsFunc(kids, func(s reducer.TaskStatus) bool { return s != reducer.TaskDone }):
		return reducer.TaskDone
	case has(reducer.TaskFailed):
		return reducer.TaskFailed
	case has(reducer.TaskRunning):
		return reducer.TaskRunning
	case has(reducer.TaskStale):
		return reducer.TaskStale
	case has(reducer.TaskReady):
		return reducer.TaskReady
	case has(reducer.TaskBlocked):
		return reducer.TaskBlocked
	}
	return reducer.TaskPending
}

// checkPlanState compares what the reducer keeps of epics and ready
// work with a naive recomputation from the tasks.
func checkPlanState(t *testing.T, p *reducer.Project, what string) {
	t.Helper()
	tasks := p.Tasks()
	byID := map[string]*reducer.Task{}
	kids := map[string][]reducer.TaskStatus{}
	counts := map[reducer.TaskStatus]int{}
	for _, task := range tasks {
		byID[task.ID] = task
		counts[task.Status]++
		if task.Parent != "" {
			kids[task.Parent] = append(kids[task.Parent], task.Status)
		}
	}
	depsDone := func(deps []string) bool {
		for _, d := range deps {
			if byID[d].Status != reducer.TaskDone {
				return false
			}
		}
		return true
	}
	type ready struct {
		prio, idx int
		id        string
	}
	var want []ready
	for i, task := range tasks {
		require.Equal(t, len(kids[task.ID]), task.Children, "%s: children of %s", what, task.ID)
		if task.Children > 0 {
			require.Equal(t, naiveEpicStatus(kids[task.ID]), task.Status, "%s: epic %s of %v", what, task.ID, kids[task.ID])
			continue
		}
		startable := depsDone(task.DependsOn)
		for e := task.Parent; e != ""; e = byID[e].Parent {
			startable = startable && depsDone(byID[e].DependsOn)
		}
		switch task.Status {
		case reducer.TaskPending:
			require.False(t, startable, "%s: %s pending but could start", what, task.ID)
		case reducer.TaskReady:
			require.True(t, startable, "%s: %s ready but waits", what, task.ID)
			if task.Approval == "" {
				want = append(want, ready{task.Priority, i, task.ID})
			}
		}
	}
	for _, s := range []reducer.TaskStatus{reducer.TaskPending, reducer.TaskReady, reducer.TaskRunning, reducer.TaskBlocked,
		reducer.TaskDone, reducer.TaskFailed, reducer.TaskStale} {
		require.Equal(t, counts[s], p.CountOf(s), "%s: count of %s", what, s)
	}
	slices.SortFunc(want, func(a, b ready) int { return cmp.Or(cmp.Compare(a.prio, b.prio), cmp.Compare(a.idx, b.idx)) })
	ids := []string{}
	for _, r := range want {
		ids = append(ids, r.id)
	}
	require.Equal(t, ids, readyIDs(p), "%s: ready", what)
}

// TestPropertyEpicsDerived grows random trees of tasks, with random
// dependencies, and gives their runs random outcomes, with random moves
// of tasks between epics; after each event the epics' status, the counts
// and the ready list agree with a naive recomputation, and a snapshot
// restores the same state.
func TestPropertyEpicsDerived(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 38))
		l := newLedger(t)
		l.do(baseProject)
		var ids, running []string
		n := 0
		try := func(c reducer.Command) bool {
			evs, err := l.s.decide(withNow(c, l.now+10))
			l.now += 10
			if err != nil {
				return false
			}
			l.evolve(evs...)
			return true
		}
		for step := range 300 {
			p := l.project()
			switch k := r.IntN(10); {
			case k < 3 || len(ids) == 0:
				n++
				id := fmt.Sprint("t", n)
				c := addP(id, r.IntN(5), "")
				c.MaxRetries = uint32(r.IntN(3))
				if len(ids) > 0 && r.IntN(3) > 0 {
					c.Parent = ids[r.IntN(len(ids))]
				}
				if len(ids) > 0 && r.IntN(3) == 0 {
					c.DependsOn = []string{ids[r.IntN(len(ids))]}
				}
				if try(c) {
					ids = append(ids, id)
				}
			case k < 6:
				run := fmt.Sprint("r", step)
				if try(next(run)) {
					running = append(running, run)
				}
			case k < 8 && len(running) > 0:
				i := r.IntN(len(running))
				run := running[i]
				running = slices.Delete(running, i, i+1)
				if r.IntN(3) == 0 {
					try(reducer.MarkStale{Project: projID, Window: 0})
					running = nil
					continue
				}
				try(finish(run, []reducer.RunStatus{reducer.RunSucceeded, reducer.RunSucceeded, reducer.RunFailed, reducer.RunCancelled}[r.IntN(4)]))
			case k == 8:
				c := edit(ids[r.IntN(len(ids))])
				c.Parent = ptr("")
				if r.IntN(2) == 0 {
					c.Parent = ptr(ids[r.IntN(len(ids))])
				}
				try(c)
			default:
				id := ids[r.IntN(len(ids))]
				if task, _ := p.Task(id); task.Status == reducer.TaskFailed {
					try(reducer.RetryTask{Project: projID, TaskID: id, By: "owner"})
				} else {
					try(upd(id, []reducer.TaskStatus{reducer.TaskBlocked, reducer.TaskReady, reducer.TaskDone}[r.IntN(3)]))
				}
			}
			what := fmt.Sprintf("seed %d step %d", seed, step)
			p = l.project()
			checkPlanState(t, p, what)
			snap, err := reducer.Snapshot(p)
			require.NoError(t, err)
			restored, err := reducer.Restore(snap)
			require.NoError(t, err)
			require.Equal(t, dumpProject(p), dumpProject(restored), what)
		}
	}
}

func apply(items ...reducer.PlanItem) reducer.ApplyPlan {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = "id-" + it.Key
	}
	return reducer.ApplyPlan{Project: projID, Items: items, IDs: ids, By: "owner"}
}

func kinds(evs []reducer.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Body.Kind()+" "+taskOf(e.Body))
	}
	return out
}

func taskOf(b reducer.Body) string {
	switch b := b.(type) {
	case reducer.TaskAdded:
		return b.TaskID
	case reducer.TaskEdited:
		return b.TaskID
	}
	return ""
}

func TestApplyPlan(t *testing.T) {
	plan := []reducer.PlanItem{
		{Key: "tests", Title: "Tests", DependsOn: []string{"impl"}, Parent: "epic", Labels: []string{"go"}},
		{Key: "epic", Title: "The epic", Description: "All of it.\n", Priority: prio(1)},
		{Key: "impl", Title: "Implement", Acceptance: "it works", Parent: "epic", Labels: []string{"go", "db", "go"}, Priority: prio(0)},
		{Key: "docs", Title: "Docs", DependsOn: []string{"epic"}},
	}
	l := newLedger(t)
	l.do(baseProject)
	decide := func(c reducer.Command) ([]reducer.Event, error) { return l.s.decide(withNow(c, cmdNow)) }

	evs, err := decide(apply(plan...))
	require.NoError(t, err)
	// Epic and dependencies first, else the plan's order.
	assert.Equal(t, []string{"task_added id-epic", "task_added id-impl", "task_added id-tests", "task_added id-docs"}, kinds(evs))
	l.evolve(evs...)
	p := l.project()
	impl, _ := p.Task("id-impl")
	assert.Equal(t, "impl", impl.Key)
	assert.Equal(t, []string{"db", "go"}, impl.Labels)
	assert.Equal(t, "id-epic", impl.Parent)
	assert.Equal(t, "it works", impl.Acceptance)
	epic, _ := p.Task("id-epic")
	assert.Equal(t, 2, epic.Children)
	assert.Equal(t, reducer.TaskReady, epic.Status)
	requireStatus(t, p, "id-docs", reducer.TaskPending)
	assert.Equal(t, []string{"id-impl"}, readyIDs(p))
	// A task is named by its ID, its key or its title.
	for _, ref := range []string{"id-impl", "impl", "Implement"} {
		byRef, err := p.ResolveTask(ref)
		require.NoError(t, err, ref)
		assert.Equal(t, "id-impl", byRef.ID, ref)
	}

	// Applied again: nothing.
	evs, err = decide(apply(plan...))
	require.NoError(t, err)
	assert.Empty(t, evs)

	// Edited: edit events only, of what changed.
	edited := slices.Clone(plan)
	edited[0].Priority = prio(3)
	edited[3].DependsOn = nil
	edited = append(edited, reducer.PlanItem{Key: "more", Title: "More", Parent: "epic"})
	evs, err = decide(apply(edited...))
	require.NoError(t, err)
	assert.Equal(t, []string{"task_edited id-tests", "task_edited id-docs", "task_added id-more"}, kinds(evs))
	assert.Equal(t, reducer.TaskEdited{TaskID: "id-tests", Priority: prio(3), By: "owner"}, evs[0].Body)
	assert.Equal(t, reducer.TaskEdited{TaskID: "id-docs", DependsOn: &[]string{}, By: "owner"}, evs[1].Body)
	l.evolve(evs...)
	requireStatus(t, l.project(), "id-docs", reducer.TaskReady)

	// A task added without a key is matched by its ID.
	l.do(reducer.AddTask{Project: projID, TaskID: "T9", Title: "Loose"})
	evs, err = decide(apply(append(slices.Clone(edited), reducer.PlanItem{Key: "T9", Title: "Loose", Priority: prio(1)})...))
	require.NoError(t, err)
	assert.Equal(t, []string{"task_edited T9"}, kinds(evs))

	// The snapshot keeps every field.
	p = l.project()
	snap, err := reducer.Snapshot(p)
	require.NoError(t, err)
	restored, err := reducer.Restore(snap)
	require.NoError(t, err)
	require.Equal(t, dumpProject(p), dumpProject(restored))
	again, err := reducer.Snapshot(restored)
	require.NoError(t, err)
	require.Equal(t, string(snap), string(again))

	for _, tc := range []struct {
		name  string
		items []reducer.PlanItem
		msg   string
	}{
		{"duplicate key", []reducer.PlanItem{{Key: "a", Title: "A"}, {Key: "a", Title: "B"}}, `plan task "a": the key is also task 1's`},
		{"unknown dependency", []reducer.PlanItem{{Key: "a", Title: "A", DependsOn: []string{"zz"}}}, `plan task "a": depends_on: invalid argument: "zz" is the key of no task`},
		{"unknown parent", []reducer.PlanItem{{Key: "a", Title: "A", Parent: "zz"}}, `plan task "a": parent: invalid argument: "zz"`},
		{"cycle", []reducer.PlanItem{{Key: "a", Title: "A", DependsOn: []string{"b"}}, {Key: "b", Title: "B", DependsOn: []string{"a"}}},
			`cycle: "a" waits for "b" waits for "a"`},
		{"parent cycle", []reducer.PlanItem{{Key: "a", Title: "A", Parent: "b"}, {Key: "b", Title: "B", Parent: "a"}}, "cycle"},
		{"child on its epic", []reducer.PlanItem{{Key: "a", Title: "A"}, {Key: "b", Title: "B", Parent: "a", DependsOn: []string{"a"}}}, "cycle"},
		{"cycle through the project", []reducer.PlanItem{{Key: "impl", Title: "Implement", DependsOn: []string{"tests"}}}, "cycle"},
		{"priority", []reducer.PlanItem{{Key: "a", Title: "A", Priority: prio(-1)}}, `plan task "a": invalid argument: priority is -1`},
		{"title", []reducer.PlanItem{{Key: "a"}}, `plan task "a": invalid argument: title is empty`},
		{"no key", []reducer.PlanItem{{Title: "A"}}, `plan task 1: invalid argument: key is empty`},
		{"labels", []reducer.PlanItem{{Key: "a", Title: "A", Labels: make([]string, reducer.MaxLabels+1)}}, `plan task "a": invalid argument: labels has 21 entries`},
		{"same task twice", []reducer.PlanItem{{Key: "impl", Title: "A"}, {Key: "id-impl", Title: "A"}}, `plan tasks "impl" and "id-impl" are both task id-impl`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := decide(apply(tc.items...))
			require.ErrorIs(t, err, reducer.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Empty(t, evs)
		})
	}
	_, err = decide(reducer.ApplyPlan{Project: projID, Items: make([]reducer.PlanItem, reducer.MaxPlanTasks+1), IDs: make([]string, reducer.MaxPlanTasks+1)})
	require.ErrorIs(t, err, reducer.ErrInvalidArgument)
}

func TestApplyPlanDecodes(t *testing.T) {
	// Every event of a plan survives its stored form.
	l := newLedger(t)
	l.do(baseProject)
	evs, err := l.s.decide(withNow(apply(reducer.PlanItem{Key: "a", Title: "A", Labels: []string{"x"}, Priority: prio(0), Description: "d"}), cmdNow))
	require.NoError(t, err)
	l.evolve(evs...)
	c := edit("id-a")
	c.Labels, c.Parent, c.DependsOn = &[]string{}, ptr(""), &[]string{}
	c.Title = ptr("B")
	evs, err = l.s.decide(withNow(c, cmdNow))
	require.NoError(t, err)
	for _, e := range append(l.events[len(l.events)-1:], evs...) {
		data, err := reducer.EncodeBody(e.Body)
		require.NoError(t, err)
		back, err := reducer.DecodeBody(e.Body.Kind(), data)
		require.NoError(t, err)
		assert.Equal(t, e.Body, back)
	}
}
