package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"

	"scv/ledger/driver"
	"scv/reducer"
)

// maxSeq is past every sequence (sequences are SQLite and PostgreSQL
// signed 64-bit integers).
const maxSeq = math.MaxInt64

// rebuild is the one way a project's state is built from the database:
// from p (nil for nothing yet), or from the project's latest snapshot at or
// before upTo when that is newer, then every event of its history (archive
// or live tail) after that and up to upTo, folded in order. The daemon
// loads and catches up projects with it (upTo maxSeq), compaction derives
// the state it snapshots, and `--at` the state as of any sequence. A
// history that does not fold (a stored event contradicts the state) is
// ErrStorage naming the event, not a panic: it is the database's fault,
// not the program's.
func rebuild(ctx context.Context, r driver.Reader, p *reducer.Project, id string, upTo uint64) (*reducer.Project, error) {
	sn, ok, err := r.LatestSnapshot(ctx, id, upTo)
	if err != nil {
		return nil, err
	}
	if ok && (p == nil || sn.Sequence > p.LastSequence) {
		if p, err = restore(sn); err != nil {
			return nil, err
		}
	}
	var after uint64
	if p != nil {
		after = p.LastSequence
	}
	f := reducer.NewFold()
	if err := r.History(ctx, id, after, upTo, func(row driver.Event) error {
		e, err := eventOf(row)
		if err == nil {
			p, err = fold(f, p, e)
		}
		if err != nil {
			return fmt.Errorf("%w: project %s, sequence %d: %v", ErrStorage, id, row.Sequence, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w: project %s has no history up to %d", reducer.ErrNotFound, id, upTo)
	}
	return p, nil
}

// restore decodes a stored snapshot, refusing a format this build does not
// read.
func restore(sn driver.Snapshot) (*reducer.Project, error) {
	if !reducer.ReadsSnapshot(sn.Version) {
		return nil, fmt.Errorf("%w: project %s: snapshot at %d has format %d; this build reads %d",
			ErrStorage, sn.ProjectID, sn.Sequence, sn.Version, reducer.SnapshotVersion)
	}
	p, err := reducer.Restore(sn.State)
	if err != nil {
		return nil, fmt.Errorf("%w: project %s: snapshot at %d: %v", ErrStorage, sn.ProjectID, sn.Sequence, err)
	}
	return p, nil
}

// eventOf decodes a stored event.
func eventOf(r driver.Event) (reducer.Event, error) {
	b, err := reducer.DecodeBody(r.Kind, []byte(r.Data))
	if err != nil {
		return reducer.Event{}, fmt.Errorf("event %d: %w", r.Sequence, err)
	}
	return reducer.Event{Sequence: r.Sequence, ProjectID: r.ProjectID, Time: r.TimestampMs, Body: b, Hash: r.Hash}, nil
}

// fold evolves e into p within f, turning the reducer's panic on an event
// that contradicts the state into an error.
func fold(f *reducer.Fold, p *reducer.Project, e reducer.Event) (q *reducer.Project, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = errors.New(fmt.Sprint("the event contradicts the history before it: ", v))
		}
	}()
	return f.Evolve(p, e), nil
}
