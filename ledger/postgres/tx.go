package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"scv/ledger/driver"
)

// querier is what a reader needs of a pgx transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// reader runs the driver's reads inside one transaction.
type reader struct {
	d *DB
	q querier
}

const eventColumns = `sequence, project_id, kind, timestamp, timestamp_ms, data, hash`

// each calls fn with every event the query returns.
func (r reader) each(ctx context.Context, fn func(driver.Event) error, query string, args ...any) error {
	rows, err := r.q.Query(ctx, query, args...)
	if err != nil {
		return r.d.fail(err)
	}
	defer rows.Close()
	archived := len(rows.FieldDescriptions()) > 7
	for rows.Next() {
		var e driver.Event
		var seq int64
		dst := []any{&seq, &e.ProjectID, &e.Kind, &e.Timestamp, &e.TimestampMs, &e.Data, &e.Hash}
		if archived {
			dst = append(dst, &e.Archived)
		}
		if err := rows.Scan(dst...); err != nil {
			return r.d.fail(err)
		}
		e.Sequence = uint64(seq)
		if err := fn(e); err != nil {
			return err
		}
	}
	return r.d.fail(rows.Err())
}

func (r reader) LastSequence(ctx context.Context) (uint64, int64, error) {
	var seq, ms int64
	err := r.q.QueryRow(ctx, `SELECT (SELECT seq FROM ledger_head), `+newestSQL).Scan(&seq, &ms)
	return uint64(seq), ms, r.d.fail(err)
}

const projectColumns = `id, name, workspace, created_seq, head, live, status IS NOT NULL,
	coalesce(status, ''), coalesce(phase, ''), tasks, done, running, created_ms, updated_ms, heartbeat_ms`

func scanProject(row pgx.Row) (driver.Project, error) {
	var p driver.Project
	var created, head, live, tasks, done, running int64
	err := row.Scan(&p.ID, &p.Name, &p.Workspace, &created, &head, &live, &p.Summarized, &p.Status, &p.Phase, &tasks, &done, &running,
		&p.CreatedMs, &p.UpdatedMs, &p.HeartbeatMs)
	p.CreatedSeq, p.Head, p.Live = uint64(created), uint64(head), int(live)
	p.Tasks, p.Done, p.Running = int(tasks), int(done), int(running)
	return p, err
}

func (r reader) Project(ctx context.Context, ref string) (driver.Project, bool, error) {
	// By ID first, then by name: at most one row each.
	p, err := scanProject(r.q.QueryRow(ctx, `SELECT `+projectColumns+` FROM projects WHERE id = $1 OR name = $1
		ORDER BY id = $1 DESC LIMIT 1`, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Project{}, false, nil
	}
	if err != nil {
		return driver.Project{}, false, r.d.fail(err)
	}
	return p, true, nil
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
		args = append(args, f.LiveOver)
		where = append(where, fmt.Sprintf("live > $%d", len(args)))
	}
	if f.Unsummarized {
		where = append(where, "status IS NULL")
	}
	if f.Status != "" {
		args = append(args, f.Status)
		where = append(where, fmt.Sprintf("status = $%d", len(args)))
	}
	q := `SELECT ` + projectColumns + ` FROM projects`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := r.q.Query(ctx, q+` ORDER BY created_seq, id`, args...)
	if err != nil {
		return nil, r.d.fail(err)
	}
	defer rows.Close()
	out := []driver.Project{}
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, r.d.fail(err)
		}
		out = append(out, p)
	}
	return out, r.d.fail(rows.Err())
}

const snapshotColumns = `project_id, sequence, version, state, chain_head, state_hash`

func scanSnapshot(row pgx.Row) (driver.Snapshot, error) {
	var s driver.Snapshot
	var seq int64
	err := row.Scan(&s.ProjectID, &seq, &s.Version, &s.State, &s.ChainHead, &s.StateHash)
	s.Sequence = uint64(seq)
	return s, err
}

func (r reader) LatestSnapshot(ctx context.Context, projectID string, upTo uint64) (driver.Snapshot, bool, error) {
	s, err := scanSnapshot(r.q.QueryRow(ctx, `SELECT `+snapshotColumns+` FROM snapshots
		WHERE project_id = $1 AND sequence <= $2 ORDER BY sequence DESC LIMIT 1`, projectID, int64(upTo)))
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Snapshot{}, false, nil
	}
	if err != nil {
		return driver.Snapshot{}, false, r.d.fail(err)
	}
	return s, true, nil
}

func (r reader) Snapshots(ctx context.Context, projectID string) ([]driver.Snapshot, error) {
	rows, err := r.q.Query(ctx, `SELECT `+snapshotColumns+` FROM snapshots
		WHERE $1 = '' OR project_id = $1 ORDER BY sequence`, projectID)
	if err != nil {
		return nil, r.d.fail(err)
	}
	defer rows.Close()
	out := []driver.Snapshot{}
	for rows.Next() {
		s, err := scanSnapshot(rows)
		if err != nil {
			return nil, r.d.fail(err)
		}
		out = append(out, s)
	}
	return out, r.d.fail(rows.Err())
}

func (r reader) Live(ctx context.Context, projectID string, after, upTo uint64, limit int, fn func(driver.Event) error) error {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	return r.each(ctx, fn, `SELECT `+eventColumns+` FROM events
		WHERE project_id = $1 AND sequence > $2 AND sequence <= $3 ORDER BY sequence LIMIT $4`, projectID, int64(after), int64(upTo), lim)
}

func (r reader) History(ctx context.Context, projectID string, after, upTo uint64, fn func(driver.Event) error) error {
	return r.each(ctx, fn, `SELECT `+eventColumns+`, false FROM events WHERE ($1 = '' OR project_id = $1) AND sequence > $2 AND sequence <= $3
		UNION ALL SELECT `+eventColumns+`, true FROM events_archive WHERE ($1 = '' OR project_id = $1) AND sequence > $2 AND sequence <= $3
		ORDER BY sequence`, projectID, int64(after), int64(upTo))
}

func (r reader) CountHistory(ctx context.Context, projectID string) (int, error) {
	var n int64
	err := r.q.QueryRow(ctx, `SELECT (SELECT count(*) FROM events WHERE $1 = '' OR project_id = $1)
		+ (SELECT count(*) FROM events_archive WHERE $1 = '' OR project_id = $1)`, projectID).Scan(&n)
	return int(n), r.d.fail(err)
}

func (r reader) LiveAt(ctx context.Context, projectID string, i int) (uint64, bool, error) {
	var s int64
	err := r.q.QueryRow(ctx, `SELECT sequence FROM events WHERE project_id = $1 ORDER BY sequence LIMIT 1 OFFSET $2`, projectID, i).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return uint64(s), err == nil, r.d.fail(err)
}

func (r reader) Find(ctx context.Context, ref string) (driver.Found, bool, error) {
	var f driver.Found
	var seq int64
	// An ID wins over a name; among projects of the same name, the first.
	err := r.q.QueryRow(ctx, `SELECT project_id, coalesce(data::jsonb->>'name', ''), sequence FROM (
			SELECT project_id, data, sequence FROM events WHERE kind = 'project_created'
			UNION ALL SELECT project_id, data, sequence FROM events_archive WHERE kind = 'project_created') c
		WHERE project_id = $1 OR data::jsonb->>'name' = $1
		ORDER BY project_id = $1 DESC, sequence LIMIT 1`, ref).Scan(&f.ID, &f.Name, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		// Its creation may have been dropped by compaction: its snapshots
		// name it, and it existed from before the earliest.
		seq = 0
		err = r.q.QueryRow(ctx, `SELECT project_id, coalesce(convert_from(state, 'UTF8')::jsonb->>'name', '') FROM snapshots
			WHERE project_id = $1 OR convert_from(state, 'UTF8')::jsonb->>'name' = $1
			ORDER BY project_id = $1 DESC, sequence LIMIT 1`, ref).Scan(&f.ID, &f.Name)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Found{}, false, nil
	}
	if err != nil {
		return driver.Found{}, false, r.d.fail(err)
	}
	f.CreatedSeq = uint64(seq)
	return f, true, nil
}

// Integrity is "": PostgreSQL checks its own pages (data checksums, when
// the cluster has them) as it reads them; there is no whole-file check to
// run.
func (r reader) Integrity(context.Context) (string, error) { return "", nil }

func (r reader) Leases(ctx context.Context) ([]driver.Lease, error) {
	rows, err := r.q.Query(ctx, `SELECT name, holder, term, expires_ms FROM leases ORDER BY name`)
	if err != nil {
		return nil, r.d.fail(err)
	}
	defer rows.Close()
	var out []driver.Lease
	for rows.Next() {
		var l driver.Lease
		var term int64
		if err := rows.Scan(&l.Name, &l.Holder, &term, &l.ExpiresMs); err != nil {
			return nil, r.d.fail(err)
		}
		l.Term = uint64(term)
		out = append(out, l)
	}
	return out, r.d.fail(rows.Err())
}

// writeTx is the write transaction; it holds ledger_head's lock.
type writeTx struct {
	reader
	tx     pgx.Tx
	head   int64 // the last sequence handed out, read under the lock
	locked bool
	done   bool
}

// Head is the last sequence handed out, read under the lock at Begin
// (and moved by Append).
func (t *writeTx) Head(context.Context) (uint64, error) { return uint64(t.head), nil }

func (t *writeTx) LastSequence(ctx context.Context) (uint64, int64, error) {
	var ms int64
	err := t.tx.QueryRow(ctx, `SELECT `+newestSQL).Scan(&ms)
	return uint64(t.head), ms, t.d.fail(err)
}

// newestSQL is the newest event's time: the live tail's newest, or a
// projects row's (an index on updated_ms makes it one lookup) when
// compaction took that event out of the tail.
const newestSQL = `greatest(COALESCE((SELECT timestamp_ms FROM events ORDER BY sequence DESC LIMIT 1), 0),
	COALESCE((SELECT max(updated_ms) FROM projects), 0))`

func (t *writeTx) Append(ctx context.Context, events []driver.Event) error {
	if len(events) == 0 {
		return nil
	}
	var live, archived [][]any
	last := t.head
	for _, e := range events {
		if int64(e.Sequence) <= last {
			return fmt.Errorf("%w: event %d does not follow %d", driver.ErrStorage, e.Sequence, last)
		}
		last = int64(e.Sequence)
		row := []any{int64(e.Sequence), e.ProjectID, e.Kind, e.Timestamp, e.TimestampMs, e.Data, e.Hash}
		if e.Archived {
			archived = append(archived, row)
		} else {
			live = append(live, row)
		}
	}
	cols := []string{"sequence", "project_id", "kind", "timestamp", "timestamp_ms", "data", "hash"}
	for _, c := range []struct {
		table string
		rows  [][]any
	}{{"events", live}, {"events_archive", archived}} {
		if len(c.rows) == 0 {
			continue
		}
		if _, err := t.tx.CopyFrom(ctx, pgx.Identifier{c.table}, cols, pgx.CopyFromRows(c.rows)); err != nil {
			return t.d.fail(err)
		}
	}
	tag, err := t.tx.Exec(ctx, `UPDATE ledger_head SET seq = $1 WHERE seq = $2`, last, t.head)
	if err != nil {
		return t.d.fail(err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: the ledger's head is no longer %d, which this write read: another writer committed since",
			driver.ErrStorage, t.head)
	}
	t.head = last
	return nil
}

func (t *writeTx) InsertProject(ctx context.Context, p driver.Project) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO projects (id, name, workspace, created_seq, head, live) VALUES ($1, $2, $3, $4, $5, 0)
		ON CONFLICT DO NOTHING`, p.ID, p.Name, p.Workspace, int64(p.CreatedSeq), int64(p.Head))
	if err != nil {
		return false, t.d.fail(err)
	}
	return tag.RowsAffected() == 1, nil
}

func (t *writeTx) UpdateProject(ctx context.Context, p driver.Project, liveDelta int) error {
	var status, phase any // NULL: not summarized
	if p.Summarized {
		status, phase = p.Status, p.Phase
	}
	tag, err := t.tx.Exec(ctx, `UPDATE projects SET head = $1, live = live + $2, status = $3, phase = $4, tasks = $5, done = $6,
		running = $7, created_ms = $8, updated_ms = $9, heartbeat_ms = $10,
		workspace = CASE WHEN workspace = '' THEN $11 ELSE workspace END WHERE id = $12`,
		int64(p.Head), liveDelta, status, phase, p.Tasks, p.Done, p.Running, p.CreatedMs, p.UpdatedMs, p.HeartbeatMs, p.Workspace, p.ID)
	if err != nil {
		return t.d.fail(err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: project %s has no row in the projects table", driver.ErrStorage, p.ID)
	}
	return nil
}

func (t *writeTx) InsertSnapshot(ctx context.Context, s driver.Snapshot) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO snapshots (project_id, sequence, version, state, chain_head, state_hash) VALUES ($1, $2, $3, $4, $5, $6)`,
		s.ProjectID, int64(s.Sequence), s.Version, s.State, s.ChainHead, s.StateHash)
	return t.d.fail(err)
}

func (t *writeTx) Archive(ctx context.Context, projectID string, upTo uint64) (int, error) {
	return t.exec(ctx, `INSERT INTO events_archive (`+eventColumns+`)
		SELECT `+eventColumns+` FROM events WHERE project_id = $1 AND sequence <= $2`, projectID, int64(upTo))
}

func (t *writeTx) DeleteLive(ctx context.Context, projectID string, upTo uint64) (int, error) {
	return t.exec(ctx, `DELETE FROM events WHERE project_id = $1 AND sequence <= $2`, projectID, int64(upTo))
}

func (t *writeTx) Lease(ctx context.Context, name, holder string, ttlMs, nowMs int64) (uint64, bool, error) {
	var term int64
	err := t.tx.QueryRow(ctx, `INSERT INTO leases (name, holder, term, expires_ms) VALUES ($1, $2, 1, $3::bigint + $4::bigint)
		ON CONFLICT (name) DO UPDATE SET
			term = CASE WHEN leases.holder = excluded.holder AND leases.expires_ms >= $3 THEN leases.term ELSE leases.term + 1 END,
			holder = excluded.holder, expires_ms = excluded.expires_ms
		WHERE leases.holder = excluded.holder OR leases.expires_ms < $3
		RETURNING term`, name, holder, nowMs, ttlMs).Scan(&term)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, t.d.fail(err)
	}
	return uint64(term), true, nil
}

func (t *writeTx) LeaseHeld(ctx context.Context, name, holder string, term uint64, nowMs int64) (bool, error) {
	var n int64
	err := t.tx.QueryRow(ctx, `SELECT count(*) FROM leases WHERE name = $1 AND holder = $2 AND term = $3 AND expires_ms >= $4`,
		name, holder, int64(term), nowMs).Scan(&n)
	return n == 1, t.d.fail(err)
}

func (t *writeTx) exec(ctx context.Context, query string, args ...any) (int, error) {
	tag, err := t.tx.Exec(ctx, query, args...)
	if err != nil {
		return 0, t.d.fail(err)
	}
	return int(tag.RowsAffected()), nil
}

func (t *writeTx) Commit() error {
	t.done = true
	return t.d.fail(t.tx.Commit(context.Background()))
}

func (t *writeTx) Rollback() error {
	if t.done {
		return nil
	}
	t.done = true
	if err := t.tx.Rollback(context.Background()); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return t.d.fail(err)
	}
	return nil
}
