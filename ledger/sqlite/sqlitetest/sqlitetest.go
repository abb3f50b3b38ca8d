// Package sqlitetest is what tests, benchmarks and reliability tools need
// of a SQLite ledger file beyond the driver itself, so that none of them
// runs SQL of its own:
//
//   - Harness, the SQLite side of the conformance suite
//     (scv/ledger/drivertest), including the tampering it checks verify
//     against (TamperFile too, for callers without a *testing.T);
//   - Raw, a writer that appends events to a ledger file directly, with
//     the driver's connection settings and INSERT but none of the
//     ledger's logic: the benchmark's ceiling, and a fast way to lay down
//     a long history;
//   - ReadAll and Each, which read a ledger file as it is (every event,
//     archive and live tail, snapshots, projects rows, the sequence
//     counter, SQLite's integrity_check) through a read-only driver.
package sqlitetest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"scv/ledger/driver"
	"scv/ledger/drivertest"
	"scv/ledger/sqlite"
)

// Harness is drivertest.Harness for SQLite: each database is a file,
// ledger.db, in a folder of the test's own, named by its path.
type Harness struct{}

var _ drivertest.Harness = Harness{}

// Create makes a new ledger file, migrated, and returns its path.
func (Harness) Create(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	return path
}

// Open opens the file at path with sqlite.Open.
func (Harness) Open(t *testing.T, path string) driver.Driver {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// OpenReadOnly opens the file at path with sqlite.OpenReadOnly.
func (Harness) OpenReadOnly(t *testing.T, path string) driver.Driver {
	t.Helper()
	db, err := sqlite.OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatalf("open %s read-only: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Tamper changes the file at path through a connection of its own,
// dropping the append-only triggers of the events and the archive first
// (for good: the file is evidence of tampering from then on).
func (Harness) Tamper(t *testing.T, path string, x drivertest.Tampering) error {
	t.Helper()
	err := TamperFile(context.Background(), path, x)
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("tamper %s with %#v: %v", path, x, err)
	}
	return err
}

// TamperFile is Tamper for a caller with no *testing.T (the CLI's
// transcripts): it returns what went wrong.
func TamperFile(ctx context.Context, path string, x drivertest.Tampering) error {
	db, err := rawConn(path)
	if err != nil {
		return err
	}
	defer db.Close()
	return tamper(ctx, db, x)
}

// rawConn is one connection to the file at path with the driver's writer
// settings (WAL, synchronous=FULL, IMMEDIATE transactions).
func rawConn(path string) (*sqlx.DB, error) {
	db, err := sqlx.Open("sqlite", sqlite.DSN(path, false))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// The triggers that keep the events and the archive append-only.
const dropProtection = `DROP TRIGGER IF EXISTS events_no_update;
DROP TRIGGER IF EXISTS events_no_uncovered_delete;
DROP TRIGGER IF EXISTS events_archive_no_update;
DROP TRIGGER IF EXISTS events_archive_no_delete`

// eventTables are where an event may be: the live tail and the archive.
var eventTables = []string{"events", "events_archive"}

const eventColumns = `sequence, project_id, kind, timestamp, timestamp_ms, data, hash`

func tamper(ctx context.Context, db *sqlx.DB, x drivertest.Tampering) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, dropProtection); err != nil {
		return err
	}
	switch x := x.(type) {
	case drivertest.EditEvent:
		err = eachTable(ctx, tx, x.Sequence, `UPDATE %s SET
			data = CASE WHEN ?1 = '' THEN data ELSE ?1 END,
			project_id = CASE WHEN ?2 = '' THEN project_id ELSE ?2 END,
			timestamp_ms = timestamp_ms + ?3, timestamp = (timestamp_ms + ?3) / 1000
			WHERE sequence = ?4`, x.Data, x.ProjectID, x.ShiftMs, x.Sequence)
	case drivertest.DeleteEvent:
		err = eachTable(ctx, tx, x.Sequence, `DELETE FROM %s WHERE sequence = ?`, x.Sequence)
	case drivertest.SwapEvents:
		err = swap(ctx, tx, x.A, x.B)
	case drivertest.InsertEvent:
		e := x.Event
		_, err = tx.ExecContext(ctx, `INSERT INTO events (`+eventColumns+`) VALUES (nullif(?, 0), ?, ?, ?, ?, ?, ?)`,
			e.Sequence, e.ProjectID, e.Kind, e.Timestamp, e.TimestampMs, e.Data, e.Hash)
	case drivertest.EditSnapshot:
		sum := sha256.Sum256(x.State)
		err = one(tx.ExecContext(ctx, `UPDATE snapshots SET state = ?1, state_hash = CASE WHEN ?2 THEN ?3 ELSE state_hash END
			WHERE project_id = ?4 AND sequence = ?5`, x.State, x.FixHash, sum[:], x.ProjectID, x.Sequence))
	case drivertest.SetProjectRow:
		r := x.Row
		var status, phase sql.NullString
		if r.Summarized {
			status, phase = sql.NullString{String: r.Status, Valid: true}, sql.NullString{String: r.Phase, Valid: true}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO projects (id, name, created_seq, head, live, status, phase, tasks, done, running, created_ms, updated_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET
			name = excluded.name, created_seq = excluded.created_seq, head = excluded.head, live = excluded.live,
			status = excluded.status, phase = excluded.phase, tasks = excluded.tasks, done = excluded.done,
			running = excluded.running, created_ms = excluded.created_ms, updated_ms = excluded.updated_ms`,
			r.ID, r.Name, r.CreatedSeq, r.Head, r.Live, status, phase, r.Tasks, r.Done, r.Running, r.CreatedMs, r.UpdatedMs)
	case drivertest.DeleteProjectRow:
		err = one(tx.ExecContext(ctx, `DELETE FROM projects WHERE id = ?`, x.ID))
	default:
		return fmt.Errorf("%w: %T", errors.ErrUnsupported, x)
	}
	if err != nil {
		return err
	}
	return tx.Commit()
}

// eachTable runs query (a format with the table's place) on the live
// tail and the archive; exactly one of them must hold the event at seq.
func eachTable(ctx context.Context, tx *sqlx.Tx, seq uint64, query string, args ...any) error {
	n := int64(0)
	for _, table := range eventTables {
		res, err := tx.ExecContext(ctx, fmt.Sprintf(query, table), args...)
		if err != nil {
			return err
		}
		k, _ := res.RowsAffected()
		n += k
	}
	if n != 1 {
		return fmt.Errorf("%d events at sequence %d", n, seq)
	}
	return nil
}

// swap exchanges everything but the sequence of the events at a and b.
func swap(ctx context.Context, tx *sqlx.Tx, a, b uint64) error {
	read := func(seq uint64) (driver.Event, string, error) {
		for _, table := range eventTables {
			var e driver.Event
			err := tx.QueryRowxContext(ctx, `SELECT `+eventColumns+` FROM `+table+` WHERE sequence = ?`, seq).
				Scan(&e.Sequence, &e.ProjectID, &e.Kind, &e.Timestamp, &e.TimestampMs, &e.Data, &e.Hash)
			if err == nil {
				return e, table, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return e, "", err
			}
		}
		return driver.Event{}, "", fmt.Errorf("no event at sequence %d", seq)
	}
	ea, ta, err := read(a)
	if err != nil {
		return err
	}
	eb, tb, err := read(b)
	if err != nil {
		return err
	}
	for _, w := range []struct {
		table string
		seq   uint64
		e     driver.Event
	}{{ta, a, eb}, {tb, b, ea}} {
		if err := one(tx.ExecContext(ctx, `UPDATE `+w.table+` SET project_id = ?, kind = ?, timestamp = ?, timestamp_ms = ?, data = ?, hash = ?
			WHERE sequence = ?`, w.e.ProjectID, w.e.Kind, w.e.Timestamp, w.e.TimestampMs, w.e.Data, w.e.Hash, w.seq)); err != nil {
			return err
		}
	}
	return nil
}

// one checks that a statement changed exactly one row.
func one(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%d rows changed, not 1", n)
	}
	return nil
}

// Raw appends events to a ledger file directly: one writer connection
// with the driver's DSN (WAL, synchronous=FULL, IMMEDIATE transactions),
// the driver's INSERT, prepared once, and nothing above them: no
// decision, no chain hash, no projects rows, no snapshots. It is what the
// ledger's write path is measured against, and a fast way to lay down a
// long history (see OpenRaw for how such a history becomes a ledger).
type Raw struct {
	db  *sqlx.DB
	ins *sqlx.Stmt
	now func() time.Time
}

// insertEventSQL is the driver's INSERT of an event.
const insertEventSQL = `INSERT INTO events (` + eventColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`

// OpenRaw opens (creating if need be) the ledger file at path for Raw
// appends, migrated up to schema version (0: the newest). A file at
// version 5, the schema before the projects table, is how a raw history
// becomes a ledger: the next sqlite.Open migrates it, deriving every
// project's row from its events, and ledger.Open summarizes them. At the
// newest version Raw writes no projects rows, so the ledger does not see
// the projects of raw events.
func OpenRaw(ctx context.Context, path string, version int64) (*Raw, error) {
	db, err := rawConn(path)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Raw, error) {
		db.Close()
		return nil, fmt.Errorf("open %s raw: %w", path, err)
	}
	p, err := sqlite.NewMigrator(db)
	if err != nil {
		return fail(err)
	}
	if version == 0 {
		_, err = p.Up(ctx)
	} else {
		_, err = p.UpTo(ctx, version)
	}
	if err != nil {
		return fail(err)
	}
	ins, err := db.PreparexContext(ctx, insertEventSQL)
	if err != nil {
		return fail(err)
	}
	return &Raw{db: db, ins: ins, now: time.Now}, nil
}

// Append inserts events in one transaction and returns the sequence of
// the last. An event's Sequence 0 is the next after the highest so far
// (read inside the transaction, as the ledger's writer does); its
// TimestampMs 0 is the clock, read once per call inside the transaction;
// its Timestamp is always TimestampMs / 1000, as the schema wants. Hash
// is stored as given (nil: none).
func (r *Raw) Append(ctx context.Context, events []driver.Event) (uint64, error) {
	tx, err := r.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var tail uint64
	if err := tx.GetContext(ctx, &tail, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`); err != nil {
		return 0, err
	}
	ins := tx.StmtxContext(ctx, r.ins)
	defer ins.Close()
	now := r.now().UnixMilli()
	for _, e := range events {
		if e.Sequence == 0 {
			e.Sequence = tail + 1
		}
		tail = max(tail, e.Sequence)
		if e.TimestampMs == 0 {
			e.TimestampMs = now
		}
		if _, err := ins.ExecContext(ctx, e.Sequence, e.ProjectID, e.Kind, e.TimestampMs/1000, e.TimestampMs, e.Data, e.Hash); err != nil {
			return 0, err
		}
	}
	return tail, tx.Commit()
}

// Close closes the connection.
func (r *Raw) Close() error {
	return errors.Join(r.ins.Close(), r.db.Close())
}

// Contents is everything a ledger file holds of the ledger, read in one
// transaction.
type Contents struct {
	// Integrity is SQLite's integrity_check: "ok" when the file is
	// sound.
	Integrity string
	// LastSequence is the highest sequence ever appended (the counter
	// the next append continues from), LastMs the time of the newest
	// live event.
	LastSequence uint64
	LastMs       int64
	// Events is the whole history, archive and live tail, in sequence
	// order; Live counts each project's events in the live tail.
	Events    []driver.Event
	Live      map[string]int
	Snapshots []driver.Snapshot
	// Projects is the projects table, in creation order (nil for a file
	// from before it).
	Projects []driver.Project
}

// ReadAll reads the ledger file at path as it is, through a read-only
// driver: with or without a daemon running, creating and migrating
// nothing.
func ReadAll(ctx context.Context, path string) (Contents, error) {
	c := Contents{Live: map[string]int{}}
	err := read(ctx, path, func(r driver.Reader) error {
		var err error
		if c.Integrity, err = r.Integrity(ctx); err != nil {
			return err
		}
		if c.LastSequence, c.LastMs, err = r.LastSequence(ctx); err != nil {
			return err
		}
		if err := r.History(ctx, "", 0, maxSeq, func(e driver.Event) error {
			c.Events = append(c.Events, e)
			return nil
		}); err != nil {
			return err
		}
		if c.Snapshots, err = r.Snapshots(ctx, ""); err != nil {
			return err
		}
		if c.Projects, err = r.Projects(ctx, driver.ProjectFilter{}); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range c.Events {
			if seen[e.ProjectID] {
				continue
			}
			seen[e.ProjectID] = true
			if err := r.Live(ctx, e.ProjectID, 0, maxSeq, 0, func(driver.Event) error {
				c.Live[e.ProjectID]++
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return c, err
}

// Each calls fn with every event of the ledger file at path, archive and
// live tail, in sequence order, in one read-only transaction: ReadAll's
// Events without holding them all.
func Each(ctx context.Context, path string, fn func(driver.Event) error) error {
	return read(ctx, path, func(r driver.Reader) error { return r.History(ctx, "", 0, maxSeq, fn) })
}

// maxSeq is past every sequence.
const maxSeq = 1<<63 - 1

func read(ctx context.Context, path string, fn func(driver.Reader) error) error {
	db, err := sqlite.OpenReadOnly(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Read(ctx, fn)
}
