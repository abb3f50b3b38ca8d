package daemon

import (
	"context"
	"os"
	"path/filepath"

	"scv/control/rpc"
	"scv/ledger/driver"
	"scv/ledger/postgres"
	"scv/ledger/sqlite"
)

// DefaultDB is the ledger database when none is given: $SCV_DB, else
// ledger.db in the state folder ($XDG_STATE_HOME/scv).
func DefaultDB() string {
	if p := os.Getenv("SCV_DB"); p != "" {
		return p
	}
	return filepath.Join(rpc.StateDir(), "ledger.db")
}

// DefaultLocalDB is the machine's own store beside a shared ledger when
// none is given: $SCV_LOCAL_DB, else local.db in the state folder.
func DefaultLocalDB() string {
	if p := os.Getenv("SCV_LOCAL_DB"); p != "" {
		return p
	}
	return filepath.Join(rpc.StateDir(), "local.db")
}

// OpenLedger opens the ledger database db, a SQLite file or a
// PostgreSQL URL, without a daemon: read-only, as it is, creating and
// migrating nothing (the auditor's tools: verify, export, --at, the
// pictures), or writable, created and migrated if need be (the target
// of `ledger copy`).
func OpenLedger(ctx context.Context, db string, writable bool) (driver.Driver, error) {
	switch {
	case postgres.IsURL(db):
		return postgres.Open(ctx, db, postgres.Options{ReadOnly: !writable})
	case writable:
		return sqlite.Open(ctx, db, sqlite.Options{})
	}
	return sqlite.OpenReadOnly(ctx, db)
}
