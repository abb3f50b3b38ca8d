package reducer

import "fmt"

// Evidence returns the human-readable notes of a project report: how far
// the tasks are, what the runs did, and, for every task that cannot
// progress, the root cause (an exhausted retry budget, the owner's
// failure, an external block, a silent run, or a dependency stuck for one
// of those) with the sequences of the events that show it.
func Evidence(p *Project) []string {
	notes := []string{fmt.Sprintf("%d/%d tasks done", p.DoneCount(), len(p.tasks))}
	counts := map[RunStatus]int{}
	for _, r := range p.runs {
		counts[r.Status]++
	}
	if len(p.runs) > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d running, %d succeeded, %d failed, %d cancelled, %d stale",
			plural(len(p.runs), "run"), counts[RunRunning], counts[RunSucceeded], counts[RunFailed], counts[RunCancelled], counts[RunStale]))
	}
	for _, t := range p.tasks {
		if why, seqs, stuck := p.whyStuck(t); stuck {
			notes = append(notes, fmt.Sprintf("task %s (%s) cannot progress: %s %s", t.ID, t.Title, why, eventsNote(seqs)))
		}
	}
	return notes
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// whyStuck says why t cannot progress, and which events show it; stuck is
// false for a task that is done, can start, runs, or waits only on tasks
// that can still progress.
func (p *Project) whyStuck(t *Task) (why string, seqs []uint64, stuck bool) {
	switch t.Status {
	case TaskFailed:
		if t.Retries > t.MaxRetries {
			return fmt.Sprintf("it failed after %s, its retry budget spent (%d retries of %d allowed)",
				plural(int(t.Attempts), "attempt"), t.Retries, t.MaxRetries), []uint64{t.Since}, true
		}
		return "the owner marked it failed", []uint64{t.Since}, true
	case TaskBlocked:
		why = "it is blocked on an external condition"
		if t.Progress != nil && *t.Progress != "" {
			why += fmt.Sprintf(" (%q)", *t.Progress)
		}
		return why, []uint64{t.Since}, true
	case TaskStale:
		return "its run went silent (stale owner); it can be started again", []uint64{t.Since}, true
	case TaskPending:
		for _, id := range t.DependsOn {
			d, ok := p.Task(id)
			if !ok || d.Status == TaskDone {
				continue
			}
			if dwhy, dseqs, dstuck := p.whyStuck(d); dstuck {
				return fmt.Sprintf("it waits on %s (%s), and %s", d.ID, d.Title, dropIt(dwhy)), dseqs, true
			}
		}
	}
	return "", nil, false
}

// dropIt rewords a cause about "it" to follow "and": "it is blocked" → "that is
// blocked".
func dropIt(why string) string {
	if len(why) > 3 && why[:3] == "it " {
		return "that " + why[3:]
	}
	if len(why) > 7 && why[:7] == "its run" {
		return "whose run" + why[7:]
	}
	return why
}

func eventsNote(seqs []uint64) string {
	if len(seqs) == 1 {
		return fmt.Sprintf("[event %d]", seqs[0])
	}
	out := "[events"
	for i, s := range seqs {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf(" %d", s)
	}
	return out + "]"
}
