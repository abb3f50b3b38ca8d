// Package pgtest gives tests a fresh PostgreSQL database of their own on
// the server named by $SCV_TEST_PG (a URL whose role may create
// databases), and drops it when the test ends. With $SCV_TEST_PG unset,
// the test is skipped with a message saying how to run it, unless
// $SCV_REQUIRE_PG is set (as .ci/run sets it), when it fails: there, a
// missing server is a broken CI, not a reason to skip.
//
// `make pg` (or .ci/run) starts a private cluster and prints the URL.
package pgtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"os"
	"scv/ledger/driver"
	"scv/ledger/drivertest"
	"scv/ledger/postgres"
	"scv/ledger/postgres/pgcluster"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Env names the server's URL; RequireEnv, set, makes its absence fail.
const (
	Env        = "SCV_TEST_PG"
	RequireEnv = "SCV_REQUIRE_PG"
)

var seq atomic.Int64

// Server is the admin URL of the test server, or skips (or fails) t.
func Server(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u == "" {
		msg := "no PostgreSQL for this test: set " + Env + " to a server URL whose role may create databases " +
			"(`make pg` starts a private cluster and prints one)"
		if os.Getenv(RequireEnv) != "" {
			t.Fatal(msg + "; " + RequireEnv + " is set, so this is a failure")
		}
		t.Skip(msg)
	}
	return u
}

// Database creates a fresh database on the test server and returns its
// URL; it is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	admin := Server(t)
	name := fmt.Sprintf("scvtest_%d_%d", os.Getpid(), seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to %s: %v", Env, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return WithDatabase(admin, name)
}

// WithDatabase is the URL u naming database name instead.
func WithDatabase(u, name string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Path = "/" + strings.TrimPrefix(name, "/")
	return p.String()
}

// Exec runs statements on the database at u, for tests that tamper with
// what the driver wrote (as a careless hand would).
func Exec(t testing.TB, u string, statements ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	for _, s := range statements {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// BouncerEnv, set, makes a missing pgbouncer program fail the tests that
// need one instead of skipping them.
const BouncerEnv = "SCV_REQUIRE_PGBOUNCER"

// NeedBouncer skips t where the pgbouncer program is missing, or fails it
// when BouncerEnv is set.
func NeedBouncer(t testing.TB) {
	t.Helper()
	if !pgcluster.BouncerInstalled() {
		msg := "no pgbouncer for this test: install PgBouncer (Debian: apt-get install pgbouncer)"
		if os.Getenv(BouncerEnv) != "" {
			t.Fatal(msg + "; " + BouncerEnv + " is set, so this is a failure")
		}
		t.Skip(msg)
	}
}

// Bouncer starts a PgBouncer in pool mode mode in front of the test server,
// stopped when the test ends; it skips (or fails) t where PostgreSQL or
// pgbouncer is missing.
func Bouncer(t testing.TB, mode string) *pgcluster.Bouncer {
	t.Helper()
	return BouncerOf(t, Server(t), mode)
}

// BouncerOf starts a PgBouncer in pool mode mode in front of the server
// at upstream (any database), stopped when the test ends; it skips (or
// fails) t where pgbouncer is missing.
func BouncerOf(t testing.TB, upstream, mode string) *pgcluster.Bouncer {
	t.Helper()
	NeedBouncer(t)
	// A short folder: the socket's path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "scvpgb")
	if err != nil {
		t.Fatal(err)
	}
	b := &pgcluster.Bouncer{Dir: dir, Upstream: upstream, Mode: mode}
	t.Cleanup(func() {
		b.Stop()
		os.RemoveAll(dir)
	})
	if err := b.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	return b
}

// Via is the URL u of a database on the test server, reached through b.
func Via(b *pgcluster.Bouncer, u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return b.URL(strings.TrimPrefix(p.Path, "/"))
}

// Harness is drivertest's Harness for PostgreSQL: each database is a fresh
// one on the test server, reached through Via when it is set.
type Harness struct {
	Via *pgcluster.Bouncer
}

var _ drivertest.Harness = Harness{}

// Create makes a fresh database, migrated, and returns its URL.
func (h Harness) Create(t *testing.T) string {
	t.Helper()
	u := Database(t)
	if h.Via != nil {
		u = Via(h.Via, u)
	}
	db, err := postgres.Open(context.Background(), u, postgres.Options{})
	if err != nil {
		t.Fatalf("create %s: %v", postgres.Redact(u), err)
	}
	db.Close()
	return u
}

// Open opens the database at u with postgres.Open.
func (Harness) Open(t *testing.T, u string) driver.Driver {
	t.Helper()
	db, err := postgres.Open(context.Background(), u, postgres.Options{})
	if err != nil {
		t.Fatalf("open %s: %v", postgres.Redact(u), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// OpenReadOnly opens the database at u read-only.
func (Harness) OpenReadOnly(t *testing.T, u string) driver.Driver {
	t.Helper()
	db, err := postgres.Open(context.Background(), u, postgres.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s read-only: %v", postgres.Redact(u), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Tamper changes the database at u through a connection of its own, with
// the append-only triggers of the events and the archive disabled (for
// good: the database is evidence of tampering from then on).
func (Harness) Tamper(t *testing.T, u string, x drivertest.Tampering) error {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
	defer conn.Close(ctx)
	if err := tamper(ctx, conn, x); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			return err
		}
		t.Fatalf("tamper %s with %#v: %v", postgres.Redact(u), x, err)
	}
	return nil
}

const eventColumns = `sequence, project_id, kind, timestamp, timestamp_ms, data, hash`

var eventTables = []string{"events", "events_archive"}

func tamper(ctx context.Context, conn *pgx.Conn, x drivertest.Tampering) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, table := range eventTables {
		if _, err := tx.Exec(ctx, `ALTER TABLE `+table+` DISABLE TRIGGER USER`); err != nil {
			return err
		}
	}
	switch x := x.(type) {
	case drivertest.EditEvent:
		err = eachTable(ctx, tx, x.Sequence, `UPDATE %s SET
			data = CASE WHEN $1 = '' THEN data ELSE $1 END,
			project_id = CASE WHEN $2 = '' THEN project_id ELSE $2 END,
			timestamp_ms = timestamp_ms + $3, timestamp = div(timestamp_ms + $3, 1000)
			WHERE sequence = $4`, x.Data, x.ProjectID, x.ShiftMs, int64(x.Sequence))
	case drivertest.DeleteEvent:
		err = eachTable(ctx, tx, x.Sequence, `DELETE FROM %s WHERE sequence = $1`, int64(x.Sequence))
	case drivertest.SwapEvents:
		err = swap(ctx, tx, x.A, x.B)
	case drivertest.InsertEvent:
		e := x.Event
		seq := int64(e.Sequence)
		if seq == 0 {
			if err := tx.QueryRow(ctx, `SELECT seq + 1 FROM ledger_head`).Scan(&seq); err != nil {
				return err
			}
		}
		if _, err = tx.Exec(ctx, `INSERT INTO events (`+eventColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			seq, e.ProjectID, e.Kind, e.Timestamp, e.TimestampMs, e.Data, e.Hash); err == nil {
			_, err = tx.Exec(ctx, `UPDATE ledger_head SET seq = greatest(seq, $1)`, seq)
		}
	case drivertest.EditSnapshot:
		sum := sha256.Sum256(x.State)
		err = one(tx.Exec(ctx, `UPDATE snapshots SET state = $1, state_hash = CASE WHEN $2 THEN $3 ELSE state_hash END
			WHERE project_id = $4 AND sequence = $5`, x.State, x.FixHash, sum[:], x.ProjectID, int64(x.Sequence)))
	case drivertest.SetProjectRow:
		r := x.Row
		var status, phase any
		if r.Summarized {
			status, phase = r.Status, r.Phase
		}
		_, err = tx.Exec(ctx, `INSERT INTO projects (id, name, workspace, created_seq, head, live, status, phase, tasks, done, running,
			created_ms, updated_ms, heartbeat_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			ON CONFLICT (id) DO UPDATE SET name = excluded.name, workspace = excluded.workspace, created_seq = excluded.created_seq,
			head = excluded.head, live = excluded.live, status = excluded.status, phase = excluded.phase, tasks = excluded.tasks,
			done = excluded.done, running = excluded.running, created_ms = excluded.created_ms, updated_ms = excluded.updated_ms,
			heartbeat_ms = excluded.heartbeat_ms`,
			r.ID, r.Name, r.Workspace, int64(r.CreatedSeq), int64(r.Head), r.Live, status, phase, r.Tasks, r.Done, r.Running,
			r.CreatedMs, r.UpdatedMs, r.HeartbeatMs)
	case drivertest.DeleteProjectRow:
		err = one(tx.Exec(ctx, `DELETE FROM projects WHERE id = $1`, x.ID))
	default:
		return fmt.Errorf("%w: %T", errors.ErrUnsupported, x)
	}
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// eachTable runs query (a format with the table's place) on the live
// tail and the archive; exactly one of them must hold the event at seq.
func eachTable(ctx context.Context, tx pgx.Tx, seq uint64, query string, args ...any) error {
	n := int64(0)
	for _, table := range eventTables {
		tag, err := tx.Exec(ctx, fmt.Sprintf(query, table), args...)
		if err != nil {
			return err
		}
		n += tag.RowsAffected()
	}
	if n != 1 {
		return fmt.Errorf("%d events at sequence %d", n, seq)
	}
	return nil
}

// swap exchanges everything but the sequence of the events at a and b.
func swap(ctx context.Context, tx pgx.Tx, a, b uint64) error {
	read := func(seq uint64) (driver.Event, string, error) {
		for _, table := range eventTables {
			var e driver.Event
			var s int64
			err := tx.QueryRow(ctx, `SELECT `+eventColumns+` FROM `+table+` WHERE sequence = $1`, int64(seq)).
				Scan(&s, &e.ProjectID, &e.Kind, &e.Timestamp, &e.TimestampMs, &e.Data, &e.Hash)
			if err == nil {
				return e, table, nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
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
		if err := one(tx.Exec(ctx, `UPDATE `+w.table+` SET project_id = $1, kind = $2, timestamp = $3, timestamp_ms = $4, data = $5, hash = $6
			WHERE sequence = $7`, w.e.ProjectID, w.e.Kind, w.e.Timestamp, w.e.TimestampMs, w.e.Data, w.e.Hash, int64(w.seq))); err != nil {
			return err
		}
	}
	return nil
}

// one checks that a statement changed exactly one row.
func one(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return err
	}
	if n := tag.RowsAffected(); n != 1 {
		return fmt.Errorf("%d rows changed, not 1", n)
	}
	return nil
}
