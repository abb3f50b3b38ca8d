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
		notes = append(notes, fmt.Sprintf("%d runs: %d running, %d succeeded, %d failed, %d cancelled, %d stale",
			len(p.runs), counts[RunRunning], counts[RunSucceeded], counts[RunFailed], counts[RunCancelled], counts[RunStale]))
	}
	for _, t := range p.tasks {
		switch t.Status {
		case TaskFailed:
			notes = append(notes, fmt.Sprintf("task %s (%s) failed after %d attempts, %d retries of %d allowed",
				t.ID, t.Title, t.Attempts, t.Retries, t.MaxRetries))
		case TaskStale:
			notes = append(notes, fmt.Sprintf("task %s (%s) is stale: its last run stopped reporting", t.ID, t.Title))
		case TaskBlocked:
			notes = append(notes, fmt.Sprintf("task %s (%s) is blocked on an external condition", t.ID, t.Title))
		}
	}
	return notes
}
