package ledger

import (
	"context"
	"fmt"

	"scv/ledger/driver"
	"scv/reducer"
)

// ProjectAt derives the state of one project (by ID or name) as the
// ledger knew it after sequence seq: "what did we know then?". It reads
// one committed state of drv, so it works with or without a daemon
// running: the project's latest snapshot at or before seq, if any, then
// its events from the archive and the live tail up to and including seq,
// folded with the same reducer the daemon uses. A seq past the newest
// event is ErrBeyondHead; a project unknown, or not yet created at seq,
// is reducer.ErrNotFound.
func ProjectAt(ctx context.Context, drv driver.Driver, project string, seq uint64) (*reducer.Project, error) {
	var p *reducer.Project
	err := drv.Read(ctx, func(r driver.Reader) error {
		var err error
		p, _, _, err = stateAt(ctx, r, project, seq, false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("project at: %w", err)
	}
	return p, nil
}

// stateAt is ProjectAt within one read, also returning the project's row
// and the sequence the state stands at: seq, or with atHead the reader's
// newest sequence.
func stateAt(ctx context.Context, r driver.Reader, project string, seq uint64, atHead bool) (*reducer.Project, driver.Found, uint64, error) {
	head, _, err := r.LastSequence(ctx)
	if err != nil {
		return nil, driver.Found{}, 0, err
	}
	if atHead {
		seq = head
	}
	if seq > head {
		return nil, driver.Found{}, 0, fmt.Errorf("%w: sequence %d is past the ledger's head, %d", ErrBeyondHead, seq, head)
	}
	f, ok, err := r.Find(ctx, project)
	if err != nil {
		return nil, f, 0, err
	}
	if !ok {
		return nil, f, 0, fmt.Errorf("%w: project %q", reducer.ErrNotFound, project)
	}
	if seq < f.CreatedSeq {
		return nil, f, 0, fmt.Errorf("%w: project %q did not exist yet at sequence %d (created at %d)",
			reducer.ErrNotFound, project, seq, f.CreatedSeq)
	}
	p, err := rebuild(ctx, r, nil, f.ID, seq)
	if err != nil && reducer.IsRefusal(err) {
		return nil, f, 0, fmt.Errorf("%w: project %s: its history up to %d was dropped by compaction", reducer.ErrNotFound, f.ID, seq)
	}
	return p, f, seq, err
}
