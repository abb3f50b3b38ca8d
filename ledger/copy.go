package ledger

import (
	"bytes"
	"context"
	"fmt"

	"scv/ledger/driver"
)

// CopyReport is what Copy moved.
type CopyReport struct {
	Events    int // live and archived
	Archived  int
	Snapshots int
	Projects  int
	// From and To are the verification of each side after the copy: the
	// same chains, heads and sequences.
	From, To *VerifyReport
}

// Copy moves the whole ledger in from (every event, live or archived,
// every snapshot, every project's row) into to, which must hold no
// ledger yet, in one write transaction of to: sequences, timestamps,
// data and hashes unchanged, so that the hash chains continue. Then it
// verifies both and compares them: the copy is good only if every chain
// ends in the same head after the same events. Nothing is written to
// from. progress, if set, is called now and then with the events copied
// and the total.
func Copy(ctx context.Context, from, to driver.Driver, progress func(done, total int)) (CopyReport, error) {
	var rep CopyReport
	tx, err := to.Begin(ctx)
	if err != nil {
		return rep, fmt.Errorf("copy to %s: %w", to.Name(), err)
	}
	defer tx.Rollback()
	last, _, err := tx.LastSequence(ctx)
	if err != nil {
		return rep, fmt.Errorf("copy to %s: %w", to.Name(), err)
	}
	if rows, err := tx.Projects(ctx, driver.ProjectFilter{}); err != nil || last != 0 || len(rows) > 0 {
		if err == nil {
			err = fmt.Errorf("it holds a ledger already (last sequence %d, %d projects): copy only into an empty one", last, len(rows))
		}
		return rep, fmt.Errorf("copy to %s: %w", to.Name(), err)
	}
	err = from.Read(ctx, func(r driver.Reader) error {
		total, err := r.CountHistory(ctx, "")
		if err != nil {
			return err
		}
		const chunk = 4096
		var buf []driver.Event
		flush := func() error {
			if err := tx.Append(ctx, buf); err != nil {
				return err
			}
			rep.Events += len(buf)
			if progress != nil {
				progress(rep.Events, total)
			}
			buf = buf[:0]
			return nil
		}
		if err := r.History(ctx, "", 0, maxSeq, func(e driver.Event) error {
			if e.Archived {
				rep.Archived++
			}
			if buf = append(buf, e); len(buf) == chunk {
				return flush()
			}
			return nil
		}); err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		snaps, err := r.Snapshots(ctx, "")
		if err != nil {
			return err
		}
		for _, s := range snaps {
			if err := tx.InsertSnapshot(ctx, s); err != nil {
				return err
			}
		}
		rep.Snapshots = len(snaps)
		rows, err := r.Projects(ctx, driver.ProjectFilter{})
		if err != nil {
			return err
		}
		if rows == nil {
			return fmt.Errorf("%s has no projects table: open it once with this release's daemon (which migrates it), then copy", from.Name())
		}
		for _, p := range rows {
			ok, err := tx.InsertProject(ctx, p)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("project %s (%s) is in %s twice", p.ID, p.Name, from.Name())
			}
			if err := tx.UpdateProject(ctx, p, p.Live); err != nil {
				return err
			}
		}
		rep.Projects = len(rows)
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("copy %s to %s: %w", from.Name(), to.Name(), err)
	}
	if err := tx.Commit(); err != nil {
		return rep, fmt.Errorf("copy to %s: %w", to.Name(), err)
	}
	if rep.From, err = Verify(ctx, from, VerifyOptions{}); err != nil {
		return rep, err
	}
	if rep.To, err = Verify(ctx, to, VerifyOptions{}); err != nil {
		return rep, err
	}
	if err := sameChains(rep.From, rep.To); err != nil {
		return rep, fmt.Errorf("copy to %s: the copy differs from %s: %w", to.Name(), from.Name(), err)
	}
	return rep, nil
}

// sameChains compares two verify reports chain by chain.
func sameChains(a, b *VerifyReport) error {
	if a.Events != b.Events {
		return fmt.Errorf("%d events, against %d", b.Events, a.Events)
	}
	if len(a.Chains) != len(b.Chains) {
		return fmt.Errorf("%d projects, against %d", len(b.Chains), len(a.Chains))
	}
	for i, c := range a.Chains {
		d := b.Chains[i]
		if c.ProjectID != d.ProjectID || c.Events != d.Events || !bytes.Equal(c.Head, d.Head) || c.From != d.From {
			return fmt.Errorf("project %s: chain of %d events to %x, against %d to %x", c.ProjectID, d.Events, d.Head, c.Events, c.Head)
		}
	}
	return nil
}
