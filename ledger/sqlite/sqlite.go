// Package sqlite is the ledger's SQLite driver (modernc.org/sqlite, pure
// Go): the embedded default, one database file per daemon. It implements
// driver.Driver for the project ledger and local.Store for the machine's
// own state, both in the same file, and keeps every line of SQL they run.
//
// # Opening
//
// Open creates the file (and its folder, 0700) if needed, migrates it to
// the newest schema under an exclusive flock, and opens two pools: one
// writer connection, whose transactions begin IMMEDIATE (the write lock
// is held before anything is read, so writes queue in the ledger instead
// of contending on SQLITE_BUSY), and up to eight read-only readers, which
// in WAL mode see the last committed transaction and never wait for the
// writer. Every connection runs with synchronous=FULL: COMMIT returns once
// the WAL is on disk. OpenReadOnly opens a file as it is, for the
// auditor's tools, creating and migrating nothing.
//
// # Errors
//
// Every failure is returned wrapping driver.ErrStorage; a write that ran
// out of room (a full disk, or the process's file size limit) wraps
// driver.ErrStorageFull. Open and CheckFile refuse a file they cannot use
// with ErrNotWritable or ErrCorrupt, leaving it as it is.
package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"golang.org/x/sys/unix"
	"modernc.org/sqlite" // the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"scv/migrations"
)

// pragmas are set on every connection at open.
var pragmas = []string{
	"journal_mode(WAL)",
	"synchronous(FULL)",
	"busy_timeout(5000)",
	// After a checkpoint that resets the WAL, truncate the -wal file back
	// to at most this size: readers that held a checkpoint off let it grow.
	"journal_size_limit(67108864)",
	"foreign_keys(ON)",
}

// DSN builds the modernc.org/sqlite data source name the driver opens
// path with: its pragmas, and, for the writer, IMMEDIATE transactions, so
// that the writer takes the lock before it reads the tail.
func DSN(path string, readOnly bool) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	if readOnly {
		q.Add("_pragma", "query_only(ON)")
	} else {
		q.Set("_txlock", "immediate")
	}
	// A plain file name, not a file: URI, so SQLite takes the path
	// literally (no %-decoding); the driver strips the query itself.
	return path + "?" + q.Encode()
}

// openSQLite opens the writer and reader pools of the database at path,
// creating it and its folder as needed, and migrates it to the newest
// schema. A file it could not write, or one that is not a sound SQLite
// database, is refused as it is: never replaced, never written to.
func openSQLite(ctx context.Context, path string) (w, r *sqlx.DB, err error) {
	if strings.Contains(path, "?") {
		return nil, nil, fmt.Errorf("open ledger: database path %q may not contain '?'", path)
	}
	// Before SQLite opens the file: see migrateLocked.
	if err := CheckFile(path); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("open ledger: %w", err)
	}
	if err := migrateLocked(ctx, path); err != nil {
		return nil, nil, openError(ctx, path, err)
	}
	w, err = sqlx.Open("sqlite", DSN(path, false))
	if err != nil {
		return nil, nil, fmt.Errorf("open ledger: %w", err)
	}
	// One writer connection: appends queue in the ledger, never on
	// SQLITE_BUSY.
	w.SetMaxOpenConns(1)
	r, err = sqlx.Open("sqlite", DSN(path, true))
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open ledger: %w", err)
	}
	r.SetMaxOpenConns(8)
	for _, db := range []*sqlx.DB{w, r} {
		if err := db.PingContext(ctx); err != nil {
			w.Close()
			r.Close()
			return nil, nil, openError(ctx, path, err)
		}
	}
	return w, r, nil
}

// migrateLocked migrates under an exclusive flock(2) on the database file,
// so that processes opening a new database at once do not race to create
// the schema. SQLite's own locks are fcntl(2) locks, which flock does not
// touch.
//
// But closing any descriptor of a file drops every fcntl lock the process
// holds on it, SQLite's included: the migration runs on a connection of
// its own, closed before the flock's descriptor is. Were a connection
// left open past that close, the process would no longer hold the shared
// lock SQLite keeps on a WAL database, and the next other process to
// close the database (sqlite3 taking a backup) would take it for the last
// user, checkpoint, and delete the -wal file under the ledger: every
// commit after that goes to a deleted file, and a crash loses it.
func migrateLocked(ctx context.Context, path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("migrate: lock %s: %w", path, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	db, err := sqlx.Open("sqlite", DSN(path, false))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	db.SetMaxOpenConns(1)
	err = Migrate(ctx, db)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("migrate: %w", cerr)
	}
	return err
}

// Migrate applies every embedded migration that db lacks.
func Migrate(ctx context.Context, db *sqlx.DB) error {
	p, err := NewMigrator(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// NewMigrator returns a goose Provider over the embedded migrations.
func NewMigrator(db *sqlx.DB) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectSQLite3, db.DB, migrations.SQLite)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}

// Errors Open returns for a database file it will not use. Either way the
// file is left exactly as it was.
var (
	// ErrNotWritable: the database file, or its folder, cannot be
	// written by this process.
	ErrNotWritable = errors.New("database not writable")
	// ErrCorrupt: the file is not a sound SQLite database: its header is
	// not SQLite's, or SQLite found damaged pages in it.
	ErrCorrupt = errors.New("database damaged")
)

// sqliteHeader is how every SQLite 3 database file begins.
const sqliteHeader = "SQLite format 3\x00"

// CheckFile checks, without changing anything, that the database at path
// can be opened for writing: it does not exist yet (Open creates it), or
// it is a regular file that is empty or starts with the SQLite header,
// and this process may write it, its -wal and -shm files, and its folder
// (where SQLite creates them). The daemon runs it before it takes any
// lock, so that a refused database gets no new file beside it; Open runs
// it again.
//
// It must run before SQLite opens the file in this process: it opens and
// closes a descriptor of it, which drops the process's fcntl locks on it
// (see migrateLocked).
func CheckFile(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Open creates it; its folder too if need be.
		dir := filepath.Dir(path)
		if _, err := os.Stat(dir); err == nil {
			if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
				return fmt.Errorf("open ledger: %w: cannot create %s in %s: %v", ErrNotWritable, filepath.Base(path), dir, err)
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	switch {
	case fi.IsDir():
		return fmt.Errorf("open ledger: %s is a directory, not a database file", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("open ledger: %s is not a regular file (mode %s), not a database file", path, fi.Mode())
	}
	// SQLite would open a file it cannot write read-only, and fail at the
	// first write; one in a folder it cannot write would fail to create
	// its -wal file. Refuse both now, by name.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := unix.Access(p, unix.R_OK|unix.W_OK); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("open ledger: %w: %s: %v (it was left as it is)", ErrNotWritable, p, err)
		}
	}
	dir := filepath.Dir(path)
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("open ledger: %w: the folder %s of %s: %v (SQLite creates %s-wal and %s-shm there; the database was left as it is)",
			ErrNotWritable, dir, path, err, filepath.Base(path), filepath.Base(path))
	}
	return checkHeader(path, fi.Size())
}

// checkHeader refuses a non-empty file that does not start with the
// SQLite header. SQLite itself would refuse it too (file is not a
// database) but without naming the file.
func checkHeader(path string, size int64) error {
	if size == 0 {
		return nil // what Open creates, before the first migration
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("open ledger: read %s: %w", path, err)
	}
	if string(head[:n]) != sqliteHeader {
		return fmt.Errorf("open ledger: %w: %s does not start with the SQLite header (its first bytes are %q): it is not a SQLite database, or its header was overwritten; it was left as it is",
			ErrCorrupt, path, head[:n])
	}
	return nil
}

// QuickCheck runs SQLite's quick_check on the database at path, read-only,
// and returns an error wrapping ErrCorrupt that names the file and the
// first damage found, or nil if SQLite finds none. It reads every page,
// so Open does not run it on every start (0.3 to 0.8 s per million events
// of history, where a start after compaction takes milliseconds); Open
// runs it when opening fails, to say why, and `scv ledger verify` runs the
// full integrity_check.
func QuickCheck(ctx context.Context, path string) error {
	db, err := sqlx.Open("sqlite", DSN(path, true))
	if err != nil {
		return fmt.Errorf("quick check: %w", err)
	}
	defer db.Close()
	lines, err := quickCheck(ctx, db)
	switch {
	case len(lines) == 1 && lines[0] == "ok" && err == nil:
		return nil
	case len(lines) > 0 && lines[0] != "ok":
		// The check may stop at a page too damaged to go on: what it
		// found until then is the news.
		return fmt.Errorf("open ledger: %w: %s: SQLite's quick_check found: %s; it was left as it is",
			ErrCorrupt, path, strings.Join(lines, "; "))
	case damaged(err):
		return fmt.Errorf("open ledger: %w: %s: SQLite's quick_check failed: %v; it was left as it is", ErrCorrupt, path, err)
	default:
		return fmt.Errorf("quick check %s: %w", path, err)
	}
}

// quickCheck returns the lines of PRAGMA quick_check, up to three
// problems, and the error it ended with, if any.
func quickCheck(ctx context.Context, db *sqlx.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check(3)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return lines, err
		}
		lines = append(lines, strings.ReplaceAll(s, "\n", " "))
	}
	return lines, rows.Err()
}

// openError is the error of an Open that failed at err: if SQLite finds
// the file damaged, that (naming the file and the damage), else err.
func openError(ctx context.Context, path string, err error) error {
	if qerr := QuickCheck(ctx, path); errors.Is(qerr, ErrCorrupt) {
		return qerr
	}
	if damaged(err) {
		return fmt.Errorf("open ledger: %w: %s: %v; it was left as it is", ErrCorrupt, path, err)
	}
	return fmt.Errorf("open ledger %s: %w", path, err)
}

// damaged reports whether err is SQLite finding a file not a database or
// a page malformed.
func damaged(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}
