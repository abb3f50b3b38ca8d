package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"scv/control/api"
	"scv/reducer"
)

// The linear check's model of the project ledger, for porcupine. Each
// project is a partition of the history (its operations touch no other
// project), and its sequential specification is the reducer itself: a
// write is what reducer.Decide says of the state the operations before it
// left, and a read must show that state, through the same views
// (api.ProjectTasksOf) the daemon answers with. The model adds only what
// the reducer does not know: run IDs minted by a write whose answer was
// lost, and the global sequence numbers of events, learnt from reads, or
// from the final events for the writes they tell apart.

// opKind is what an operation of the linear check does.
type opKind uint8

const (
	opClaim    opKind = iota // project_run_start: claim a task's run
	opProgress               // project_run_progress
	opFinish                 // project_run_finish
	opRetry                  // project_task_retry
	opTasks                  // project_tasks: read the tasks' status
	opEvents                 // project_events after a sequence
)

var opNames = [...]string{"claim", "progress", "finish", "retry", "tasks", "events"}

func (k opKind) String() string { return opNames[k] }

// writes reports whether the operation can change the ledger.
func (k opKind) writes() bool { return k < opTasks }

// linInput is an operation as called.
type linInput struct {
	// ID is the operation's index in the history: the placeholder run ID
	// of a claim whose answer was lost is made of it.
	ID      int
	Kind    opKind
	Project string // the project's ID
	// Task is the task claimed or retried; for progress and finish, the
	// task the client believes the run is of.
	Task   string
	Run    string            // progress, finish
	Agent  string            // claim
	Text   string            // progress
	Status reducer.RunStatus // finish
	After  uint64            // events
	// Seq, for a write that took effect, is the sequence of its event as
	// the final events show it (0 when they do not tell which event is
	// its own): the model appends its event at that sequence only.
	Seq uint64
}

// linOutput is an operation's outcome as its client saw it.
type linOutput struct {
	// Unknown: no answer (a timeout, a broken connection) or `unavailable`:
	// the operation may or may not have taken effect, at any time after it
	// was called.
	Unknown bool
	// Reason is the daemon's refusal ("" when it answered with a result).
	Reason string
	Run    string      // claim: the run started
	Tasks  []taskView  // tasks
	Events []eventView // events
}

// taskView is what a read of the tasks shows of one, and is checked.
type taskView struct {
	ID       string
	Status   reducer.TaskStatus
	Retries  uint32
	Run      string // "" for none
	Progress string // "" for none
}

func tasksView(ts []api.ProjectTask) []taskView {
	out := make([]taskView, len(ts))
	for i, t := range ts {
		out[i] = taskView{ID: t.ID, Status: t.Status, Retries: t.Retries}
		if t.RunID != nil {
			out[i].Run = *t.RunID
		}
		if t.Progress != nil {
			out[i].Progress = *t.Progress
		}
	}
	return out
}

// eventView is what is checked of one event: its kind, the task and run
// it names, its text or status, and its sequence (0 in the model until a
// read shows it).
type eventView struct {
	Seq    uint64
	Kind   string
	Task   string
	Run    string
	Detail string
}

// viewOf is the view of an event's body.
func viewOf(seq uint64, b reducer.Body) eventView {
	v := eventView{Seq: seq, Kind: b.Kind()}
	switch b := b.(type) {
	case reducer.ProjectCreated:
		v.Detail = b.Name
	case reducer.TaskAdded:
		v.Task, v.Detail = b.TaskID, strings.Join(b.DependsOn, ",")
	case reducer.RunStarted:
		v.Task, v.Run, v.Detail = b.TaskID, b.RunID, b.Agent
	case reducer.RunProgress:
		v.Run, v.Detail = b.RunID, b.Progress
	case reducer.RunFinished:
		v.Run, v.Detail = b.RunID, string(b.Status)
	case reducer.RunStaleMarked:
		v.Run = b.RunID
	case reducer.TaskRetried:
		v.Task = b.TaskID
	case reducer.Heartbeat:
		v.Task, v.Run = b.TaskID, b.RunID
	}
	return v
}

// eventsView decodes the events a daemon answered with.
func eventsView(es []api.ProjectEvent) ([]eventView, error) {
	out := make([]eventView, len(es))
	for i, e := range es {
		b, err := reducer.DecodeBody(e.Kind, e.Data)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", e.Sequence, err)
		}
		out[i] = viewOf(e.Sequence, b)
	}
	return out, nil
}

// linState is the model's state of one project. It is never changed once
// made: a step makes a new one.
type linState struct {
	p *reducer.Project
	// events are the project's events in order, each with its sequence
	// once a read showed it.
	events []eventView
	// alias maps the real ID of a run started by a claim whose answer was
	// lost to the placeholder the model gave it, once a read or a write
	// naming it shows which it is. Sorted by real ID.
	alias []aliasPair
	hash  uint64 // of events and alias
}

type aliasPair struct{ real, model string }

// placeholder is the model's run ID for the run a claim whose answer was
// lost may have started.
func placeholder(op int) string { return fmt.Sprintf("?%d", op) }

func isPlaceholder(id string) bool { return strings.HasPrefix(id, "?") }

func newState(p *reducer.Project, events []eventView, alias []aliasPair) *linState {
	// The project is the fold of its events, so the events (with the
	// sequences learnt) and the aliases are the whole state.
	h := uint64(fnvOffset)
	for _, e := range events {
		h = e.hash(h)
	}
	for _, a := range alias {
		h = fnvString(fnvString(h, a.real), a.model)
	}
	return &linState{p: p, events: events, alias: alias, hash: h}
}

// equal reports whether two states are the same.
func (s *linState) equal(t *linState) bool {
	return s == t || (s.hash == t.hash && slices.Equal(s.events, t.events) && slices.Equal(s.alias, t.alias))
}

// FNV-1a, written out so that a hash goes on from where another stopped.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return (h ^ 0xff) * fnvPrime // a separator
}

// hash goes on from h with e.
func (e eventView) hash(h uint64) uint64 {
	for i := range 8 {
		h = (h ^ (e.Seq >> (8 * i) & 0xff)) * fnvPrime
	}
	return fnvString(fnvString(fnvString(fnvString(h, e.Kind), e.Task), e.Run), e.Detail)
}

// initialState is a project's state as the events the check set it up
// with leave it.
func initialState(events []eventView, bodies []reducer.Body, projectID string) *linState {
	var p *reducer.Project
	for i, b := range bodies {
		p = reducer.Evolve(p, reducer.Event{Sequence: events[i].Seq, ProjectID: projectID, Body: b})
	}
	return newState(p, events, nil)
}

// aliasOf is the model's ID of the real run ID real, if one was learnt.
func (s *linState) aliasOf(real string) (string, bool) {
	i, ok := slices.BinarySearchFunc(s.alias, real, func(a aliasPair, r string) int { return strings.Compare(a.real, r) })
	if !ok {
		return "", false
	}
	return s.alias[i].model, true
}

// aliased reports whether some real ID is known for the placeholder m.
func (s *linState) aliased(m string) bool {
	return slices.ContainsFunc(s.alias, func(a aliasPair) bool { return a.model == m })
}

// withAlias is s's alias list with real → model added.
func (s *linState) withAlias(real, model string) []aliasPair {
	out := slices.Clone(s.alias)
	i, _ := slices.BinarySearchFunc(out, real, func(a aliasPair, r string) int { return strings.Compare(a.real, r) })
	return slices.Insert(out, i, aliasPair{real, model})
}

// bind checks that the real run ID r, as a read showed it, is the model's
// run m, and returns the alias list with what that teaches (a placeholder
// bound to r). ok is false when they cannot be the same run.
func (s *linState) bind(alias []aliasPair, m, r string) ([]aliasPair, bool) {
	if m == r {
		return alias, true
	}
	if m == "" || r == "" || !isPlaceholder(m) {
		return alias, false
	}
	t := &linState{alias: alias}
	if got, ok := t.aliasOf(r); ok {
		return alias, got == m
	}
	if _, ok := s.p.Run(r); ok || t.aliased(m) {
		return alias, false // r is another run, or m is bound to another ID
	}
	return t.withAlias(r, m), true
}

// candidates are the model's IDs the real run ID r, named by a write for
// task, may be: its alias, itself, or, when the model does not know it,
// any placeholder of that task not bound yet (and itself, unknown).
func (s *linState) candidates(r, task string) []string {
	if m, ok := s.aliasOf(r); ok {
		return []string{m}
	}
	if _, ok := s.p.Run(r); ok {
		return []string{r}
	}
	out := []string{r}
	for _, run := range s.p.Runs() {
		if isPlaceholder(run.ID) && run.TaskID == task && !s.aliased(run.ID) {
			out = append(out, run.ID)
		}
	}
	return out
}

// command is the reducer's command for a write, naming run (the model's
// ID) where it names one.
func (s *linState) command(in linInput, run string) reducer.Command {
	now := s.p.Updated // the model keeps no time; nothing checked depends on it
	switch in.Kind {
	case opClaim:
		return reducer.StartRun{Project: s.p.ID, TaskID: in.Task, RunID: run, Agent: in.Agent, Now: now}
	case opProgress:
		return reducer.ProgressRun{Project: s.p.ID, RunID: run, Progress: in.Text, Now: now}
	case opFinish:
		return reducer.FinishRun{Project: s.p.ID, RunID: run, Status: in.Status, Now: now}
	case opRetry:
		return reducer.RetryTask{Project: s.p.ID, TaskID: in.Task, By: "linear", Now: now}
	}
	panic(fmt.Sprintf("linear: %s is not a write", in.Kind))
}

// apply decides a write with the model's run ID run: the new state and
// nil, or the reducer's refusal.
func (s *linState) apply(in linInput, run string, alias []aliasPair) (*linState, error) {
	evs, err := reducer.Decide(s.p, s.command(in, run))
	if err != nil {
		return nil, err
	}
	if in.Seq != 0 && !s.fits(in.Seq) {
		return nil, errOutOfOrder
	}
	p, events := s.p, slices.Clone(s.events)
	for i, e := range evs {
		p = reducer.Evolve(p, e)
		var seq uint64
		if in.Seq != 0 {
			seq = in.Seq + uint64(i) // one write's events are one batch
		}
		events = append(events, viewOf(seq, e.Body))
	}
	return newState(p, events, alias), nil
}

// errOutOfOrder: a write whose event is known to come later in the ledger
// than where the model would append it. No refusal is this.
var errOutOfOrder = errors.New("linear: the write's event does not fit here")

// fits reports whether an event of sequence seq can follow s's events:
// above the last sequence learnt, with room for the events after it.
func (s *linState) fits(seq uint64) bool {
	var low uint64
	for _, e := range s.events {
		if e.Seq != 0 {
			low = e.Seq
		} else {
			low++
		}
	}
	return seq > low
}

// reasonOf is the refusal reason the daemon answers err with.
func reasonOf(err error) string { return api.ErrorOf(err).Data.Reason }

// environmental reports whether a refusal says the operation could not
// be done at all (the database failed it), which any state may answer:
// nothing of it was kept.
func environmental(reason string) bool {
	switch reason {
	case api.ReasonStorage, api.ReasonStorageFull:
		return true
	}
	return false
}

// step is the model's step: every state s can be in after the operation
// (in, out), none when out cannot be what the operation answered in s.
func (s *linState) step(in linInput, out linOutput) []*linState {
	if out.Unknown {
		next := []*linState{s} // not applied
		if in.Kind.writes() {
			for _, m := range s.writeRuns(in, placeholder(in.ID)) {
				if t, err := s.apply(in, m.model, m.alias); err == nil {
					next = append(next, t)
				}
			}
		}
		return next
	}
	if environmental(out.Reason) {
		return []*linState{s}
	}
	switch in.Kind {
	case opTasks:
		return s.readTasks(out.Tasks)
	case opEvents:
		return s.readEvents(in.After, out.Events)
	}
	var next []*linState
	for _, m := range s.writeRuns(in, out.Run) {
		t, err := s.apply(in, m.model, m.alias)
		switch {
		case out.Reason == "" && err == nil:
			next = append(next, t)
		case out.Reason != "" && err != nil && err != errOutOfOrder && reasonOf(err) == out.Reason:
			next = append(next, s) // refused, as the model refuses it
		}
	}
	return next
}

// runChoice is a model run ID a write may name, with the alias list that
// choosing it makes.
type runChoice struct {
	model string
	alias []aliasPair
}

// writeRuns are the model's run IDs a write may name: for a claim, the
// run it started (claimed, the real ID its answer gave, or a placeholder
// when there was none); for progress and finish, the candidates of the
// run it names; none for a retry.
func (s *linState) writeRuns(in linInput, claimed string) []runChoice {
	switch in.Kind {
	case opClaim:
		if claimed == "" {
			claimed = "-" // refused: no run was minted
		}
		return []runChoice{{claimed, s.alias}}
	case opProgress, opFinish:
		var out []runChoice
		for _, m := range s.candidates(in.Run, in.Task) {
			alias := s.alias
			if m != in.Run && !slices.ContainsFunc(s.alias, func(a aliasPair) bool { return a.real == in.Run }) {
				alias = s.withAlias(in.Run, m)
			}
			out = append(out, runChoice{m, alias})
		}
		return out
	}
	return []runChoice{{"", s.alias}}
}

// readTasks is the state after a read of the tasks showed got, if the
// model shows the same.
func (s *linState) readTasks(got []taskView) []*linState {
	want := tasksView(api.ProjectTasksOf(s.p))
	if len(got) != len(want) {
		return nil
	}
	alias := s.alias
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Status != w.Status || g.Retries != w.Retries || g.Progress != w.Progress {
			return nil
		}
		var ok bool
		if alias, ok = s.bind(alias, w.Run, g.Run); !ok {
			return nil
		}
	}
	if len(alias) == len(s.alias) {
		return []*linState{s}
	}
	return []*linState{newState(s.p, s.events, alias)}
}

// readEvents is the state after a read of the events after sequence
// after showed got, if the model's events end with them: the same kinds,
// tasks, runs and details, in order, with the sequences the model has
// learnt, and every event of the model before them at or below after.
// The sequences got shows are learnt.
func (s *linState) readEvents(after uint64, got []eventView) []*linState {
	n, k := len(s.events), len(got)
	if k > n {
		return nil
	}
	start := n - k
	// The events before the suffix must fit at or below after, between
	// the sequences learnt: each sequence is above the one before it.
	var low uint64
	for _, e := range s.events[:start] {
		if e.Seq != 0 {
			if e.Seq <= low || e.Seq > after {
				return nil
			}
			low = e.Seq
		} else if low++; low > after {
			return nil
		}
	}
	events := slices.Clone(s.events)
	alias := s.alias
	for i, g := range got {
		w := events[start+i]
		if g.Kind != w.Kind || g.Task != w.Task || g.Detail != w.Detail || g.Seq <= after || g.Seq <= low ||
			(w.Seq != 0 && w.Seq != g.Seq) {
			return nil
		}
		var ok bool
		if alias, ok = s.bind(alias, w.Run, g.Run); !ok {
			return nil
		}
		low = g.Seq
		events[start+i].Seq = g.Seq
	}
	return []*linState{newState(s.p, events, alias)}
}

// describe is the state for porcupine's visualisation: each task's
// status and run, and the number of events.
func (s *linState) describe() string {
	if s.p == nil {
		return "(no project yet)"
	}
	var b strings.Builder
	for i, t := range s.p.Tasks() {
		fmt.Fprintf(&b, "t%d %s", i, t.Status)
		if t.RunID != "" {
			fmt.Fprintf(&b, " %s", short(t.RunID))
		}
		if t.Retries > 0 {
			fmt.Fprintf(&b, " r%d", t.Retries)
		}
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "%d events", len(s.events))
	return b.String()
}

// short is the tail of an ID, enough to tell runs apart in a picture.
func short(id string) string {
	if isPlaceholder(id) || len(id) <= 6 {
		return id
	}
	return "…" + id[len(id)-6:]
}

// linModel is the porcupine model of the linear check's projects: init
// holds each project's state after its set-up, by project ID.
func linModel(init map[string]*linState, taskNames map[string]string) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range history {
				p := op.Input.(linInput).Project
				if _, seen := by[p]; !seen {
					order = append(order, p)
				}
				by[p] = append(by[p], op)
			}
			out := make([][]porcupine.Operation, len(order))
			for i, p := range order {
				out[i] = by[p]
			}
			return out
		},
		Init: func() []any { return []any{&linState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(*linState), input.(linInput), output.(linOutput)
			if s.p == nil {
				if s = init[in.Project]; s == nil {
					return nil
				}
			}
			next := s.step(in, out)
			res := make([]any, len(next))
			for i, t := range next {
				res[i] = t
			}
			return res
		},
		Equal: func(a, b any) bool {
			x, y := a.(*linState), b.(*linState)
			return x.equal(y)
		},
		DescribeOperation: func(input, output any) string {
			return describeOp(input.(linInput), output.(linOutput), taskNames)
		},
		DescribeState: func(state any) string { return state.(*linState).describe() },
	}
	m := nm.ToModel()
	// The power-set model's states are sets of ours: hash them by theirs
	// (the checker's cache then compares only states that may be equal).
	m.Hash = func(state any) uint64 {
		var h uint64
		for _, s := range state.([]any) {
			h ^= s.(*linState).hash // order-free: a set
		}
		return h
	}
	return m
}

// describeOp is an operation as the visualisation shows it.
func describeOp(in linInput, out linOutput, taskNames map[string]string) string {
	task := taskNames[in.Task]
	var call string
	switch in.Kind {
	case opClaim:
		call = fmt.Sprintf("claim(%s)", task)
	case opProgress:
		call = fmt.Sprintf("progress(%s, %q)", short(in.Run), in.Text)
	case opFinish:
		call = fmt.Sprintf("finish(%s, %s)", short(in.Run), in.Status)
	case opRetry:
		call = fmt.Sprintf("retry(%s)", task)
	case opTasks:
		call = "tasks()"
	case opEvents:
		call = fmt.Sprintf("events(after %d)", in.After)
	}
	var res string
	switch {
	case out.Unknown:
		res = "unknown"
	case out.Reason != "":
		res = out.Reason
	case in.Kind == opClaim:
		res = short(out.Run)
	case in.Kind == opTasks:
		var parts []string
		for _, t := range out.Tasks {
			p := fmt.Sprintf("%s %s", taskNames[t.ID], t.Status)
			if t.Run != "" {
				p += " " + short(t.Run)
			}
			parts = append(parts, p)
		}
		res = strings.Join(parts, ", ")
	case in.Kind == opEvents:
		res = fmt.Sprintf("%d events", len(out.Events))
		if len(out.Events) > 0 {
			res += fmt.Sprintf(" (%d…%d)", out.Events[0].Seq, out.Events[len(out.Events)-1].Seq)
		}
	default:
		res = "ok"
	}
	return call + " → " + res
}
