package ledger

import (
	"cmp"
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

// foldBatch is how many rows rebuild's reader hands its folder at once.
const foldBatch = 256

// rebuild is the one way a project's state is built from the database:
// from p (nil for nothing yet), or from the project's latest snapshot at or
// before upTo when that is newer, then every event of its history (archive
// or live tail) after that and up to upTo, folded in order. The daemon
// loads and catches up projects with it (upTo maxSeq), compaction derives
// the state it snapshots, and `--at` the state as of any sequence. A
// history that does not fold (a stored event contradicts the state) is
// ErrStorage naming the event, not a panic: it is the database's fault,
// not the program's.
//
// The rows are read by a goroutine of rebuild's own and decoded and folded
// by the caller's, in batches of foldBatch: a long history loads in about
// the longer of the two, not their sum. The reading goroutine has ended
// when rebuild returns, so r is not used after.
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []driver.Event, 2)
	var readErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(batches)
		batch := make([]driver.Event, 0, foldBatch)
		readErr = r.History(ctx, id, after, upTo, func(row driver.Event) error {
			if batch = append(batch, row); len(batch) == foldBatch {
				select {
				case batches <- batch:
				case <-ctx.Done():
					return ctx.Err()
				}
				batch = make([]driver.Event, 0, foldBatch)
			}
			return nil
		})
		if readErr == nil && len(batch) > 0 {
			batches <- batch // the folding side takes every batch
		}
	}()
	f := reducer.NewFold()
	var foldErr error
	for batch := range batches {
		for _, row := range batch {
			if foldErr != nil {
				break // what is still coming is drained, not folded
			}
			e, err := eventOf(row)
			if err == nil {
				p, err = fold(f, p, e)
			}
			if err != nil {
				foldErr = fmt.Errorf("%w: project %s, sequence %d: %v", ErrStorage, id, row.Sequence, err)
				cancel()
			}
		}
	}
	<-read
	if err := cmp.Or(foldErr, readErr); err != nil {
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
