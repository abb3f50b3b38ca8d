package reducer_test

import (
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// The property test drives the reducer with random command sequences,
// mostly valid, with monotonic times and fresh IDs, in batches that are
// committed or rolled back at random, as the ledger's are (a rolled-back
// batch's events are dropped from the history too), and checks:
//
//   - (a) replay: at the end, folding the kept events from scratch (with
//     no snapshot, and with every project replaced by its restored
//     snapshot every few events) gives the same observable state as the
//     incremental one;
//   - (b) immutability: every committed version of a project is unchanged
//     at the end, and a rollback brings back exactly the committed ones;
//   - (c) a refused command changes nothing, after every refusal;
//   - (d) the invariants of SPEC section 3 (see invariants), and done and
//     failed tasks never change status, after every accepted command.

const (
	propSequences = 200
	propSteps     = 200
)

var projectNames = []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}

var sentinels = []error{
	reducer.ErrNotFound, reducer.ErrConflict, reducer.ErrInvalidArgument,
	reducer.ErrInvalidTransition, reducer.ErrRunNotRunning,
}

// gen generates commands against the current state.
type gen struct {
	r    *rand.Rand
	now  int64
	ids  int
	pIDs []string // every project ID ever proposed
}

func (g *gen) fresh(prefix string) string {
	g.ids++
	return prefix + strconv.Itoa(g.ids)
}

func (g *gen) chance(n int) bool { return g.r.IntN(n) == 0 }

func pick[T any](g *gen, xs []T) T { return xs[g.r.IntN(len(xs))] }

// command returns a command against the state's projects ps.
func (g *gen) command(ps []*reducer.Project) reducer.Command {
	g.now += int64(g.r.IntN(40))
	// Projects come in no particular order: sort them, so that a seed
	// always gives the same sequence.
	slices.SortFunc(ps, func(a, b *reducer.Project) int { return strings.Compare(a.ID, b.ID) })
	if len(ps) == 0 || g.chance(12) {
		return g.createProject(ps)
	}
	p := pick(g, ps)
	ref := p.ID
	if g.chance(2) {
		ref = p.Name
	}
	if g.chance(60) {
		ref = "no-such-project"
	}
	if g.chance(10) {
		return g.ownerDecision(p, ref)
	}
	k := g.r.IntN(100)
	if k >= 50 && k < 78 && !hasLiveRun(p) && !g.chance(5) {
		k = 30 // progress and finish need a running run: start one instead
	}
	if k >= 18 && k < 50 && !hasStartable(p) && !g.chance(5) {
		k = 0 // nothing to start or update: add a task instead
	}
	switch {
	case k < 18:
		return g.addTask(p, ref)
	case k < 30:
		return g.updateTask(p, ref)
	case k < 50:
		return g.startRun(p, ref)
	case k < 60:
		return reducer.ProgressRun{Project: ref, RunID: g.run(p), Progress: g.fresh("progress "), Now: g.now}
	case k < 78:
		st := pick(g, []reducer.RunStatus{
			reducer.RunSucceeded, reducer.RunSucceeded, reducer.RunSucceeded, reducer.RunSucceeded, reducer.RunFailed, reducer.RunFailed,
			reducer.RunFailed, reducer.RunCancelled, reducer.RunCancelled, reducer.RunRunning, reducer.RunStale,
		})
		return reducer.FinishRun{Project: ref, RunID: g.run(p), Status: st, Now: g.now}
	case k < 90:
		return g.heartbeat(p, ref)
	default:
		return reducer.MarkStale{Project: ref, Window: int64(g.r.IntN(120)), Now: g.now}
	}
}

// ownerDecision is one of the owner's commands (SPEC section 5), mostly
// ones that apply: retrying a failed task, asking and deciding approvals,
// releasing, and now and then archiving.
func (g *gen) ownerDecision(p *reducer.Project, ref string) reducer.Command {
	by := pick(g, []string{"owner", "uid 1000 pid 7"})
	var pendingQ []string
	for _, a := range p.Approvals() {
		if a.Outcome == reducer.ApprovalPending {
			pendingQ = append(pendingQ, a.ID)
		}
	}
	switch k := g.r.IntN(100); {
	case k < 30:
		task := g.task(p)
		for _, t := range p.Tasks() {
			if t.Status == reducer.TaskFailed && !g.chance(4) {
				task = t.ID
				break
			}
		}
		var budget *uint32
		if g.chance(2) {
			m := uint32(g.r.IntN(3))
			budget = &m
		}
		return reducer.RetryTask{Project: ref, TaskID: task, MaxRetries: budget, By: by, Now: g.now}
	case k < 55:
		task := ""
		if !g.chance(3) {
			task = g.task(p)
		}
		return reducer.AskApproval{Project: ref, TaskID: task, QuestionID: g.fresh("Q"), Question: "may I?",
			Deadline: g.now + int64(1+g.r.IntN(1000)), By: by, Now: g.now}
	case k < 85:
		id := "no-such-question"
		if len(pendingQ) > 0 && !g.chance(6) {
			id = pick(g, pendingQ)
		}
		outcome := pick(g, []reducer.ApprovalOutcome{reducer.ApprovalYes, reducer.ApprovalYes, reducer.ApprovalNo,
			reducer.ApprovalExpired, reducer.ApprovalFailed, reducer.ApprovalWithdrawn, reducer.ApprovalPending})
		return reducer.DecideApproval{Project: ref, QuestionID: id, Outcome: outcome, By: by, Now: g.now}
	case k < 90:
		return reducer.ExpireApprovals{Project: ref, Grace: int64(g.r.IntN(500)), Now: g.now}
	case k < 95:
		return reducer.ReleaseProject{Project: ref, By: by, Now: g.now}
	}
	return reducer.ArchiveProject{Project: ref, By: by, Now: g.now}
}

func hasStartable(p *reducer.Project) bool {
	return slices.ContainsFunc(p.Tasks(), func(t *reducer.Task) bool {
		return t.Status == reducer.TaskReady || t.Status == reducer.TaskStale
	})
}

func hasLiveRun(p *reducer.Project) bool {
	return slices.ContainsFunc(p.Runs(), func(r *reducer.Run) bool { return r.Status == reducer.RunRunning })
}

func (g *gen) createProject(ps []*reducer.Project) reducer.Command {
	id := g.fresh("P")
	if len(ps) > 0 && g.chance(20) {
		id = pick(g, ps).ID
	}
	g.pIDs = append(g.pIDs, id)
	name := pick(g, projectNames)
	switch {
	case g.chance(20):
		name = ""
	case g.chance(20):
		name = "tab\there"
	case g.chance(20):
		name = strings.Repeat("x", 201)
	}
	ws := "/work/" + name
	if g.chance(20) {
		ws = "work/relative"
	}
	return reducer.CreateProject{ProjectID: id, Name: name, Workspace: ws, Now: g.now}
}

func (g *gen) task(p *reducer.Project) string {
	ts := p.Tasks()
	if len(ts) == 0 || g.chance(40) {
		return "no-such-task"
	}
	return pick(g, ts).ID
}

func (g *gen) run(p *reducer.Project) string {
	rs := p.Runs()
	if len(rs) == 0 || g.chance(40) {
		return "no-such-run"
	}
	if !g.chance(4) {
		var live []*reducer.Run
		for _, r := range rs {
			if r.Status == reducer.RunRunning {
				live = append(live, r)
			}
		}
		if len(live) > 0 {
			return pick(g, live).ID
		}
	}
	return pick(g, rs).ID
}

func (g *gen) addTask(p *reducer.Project, ref string) reducer.Command {
	id := g.fresh("T")
	if len(p.Tasks()) > 0 && g.chance(30) {
		id = g.task(p)
	}
	var deps []string
	for range g.r.IntN(3) {
		if len(p.Tasks()) > 0 {
			deps = append(deps, pick(g, p.Tasks()).ID)
		}
	}
	if g.chance(30) {
		deps = append(deps, "no-such-task")
	}
	title := "task " + id
	if g.chance(30) {
		title = ""
	}
	return reducer.AddTask{Project: ref, TaskID: id, Title: title, DependsOn: deps, MaxRetries: uint32(g.r.IntN(3)), Now: g.now}
}

var allTaskStatuses = []reducer.TaskStatus{
	reducer.TaskPending, reducer.TaskReady, reducer.TaskRunning, reducer.TaskBlocked,
	reducer.TaskDone, reducer.TaskFailed, reducer.TaskStale,
}

func (g *gen) updateTask(p *reducer.Project, ref string) reducer.Command {
	c := reducer.UpdateTask{Project: ref, TaskID: g.task(p), Status: pick(g, allTaskStatuses), Now: g.now}
	if t, ok := p.Task(c.TaskID); ok && !g.chance(4) {
		// Mostly the moves the table allows, and the same status.
		c.Status = pick(g, []reducer.TaskStatus{reducer.TaskBlocked, reducer.TaskReady, reducer.TaskDone, reducer.TaskFailed, t.Status})
		if !t.Status.Final() && t.Status != reducer.TaskRunning && c.Status == reducer.TaskFailed && !g.chance(3) {
			c.Status = reducer.TaskBlocked // failing is final: keep it rarer
		}
	}
	if g.chance(3) {
		progress := g.fresh("note ")
		c.Progress = &progress
	}
	return c
}

func (g *gen) startRun(p *reducer.Project, ref string) reducer.Command {
	task := g.task(p)
	if !g.chance(4) {
		var startable []*reducer.Task
		for _, t := range p.Tasks() {
			if t.Status == reducer.TaskReady || t.Status == reducer.TaskStale {
				startable = append(startable, t)
			}
		}
		if len(startable) > 0 {
			task = pick(g, startable).ID
		}
	}
	id := g.fresh("R")
	if len(p.Runs()) > 0 && g.chance(30) {
		id = pick(g, p.Runs()).ID
	}
	agent := "agent"
	if g.chance(40) {
		agent = ""
	}
	return reducer.StartRun{Project: ref, TaskID: task, RunID: id, Agent: agent, Now: g.now}
}

func (g *gen) heartbeat(p *reducer.Project, ref string) reducer.Command {
	c := reducer.RecordHeartbeat{Project: ref, Now: g.now}
	switch g.r.IntN(5) {
	case 0, 1:
		c.RunID = g.run(p)
		if r, ok := p.Run(c.RunID); ok && g.chance(2) {
			c.TaskID = r.TaskID
		}
		if g.chance(8) {
			c.TaskID = g.task(p)
		}
	case 2, 3:
		c.TaskID = g.task(p)
	}
	return c
}

// projectRef is the project a command names, "" for CreateProject.
func projectRef(c reducer.Command) string {
	switch c := c.(type) {
	case reducer.AddTask:
		return c.Project
	case reducer.UpdateTask:
		return c.Project
	case reducer.StartRun:
		return c.Project
	case reducer.ProgressRun:
		return c.Project
	case reducer.FinishRun:
		return c.Project
	case reducer.RecordHeartbeat:
		return c.Project
	case reducer.MarkStale:
		return c.Project
	case reducer.ExpireApprovals:
		return c.Project
	case reducer.RetryTask:
		return c.Project
	case reducer.AskApproval:
		return c.Project
	case reducer.DecideApproval:
		return c.Project
	case reducer.ReleaseProject:
		return c.Project
	case reducer.ArchiveProject:
		return c.Project
	}
	return ""
}

// propStats proves the generator reaches what the properties are about.
type propStats struct {
	accepted, refused, commits, rollbacks int
	kinds                                 map[string]int
	taskStatuses                          map[reducer.TaskStatus]int
	refusals                              map[error]int
}

type frozenProject struct {
	p    *reducer.Project
	hash uint64
}

func TestPropertyReplayCopyOnWriteInvariants(t *testing.T) {
	st := &propStats{kinds: map[string]int{}, taskStatuses: map[reducer.TaskStatus]int{}, refusals: map[error]int{}}
	// Odd seeds evolve each batch with a Fold, as the ledger does; even
	// seeds event by event with Evolve. Both must keep every property.
	for seed := uint64(1); seed <= propSequences; seed++ {
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSequence(t, seed, seed%2 == 1, st) }) {
			break // the first failing seed is enough to debug
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("accepted %d, refused %d, commits %d, rollbacks %d", st.accepted, st.refused, st.commits, st.rollbacks)
	assert.Greater(t, st.accepted, st.refused, "the generator makes mostly valid commands")
	assert.Greater(t, st.commits, propSequences)
	assert.Greater(t, st.rollbacks, propSequences/2)
	for _, k := range []string{
		reducer.KindProjectCreated, reducer.KindTaskAdded, reducer.KindTaskUpdated, reducer.KindRunStarted,
		reducer.KindRunProgress, reducer.KindRunFinished, reducer.KindRunStale, reducer.KindHeartbeat,
		reducer.KindTaskRetried, reducer.KindApprovalAsked, reducer.KindApprovalDecided,
		reducer.KindProjectReleased, reducer.KindProjectArchived,
	} {
		assert.Positive(t, st.kinds[k], "no %s event was generated", k)
	}
	for _, s := range allTaskStatuses {
		assert.Positive(t, st.taskStatuses[s], "no task reached %s", s)
	}
	for _, e := range sentinels {
		assert.Positive(t, st.refusals[e], "no refusal with %v", e)
	}
}

// runSequence runs one random sequence of batches; folded evolves each
// batch with a Fold of its own.
func runSequence(t *testing.T, seed uint64, folded bool, st *propStats) {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0x5c5)), now: 1_000_000}
	refs := func() []string { return append(slices.Clone(projectNames), g.pIDs...) }

	var kept, batch []reducer.Event
	var seq uint64
	committed := newWorld()
	var work *world // the batch's working versions
	begin := func() {
		work = committed.clone()
		if folded {
			work.fold = reducer.NewFold()
		}
	}
	begin()
	var frozen []frozenProject
	isFrozen := map[*reducer.Project]bool{}
	// hashes caches each project's hash; fresh says which entries no event
	// has made stale yet.
	hashes := map[string]uint64{}
	fresh := map[string]bool{}

	for step := range propSteps {
		ps := work.all()
		c := g.command(ps)
		where := func() string { return fmt.Sprintf("seed %d step %d: %#v", seed, step, c) }

		// (c) A refused command changes nothing.
		nProjects := len(ps)
		target, hadTarget := work.project(projectRef(c))
		var finals []*reducer.Task // copies of the final tasks before the command
		if hadTarget {
			if !fresh[target.ID] {
				hashes[target.ID] = hashProject(target)
				fresh[target.ID] = true
			}
			for _, tk := range target.Tasks() {
				if tk.Status.Final() {
					cp := *tk
					finals = append(finals, &cp)
				}
			}
		}
		evs, err := work.decide(c)
		if n := len(work.projects); n != nProjects {
			require.Equal(t, nProjects, n, "Decide added or removed a project; %s", where())
		}
		if hadTarget {
			if p, _ := work.project(target.ID); p != target {
				require.FailNow(t, "Decide replaced the project", where())
			}
			// Decide must not change the project, whatever it decides.
			// Checked on refusals here; for accepted commands every row
			// of TestTransitions checks it, and a change would also show
			// up in the replay check below.
			if err != nil {
				if hashProject(target) != hashes[target.ID] {
					require.FailNow(t, "Decide changed the project", "refused with %v; %s", err, where())
				}
			}
		}
		if err != nil {
			st.refused++
			i := slices.IndexFunc(sentinels, func(s error) bool { return errors.Is(err, s) })
			if i < 0 || len(evs) > 0 {
				require.FailNow(t, "refusal without a sentinel error, or with events", "%v, %v; %s", err, evs, where())
			}
			st.refusals[sentinels[i]]++
			continue
		}
		st.accepted++

		touched := map[string]bool{}
		for _, e := range evs {
			seq++
			e.Sequence = seq
			before := work.projects[e.ProjectID]
			// A Fold may change in place what it made itself in this
			// batch, but never a version it was given.
			pure := !folded || before == committed.projects[e.ProjectID]
			var h uint64
			if before != nil && pure {
				h = hashProject(before)
			}
			if after := work.evolve(e); after == before && pure {
				require.FailNow(t, "Evolve returned the project it was given", where())
			}
			if before != nil && pure && hashProject(before) != h {
				require.FailNow(t, "Evolve changed the project it was given", where())
			}
			batch = append(batch, e)
			touched[e.ProjectID] = true
			st.kinds[e.Body.Kind()]++
		}
		for id := range touched {
			fresh[id] = false
			p, ok := work.project(id)
			if !ok {
				require.FailNow(t, "event for a project the world does not have", where())
			}
			// (d) invariants.
			if bad := invariants(p); len(bad) > 0 {
				require.Empty(t, bad, "invariants of project %s; %s", id, where())
			}
			for _, tk := range p.Tasks() {
				st.taskStatuses[tk.Status]++
			}
		}
		// (d) done and failed are final, but for the owner's retry of a
		// failed task.
		if hadTarget {
			after, _ := work.project(target.ID)
			_, retry := c.(reducer.RetryTask)
			for _, was := range finals {
				if now, _ := after.Task(was.ID); now.Status != was.Status && !(retry && was.Status == reducer.TaskFailed) {
					require.Equal(t, was.Status, now.Status, "final task %s changed; %s", was.ID, where())
				}
			}
		}

		switch x := g.r.IntN(100); {
		case x < 12: // commit the batch
			st.commits++
			for id, p := range work.projects {
				// (b) record every committed version, to check at the
				// end that it never changed.
				if committed.projects[id] != p && !isFrozen[p] {
					isFrozen[p] = true
					frozen = append(frozen, frozenProject{p, hashProject(p)})
				}
			}
			committed = work
			begin()
			kept = append(kept, batch...)
			batch = nil
		case x < 16: // roll back the batch
			st.rollbacks++
			begin()
			batch = nil
			clear(fresh)
			// Names and IDs resolve to the committed projects, and to
			// nothing else: names of rolled-back projects are free again.
			for _, r := range refs() {
				got, ok := work.project(r)
				want := committed.projects[r]
				for _, p := range committed.projects {
					if p.Name == r {
						want = p
					}
				}
				if ok != (want != nil) || (ok && got != want) {
					require.FailNow(t, "a rollback left a wrong name or ID", "%q resolves to %v; %s", r, got, where())
				}
			}
		}
	}

	// (a) Replaying the kept events from scratch, with or without
	// snapshots, gives the incrementally evolved state.
	all := append(slices.Clone(kept), batch...)
	want := stateText(work, refs())
	if got := stateText(fold(t, all, 0), refs()); got != want {
		assert.Equal(t, want, got, "replay; seed %d", seed)
	}
	every := 1 + int(seed%4)
	if got := stateText(fold(t, all, every), refs()); got != want {
		assert.Equal(t, want, got, "replay through a snapshot every %d events; seed %d", every, seed)
	}

	// (b) No committed version changed afterwards.
	for _, f := range frozen {
		assert.Equal(t, f.hash, hashProject(f.p), "committed project %s changed; seed %d", f.p.ID, seed)
		// Tasks and runs are append-only: those added since must not be
		// found in the older version's indexes.
		cur, _ := work.project(f.p.ID)
		for _, tk := range cur.Tasks()[len(f.p.Tasks()):] {
			_, found := f.p.Task(tk.ID)
			assert.False(t, found, "committed project %s finds later task %s; seed %d", f.p.ID, tk.ID, seed)
		}
		for _, r := range cur.Runs()[len(f.p.Runs()):] {
			_, found := f.p.Run(r.ID)
			assert.False(t, found, "committed project %s finds later run %s; seed %d", f.p.ID, r.ID, seed)
		}
	}
}

// resolveAll maps each ref to the project ID it resolves to, "" for none.
func resolveAll(s *world, refs []string) map[string]string {
	m := map[string]string{}
	for _, p := range s.all() {
		refs = append(refs, p.Name, p.ID)
	}
	for _, r := range refs {
		m[r] = ""
		if p, ok := s.project(r); ok {
			m[r] = p.ID
		}
	}
	return m
}

// invariants returns what is wrong with project p, which must hold after
// any accepted command: each running run's task is running with that run,
// as many runs run as tasks do, a task's dependencies are earlier tasks
// and are all done exactly when it is ready, running or stale (never when
// pending), retries stay within max_retries+1 and equal the task's failed
// and stale runs, attempts number the task's runs from one, and phase and
// status follow SPEC section 3.
func invariants(p *reducer.Project) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	runningRuns, runningTasks := 0, 0
	runsOf := map[string][]*reducer.Run{}
	for _, r := range p.Runs() {
		if got, ok := p.Run(r.ID); !ok || got != r {
			fail("run %s is not indexed", r.ID)
		}
		tk, ok := p.Task(r.TaskID)
		if !ok {
			fail("run %s of unknown task %s", r.ID, r.TaskID)
			continue
		}
		runsOf[r.TaskID] = append(runsOf[r.TaskID], r)
		if r.Status == reducer.RunRunning {
			runningRuns++
			if tk.Status != reducer.TaskRunning || tk.RunID != r.ID {
				fail("run %s is running but its task %s is %s with run %q", r.ID, tk.ID, tk.Status, tk.RunID)
			}
		}
	}
	status := map[string]reducer.TaskStatus{}
	for i, tk := range p.Tasks() {
		if got, ok := p.Task(tk.ID); !ok || got != tk {
			fail("task %s is not indexed", tk.ID)
		}
		depsDone := true
		for _, d := range tk.DependsOn {
			s, ok := status[d]
			if !ok {
				fail("task %d (%s) depends on %s, which is not an earlier task", i, tk.ID, d)
			}
			depsDone = depsDone && s == reducer.TaskDone
		}
		status[tk.ID] = tk.Status

		if tk.Status == reducer.TaskRunning {
			runningTasks++
			if r, ok := p.Run(tk.RunID); !ok || r.Status != reducer.RunRunning || r.TaskID != tk.ID {
				fail("task %s is running without a running run (%q)", tk.ID, tk.RunID)
			}
		} else if tk.RunID != "" {
			fail("task %s is %s with run %s", tk.ID, tk.Status, tk.RunID)
		}
		switch tk.Status {
		case reducer.TaskPending:
			if depsDone {
				fail("task %s is pending with every dependency done", tk.ID)
			}
		case reducer.TaskReady, reducer.TaskRunning, reducer.TaskStale:
			if !depsDone {
				fail("task %s is %s with a dependency not done", tk.ID, tk.Status)
			}
		}
		if tk.Retries > tk.MaxRetries+1 {
			fail("task %s spent %d retries of %d", tk.ID, tk.Retries, tk.MaxRetries)
		}
		if tk.Retries > tk.MaxRetries && tk.Status != reducer.TaskFailed {
			fail("task %s spent its %d retries and is %s", tk.ID, tk.MaxRetries, tk.Status)
		}
		runs := runsOf[tk.ID]
		if int(tk.Attempts) != len(runs) {
			fail("task %s has %d attempts and %d runs", tk.ID, tk.Attempts, len(runs))
		}
		var spent uint32
		for j, r := range runs {
			if r.Attempt != uint32(j+1) {
				fail("run %s is attempt %d, want %d", r.ID, r.Attempt, j+1)
			}
			if r.Status == reducer.RunFailed || r.Status == reducer.RunStale {
				spent++
			}
		}
		if spent < tk.Retries {
			fail("task %s has %d retries and only %d failed or stale runs", tk.ID, tk.Retries, spent)
		}
		if tk.Approval != "" {
			a, ok := p.Approval(tk.Approval)
			if !ok || a.Outcome != reducer.ApprovalPending || a.TaskID != tk.ID {
				fail("task %s is gated by %s, which is not its pending approval", tk.ID, tk.Approval)
			}
		}
	}
	if runningRuns != runningTasks {
		fail("%d runs running, %d tasks running", runningRuns, runningTasks)
	}
	pending := 0
	for _, a := range p.Approvals() {
		if a.Outcome == reducer.ApprovalPending {
			pending++
			if tk, ok := p.Task(a.TaskID); a.TaskID != "" && (!ok || tk.Approval != a.ID) {
				fail("approval %s is pending, but its task %s is not gated by it", a.ID, a.TaskID)
			}
		}
	}
	if pending != p.PendingApprovals() {
		fail("%d approvals pending, the count says %d", pending, p.PendingApprovals())
	}
	if got, want := p.Phase(), naivePhase(p); got != want {
		fail("phase %s, want %s", got, want)
	}
	if got, want := p.Status(), naiveStatus(p); got != want {
		fail("status %s, want %s", got, want)
	}
	return bad
}

// naivePhase and naiveStatus restate SPEC section 3 by counting, as the
// model the reducer's derivations are checked against.
func naivePhase(p *reducer.Project) reducer.Phase {
	ts, rs := p.Tasks(), p.Runs()
	done := 0
	for _, t := range ts {
		if t.Status == reducer.TaskDone {
			done++
		}
	}
	live := slices.ContainsFunc(rs, func(r *reducer.Run) bool { return r.Status == reducer.RunRunning })
	switch {
	case p.Archived:
		return reducer.PhaseReporting
	case p.Released:
		return reducer.PhaseProduction
	case len(ts) == 0:
		return reducer.PhaseDiscovery
	case done == len(ts):
		return reducer.PhaseStaging
	case live:
		return reducer.PhaseImplementation
	case len(rs) == 0:
		return reducer.PhasePlanning
	}
	return reducer.PhaseVerification
}

func naiveStatus(p *reducer.Project) reducer.ProjectStatus {
	ts := p.Tasks()
	has := func(ss ...reducer.TaskStatus) bool {
		return slices.ContainsFunc(ts, func(t *reducer.Task) bool { return slices.Contains(ss, t.Status) })
	}
	allDone := !slices.ContainsFunc(ts, func(t *reducer.Task) bool { return t.Status != reducer.TaskDone })
	waiting := slices.ContainsFunc(p.Approvals(), func(a *reducer.Approval) bool { return a.Outcome == reducer.ApprovalPending })
	switch {
	case p.Archived:
		return reducer.ProjectArchived
	case has(reducer.TaskFailed):
		return reducer.ProjectFailed
	case waiting:
		return reducer.ProjectWaitingApproval
	case len(ts) > 0 && allDone:
		return reducer.ProjectCompleted
	case len(ts) > 0 && !has(reducer.TaskReady, reducer.TaskRunning, reducer.TaskStale):
		return reducer.ProjectBlocked
	}
	return reducer.ProjectActive
}

// appendFingerprint appends a line-per-entity text of every field of a
// project, its tasks and its runs, fast enough for every step. The derived
// values (Phase, Status, DoneCount, Evidence) are left to invariants and
// to the dumps of the replay check.
func appendFingerprint(b []byte, p *reducer.Project) []byte {
	num := func(b []byte, ns ...int64) []byte {
		for _, n := range ns {
			b = strconv.AppendInt(append(b, ' '), n, 10)
		}
		return b
	}
	str := func(b []byte, ss ...string) []byte {
		for _, s := range ss {
			b = append(append(b, '\x1f'), s...)
		}
		return b
	}
	opt := func(b []byte, s *string) []byte {
		if s == nil {
			return append(b, " <nil>"...)
		}
		return str(b, *s)
	}
	b = str(b, "project", p.ID, p.Name, p.Workspace, strconv.FormatBool(p.Released), strconv.FormatBool(p.Archived))
	b = num(b, p.Created, p.Updated, p.LastHeartbeat, int64(p.LastSequence))
	b = append(b, '\n')
	for _, a := range p.Approvals() {
		b = str(b, "approval", a.ID, a.TaskID, a.Question, a.AskedBy, string(a.Outcome), a.DecidedBy)
		b = num(b, a.Asked, a.Deadline, int64(a.AskedSeq), a.Decided, int64(a.DecidedSeq))
		b = append(b, '\n')
	}
	for _, t := range p.Tasks() {
		b = str(b, "task", t.ID, t.Title, string(t.Status), t.RunID, t.Approval)
		b = str(b, t.DependsOn...)
		b = num(b, int64(len(t.DependsOn)), int64(t.Retries), int64(t.MaxRetries), t.LastHeartbeat, int64(t.Attempts))
		b = append(opt(b, t.Progress), '\n')
	}
	for _, r := range p.Runs() {
		b = str(b, "run", r.ID, r.TaskID, r.Agent, string(r.Status))
		b = num(b, int64(r.Attempt), r.Started, r.Updated, r.LastHeartbeat)
		b = append(opt(b, r.Progress), '\n')
	}
	return b
}

var hashSeed = maphash.MakeSeed()

// hashProject hashes what appendFingerprint writes, without building the
// text: the step loop runs it tens of thousands of times under -race.
func hashProject(p *reducer.Project) uint64 {
	var h uint64
	num := func(ns ...int64) {
		for _, n := range ns {
			h = bits.RotateLeft64(h^uint64(n), 31) * 0x9e3779b97f4a7c15
		}
	}
	str := func(ss ...string) {
		for _, s := range ss {
			num(int64(maphash.String(hashSeed, s)))
		}
	}
	opt := func(s *string) {
		if s == nil {
			num(-1)
		} else {
			str(*s)
		}
	}
	str(p.ID, p.Name, p.Workspace, strconv.FormatBool(p.Released), strconv.FormatBool(p.Archived))
	num(p.Created, p.Updated, p.LastHeartbeat, int64(p.LastSequence), int64(len(p.Tasks())), int64(len(p.Runs())))
	for _, a := range p.Approvals() {
		str(a.ID, a.TaskID, a.Question, a.AskedBy, string(a.Outcome), a.DecidedBy)
		num(a.Asked, a.Deadline, int64(a.AskedSeq), a.Decided, int64(a.DecidedSeq))
	}
	for _, t := range p.Tasks() {
		str(t.ID, t.Title, string(t.Status), t.RunID, t.Approval)
		str(t.DependsOn...)
		num(int64(len(t.DependsOn)), int64(t.Retries), int64(t.MaxRetries), t.LastHeartbeat, int64(t.Attempts))
		opt(t.Progress)
	}
	for _, r := range p.Runs() {
		str(r.ID, r.TaskID, r.Agent, string(r.Status))
		num(int64(r.Attempt), r.Started, r.Updated, r.LastHeartbeat)
		opt(r.Progress)
	}
	return h
}

// stateText is everything observable of a state as text: every project in
// ID order with its fingerprint, derived values and evidence, then how
// each of refs and each project name resolves.
func stateText(s *world, refs []string) string {
	ps := s.all()
	slices.SortFunc(ps, func(a, b *reducer.Project) int { return strings.Compare(a.ID, b.ID) })
	var b []byte
	for _, p := range ps {
		b = appendFingerprint(b, p)
		b = append(b, "derived "+string(p.Phase())+" "+string(p.Status())+" "+strconv.Itoa(p.DoneCount())+"\n"...)
		for _, e := range reducer.Evidence(p) {
			b = append(b, "evidence "+e+"\n"...)
		}
	}
	res := resolveAll(s, refs)
	for _, r := range slices.Sorted(maps.Keys(res)) {
		b = append(b, "resolve "+r+" "+res[r]+"\n"...)
	}
	return string(b)
}
