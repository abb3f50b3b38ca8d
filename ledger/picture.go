package ledger

import (
	"context"
	"fmt"

	"scv/ledger/driver"
	"scv/reducer"
)

// Picture is a project as the ledger stood after a sequence, with its
// stored events up to there: what a drawing of it needs (scv project
// graph and timeline, the HTML report).
type Picture struct {
	Project *reducer.Project
	// Events are the project's events up to Seq, from the archive and
	// the live tail, in sequence order; those that compaction dropped
	// are missing.
	Events []Row
	// Seq is the sequence the picture stands at.
	Seq uint64
}

// PictureAt reads, in one committed state of drv, the project (by ID or
// name) as ProjectAt derives it after sequence seq, and its events up to
// seq. The errors are ProjectAt's: ErrBeyondHead past the newest event,
// reducer.ErrNotFound for a project unknown or not yet created.
func PictureAt(ctx context.Context, drv driver.Driver, project string, seq uint64) (*Picture, error) {
	return picture(ctx, drv, project, seq, false)
}

// PictureNow is PictureAt at the ledger's head: after its newest event.
func PictureNow(ctx context.Context, drv driver.Driver, project string) (*Picture, error) {
	return picture(ctx, drv, project, 0, true)
}

func picture(ctx context.Context, drv driver.Driver, project string, seq uint64, atHead bool) (*Picture, error) {
	var pic Picture
	err := drv.Read(ctx, func(r driver.Reader) error {
		p, f, seq, err := stateAt(ctx, r, project, seq, atHead)
		if err != nil {
			return err
		}
		pic = Picture{Project: p, Seq: seq}
		return r.History(ctx, f.ID, 0, seq, func(e driver.Event) error {
			pic.Events = append(pic.Events, Row(e))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("picture: %w", err)
	}
	return &pic, nil
}
