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
	// Retain is how many of the newest events stay live, at least: the
	// events appended while the compaction folds stay live too.
	Retain int
	// Drop deletes the compacted events instead of archiving them: the
	// operator's choice. The snapshot then stands for them; the chain from
	// it on still verifies, but what the dropped events said is proven
	// only by the snapshot's recorded state hash.
	Drop bool
	// Fence, when set, must still be held inside the write transaction,
	// or nothing is compacted (ErrLeaseLost): automatic compaction is the
	// lease holder's job. A project with nothing to compact opens no
	// write transaction, and Compact returns no error for it, fence or
	// not.
	Fence *Lease
	// Step is the most events one write transaction takes out of the
	// live tail (0: CompactStep).
	Step int
}

// CompactStep is how many events one step of a compaction takes out of
// the live tail at most. A longer tail is compacted in steps, oldest
// first, each a whole compaction of its own (a snapshot at its S and the
// events up to S moved, in one transaction), so that appends, which wait
// for the writer, wait for one step at a time: about as long as for an
// automatic compaction at the daemon's default --compact-after (10,000),
// instead of for the whole tail. Each step leaves its snapshot.
const CompactStep = 10_000

// Compact folds a project's live events into a snapshot, keeping at least
// its Retain newest events live, and moves the rest to the archive (or
// drops them). The snapshot (the reducer's state at S, its format version,
// the chain head at S and the state's SHA-256), the archive copy, and the
// delete the schema allows only because the snapshot covers it are one
// write transaction. Reads of the project's state and events give the
// same answers before and after.
//
// The state at S is derived before that transaction, in a read of its
// own: the events up to S never change once committed (compaction only
// moves them to the archive, where the fold reads them too), so the state
// at S is the same whenever it is derived, and the writer, which every
// append waits for, is held only to store the snapshot and move the
// events. S is chosen then, from the live tail as it was: the events
// appended meanwhile stay live too. If another compaction has passed S
// by the time the writer is held, nothing is compacted.
//
// A tail of more than Step events to compact is compacted in steps
// (CompactStep), each read and written as above; the Compaction returned
// sums them, and after an error it says what the steps before it did.
func (l *Ledger) Compact(ctx context.Context, project string, opts CompactOptions) (Compaction, error) {
	var total Compaction
	var upTo uint64 // the whole compaction's S, chosen by its first step
	for {
		c, err := l.compactStep(ctx, project, opts, &upTo)
		if c.ProjectID != "" {
			total.ProjectID, total.Live = c.ProjectID, c.Live
		}
		if c.Sequence > 0 {
			total.Sequence, total.Archived = c.Sequence, total.Archived+c.Archived
		}
		if err != nil || c.Sequence == 0 || c.Sequence >= upTo {
			return total, err
		}
	}
}

// compactStep is one step of Compact: it compacts the project up to the
// Step-th oldest live event or *upTo, whichever comes first, and chooses
// *upTo when it is zero.
func (l *Ledger) compactStep(ctx context.Context, project string, opts CompactOptions, upTo *uint64) (Compaction, error) {
	var c Compaction
	if l.isClosed() {
		return c, ErrClosed
	}
	step := opts.Step
	if step <= 0 {
		step = CompactStep
	}
	var sn driver.Snapshot
	err := l.drv.Read(ctx, func(r driver.Reader) error {
		row, ok, err := r.Project(ctx, project)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: project %q", reducer.ErrNotFound, project)
		}
		c.ProjectID, c.Live = row.ID, row.Live
		if *upTo == 0 {
			if opts.Retain < 0 || row.Live <= opts.Retain {
				return nil
			}
			last, ok, err := r.LiveAt(ctx, row.ID, row.Live-opts.Retain-1)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: project %s has fewer live events than its row counts (%d)", ErrStorage, row.ID, row.Live)
			}
			*upTo = last
		}
		s, ok, err := r.LiveAt(ctx, row.ID, step-1)
		if err != nil {
			return err
		}
		if !ok || s > *upTo {
			s = *upTo
		}
		at, err := rebuild(ctx, r, nil, row.ID, s)
		if err != nil {
			return err
		}
		state, err := reducer.Snapshot(at)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(state)
		sn = driver.Snapshot{ProjectID: row.ID, Sequence: s, Version: reducer.SnapshotVersion,
			State: state, ChainHead: at.ChainHead, StateHash: sum[:]}
		return nil
	})
	if err != nil || sn.Sequence == 0 {
		return c, readError(err)
	}
	err = l.exclusive(ctx, func(ctx context.Context, tx driver.Tx) error {
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
		row, ok, err := tx.Project(ctx, c.ProjectID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: project %q", reducer.ErrNotFound, project)
		}
		c.Live = row.Live
		if latest, ok, err := tx.LatestSnapshot(ctx, row.ID, maxSeq); err != nil {
			return err
		} else if ok && latest.Sequence >= sn.Sequence {
			return nil // compacted past S meanwhile
		}
		if err := tx.InsertSnapshot(ctx, sn); err != nil {
			return err
		}
		if err := l.fail.Hit(FailSnapshot); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if !opts.Drop {
			if _, err := tx.Archive(ctx, row.ID, sn.Sequence); err != nil {
				return err
			}
			if err := l.fail.Hit(FailCompactArchive); err != nil {
				return fmt.Errorf("%w: %w", ErrStorage, err)
			}
		}
		n, err := tx.DeleteLive(ctx, row.ID, sn.Sequence)
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
		c.Sequence, c.Archived, c.Live = sn.Sequence, n, row.Live
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
