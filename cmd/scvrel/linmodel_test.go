package main

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// modelProject is a project as the linear check sets one up, at
// sequences 1 to 3: tasks T0 and T1 (T1 depends on T0), each retried once
// by the ledger.
func modelProject(t *testing.T) (*linState, []eventView) {
	t.Helper()
	bodies := []reducer.Body{
		reducer.ProjectCreated{Name: "p", Workspace: "/w"},
		reducer.TaskAdded{TaskID: "T0", Title: "t0", DependsOn: []string{}, MaxRetries: 1},
		reducer.TaskAdded{TaskID: "T1", Title: "t1", DependsOn: []string{"T0"}, MaxRetries: 1},
	}
	views := make([]eventView, len(bodies))
	for i, b := range bodies {
		views[i] = viewOf(uint64(i+1), b)
	}
	return initialState(views, bodies, "P"), views
}

// opHistory builds operations one after the other, or overlapping.
type opHistory struct {
	ops []porcupine.Operation
	t   int64
}

// op adds an operation that starts after every one before it returned;
// ret false leaves it without a return (its outcome unknown).
func (h *opHistory) op(client int, in linInput, out linOutput) {
	in.ID, in.Project = len(h.ops)+1, "P"
	h.t += 10
	ret := h.t + 5
	if out.Unknown {
		ret = math.MaxInt64
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: h.t, Output: out, Return: ret})
	h.t += 10
}

// overlap adds two operations that run at the same time.
func (h *opHistory) overlap(a, b linInput, ao, bo linOutput) {
	a.ID, a.Project, b.ID, b.Project = len(h.ops)+1, "P", len(h.ops)+2, "P"
	h.t += 10
	h.ops = append(h.ops,
		porcupine.Operation{ClientId: 0, Input: a, Call: h.t, Output: ao, Return: h.t + 20},
		porcupine.Operation{ClientId: 1, Input: b, Call: h.t + 1, Output: bo, Return: h.t + 21})
	h.t += 30
}

func (h *opHistory) linearizable(t *testing.T) bool {
	t.Helper()
	init, _ := modelProject(t)
	res := porcupine.CheckOperationsTimeout(linModel(map[string]*linState{"P": init}, nil), h.ops, 0)
	require.NotEqual(t, porcupine.Unknown, res)
	return res == porcupine.Ok
}

func tasks(ts ...taskView) linOutput { return linOutput{Tasks: ts} }

var (
	claim0 = linInput{Kind: opClaim, Task: "T0", Agent: "a"}
	ok     = linOutput{}
)

// TestModelAcceptsTheLedgersAnswers: a claim, progress, a failed run
// retried by the ledger, a second run finishing, with reads between, as
// the ledger answers them, is linearizable; and a read racing a write may
// show the state before it or after it.
func TestModelAcceptsTheLedgersAnswers(t *testing.T) {
	var h opHistory
	h.op(0, claim0, linOutput{Run: "R1"})
	h.op(0, linInput{Kind: opProgress, Task: "T0", Run: "R1", Text: "half"}, ok)
	h.op(1, linInput{Kind: opTasks}, tasks(taskView{ID: "T0", Status: reducer.TaskRunning, Run: "R1", Progress: "half"},
		taskView{ID: "T1", Status: reducer.TaskPending}))
	h.op(0, linInput{Kind: opFinish, Task: "T0", Run: "R1", Status: reducer.RunFailed}, ok)
	h.op(1, linInput{Kind: opProgress, Task: "T0", Run: "R1", Text: "late"}, linOutput{Reason: api.ReasonRunNotRunning})
	h.op(1, claim0, linOutput{Run: "R2"})
	h.overlap(linInput{Kind: opFinish, Task: "T0", Run: "R2", Status: reducer.RunSucceeded}, linInput{Kind: opTasks}, ok,
		tasks(taskView{ID: "T0", Status: reducer.TaskRunning, Retries: 1, Run: "R2", Progress: "half"},
			taskView{ID: "T1", Status: reducer.TaskPending}))
	h.op(1, linInput{Kind: opTasks}, tasks(taskView{ID: "T0", Status: reducer.TaskDone, Retries: 1, Progress: "half"},
		taskView{ID: "T1", Status: reducer.TaskReady}))
	assert.True(t, h.linearizable(t))
}

// TestModelRefusesADoubleClaim: two claims of one task, one after the
// other, both answered with a run: the second must have been refused.
func TestModelRefusesADoubleClaim(t *testing.T) {
	var h opHistory
	h.op(0, claim0, linOutput{Run: "R1"})
	h.op(1, claim0, linOutput{Run: "R2"})
	assert.False(t, h.linearizable(t))

	h = opHistory{}
	h.op(0, claim0, linOutput{Run: "R1"})
	h.op(1, claim0, linOutput{Reason: api.ReasonInvalidTransition})
	assert.True(t, h.linearizable(t), "refused as the reducer refuses it")

	h = opHistory{}
	h.op(1, claim0, linOutput{Reason: api.ReasonInvalidTransition})
	assert.False(t, h.linearizable(t), "refused although the task was ready")
}

// TestModelRefusesAStaleRead: a read that starts after a claim was
// acknowledged must show it; one racing it may not.
func TestModelRefusesAStaleRead(t *testing.T) {
	before := tasks(taskView{ID: "T0", Status: reducer.TaskReady}, taskView{ID: "T1", Status: reducer.TaskPending})
	var h opHistory
	h.op(0, claim0, linOutput{Run: "R1"})
	h.op(1, linInput{Kind: opTasks}, before)
	assert.False(t, h.linearizable(t))

	h = opHistory{}
	h.overlap(claim0, linInput{Kind: opTasks}, linOutput{Run: "R1"}, before)
	assert.True(t, h.linearizable(t))

	// Statuses, retries and progress are checked, not only runs.
	for _, read := range [][]taskView{
		{{ID: "T0", Status: reducer.TaskDone}, {ID: "T1", Status: reducer.TaskPending}},
		{{ID: "T0", Status: reducer.TaskDone, Retries: 1}, {ID: "T1", Status: reducer.TaskReady}},
		{{ID: "T0", Status: reducer.TaskDone, Progress: "x"}, {ID: "T1", Status: reducer.TaskReady}},
	} {
		h = opHistory{}
		h.op(0, claim0, linOutput{Run: "R1"})
		h.op(0, linInput{Kind: opFinish, Task: "T0", Run: "R1", Status: reducer.RunSucceeded}, ok)
		h.op(1, linInput{Kind: opTasks}, tasks(read...))
		assert.False(t, h.linearizable(t), "%+v", read)
	}
}

// TestModelUnknownOutcomes: a claim whose answer was lost may have
// started a run, which a later read shows with its real ID and a later
// write names; or it may not have, which a later read shows too. What it
// cannot do is start two.
func TestModelUnknownOutcomes(t *testing.T) {
	running := func(run string) linOutput {
		return tasks(taskView{ID: "T0", Status: reducer.TaskRunning, Run: run}, taskView{ID: "T1", Status: reducer.TaskPending})
	}
	var h opHistory
	h.op(0, claim0, linOutput{Unknown: true})
	h.op(1, linInput{Kind: opTasks}, running("R9"))
	h.op(1, linInput{Kind: opProgress, Task: "T0", Run: "R9", Text: "x"}, ok)
	assert.True(t, h.linearizable(t), "applied, its run learnt from a read")

	h = opHistory{}
	h.op(0, claim0, linOutput{Unknown: true})
	h.op(1, linInput{Kind: opTasks}, tasks(taskView{ID: "T0", Status: reducer.TaskReady}, taskView{ID: "T1", Status: reducer.TaskPending}))
	h.op(1, claim0, linOutput{Run: "R2"})
	assert.True(t, h.linearizable(t), "not applied (or not yet)")

	h = opHistory{}
	h.op(0, claim0, linOutput{Unknown: true})
	h.op(1, linInput{Kind: opTasks}, running("R9"))
	h.op(1, linInput{Kind: opTasks}, running("R8"))
	assert.False(t, h.linearizable(t), "one claim, two runs")

	h = opHistory{}
	h.op(0, claim0, linOutput{Unknown: true})
	h.op(1, linInput{Kind: opProgress, Task: "T0", Run: "R9", Text: "x"}, ok)
	h.op(1, linInput{Kind: opTasks}, tasks(taskView{ID: "T0", Status: reducer.TaskRunning, Run: "R7", Progress: "x"},
		taskView{ID: "T1", Status: reducer.TaskPending}))
	assert.False(t, h.linearizable(t), "the run progressed as R9 is shown as R7")
}

// TestModelEvents: a read of the events after a sequence must show
// every event after it, in order, with sequences that only grow, and
// none at or below it.
func TestModelEvents(t *testing.T) {
	_, setup := modelProject(t)
	started := eventView{Seq: 7, Kind: reducer.KindRunStarted, Task: "T0", Run: "R1", Detail: "a"}
	progress := eventView{Seq: 9, Kind: reducer.KindRunProgress, Run: "R1", Detail: "x"}
	all := append(append([]eventView{}, setup...), started)
	read := func(h *opHistory, after uint64, es ...eventView) {
		h.op(1, linInput{Kind: opEvents, After: after}, linOutput{Events: es})
	}
	cases := []struct {
		name string
		ok   bool
		ops  func(h *opHistory)
	}{
		{"everything after 0", true, func(h *opHistory) {
			h.op(0, claim0, linOutput{Run: "R1"})
			read(h, 0, all...)
		}},
		{"after a sequence learnt", true, func(h *opHistory) {
			h.op(0, claim0, linOutput{Run: "R1"})
			read(h, 3, started)
			h.op(0, linInput{Kind: opProgress, Task: "T0", Run: "R1", Text: "x"}, ok)
			read(h, 7, progress)
		}},
		{"an acknowledged event missing", false, func(h *opHistory) {
			h.op(0, claim0, linOutput{Run: "R1"})
			read(h, 0, setup...)
		}},
		{"an event shown at a second sequence", false, func(h *opHistory) {
			h.op(0, claim0, linOutput{Run: "R1"})
			read(h, 3, started)
			moved := started
			moved.Seq = 8
			read(h, 3, moved)
		}},
		{"an event at or below after", false, func(h *opHistory) {
			h.op(0, claim0, linOutput{Run: "R1"})
			read(h, 7, started)
		}},
		{"an event that never was", false, func(h *opHistory) {
			read(h, 3, started)
		}},
		// Writes whose sequence the final events told (linInput.Seq).
		{"racing writes in the order of their sequences", true, func(h *opHistory) {
			racingProgress(h)
			h.op(1, linInput{Kind: opTasks}, tasks(taskView{ID: "T0", Status: reducer.TaskRunning, Run: "R1", Progress: "x"},
				taskView{ID: "T1", Status: reducer.TaskPending}))
		}},
		{"racing writes in another order", false, func(h *opHistory) {
			racingProgress(h)
			h.op(1, linInput{Kind: opTasks}, tasks(taskView{ID: "T0", Status: reducer.TaskRunning, Run: "R1", Progress: "y"},
				taskView{ID: "T1", Status: reducer.TaskPending}))
		}},
		{"a write at a sequence below one written before it was called", false, func(h *opHistory) {
			h.op(0, linInput{Kind: opClaim, Task: "T0", Agent: "a", Seq: 8}, linOutput{Run: "R1"})
			h.op(0, linInput{Kind: opProgress, Task: "T0", Run: "R1", Text: "x", Seq: 6}, ok)
		}},
		{"a write at a sequence a read showed another event at", false, func(h *opHistory) {
			h.op(0, linInput{Kind: opClaim, Task: "T0", Agent: "a", Seq: 8}, linOutput{Run: "R1"})
			read(h, 3, started)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h opHistory
			c.ops(&h)
			assert.Equal(t, c.ok, h.linearizable(t))
		})
	}
}

// racingProgress: a claim at sequence 4, then two progress writes at the
// same time, "y" at 5 and "x" at 6.
func racingProgress(h *opHistory) {
	h.op(0, linInput{Kind: opClaim, Task: "T0", Agent: "a", Seq: 4}, linOutput{Run: "R1"})
	h.overlap(linInput{Kind: opProgress, Task: "T0", Run: "R1", Text: "x", Seq: 6},
		linInput{Kind: opProgress, Task: "T0", Run: "R1", Text: "y", Seq: 5}, ok, ok)
}

// TestSettle: the final events decide unknown writes: one whose event is
// missing leaves the history, one whose event is there and could only be
// its own takes effect with its run; unknown reads leave; an
// acknowledged write without its event is lost; an event no write made
// is a problem.
func TestSettle(t *testing.T) {
	ev := func(seq uint64, b reducer.Body) api.ProjectEvent {
		data, err := json.Marshal(b)
		require.NoError(t, err)
		return api.ProjectEvent{Sequence: seq, Kind: b.Kind(), Data: data}
	}
	final := map[string]*finalState{"P": {events: []api.ProjectEvent{
		ev(4, reducer.RunStarted{RunID: "R1", TaskID: "T0", Agent: "c0"}),
		ev(5, reducer.RunProgress{RunID: "R1", Progress: "c1-1"}),
		ev(6, reducer.RunStarted{RunID: "R2", TaskID: "T1", Agent: "c1"}),
	}}}
	op := func(in linInput, out linOutput) porcupine.Operation {
		in.Project = "P"
		return porcupine.Operation{Input: in, Output: out}
	}
	ops := []porcupine.Operation{
		op(linInput{Kind: opClaim, Task: "T0", Agent: "c0"}, linOutput{Run: "R1"}),                          // acknowledged, there
		op(linInput{Kind: opProgress, Run: "R1", Text: "c1-1"}, linOutput{Unknown: true}),                   // unknown, there
		op(linInput{Kind: opProgress, Run: "R1", Text: "c1-2"}, linOutput{Unknown: true}),                   // unknown, not there
		op(linInput{Kind: opClaim, Task: "T1", Agent: "c1"}, linOutput{Unknown: true}),                      // unknown, there as R2
		op(linInput{Kind: opTasks}, linOutput{Unknown: true}),                                               // a read: leaves
		op(linInput{Kind: opFinish, Run: "R1", Status: reducer.RunSucceeded}, linOutput{}),                  // acknowledged, lost
		op(linInput{Kind: opRetry, Task: "T0"}, linOutput{Reason: api.ReasonInvalidTransition}),             // refused
		op(linInput{Kind: opProgress, Run: "R1", Text: "c2-1"}, linOutput{Reason: api.ReasonRunNotRunning}), // refused
	}
	var p problems
	r := &linRun{p: &p, names: map[string]string{}}
	out, acked, lost, settled := r.settle(ops, final)
	assert.Equal(t, 2, acked)
	assert.Equal(t, 1, lost)
	assert.Equal(t, 3, settled)
	var got []linOutput
	for _, o := range out {
		got = append(got, o.Output.(linOutput))
	}
	assert.ElementsMatch(t, []linOutput{{Run: "R1"}, {}, {}, {Reason: api.ReasonInvalidTransition}, {Reason: api.ReasonRunNotRunning},
		{Run: "R2"}}, got, "the unknown progress there and the claim as R2 took effect; the other unknowns left")
	seqs := map[string]uint64{}
	for _, o := range out {
		in := o.Input.(linInput)
		seqs[in.Kind.String()+" "+in.Run+in.Task+" "+in.Text+string(in.Status)] = in.Seq
	}
	assert.Equal(t, map[string]uint64{"claim T0 ": 4, "progress R1 c1-1": 5, "claim T1 ": 6, "finish R1 succeeded": 0,
		"retry T0 ": 0, "progress R1 c2-1": 0}, seqs, "what took effect is at its event's sequence")
	require.Len(t, p.list, 1)
	assert.Contains(t, p.list[0], "acknowledged finish")

	// Two retries of one task, two events: which is whose is not known,
	// so neither write is given a sequence.
	retried := map[string]*finalState{"P": {events: []api.ProjectEvent{
		ev(8, reducer.TaskRetried{TaskID: "T0", By: "c0"}), ev(9, reducer.TaskRetried{TaskID: "T0", By: "c1"})}}}
	out, _, lost, _ = r.settle([]porcupine.Operation{op(linInput{Kind: opRetry, Task: "T0"}, ok), op(linInput{Kind: opRetry, Task: "T0"}, ok)}, retried)
	assert.Zero(t, lost)
	for _, o := range out {
		assert.Zero(t, o.Input.(linInput).Seq)
	}

	// An event that nothing explains.
	final["P"].events = append(final["P"].events, ev(7, reducer.RunProgress{RunID: "R1", Progress: "c9-9"}))
	p = problems{}
	r.settle(ops, final)
	assert.Contains(t, p.all(), `project P: 1 progress events of R1 c9-9 that no write of a client made`)
}
