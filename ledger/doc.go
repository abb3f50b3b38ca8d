// Package ledger is the project ledger's logic, written once above a
// database driver (scv/ledger/driver): the append-only history of every
// project, the single writer that appends to it, and the committed state
// the reducer derives from it. It runs no SQL; scv/ledger/sqlite and
// scv/ledger/postgres do.
//
// # Writing
//
// Execute queues a reducer.Command. One caller at a time leads the writer
// (group commit): it takes every queued command into one transaction that
// holds the database's write lock, stamps each with the batch's time (the
// driver's clock: the server's, for a database daemons share), decides it
// with reducer.Decide against the project's newest state, gives its events
// their sequences and their links in the project's hash chain, folds them
// in with reducer.Evolve, appends them, and rewrites the project's row.
// Every caller is answered once COMMIT returned: an acknowledged write is
// durable. A refused command appends nothing and returns the reducer's
// sentinel error; the batch goes on without it. Submit queues a command
// without waiting for it: the goroutine that committed its batch calls
// back with the answer, once it has handed the writer's part on, so that
// a server answers a batch from one goroutine instead of waking one per
// caller. SubmitAll and ExecuteAll queue several commands at once, a
// group the writer never splits: they share one transaction, each decided
// on its own (a JSON-RPC batch's writes).
//
// # Reading
//
// Project returns the committed, immutable state of a project. Projects
// are loaded on demand, from the latest snapshot and the events after it
// (the one rebuild path), and kept in a bounded cache (Options.CacheSize).
// Reads never wait for the writer. On a shared database a cached project
// is checked against the database's head of it first, so a read reflects
// every write acknowledged before it, by any daemon. Projects lists the
// projects table (Summary); EventsPage pages through a project's history
// (Row). Those types are the ledger's own: no driver type crosses its API
// but the Driver it is opened on.
//
// # Maintenance
//
// MarkStale is one sweep of the stale-run detector, Compact folds a long
// live tail into a snapshot (one of more than CompactStep events in steps,
// a snapshot each), both fenced by a Lease when daemons share the
// database. ProjectAt derives a project at a past sequence; Verify, Export
// and VerifyBundle check a history's chains and snapshots; Copy moves a
// ledger between two drivers.
//
// # Errors
//
// Besides the reducer's refusals, the ledger returns ErrClosed,
// ErrBeyondHead, ErrLeaseLost and the driver's ErrStorage (ErrStorageFull,
// ErrUnavailable, which wrap it). No database error leaves the driver.
// Every error is of one of the reducer's kinds (ErrClosed is
// reducer.ErrUnavailable, ErrBeyondHead reducer.ErrInvalidArgument,
// ErrLeaseLost reducer.ErrConflict, the driver's errors
// reducer.ErrStorage and the more particular ErrStorageFull and
// ErrUnavailable), so the wire maps them without knowing the ledger.
package ledger
