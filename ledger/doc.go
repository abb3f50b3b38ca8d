// Package ledger is the SQLite event store of one scv instance: the
// append-only events table, the single writer that appends to it, and the
// committed state the reducer derives from it.
//
// # Writing
//
// Execute takes a reducer.Command, stamps it with the ledger's clock,
// decides it with reducer.Decide against the state read inside the write
// transaction, inserts its events and folds them in with reducer.Evolve,
// and returns once COMMIT returned (WAL, synchronous=FULL): an
// acknowledged write is on disk. A refused command appends nothing and
// returns the reducer's sentinel error. Concurrent callers are batched
// into one transaction (group commit); one caller at a time leads the
// batch, so there is one writer and never an SQLITE_BUSY storm.
//
// # Reading
//
// Project returns the committed state of a project; Events pages through
// its stored events on a separate read-only pool. Neither waits for the
// writer. MarkStale is one sweep of the stale-run detector; the daemon
// calls it on a timer.
//
// # Errors
//
// Besides the reducer's refusals, the ledger returns ErrClosed and
// ErrStorage (ErrStorageFull, which wraps it, when the disk or the file
// size limit ran out; ErrFailpoint under an injected failure); Open and
// CheckFile also return ErrNotWritable and ErrCorrupt. No driver error
// leaves the package.
//
// # Storage
//
// SQLite specifics (driver, DSN, pragmas, SQL) live here and in package
// migrations only, so that another store can later play the same part.
package ledger
