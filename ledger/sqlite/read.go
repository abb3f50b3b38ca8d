package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jmoiron/sqlx"

	"scv/ledger/driver"
)

// reader runs the driver's reads inside one transaction (a read-only one,
// or the write transaction, whose reads see its own writes).
type reader struct {
	d *DB
	q *sqlx.Tx
	// writer: q is the write transaction, on the connection the DB's
	// statements are prepared on.
	writer bool
}

// eventColumns are read into driver.Event, in its order.
const eventColumns = `sequence, project_id, kind, timestamp, timestamp_ms, data, hash`

// history is the archive and the live tail as one table, with an
// archived column saying where each row is.
const history = `(SELECT ` + eventColumns + `, 0 AS archived FROM events UNION ALL SELECT ` + eventColumns + `, 1 AS archived FROM events_archive)`

func scanEvent(rows *sqlx.Rows) (driver.Event, error) {
	var e driver.Event
	cols, _ := rows.Columns()
	if len(cols) > 7 {
		err := rows.Scan(&e.Sequence, &e.ProjectID, &e.Kind, &e.Timestamp, &e.TimestampMs, &e.Data, &e.Hash, &e.Archived)
		return e, err
	}
	err := rows.Scan(&e.Sequence, &e.ProjectID, &e.Kind, &e.Timestamp, &e.TimestampMs, &e.Data, &e.Hash)
	return e, err
}

// each calls fn with every event the query returns.
func (r reader) each(ctx context.Context, fn func(driver.Event) error, query string, args ...any) error {
	rows, err := r.q.QueryxContext(ctx, query, args...)
	if err != nil {
		return r.d.fail(err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return r.d.fail(err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return r.d.fail(rows.Err())
}

// lastSQL reads the sequence counter and the newest time: the live
// tail's newest event's, or a projects row's (an index on updated_ms
// makes it one lookup) when compaction took that event out of the tail.
const (
	lastSQL = `SELECT
		COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) AS seq,
		max(COALESCE((SELECT timestamp_ms FROM events ORDER BY sequence DESC LIMIT 1), 0),
			COALESCE((SELECT max(updated_ms) FROM projects), 0)) AS time`
	// lastBeforeProjectsSQL is lastSQL for a file from before the
	// projects table, opened read-only.
	lastBeforeProjectsSQL = `SELECT
		COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) AS seq,
		COALESCE((SELECT timestamp_ms FROM events ORDER BY sequence DESC LIMIT 1), 0) AS time`
)

func (r reader) LastSequence(ctx context.Context) (uint64, int64, error) {
	var v struct {
		Seq  uint64 `db:"seq"`
		Time int64  `db:"time"`
	}
	err := r.q.GetContext(ctx, &v, lastSQL)
	if noProjectsTable(err) {
		err = r.q.GetContext(ctx, &v, lastBeforeProjectsSQL)
	}
	return v.Seq, v.Time, r.d.fail(err)
}

// projectColumns are read into projectRow, in driver.Project's order.
const projectColumns = `id, name, workspace, created_seq, head, live, status IS NOT NULL AS summarized,
	coalesce(status, '') AS status, coalesce(phase, '') AS phase, tasks, done, running, created_ms, updated_ms, heartbeat_ms`

type projectRow struct {
	ID          string `db:"id"`
	Name        string `db:"name"`
	Workspace   string `db:"workspace"`
	CreatedSeq  uint64 `db:"created_seq"`
	Head        uint64 `db:"head"`
	Live        int    `db:"live"`
	Summarized  bool   `db:"summarized"`
	Status      string `db:"status"`
	Phase       string `db:"phase"`
	Tasks       int    `db:"tasks"`
	Done        int    `db:"done"`
	Running     int    `db:"running"`
	CreatedMs   int64  `db:"created_ms"`
	UpdatedMs   int64  `db:"updated_ms"`
	HeartbeatMs int64  `db:"heartbeat_ms"`
}

// projectSQL finds a project's row by ID, and by name (at most one row
// each: the table holds both unique).
const projectSQL = `SELECT ` + projectColumns + ` FROM projects WHERE id = ?1
	UNION ALL SELECT ` + projectColumns + ` FROM projects WHERE name = ?1 AND id <> ?1`

func (r reader) Project(ctx context.Context, ref string) (driver.Project, bool, error) {
	var rows []projectRow
	var err error
	if r.writer {
		err = r.q.StmtxContext(ctx, r.d.lookup).SelectContext(ctx, &rows, ref)
	} else {
		err = r.q.SelectContext(ctx, &rows, projectSQL, ref)
	}
	if err != nil {
		if noProjectsTable(err) {
			return driver.Project{}, false, nil
		}
		return driver.Project{}, false, r.d.fail(err)
	}
	for _, row := range rows {
		if row.ID == ref {
			return driver.Project(row), true, nil
		}
	}
	if len(rows) > 0 {
		return driver.Project(rows[0]), true, nil
	}
	return driver.Project{}, false, nil
}

func (r reader) Projects(ctx context.Context, f driver.ProjectFilter) ([]driver.Project, error) {
	var where []string
	var args []any
	if f.Running {
		where = append(where, "running > 0")
	}
	if f.Unarchived {
		where = append(where, "coalesce(status, '') <> 'archived'")
	}
	if f.LiveOver > 0 {
		where = append(where, "live > ?")
		args = append(args, f.LiveOver)
	}
	if f.Unsummarized {
		where = append(where, "status IS NULL")
	}
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, f.Status)
	}
	q := `SELECT ` + projectColumns + ` FROM projects`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	var rows []projectRow
	if err := r.q.SelectContext(ctx, &rows, q+` ORDER BY created_seq, id`, args...); err != nil {
		if noProjectsTable(err) {
			return nil, nil // a database from before the table, read as it is
		}
		return nil, r.d.fail(err)
	}
	out := make([]driver.Project, len(rows))
	for i, row := range rows {
		out[i] = driver.Project(row)
	}
	return out, nil
}

// noProjectsTable reports whether err says the database has no projects
// table: a file from before migration 00006, opened read-only.
func noProjectsTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table: projects")
}

const snapshotColumns = `project_id, sequence, version, state, chain_head, state_hash`

type snapshotRow struct {
	ProjectID string `db:"project_id"`
	Sequence  uint64 `db:"sequence"`
	Version   int    `db:"version"`
	State     []byte `db:"state"`
	ChainHead []byte `db:"chain_head"`
	StateHash []byte `db:"state_hash"`
}

func (r reader) LatestSnapshot(ctx context.Context, projectID string, upTo uint64) (driver.Snapshot, bool, error) {
	var s snapshotRow
	err := r.q.GetContext(ctx, &s, `SELECT `+snapshotColumns+` FROM snapshots
		WHERE project_id = ? AND sequence <= ? ORDER BY sequence DESC LIMIT 1`, projectID, upTo)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Snapshot{}, false, nil
	}
	if err != nil {
		return driver.Snapshot{}, false, r.d.fail(err)
	}
	return driver.Snapshot(s), true, nil
}

func (r reader) Snapshots(ctx context.Context, projectID string) ([]driver.Snapshot, error) {
	var rows []snapshotRow
	if err := r.q.SelectContext(ctx, &rows, `SELECT `+snapshotColumns+` FROM snapshots
		WHERE ?1 = '' OR project_id = ?1 ORDER BY sequence`, projectID); err != nil {
		return nil, r.d.fail(err)
	}
	out := make([]driver.Snapshot, len(rows))
	for i, s := range rows {
		out[i] = driver.Snapshot(s)
	}
	return out, nil
}

func (r reader) Live(ctx context.Context, projectID string, after, upTo uint64, limit int, fn func(driver.Event) error) error {
	if limit <= 0 {
		limit = -1 // SQLite's "no limit"
	}
	return r.each(ctx, fn, `SELECT `+eventColumns+` FROM events
		WHERE project_id = ? AND sequence > ? AND sequence <= ? ORDER BY sequence LIMIT ?`, projectID, after, upTo, limit)
}

func (r reader) History(ctx context.Context, projectID string, after, upTo uint64, fn func(driver.Event) error) error {
	if projectID == "" {
		return r.each(ctx, fn, `SELECT `+eventColumns+`, archived FROM `+history+`
			WHERE sequence > ? AND sequence <= ? ORDER BY sequence`, after, upTo)
	}
	return r.each(ctx, fn, `SELECT `+eventColumns+`, 0 FROM events WHERE project_id = ?1 AND sequence > ?2 AND sequence <= ?3
		UNION ALL SELECT `+eventColumns+`, 1 FROM events_archive WHERE project_id = ?1 AND sequence > ?2 AND sequence <= ?3
		ORDER BY sequence`, projectID, after, upTo)
}

func (r reader) CountHistory(ctx context.Context, projectID string) (int, error) {
	var n int
	err := r.q.GetContext(ctx, &n, `SELECT count(*) FROM `+history+` WHERE ?1 = '' OR project_id = ?1`, projectID)
	return n, r.d.fail(err)
}

func (r reader) LiveAt(ctx context.Context, projectID string, i int) (uint64, bool, error) {
	var s uint64
	err := r.q.GetContext(ctx, &s, `SELECT sequence FROM events WHERE project_id = ? ORDER BY sequence LIMIT 1 OFFSET ?`, projectID, i)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return s, err == nil, r.d.fail(err)
}

func (r reader) Find(ctx context.Context, ref string) (driver.Found, bool, error) {
	var f struct {
		ID   string `db:"id"`
		Name string `db:"name"`
		Seq  uint64 `db:"seq"`
	}
	// An ID wins over a name; among projects of the same name, the first.
	err := r.q.GetContext(ctx, &f, `SELECT project_id AS id, coalesce(json_extract(data, '$.name'), '') AS name, sequence AS seq
		FROM `+history+` WHERE kind = 'project_created' AND (project_id = ?1 OR json_extract(data, '$.name') = ?1)
		ORDER BY project_id = ?1 DESC, sequence LIMIT 1`, ref)
	if errors.Is(err, sql.ErrNoRows) {
		// Its creation may have been dropped by compaction: its snapshots
		// name it, and it existed from before the earliest.
		err = r.q.GetContext(ctx, &f, `SELECT project_id AS id, coalesce(json_extract(state, '$.name'), '') AS name, 0 AS seq
			FROM snapshots WHERE project_id = ?1 OR json_extract(state, '$.name') = ?1
			ORDER BY project_id = ?1 DESC, sequence LIMIT 1`, ref)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Found{}, false, nil
	}
	if err != nil {
		return driver.Found{}, false, r.d.fail(err)
	}
	return driver.Found{ID: f.ID, Name: f.Name, CreatedSeq: f.Seq}, true, nil
}

func (r reader) Integrity(ctx context.Context) (string, error) {
	var lines []string
	if err := r.q.SelectContext(ctx, &lines, `PRAGMA integrity_check`); err != nil {
		return "", r.d.fail(err)
	}
	return strings.Join(lines, "; "), nil
}

func (r reader) Leases(ctx context.Context) ([]driver.Lease, error) {
	var rows []struct {
		Name      string `db:"name"`
		Holder    string `db:"holder"`
		Term      uint64 `db:"term"`
		ExpiresMs int64  `db:"expires_ms"`
	}
	if err := r.q.SelectContext(ctx, &rows, `SELECT name, holder, term, expires_ms FROM leases ORDER BY name`); err != nil {
		if strings.Contains(err.Error(), "no such table: leases") {
			return nil, nil
		}
		return nil, r.d.fail(err)
	}
	out := make([]driver.Lease, len(rows))
	for i, l := range rows {
		out[i] = driver.Lease(l)
	}
	return out, nil
}
