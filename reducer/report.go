package reducer

import "fmt"

// Evidence returns the human-readable notes of a project report: how far
// the tasks are, what the runs did, and which tasks need attention.
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
		switch t.Status {
		case TaskFailed:
			notes = append(notes, fmt.Sprintf("task %s (%s) failed after %s, %d retries of %d allowed",
				t.ID, t.Title, plural(int(t.Attempts), "attempt"), t.Retries, t.MaxRetries))
		case TaskStale:
			notes = append(notes, fmt.Sprintf("task %s (%s) is stale: its last run stopped reporting", t.ID, t.Title))
		case TaskBlocked:
			notes = append(notes, fmt.Sprintf("task %s (%s) is blocked on an external condition", t.ID, t.Title))
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
