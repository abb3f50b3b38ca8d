package reducer

import (
	"fmt"
	"math/bits"
	"strings"
)

// MaxCausesNamed is how many root causes one evidence note names; a task
// held by more says how many more there are.
const MaxCausesNamed = 3

// Evidence returns the human-readable notes of a project report: how far
// the tasks are, what the runs did, each epic with its children's
// progress ("epic E (release): 2/5 children done, 1 running"), each task
// found during a run ("task T (x) was found during run R of task U (y)"),
// and one note for every task that cannot progress. An epic failed,
// blocked or stale with its children is a root cause that names its
// first child of that status. A task that is failed, blocked or stale is a root
// cause, and its note says why, with the event that shows it (and, for a
// failure, whether its last run finished failed or went silent). A
// pending task that waits, directly or through other tasks, on root
// causes names each of them (up to MaxCausesNamed, then how many more),
// with its event and the dependency through which the task waits on it,
// never the whole path.
//
// The causes of every task are found in one pass in task order (a task's
// dependencies always come before it), each task's set of causes built
// from its dependencies' sets, which are shared, not copied, when one
// dependency holds them all. So the work is linear in tasks plus
// dependencies (times the number of root causes over 64 where several
// branches meet), and each note is bounded: a chain of 5,000 tasks behind
// one failed task gives 4,999 notes of one cause each.
func Evidence(p *Project) []string {
	tasks, runs := p.Tasks(), p.Runs()
	notes := []string{fmt.Sprintf("%d/%d tasks done", p.DoneCount(), len(tasks))}
	counts := map[RunStatus]int{}
	lastRun := map[string]*Run{} // task ID -> its latest run
	for _, r := range runs {
		counts[r.Status]++
		lastRun[r.TaskID] = r
	}
	if len(runs) > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d running, %d succeeded, %d failed, %d cancelled, %d stale",
			plural(len(runs), "run"), counts[RunRunning], counts[RunSucceeded], counts[RunFailed], counts[RunCancelled], counts[RunStale]))
	}

	notes = append(notes, p.planNotes(tasks)...)

	var roots []*Task // the root causes, in task order
	sets := make([]*causeSet, len(tasks))
	for i, t := range tasks {
		switch {
		case t.Epic() && (t.Status == TaskFailed || t.Status == TaskBlocked || t.Status == TaskStale):
			sets[i] = singleCause(len(roots))
			roots = append(roots, t)
			notes = append(notes, fmt.Sprintf("epic %s (%s) cannot progress: %s [event %d]", t.ID, t.Title, p.epicCause(t), t.Since))
		case t.Status == TaskFailed || t.Status == TaskBlocked || t.Status == TaskStale:
			sets[i] = singleCause(len(roots))
			roots = append(roots, t)
			notes = append(notes, fmt.Sprintf("task %s (%s) cannot progress: %s [event %d]", t.ID, t.Title, rootCause(t, lastRun[t.ID]), t.Since))
		case t.Approval != "":
			a, _ := p.Approval(t.Approval)
			sets[i] = singleCause(len(roots))
			roots = append(roots, t)
			notes = append(notes, fmt.Sprintf("task %s (%s) cannot progress: it waits for the owner's answer to approval %s (%q) [event %d]",
				t.ID, t.Title, a.ID, a.Question, a.AskedSeq))
		case t.Status == TaskPending:
			if sets[i] = p.causesOf(t, sets); sets[i] != nil {
				notes = append(notes, fmt.Sprintf("task %s (%s) cannot progress: %s", t.ID, t.Title, p.heldBy(t, tasks, sets, roots)))
			}
		}
	}
	return append(notes, p.approvalNotes()...)
}

// planNotes is a note per epic, with its children's progress ("epic E
// (release): 2/5 children done, 1 running"), and a note per task found
// during a run, naming the run and its task.
func (p *Project) planNotes(tasks []*Task) []string {
	var epics, found []string
	for _, t := range tasks {
		if t.Epic() {
			note := fmt.Sprintf("epic %s (%s): %d/%d children done", t.ID, t.Title, t.kids[statusIndex(TaskDone)], t.Children)
			for _, s := range []TaskStatus{TaskRunning, TaskFailed, TaskStale, TaskBlocked} {
				if n := t.kids[statusIndex(s)]; n > 0 {
					note += fmt.Sprintf(", %d %s", n, s)
				}
			}
			epics = append(epics, note)
		}
		if t.DiscoveredFrom != "" {
			note := fmt.Sprintf("task %s (%s) was found during run %s", t.ID, t.Title, t.DiscoveredFrom)
			if r, ok := p.Run(t.DiscoveredFrom); ok {
				note += " of task " + p.taskName(r.TaskID)
			}
			found = append(found, note)
		}
	}
	return append(epics, found...)
}

// epicCause says why epic e, failed, blocked or stale as its children
// are, cannot progress: its first child of that status, in task order.
func (p *Project) epicCause(e *Task) string {
	verb := map[TaskStatus]string{TaskFailed: "failed", TaskBlocked: "is blocked", TaskStale: "went silent"}[e.Status]
	first := -1
	for _, i := range p.childrenOf(e.ID) {
		if p.tasks.Get(i).Status == e.Status && (first < 0 || i < first) {
			first = i
		}
	}
	if first < 0 {
		return "a child " + verb
	}
	return fmt.Sprintf("its child %s %s", p.taskName(p.tasks.Get(first).ID), verb)
}

// approvalNotes is one note per approval, pending first: what was asked,
// of which task, by whom, and what became of it.
func (p *Project) approvalNotes() []string {
	var pending, past []string
	for _, a := range p.Approvals() {
		what := fmt.Sprintf("approval %s (%q)", a.ID, a.Question)
		if a.TaskID != "" {
			if t, ok := p.Task(a.TaskID); ok {
				what += fmt.Sprintf(" of task %s (%s)", t.ID, t.Title)
			}
		}
		if a.AskedBy != "" {
			what += ", asked by " + a.AskedBy
		}
		if a.Outcome == ApprovalPending {
			pending = append(pending, fmt.Sprintf("%s: pending [event %d]", what, a.AskedSeq))
		} else {
			past = append(past, fmt.Sprintf("%s: %s, %s [events %d, %d]", what, a.Outcome, decidedBy(a), a.AskedSeq, a.DecidedSeq))
		}
	}
	return append(pending, past...)
}

// decidedBy says who or what decided a.
func decidedBy(a *Approval) string {
	if a.Outcome == ApprovalYes || a.Outcome == ApprovalNo {
		return "answered by " + a.DecidedBy
	}
	return a.DecidedBy
}

// causeSet is a set of root causes (indices into Evidence's roots) as a
// bit set. Sets are never changed once built, so tasks share them.
type causeSet struct {
	bits []uint64
	n    int // members
}

func singleCause(i int) *causeSet {
	s := &causeSet{bits: make([]uint64, i/64+1), n: 1}
	s.bits[i/64] = 1 << (i % 64)
	return s
}

func (s *causeSet) has(i int) bool { return i/64 < len(s.bits) && s.bits[i/64]&(1<<(i%64)) != 0 }

// members calls f with each member in increasing order until f says stop.
func (s *causeSet) members(f func(i int) bool) {
	for w, word := range s.bits {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			if !f(w*64 + b) {
				return
			}
			word &^= 1 << b
		}
	}
}

// causesOf is the set of root causes that hold the pending task t: the
// union of its unfinished dependencies' sets, or nil when every
// dependency can still progress.
func (p *Project) causesOf(t *Task, sets []*causeSet) *causeSet {
	var first *causeSet
	var union []uint64
	for _, id := range t.DependsOn {
		d, ok := p.taskIdx.Get(id)
		if !ok || sets[d] == nil || sets[d] == first {
			continue
		}
		if first == nil {
			first = sets[d]
			continue
		}
		if union == nil {
			union = append([]uint64(nil), first.bits...)
		}
		for len(union) < len(sets[d].bits) {
			union = append(union, 0)
		}
		for w, word := range sets[d].bits {
			union[w] |= word
		}
	}
	if union == nil {
		return first // one dependency holds every cause: share its set
	}
	n := 0
	for _, word := range union {
		n += bits.OnesCount64(word)
	}
	if n == first.n {
		return first
	}
	return &causeSet{bits: union, n: n}
}

// heldBy says which root causes hold the pending task t and through which
// of its dependencies it waits on each.
func (p *Project) heldBy(t *Task, tasks []*Task, sets []*causeSet, roots []*Task) string {
	i, _ := p.taskIdx.Get(t.ID)
	set := sets[i]
	var parts []string
	set.members(func(i int) bool {
		r := roots[i]
		part := fmt.Sprintf("%s (%s), %s", r.ID, r.Title, p.heldVerb(r))
		for _, id := range t.DependsOn {
			if d, ok := p.taskIdx.Get(id); ok && sets[d] != nil && sets[d].has(i) {
				if id != r.ID {
					dep := tasks[d]
					part += fmt.Sprintf(", through %s (%s)", dep.ID, dep.Title)
				}
				break
			}
		}
		parts = append(parts, part)
		return len(parts) < MaxCausesNamed
	})
	out := "it waits on " + strings.Join(parts, "; on ")
	if more := set.n - len(parts); more > 0 {
		out += fmt.Sprintf("; and on %s", plural(more, "more task that cannot progress"))
	}
	return out
}

// rootCause says why a failed, blocked or stale task cannot progress;
// last is its latest run, if any.
func rootCause(t *Task, last *Run) string {
	switch t.Status {
	case TaskFailed:
		if t.Retries <= t.MaxRetries {
			return "the owner marked it failed"
		}
		why := "it failed after " + plural(int(t.Attempts), "attempt")
		switch {
		case last != nil && last.Status == RunStale:
			why += ": its last run went silent and was marked stale"
		case last != nil && last.Status == RunFailed:
			why += ": its last run finished failed"
		}
		if t.MaxRetries == 0 {
			return why + ", and no retry was allowed"
		}
		return why + fmt.Sprintf(", and its retry budget of %s is spent", plural(int(t.MaxRetries), "retry"))
	case TaskBlocked:
		why := "it is blocked on an external condition"
		if t.Progress != nil && *t.Progress != "" {
			why += fmt.Sprintf(" (%q)", *t.Progress)
		}
		return why
	case TaskStale:
		return "its run went silent and was marked stale; it can be started again"
	}
	panic(fmt.Sprintf("reducer: %s is not a root cause", t.Status))
}

// heldVerb is the short form of a root cause, with its event, for the
// tasks it holds.
func (p *Project) heldVerb(r *Task) string {
	switch r.Status {
	case TaskFailed:
		return fmt.Sprintf("which failed [event %d]", r.Since)
	case TaskBlocked:
		return fmt.Sprintf("which is blocked [event %d]", r.Since)
	case TaskStale:
		return fmt.Sprintf("whose run went silent [event %d]", r.Since)
	}
	a, _ := p.Approval(r.Approval)
	return fmt.Sprintf("which waits for approval %s [event %d]", a.ID, a.AskedSeq)
}

// plural counts noun: "1 run", "2 runs", "1 retry", "3 retries", "1 more
// task that cannot progress", "2 more tasks that cannot progress".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	head, tail, _ := strings.Cut(noun, " that ")
	switch {
	case strings.HasSuffix(head, "y"):
		head = strings.TrimSuffix(head, "y") + "ies"
	default:
		head += "s"
	}
	if tail != "" {
		head += " that " + tail
	}
	return fmt.Sprintf("%d %s", n, head)
}
