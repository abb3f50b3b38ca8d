package ledger

import (
	"context"

	"scv/ledger/driver"
)

// Summary is one project's row in a listing: its summary as the
// projects table keeps it, up to date with its last committed event.
type Summary = driver.Project

// Projects lists the projects in creation order from the projects table,
// without loading any: archived ones only when all is set. It reads one
// committed state and never waits for the writer.
func (l *Ledger) Projects(ctx context.Context, all bool) ([]Summary, error) {
	var rows []Summary
	err := l.drv.Read(ctx, func(r driver.Reader) (err error) {
		rows, err = r.Projects(ctx, driver.ProjectFilter{Unarchived: !all})
		return err
	})
	if err != nil {
		return nil, readError(err)
	}
	if rows == nil {
		rows = []Summary{}
	}
	return rows, nil
}
