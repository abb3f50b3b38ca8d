// Package migrations holds the ledger's schema as goose SQL migrations,
// embedded in the binary.
//
// Files are named NNNNN_what.sql with `-- +goose Up` and `-- +goose Down`
// sections. Apply them with goose's Provider (no global goose state):
//
//	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS)
//	_, err = p.Up(ctx)
//
// The ledger package does this at open.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
