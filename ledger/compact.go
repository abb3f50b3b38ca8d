package ledger

import (
	"context"
	"crypto/sha256"
	"fmt"

	"scv/ledger/driver"
	"scv/reducer"
)

// Compaction is what Compact did.
type Compaction struct {
	ProjectID string
	// Sequence is S: the project's events up to and including it now live
	// in its snapshot and the archive. Zero when nothing was compacted.
	Sequence uint64
	// Archived is how many events left the live tail.
	Archived int
	// Live is how many of the project's events remain in the live tail.
	Live int
}

// CompactOptions say how Compact compacts.
type CompactOptions struct {
	// Retain is how many of the newest events stay live.
	Retain int
	// Drop deletes the compacted events instead of archiving them: the
	// operator's choice. The snapshot then stands for them; the chain from
	// it on still verifies, but what the dropped events said is proven
	// only by the snapshot's recorded state hash.
	Drop bool
	// Fence, when set, must still be held inside the transaction, or
	// nothing is compacted (ErrLeaseLost): automatic compaction is the
	// lease holder's job.
	Fence *Lease
}

// Compact folds a project's live events into a snapshot, keeping its
// Retain newest events live, and moves the rest to the archive (or drops
// them), all in one write transaction: the snapshot (the reducer's state
// at S, its format version, the chain head at S and the state's SHA-256),
// the archive copy, and the delete the schema allows only because the
// snapshot covers it. Reads of the project's state and events give the
// same answers before and after.
func (l *Ledger) Compact(ctx context.Context, project string, opts CompactOptions) (Compaction, error) {
	var c Compaction
	err := l.exclusive(ctx, func(ctx context.Context, tx driver.Tx) error {
		if f := opts.Fence; f != nil {
			now, err := l.now(ctx)
			if err != nil {
				return err
			}
			held, err := tx.LeaseHeld(ctx, f.Name, f.Holder, f.Term, now)
			if err != nil {
				return err
			}
			if !held {
				return fmt.Errorf("%w: %s no longer holds lease %s of term %d", ErrLeaseLost, f.Holder, f.Name, f.Term)
			}
		}
		row, ok, err := tx.Project(ctx, project)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: project %q", reducer.ErrNotFound, project)
		}
		c.ProjectID, c.Live = row.ID, row.Live
		if opts.Retain < 0 || row.Live <= opts.Retain {
			return nil
		}
		s, ok, err := tx.LiveAt(ctx, row.ID, row.Live-opts.Retain-1)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: project %s has fewer live events than its row counts (%d)", ErrStorage, row.ID, row.Live)
		}
		at, err := rebuild(ctx, tx, nil, row.ID, s)
		if err != nil {
			return err
		}
		snap, err := reducer.Snapshot(at)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(snap)
		if err := tx.InsertSnapshot(ctx, driver.Snapshot{ProjectID: row.ID, Sequence: s, Version: reducer.SnapshotVersion,
			State: snap, ChainHead: at.ChainHead, StateHash: sum[:]}); err != nil {
			return err
		}
		if err := l.fail.Hit(FailSnapshot); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if !opts.Drop {
			if _, err := tx.Archive(ctx, row.ID, s); err != nil {
				return err
			}
			if err := l.fail.Hit(FailCompactArchive); err != nil {
				return fmt.Errorf("%w: %w", ErrStorage, err)
			}
		}
		n, err := tx.DeleteLive(ctx, row.ID, s)
		if err != nil {
			return err
		}
		row.Live -= n
		if err := tx.UpdateProject(ctx, row, -n); err != nil {
			return err
		}
		if err := l.fail.Hit(FailCompactDelete); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		c.Sequence, c.Archived, c.Live = s, n, row.Live
		return nil
	})
	if err == nil && c.Sequence > 0 {
		l.metrics.Compacted()
	}
	return c, err
}

// CompactDue returns the projects whose live tail holds more than
// threshold events.
func (l *Ledger) CompactDue(ctx context.Context, threshold int) ([]string, error) {
	var ids []string
	err := l.drv.Read(ctx, func(r driver.Reader) error {
		rows, err := r.Projects(ctx, driver.ProjectFilter{LiveOver: threshold})
		for _, row := range rows {
			ids = append(ids, row.ID)
		}
		return err
	})
	return ids, readError(err)
}
