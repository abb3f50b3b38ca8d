package ledger

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"scv/migrations"
)

// pragmas are set on every connection at open.
var pragmas = []string{
	"journal_mode(WAL)",
	"synchronous(FULL)",
	"busy_timeout(5000)",
	"foreign_keys(ON)",
}

// DSN builds the modernc.org/sqlite data source name the ledger opens path
// with: its pragmas, and, for the writer, IMMEDIATE transactions, so that
// the writer takes the lock before it reads the tail. Exported for the
// benchmark's raw baseline, which must run with exactly these settings.
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
// schema.
func openSQLite(ctx context.Context, path string) (w, r *sqlx.DB, err error) {
	if strings.Contains(path, "?") {
		return nil, nil, fmt.Errorf("open ledger: database path %q may not contain '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("open ledger: %w", err)
	}
	w, err = sqlx.Open("sqlite", DSN(path, false))
	if err != nil {
		return nil, nil, fmt.Errorf("open ledger: %w", err)
	}
	// One writer connection: appends queue in the ledger, never on
	// SQLITE_BUSY.
	w.SetMaxOpenConns(1)
	if err := migrateLocked(ctx, path, w); err != nil {
		w.Close()
		return nil, nil, err
	}
	r, err = sqlx.Open("sqlite", DSN(path, true))
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open ledger: %w", err)
	}
	r.SetMaxOpenConns(8)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, nil, fmt.Errorf("open ledger: %w", err)
	}
	return w, r, nil
}

// migrateLocked migrates under an exclusive flock(2) on the database file,
// so that processes opening a new database at once do not race to create
// the schema. SQLite's own locks are fcntl(2) locks, which flock does not
// touch.
func migrateLocked(ctx context.Context, path string, db *sqlx.DB) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("migrate: lock %s: %w", path, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return Migrate(ctx, db)
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
	p, err := goose.NewProvider(goose.DialectSQLite3, db.DB, migrations.FS)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}
