package sqlitetest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"scv/ledger/sqlite"
)

// What tests of whole files need to see of a ledger file below the
// driver: every row as it is stored, and where the events lie on disk.

// rawReader is one read-only connection to the file at path, with the
// driver's read-only settings (it recovers a WAL left by a crash, as
// every opener does, and changes nothing else).
func rawReader(path string) (*sqlx.DB, error) {
	db, err := sqlx.Open("sqlite", sqlite.DSN(path, true))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// Dump is every row of every table of the file at path (SQLite's own
// included), tables by name, rows in rowid order, one line each,
// `table: value value …` with blobs in hex: two files hold the same
// tables exactly when their dumps are equal. No daemon may be writing
// the file.
func Dump(ctx context.Context, path string) (string, error) {
	db, err := rawReader(path)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var tables []string
	if err := db.SelectContext(ctx, &tables, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`); err != nil {
		return "", fmt.Errorf("dump %s: %w", path, err)
	}
	var b strings.Builder
	for _, table := range tables {
		if err := dumpTable(ctx, db, table, &b); err != nil {
			return "", fmt.Errorf("dump %s: table %s: %w", path, table, err)
		}
	}
	return b.String(), nil
}

func dumpTable(ctx context.Context, db *sqlx.DB, table string, b *strings.Builder) error {
	rows, err := db.QueryxContext(ctx, `SELECT * FROM "`+strings.ReplaceAll(table, `"`, `""`)+`" ORDER BY rowid`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.SliceScan()
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "%s:", table)
		for _, v := range vals {
			if bs, ok := v.([]byte); ok {
				fmt.Fprintf(b, " %x", bs)
			} else {
				fmt.Fprintf(b, " %v", v)
			}
		}
		b.WriteByte('\n')
	}
	return rows.Err()
}

// Pages is where a table lies in a ledger file: its leaf pages (numbered
// from 1, as SQLite's dbstat numbers them), in order, and the file's page
// size and page count. A test that corrupts a page of the events on disk
// finds one with it.
type Pages struct {
	Leaves []int
	Size   int
	Count  int
}

// TablePages reads where table lies in the file at path.
func TablePages(ctx context.Context, path, table string) (Pages, error) {
	db, err := rawReader(path)
	if err != nil {
		return Pages{}, err
	}
	defer db.Close()
	var p Pages
	if err := db.SelectContext(ctx, &p.Leaves, `SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno`, table); err != nil {
		return Pages{}, fmt.Errorf("pages of %s in %s: %w", table, path, err)
	}
	if err := db.GetContext(ctx, &p.Size, `PRAGMA page_size`); err != nil {
		return Pages{}, fmt.Errorf("pages of %s: %w", path, err)
	}
	if err := db.GetContext(ctx, &p.Count, `PRAGMA page_count`); err != nil {
		return Pages{}, fmt.Errorf("pages of %s: %w", path, err)
	}
	return p, nil
}
