package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"scv/ledger/driver"
	"scv/ledger/local"
)

// DB is one SQLite ledger file: the project ledger (driver.Driver) and the
// machine's own state (local.Store).
type DB struct {
	path string
	w    *sqlx.DB // nil when read-only
	r    *sqlx.DB
	// clock stamps channel accounts written with no time.
	clock func() time.Time
	// Prepared once, on the one writer connection.
	insert, insertMany, update, lookup, head *sqlx.Stmt
}

// Options configure Open.
type Options struct {
	// Clock stamps the channel accounts written without a time; defaults
	// to the system clock.
	Clock func() time.Time
}

// Open opens (creating if needed) the ledger database at path and
// migrates it to the newest schema.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	w, r, err := openSQLite(ctx, path)
	if err != nil {
		return nil, err
	}
	d := &DB{path: path, w: w, r: r, clock: opts.Clock}
	if d.clock == nil {
		d.clock = time.Now
	}
	for _, st := range []struct {
		dst **sqlx.Stmt
		sql string
	}{{&d.insert, insertEventSQL}, {&d.insertMany, insertEventsSQL}, {&d.update, updateProjectSQL}, {&d.lookup, projectSQL}, {&d.head, headSQL}} {
		if *st.dst, err = w.PreparexContext(ctx, st.sql); err != nil {
			d.Close()
			return nil, fmt.Errorf("open ledger %s: %w", path, err)
		}
	}
	return d, nil
}

// OpenReadOnly opens the database at path for reading only, as it is:
// nothing is created or migrated, and a missing file is an error, not a
// new empty database. The auditor's tools (verify, export, time travel)
// read with it, with or without a daemon running.
func OpenReadOnly(ctx context.Context, path string) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	if strings.Contains(path, "?") {
		return nil, fmt.Errorf("open ledger: database path %q may not contain '?'", path)
	}
	r, err := sqlx.Open("sqlite", DSN(path, true))
	if err != nil {
		return nil, err
	}
	r.SetMaxOpenConns(4)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &DB{path: path, r: r, clock: time.Now}, nil
}

// Path is the database file.
func (d *DB) Path() string { return d.path }

// Name is the database file, for messages.
func (d *DB) Name() string { return d.path }

// Shared is false: one daemon holds a SQLite ledger (it takes a lock on
// the file beside it).
func (d *DB) Shared() bool { return false }

// Now is the zero time: a SQLite ledger has one daemon, whose own clock
// stamps its events.
func (d *DB) Now(context.Context) (time.Time, error) { return time.Time{}, nil }

// Close closes both pools.
func (d *DB) Close() error {
	var errs []error
	for _, st := range []*sqlx.Stmt{d.insert, d.insertMany, d.update, d.lookup, d.head} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if d.w != nil {
		errs = append(errs, d.w.Close())
	}
	errs = append(errs, d.r.Close())
	return errors.Join(errs...)
}

// fail wraps err as the driver's errors: ErrStorageFull when the file had
// no room, else ErrStorage.
func (d *DB) fail(err error) error { return storageError(d.path, err) }

// Begin opens the write transaction: BEGIN IMMEDIATE on the one writer
// connection, so the write lock is held before anything is read.
func (d *DB) Begin(ctx context.Context) (driver.Tx, error) {
	if d.w == nil {
		return nil, fmt.Errorf("%w: %s is open read-only", driver.ErrStorage, d.path)
	}
	tx, err := d.w.BeginTxx(ctx, nil)
	if err != nil {
		return nil, d.fail(err)
	}
	return &writeTx{reader: reader{d: d, q: tx, writer: true}, tx: tx}, nil
}

// Read runs fn in one read-only transaction on the reader pool.
func (d *DB) Read(ctx context.Context, fn func(driver.Reader) error) error {
	tx, err := d.r.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return d.fail(err)
	}
	defer tx.Rollback()
	return fn(reader{d: d, q: tx})
}

// writeTx is the write transaction.
type writeTx struct {
	reader
	tx   *sqlx.Tx
	done bool
}

func (t *writeTx) Commit() error {
	t.done = true
	return t.d.fail(t.tx.Commit())
}

func (t *writeTx) Rollback() error {
	if t.done {
		return nil
	}
	t.done = true
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return t.d.fail(err)
	}
	return nil
}

// headSQL is the last sequence: AUTOINCREMENT's counter, which never goes
// back, also when compaction empties the live tail.
const headSQL = `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`

func (t *writeTx) Head(ctx context.Context) (uint64, error) {
	st := t.tx.StmtxContext(ctx, t.d.head)
	defer st.Close()
	var seq uint64
	err := st.GetContext(ctx, &seq)
	return seq, t.d.fail(err)
}

// insertEventSQL appends an event. The sequence is given, not left to
// AUTOINCREMENT, because the event's hash covers it: the writer holds the
// lock and knows the tail, so it is the next one anyway.
const insertEventSQL = `INSERT INTO events (sequence, project_id, kind, timestamp, timestamp_ms, data, hash) VALUES (?, ?, ?, ?, ?, ?, ?)`

// insertRows is how many events insertEventsSQL appends at once: a batch
// of the writer goes in statements of that many rows, and the rest one
// by one, so that a statement's cost (its call, its arguments' checks)
// is paid once per insertRows events.
const insertRows = 32

var insertEventsSQL = insertEventSQL + strings.Repeat(", (?, ?, ?, ?, ?, ?, ?)", insertRows-1)

func (t *writeTx) Append(ctx context.Context, events []driver.Event) error {
	ins := t.tx.StmtxContext(ctx, t.d.insert)
	defer ins.Close()
	// The writer's batches are all live: only a copy (ledger.Copy) brings
	// archived events, which go to events_archive.
	var archived uint64
	live := events
	if slices.ContainsFunc(events, func(e driver.Event) bool { return e.Archived }) {
		live = nil
		for _, e := range events {
			if !e.Archived {
				live = append(live, e)
				continue
			}
			if _, err := t.tx.ExecContext(ctx, `INSERT INTO events_archive (sequence, project_id, kind, timestamp, timestamp_ms, data, hash)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, e.Sequence, e.ProjectID, e.Kind, e.Timestamp, e.TimestampMs, e.Data, e.Hash); err != nil {
				return t.d.fail(err)
			}
			archived = max(archived, e.Sequence)
		}
	}
	if len(live) >= insertRows {
		many := t.tx.StmtxContext(ctx, t.d.insertMany)
		defer many.Close()
		args := make([]any, 0, 7*insertRows)
		for len(live) >= insertRows {
			args = args[:0]
			for _, e := range live[:insertRows] {
				args = append(args, e.Sequence, e.ProjectID, e.Kind, e.Timestamp, e.TimestampMs, e.Data, e.Hash)
			}
			if _, err := many.ExecContext(ctx, args...); err != nil {
				return t.d.fail(err)
			}
			live = live[insertRows:]
		}
	}
	for _, e := range live {
		if _, err := ins.ExecContext(ctx, e.Sequence, e.ProjectID, e.Kind, e.Timestamp, e.TimestampMs, e.Data, e.Hash); err != nil {
			return t.d.fail(err)
		}
	}
	if archived > 0 {
		// AUTOINCREMENT's counter, which LastSequence reads, counts the
		// live tail's inserts only: raise it past the archived ones too.
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) SELECT 'events', 0
			WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events')`); err != nil {
			return t.d.fail(err)
		}
		if _, err := t.tx.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'events'`, archived); err != nil {
			return t.d.fail(err)
		}
	}
	return nil
}

func (t *writeTx) InsertProject(ctx context.Context, p driver.Project) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO projects (id, name, workspace, created_seq, head, live) VALUES (?, ?, ?, ?, ?, 0)
		ON CONFLICT DO NOTHING`, p.ID, p.Name, p.Workspace, p.CreatedSeq, p.Head)
	if err != nil {
		return false, t.d.fail(err)
	}
	n, err := res.RowsAffected()
	return n == 1, t.d.fail(err)
}

const updateProjectSQL = `UPDATE projects SET head = ?, live = live + ?, status = ?, phase = ?, tasks = ?, done = ?, running = ?,
	created_ms = ?, updated_ms = ?, heartbeat_ms = ?, workspace = CASE WHEN workspace = '' THEN ? ELSE workspace END WHERE id = ?`

func (t *writeTx) UpdateProject(ctx context.Context, p driver.Project, liveDelta int) error {
	var status, phase any // NULL: not summarized
	if p.Summarized {
		status, phase = p.Status, p.Phase
	}
	res, err := t.tx.StmtxContext(ctx, t.d.update).ExecContext(ctx, p.Head, liveDelta, status, phase, p.Tasks, p.Done, p.Running,
		p.CreatedMs, p.UpdatedMs, p.HeartbeatMs, p.Workspace, p.ID)
	if err != nil {
		return t.d.fail(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: project %s has no row in the projects table", driver.ErrStorage, p.ID)
	}
	return nil
}

func (t *writeTx) InsertSnapshot(ctx context.Context, s driver.Snapshot) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO snapshots (project_id, sequence, version, state, chain_head, state_hash) VALUES (?, ?, ?, ?, ?, ?)`,
		s.ProjectID, s.Sequence, s.Version, s.State, s.ChainHead, s.StateHash)
	return t.d.fail(err)
}

func (t *writeTx) Archive(ctx context.Context, projectID string, upTo uint64) (int, error) {
	return t.exec(ctx, `INSERT INTO events_archive (sequence, project_id, kind, timestamp, data, timestamp_ms, hash)
		SELECT sequence, project_id, kind, timestamp, data, timestamp_ms, hash FROM events
		WHERE project_id = ? AND sequence <= ?`, projectID, upTo)
}

func (t *writeTx) DeleteLive(ctx context.Context, projectID string, upTo uint64) (int, error) {
	return t.exec(ctx, `DELETE FROM events WHERE project_id = ? AND sequence <= ?`, projectID, upTo)
}

func (t *writeTx) exec(ctx context.Context, query string, args ...any) (int, error) {
	res, err := t.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, t.d.fail(err)
	}
	n, err := res.RowsAffected()
	return int(n), t.d.fail(err)
}

// The driver and the local store, checked by the compiler.
var (
	_ driver.Driver = (*DB)(nil)
	_ local.Store   = (*DB)(nil)
)

// leaseSQL takes or renews a lease: a free or expired one gets a new term,
// the holder's own keeps its term and gets a new expiry, another holder's
// unexpired one is left alone (no row returned).
const leaseSQL = `INSERT INTO leases (name, holder, term, expires_ms) VALUES (?1, ?2, 1, ?3 + ?4)
	ON CONFLICT (name) DO UPDATE SET
		term = CASE WHEN leases.holder = excluded.holder AND leases.expires_ms >= ?3 THEN leases.term ELSE leases.term + 1 END,
		holder = excluded.holder, expires_ms = excluded.expires_ms
	WHERE leases.holder = excluded.holder OR leases.expires_ms < ?3
	RETURNING term`

func (t *writeTx) Lease(ctx context.Context, name, holder string, ttlMs, nowMs int64) (uint64, bool, error) {
	var term uint64
	err := t.tx.GetContext(ctx, &term, leaseSQL, name, holder, nowMs, ttlMs)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, t.d.fail(err)
	}
	return term, true, nil
}

func (t *writeTx) LeaseHeld(ctx context.Context, name, holder string, term uint64, nowMs int64) (bool, error) {
	var n int
	err := t.tx.GetContext(ctx, &n, `SELECT count(*) FROM leases WHERE name = ? AND holder = ? AND term = ? AND expires_ms >= ?`,
		name, holder, term, nowMs)
	return n == 1, t.d.fail(err)
}
