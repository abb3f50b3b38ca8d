// Package migrations holds the ledger's schemas as goose SQL migrations,
// one folder per database, embedded in the binary.
//
// Files are named NNNNN_what.sql with `-- +goose Up` and `-- +goose Down`
// sections. Apply them with goose's Provider (no global goose state):
//
//	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite)
//	_, err = p.Up(ctx)
//
// Each driver package (scv/ledger/sqlite, …) does this at open.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql
var sqliteFiles embed.FS

//go:embed postgres/*.sql
var postgresFiles embed.FS

// SQLite holds the SQLite schema's migrations; Postgres the PostgreSQL
// schema's (the project ledger only: a fleet keeps the machine's own
// state in each daemon's local SQLite file).
var (
	SQLite   = sub(sqliteFiles, "sqlite")
	Postgres = sub(postgresFiles, "postgres")
)

func sub(f embed.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the folder is embedded above
	}
	return s
}
