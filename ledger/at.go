package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"scv/reducer"
)

// ProjectAt derives the state of one project (by ID or name) as the
// ledger knew it after sequence seq: "what did we know then?". It reads
// the database file at path read-only, in one read transaction, so it
// works with or without a daemon running. It starts from the project's
// latest snapshot at or before seq, if any, and folds the project's events
// from the archive and the live tail up to and including seq with the same
// reducer the daemon uses. A seq past the newest event gives the current
// state; a project unknown, or not yet created at seq, is
// reducer.ErrNotFound.
func ProjectAt(ctx context.Context, path, project string, seq uint64) (*reducer.Project, error) {
	tx, done, err := readFile(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("project at: %w", err)
	}
	defer done()

	// An ID wins over a name; among projects of the same name, the first.
	var created struct {
		ProjectID string `db:"project_id"`
		Sequence  uint64 `db:"sequence"`
	}
	err = tx.GetContext(ctx, &created, `SELECT project_id, sequence FROM `+allRows+`
		WHERE kind = 'project_created' AND (project_id = ? OR json_extract(data, '$.name') = ?)
		ORDER BY project_id = ? DESC, sequence LIMIT 1`, project, project, project)
	if errors.Is(err, sql.ErrNoRows) {
		// Its creation may have been dropped by compaction: its earliest
		// snapshot names it, and it existed from before that snapshot.
		err = tx.GetContext(ctx, &created, `SELECT project_id, 0 AS sequence FROM snapshots
			WHERE project_id = ? OR json_extract(state, '$.name') = ?
			ORDER BY project_id = ? DESC, sequence LIMIT 1`, project, project, project)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w: project %q", reducer.ErrNotFound, project)
	case err != nil:
		return nil, storage(err)
	}
	if seq < created.Sequence {
		return nil, fmt.Errorf("%w: project %q did not exist yet at sequence %d (created at %d)",
			reducer.ErrNotFound, project, seq, created.Sequence)
	}
	id := created.ProjectID

	st := reducer.NewState()
	var base uint64
	var sn storedSnapshot
	err = tx.GetContext(ctx, &sn, `SELECT project_id, sequence, version, state, chain_head, state_hash FROM snapshots
		WHERE project_id = ? AND sequence <= ? ORDER BY sequence DESC LIMIT 1`, id, seq)
	switch {
	case err == nil:
		if sn.Version != reducer.SnapshotVersion {
			return nil, fmt.Errorf("%w: project %s: snapshot at %d has format %d; this build reads %d",
				ErrStorage, id, sn.Sequence, sn.Version, reducer.SnapshotVersion)
		}
		if _, err := reducer.Restore(st, sn.State); err != nil {
			return nil, err
		}
		base = sn.Sequence
	case !errors.Is(err, sql.ErrNoRows):
		return nil, storage(err)
	}
	rows, err := tx.QueryxContext(ctx, `SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM `+allRows+`
		WHERE project_id = ? AND sequence > ? AND sequence <= ? ORDER BY sequence`, id, base, seq)
	if err != nil {
		return nil, storage(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r Row
		if err := rows.StructScan(&r); err != nil {
			return nil, storage(err)
		}
		e, err := r.Event()
		if err != nil {
			return nil, err
		}
		if err := fold(st, e); err != nil {
			return nil, fmt.Errorf("%w: project %s, sequence %d: %v", ErrStorage, id, r.Sequence, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, storage(err)
	}
	p, ok := st.Project(id)
	if !ok {
		return nil, fmt.Errorf("%w: project %s: its history up to %d was dropped by compaction", reducer.ErrNotFound, id, seq)
	}
	return p, nil
}
