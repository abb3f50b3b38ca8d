package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jmoiron/sqlx"

	"scv/reducer"
)

// storedSnapshot is a row of the snapshots table.
type storedSnapshot struct {
	ProjectID string `db:"project_id"`
	Sequence  uint64 `db:"sequence"`
	Version   int    `db:"version"`
	State     []byte `db:"state"`
	ChainHead []byte `db:"chain_head"`
	StateHash []byte `db:"state_hash"`
}

const latestSnapshotsSQL = `SELECT project_id, sequence, version, state, chain_head, state_hash FROM snapshots s
	WHERE sequence = (SELECT max(sequence) FROM snapshots WHERE project_id = s.project_id)`

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

// Compact folds a project's live events into a snapshot, keeping its
// retain newest events live, and moves the rest to events_archive, all in
// one write transaction: the snapshot (the reducer's state at S, its
// format version, the chain head at S and the state's SHA-256), the
// archive copy, and the DELETE the schema allows only because the snapshot
// covers it. Reads of the project's state and events give the same answers
// before and after.
func (l *Ledger) Compact(ctx context.Context, project string, retain int) (Compaction, error) {
	return l.CompactWith(ctx, project, CompactOptions{Retain: retain})
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
}

// CompactWith is Compact with options.
func (l *Ledger) CompactWith(ctx context.Context, project string, opts CompactOptions) (Compaction, error) {
	retain := opts.Retain
	var c Compaction
	err := l.exclusive(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		p, ok := l.state.Project(project)
		if !ok {
			return fmt.Errorf("%w: project %q", reducer.ErrNotFound, project)
		}
		c.ProjectID = p.ID
		var live int
		if err := tx.GetContext(ctx, &live, `SELECT count(*) FROM events WHERE project_id = ?`, p.ID); err != nil {
			return storage(err)
		}
		c.Live = live
		if retain < 0 || live <= retain {
			return nil
		}
		var s uint64
		if err := tx.GetContext(ctx, &s, `SELECT sequence FROM events WHERE project_id = ? ORDER BY sequence LIMIT 1 OFFSET ?`,
			p.ID, live-retain-1); err != nil {
			return storage(err)
		}
		at, err := stateAt(ctx, tx, p.ID, s)
		if err != nil {
			return err
		}
		snap, err := reducer.Snapshot(at)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(snap)
		for _, q := range []struct {
			sql   string
			args  []any
			point Failpoint // passed once the step is done
		}{
			{`INSERT INTO snapshots (project_id, sequence, version, state, chain_head, state_hash) VALUES (?, ?, ?, ?, ?, ?)`,
				[]any{p.ID, s, reducer.SnapshotVersion, snap, at.ChainHead, sum[:]}, FailSnapshot},
			{`INSERT INTO events_archive (sequence, project_id, kind, timestamp, data, timestamp_ms, hash)
				SELECT sequence, project_id, kind, timestamp, data, timestamp_ms, hash FROM events
				WHERE project_id = ? AND sequence <= ?`, []any{p.ID, s}, FailCompactArchive},
			{`DELETE FROM events WHERE project_id = ? AND sequence <= ?`, []any{p.ID, s}, FailCompactDelete},
		} {
			if opts.Drop && strings.HasPrefix(q.sql, "INSERT INTO events_archive") {
				continue
			}
			res, err := tx.ExecContext(ctx, q.sql, q.args...)
			if err != nil {
				return storage(err)
			}
			if n, _ := res.RowsAffected(); q.sql[:6] == "DELETE" {
				c.Archived = int(n)
			}
			if err := q.point.Hit(); err != nil {
				return fmt.Errorf("%w: %w", ErrStorage, err)
			}
		}
		c.Sequence, c.Live = s, live-c.Archived
		return nil
	})
	if err == nil && c.Sequence > 0 {
		l.liveMu.Lock()
		l.live[c.ProjectID] = c.Live
		l.liveMu.Unlock()
	}
	return c, err
}

// CompactDue returns the projects whose live tail holds more than
// threshold events.
func (l *Ledger) CompactDue(threshold int) []string {
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	var due []string
	for id, n := range l.live {
		if n > threshold {
			due = append(due, id)
		}
	}
	return due
}

func storage(err error) error { return fmt.Errorf("%w: %v", ErrStorage, err) }

// stateAt derives one project's state at sequence s from its latest
// snapshot at or before s and the live events after it.
func stateAt(ctx context.Context, tx *sqlx.Tx, project string, s uint64) (*reducer.Project, error) {
	st := reducer.NewState()
	var base uint64
	var sn storedSnapshot
	err := tx.GetContext(ctx, &sn, `SELECT project_id, sequence, version, state, chain_head, state_hash FROM snapshots
		WHERE project_id = ? AND sequence <= ? ORDER BY sequence DESC LIMIT 1`, project, s)
	switch {
	case err == nil:
		if _, err := reducer.Restore(st, sn.State); err != nil {
			return nil, err
		}
		base = sn.Sequence
	case !errors.Is(err, sql.ErrNoRows):
		return nil, storage(err)
	}
	var rows []Row
	if err := tx.SelectContext(ctx, &rows, `SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM events
		WHERE project_id = ? AND sequence > ? AND sequence <= ? ORDER BY sequence`, project, base, s); err != nil {
		return nil, storage(err)
	}
	for _, r := range rows {
		e, err := r.Event()
		if err != nil {
			return nil, err
		}
		reducer.Evolve(st, e)
	}
	p, ok := st.Project(project)
	if !ok {
		return nil, fmt.Errorf("%w: project %s has no history up to %d", ErrStorage, project, s)
	}
	return p, nil
}

// exclusive runs op as the writer, alone in one write transaction; op's
// error is returned and nothing of it is kept.
func (l *Ledger) exclusive(ctx context.Context, op func(context.Context, *sqlx.Tx) error) error {
	_, err := l.enqueue(ctx, &request{op: op, reply: make(chan response, 1)})
	return err
}

// resolveProject finds a project of the database by ID or name: through
// its project_created event in the archive or the live tail, or, when
// compaction dropped that, through its snapshots. An ID wins over a name.
func resolveProject(ctx context.Context, tx *sqlx.Tx, ref string) (id, name string, err error) {
	var p struct {
		ID   string `db:"id"`
		Name string `db:"name"`
	}
	err = tx.GetContext(ctx, &p, `SELECT project_id AS id, coalesce(json_extract(data, '$.name'), '') AS name FROM `+allRows+`
		WHERE kind = 'project_created' AND (project_id = ? OR json_extract(data, '$.name') = ?)
		ORDER BY project_id = ? DESC, sequence LIMIT 1`, ref, ref, ref)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.GetContext(ctx, &p, `SELECT project_id AS id, coalesce(json_extract(state, '$.name'), '') AS name FROM snapshots
			WHERE project_id = ? OR json_extract(state, '$.name') = ?
			ORDER BY project_id = ? DESC, sequence LIMIT 1`, ref, ref, ref)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", "", fmt.Errorf("%w: project %q", reducer.ErrNotFound, ref)
	case err != nil:
		return "", "", storage(err)
	}
	return p.ID, p.Name, nil
}

// readFile opens the database file at path for reading only, without a
// daemon, in one read transaction (one snapshot of the file for all that
// is read); done closes both. A missing file is an error, not a new empty
// database.
func readFile(ctx context.Context, path string) (tx *sqlx.Tx, done func(), err error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil, err
	}
	db, err := sqlx.Open("sqlite", DSN(path, true))
	if err != nil {
		return nil, nil, err
	}
	tx, err = db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return tx, func() { tx.Rollback(); db.Close() }, nil
}
