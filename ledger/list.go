package ledger

import (
	"context"

	"scv/ledger/driver"
	"scv/reducer"
)

// Summary is one project's row in a listing: its summary as the
// projects table keeps it, up to date with its last committed event.
type Summary struct {
	ID, Name, Workspace string
	Status              reducer.ProjectStatus
	Phase               reducer.Phase
	// Tasks, Done and Running count its tasks, those done, and its
	// running runs.
	Tasks, Done, Running int
	// Head is the sequence of its newest event.
	Head uint64
	// CreatedMs, UpdatedMs and HeartbeatMs are in Unix milliseconds;
	// HeartbeatMs is 0 for no heartbeat.
	CreatedMs, UpdatedMs, HeartbeatMs int64
}

// Projects lists the projects in creation order from the projects table,
// without loading any: archived ones only when all is set. It reads one
// committed state and never waits for the writer.
func (l *Ledger) Projects(ctx context.Context, all bool) ([]Summary, error) {
	var rows []driver.Project
	err := l.drv.Read(ctx, func(r driver.Reader) (err error) {
		rows, err = r.Projects(ctx, driver.ProjectFilter{Unarchived: !all})
		return err
	})
	if err != nil {
		return nil, readError(err)
	}
	out := make([]Summary, len(rows))
	for i, r := range rows {
		out[i] = Summary{
			ID: r.ID, Name: r.Name, Workspace: r.Workspace,
			Status: reducer.ProjectStatus(r.Status), Phase: reducer.Phase(r.Phase),
			Tasks: r.Tasks, Done: r.Done, Running: r.Running, Head: r.Head,
			CreatedMs: r.CreatedMs, UpdatedMs: r.UpdatedMs, HeartbeatMs: r.HeartbeatMs,
		}
	}
	return out, nil
}
