package postgres

import "github.com/jackc/pgx/v5/pgxpool"

// PoolOf is the driver's connection pool, for tests that look at what its
// connections run with.
func PoolOf(d *DB) *pgxpool.Pool { return d.pool }

// SetNoHeadLock has d's write transactions read ledger_head without
// locking it: the broken variant of TestHeadWithoutItsLock.
func SetNoHeadLock(d *DB) { d.noHeadLock = true }
