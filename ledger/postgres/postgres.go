// Package postgres is the ledger's PostgreSQL driver (jackc/pgx v5, a
// connection pool): one project ledger shared by the daemons of a fleet,
// on any number of machines. It implements driver.Driver and keeps every
// line of SQL it runs; its schema is migrations/postgres, applied with
// goose at Open.
//
// # Order and decisions, fleet-wide
//
// Every write transaction first locks the one row of ledger_head (SELECT
// … FOR UPDATE), which holds the last sequence handed out: writers commit
// one at a time, fleet-wide, and each hands out the sequences after the
// one it read, so sequences are strictly increasing in commit order and
// never reused (no sequence object, which commits out of order and leaves
// gaps). The head moves by compare-and-set (UPDATE … WHERE seq = the head
// read), so a writer whose head is no longer the head cannot commit even
// without the lock: the events' keys alone would not stop it, since
// compaction moves events out of the table that keys them. Under READ COMMITTED every statement after the lock sees what
// the writer before committed, so a command is decided against the
// project's latest committed event. Each daemon batches its commands into
// one such transaction (group commit), which is what keeps a fleet's
// throughput above one transaction per command.
//
// # Clock
//
// Events are stamped with the server's clock (Now), one clock for every
// daemon; the ledger never stamps an event earlier than its project's
// previous one.
//
// # Faults
//
// A lost connection, a server stopped or restarting, a refused
// connection: ErrUnavailable naming the database (without its password).
// Every statement runs under statement_timeout and lock_timeout, so no
// request waits forever on a stuck server or lock; the pool reconnects by
// itself once the server is back.
package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"scv/ledger/driver"
	"scv/migrations"
)

// Defaults of Options.
const (
	DefaultStatementTimeout = 30 * time.Second
	DefaultLockTimeout      = 10 * time.Second
	// DefaultIdleTimeout is idle_in_transaction_session_timeout: a
	// daemon's transactions wait on it for milliseconds between their
	// statements, and one that stops inside its write transaction (paused,
	// swapped out, its machine frozen) holds the ledger's write lock, and
	// so every daemon's writes, until the server ends its session. Shorter
	// than the lock timeout, so that the others' writes wait for it rather
	// than fail.
	DefaultIdleTimeout = 5 * time.Second
	DefaultMaxConns    = 8
)

// Options configure Open.
type Options struct {
	// StatementTimeout bounds every statement, LockTimeout every wait
	// for a lock, IdleTimeout a transaction's wait for its next statement
	// (0: the defaults above).
	StatementTimeout time.Duration
	LockTimeout      time.Duration
	IdleTimeout      time.Duration
	// MaxConns bounds the pool (0: DefaultMaxConns). Writes use one
	// connection at a time (they are serialized anyway); reads the rest.
	MaxConns int32
	// ReadOnly opens for the auditor's tools: nothing is migrated, and
	// every transaction is read-only.
	ReadOnly bool
}

// DB is one PostgreSQL database holding a ledger.
type DB struct {
	pool     *pgxpool.Pool
	name     string // the URL without its password
	readOnly bool
	// noHeadLock reads ledger_head without locking it: a test's broken
	// variant (SetNoHeadLock), which the head's compare-and-set in Append
	// still keeps from committing on a head another writer moved.
	noHeadLock bool
}

// IsURL reports whether db names a PostgreSQL database (postgres:// or
// postgresql://) rather than a file.
func IsURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// Redact is the URL without its password, for messages and logs.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://…"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Open connects to the database at the URL and, unless read-only,
// migrates it to the newest schema.
func Open(ctx context.Context, rawURL string, opts Options) (*DB, error) {
	name := Redact(rawURL)
	cfg, _, err := poolConfig(rawURL, opts)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", name, redactErr(err, rawURL))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", name, redactErr(err, rawURL))
	}
	d := &DB{pool: pool, name: name, readOnly: opts.ReadOnly}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, d.fail(err)
	}
	if !opts.ReadOnly {
		if err := d.migrate(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("migrate %s: %w", name, d.fail(err))
		}
	}
	return d, nil
}

// poolConfig is the pool's configuration: the URL's, with the session
// settings every connection runs with.
func poolConfig(rawURL string, opts Options) (*pgxpool.Config, []setting, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, nil, err
	}
	// Each session setting: Options, else the URL's, else the default.
	// They are set on each new connection, not sent in its start-up
	// message: a pooler in front of the server (PgBouncer) refuses
	// start-up parameters it does not know, and these are among them.
	rp := cfg.ConnConfig.RuntimeParams
	var settings []setting
	set := func(name string, d, def time.Duration) {
		v, inURL := rp[name]
		if d > 0 || !inURL {
			v = fmt.Sprint(cmp.Or(d, def).Milliseconds())
		}
		delete(rp, name)
		settings = append(settings, setting{name, v})
	}
	set("statement_timeout", opts.StatementTimeout, DefaultStatementTimeout)
	set("lock_timeout", opts.LockTimeout, DefaultLockTimeout)
	set("idle_in_transaction_session_timeout", opts.IdleTimeout, DefaultIdleTimeout)
	calls, args := make([]string, len(settings)), make([]any, 0, 2*len(settings))
	for i, s := range settings {
		calls[i] = fmt.Sprintf("set_config($%d, $%d, false)", 2*i+1, 2*i+2)
		args = append(args, s.name, s.value)
	}
	query := "SELECT " + strings.Join(calls, ", ")
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, query, args...)
		return err
	}
	// application_name is one that poolers pass on.
	if _, inURL := rp["application_name"]; !inURL {
		rp["application_name"] = "scv"
	}
	// The pool's size: Options, else the URL's pool_max_conns, else
	// DefaultMaxConns.
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	} else if !hasParam(rawURL, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	// A connection the server dropped is noticed before it is used.
	cfg.HealthCheckPeriod = 5 * time.Second
	return cfg, settings, nil
}

// setting is one session setting a connection runs with.
type setting struct{ name, value string }

// hasParam reports whether the URL's query sets the parameter.
func hasParam(rawURL, name string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Query().Has(name)
}

// migrate applies the embedded migrations, one daemon at a time (goose
// takes a session lock of its own while it migrates).
func (d *DB) migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(d.pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres, goose.WithSessionLocker(locker))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// Name is the database's URL without its password.
func (d *DB) Name() string { return d.name }

// Shared is true: daemons on many machines may write the database.
func (d *DB) Shared() bool { return true }

// Close closes the pool.
func (d *DB) Close() error {
	d.pool.Close()
	return nil
}

// Now is the server's clock.
func (d *DB) Now(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := d.pool.QueryRow(ctx, nowSQL).Scan(&ms); err != nil {
		return time.Time{}, d.fail(err)
	}
	return time.UnixMilli(ms), nil
}

const nowSQL = `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// Begin opens the write transaction and takes the ledger's write lock.
func (d *DB) Begin(ctx context.Context) (driver.Tx, error) {
	if d.readOnly {
		return nil, fmt.Errorf("%w: %s is open read-only", driver.ErrStorage, d.name)
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, d.fail(err)
	}
	t := &writeTx{reader: reader{d: d, q: tx}, tx: tx}
	head := `SELECT seq FROM ledger_head FOR UPDATE`
	if d.noHeadLock {
		head = `SELECT seq FROM ledger_head`
	}
	if err := tx.QueryRow(ctx, head).Scan(&t.head); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return nil, d.fail(err)
	}
	t.locked = true
	return t, nil
}

// Read runs fn in one read-only, repeatable-read transaction: everything
// it reads is of one committed state.
func (d *DB) Read(ctx context.Context, fn func(driver.Reader) error) error {
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return d.fail(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return fn(reader{d: d, q: tx})
}

// fail translates a pgx error: a database that cannot be reached is
// driver.ErrUnavailable naming it, anything else driver.ErrStorage; the
// message never carries the password.
func (d *DB) fail(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, driver.ErrStorage) {
		return err
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %s: %v", driver.ErrUnavailable, d.name, err)
	}
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P05" { // duplicate_prepared_statement
		// pgx names its prepared statements per connection: another
		// client prepared this one on the same server connection.
		return fmt.Errorf("%w: %s: %v: the server connection is shared with other clients "+
			"(a pooler in transaction or statement mode?); the daemon needs session pooling", driver.ErrStorage, d.name, err)
	}
	return fmt.Errorf("%w: %s: %v", driver.ErrStorage, d.name, err)
}

// unreachable reports whether err says the server cannot be reached or
// is going away, as opposed to refusing a statement.
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"),                                               // insufficient resources (too many connections)
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", pe.Code == "57P05": // shutdown, crash, cannot connect now, idle session
			return true
		}
		return false
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	var long *pgproto3.ExceededMaxBodyLenErr
	msg := err.Error()
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, sql.ErrConnDone) || strings.Contains(msg, "conn closed") ||
		strings.Contains(msg, "unexpected EOF") ||
		// A message from the server that does not decode: pgx closes the
		// connection, which has lost its place in the stream, as one that
		// broke. A server stopped while a result is on its way through
		// PgBouncer cuts a row so. At a COMMIT it is as uncertain as a
		// lost connection, and settled the same way.
		errors.As(err, &long) || strings.Contains(msg, " body is invalid") ||
		strings.Contains(msg, " body must have length of ") || strings.Contains(msg, "unknown message type: ")
}

// redactErr keeps a connection string's password out of an error.
func redactErr(err error, rawURL string) error {
	u, perr := url.Parse(rawURL)
	if perr != nil {
		return errors.New("the URL does not parse")
	}
	if p, has := u.User.Password(); has && p != "" && strings.Contains(err.Error(), p) {
		return errors.New(strings.ReplaceAll(err.Error(), p, "xxxxx"))
	}
	return err
}

var _ driver.Driver = (*DB)(nil)
