// Package driver is the seam between the ledger and a database: the
// operations the ledger's logic (group commit, decide and evolve, the hash
// chain, snapshots and compaction, time travel, verify and export) needs
// from storage, named once, and implemented by one package per database
// (scv/ledger/sqlite; PostgreSQL is the second). The ledger runs no SQL
// itself: each driver keeps the SQL of its dialect. The conformance suite
// scv/ledger/drivertest is what a driver must pass.
//
// # Transactions
//
// Begin opens the one kind of write transaction: it holds the ledger's
// write lock from its first statement, so that no other writer, in this
// process or (for a database that daemons share) on any machine, commits
// between it and its end. Sequences are handed out by the writer inside
// it (LastSequence, then Append with the next ones): they are strictly
// increasing in commit order and never reused. Read runs a function in one
// read-only transaction: everything it reads is of one committed state.
//
// # Errors
//
// A driver translates its database's errors at the edge: a failure is
// returned wrapping ErrStorage (ErrStorageFull when the database had no
// room, ErrUnavailable when it cannot be reached), never as a driver
// error the ledger would have to know.
package driver

import (
	"context"
	"time"

	"scv/reducer"
)

// Errors a driver returns: each is of the domain's kinds (reducer's
// ErrStorage, ErrStorageFull, ErrUnavailable), so that errors.Is tells
// them apart above the ledger. Anything else it returns is a bug.
var (
	// ErrStorage: the database failed; nothing of the transaction was
	// kept. It is the domain's reducer.ErrStorage.
	ErrStorage = reducer.ErrStorage
	// ErrStorageFull: the database had no room for the write (the disk is
	// full, or the process reached its file size limit). It is of kinds
	// reducer.ErrStorageFull and ErrStorage; writes succeed again once
	// there is room.
	ErrStorageFull error = &storageError{"storage failure: the disk is full", reducer.ErrStorageFull}
	// ErrUnavailable: the database cannot be reached right now (a server
	// stopped or restarting, a connection lost). It is of kinds
	// reducer.ErrUnavailable and ErrStorage; nothing of the transaction
	// was kept, and a later try may succeed.
	ErrUnavailable error = &storageError{"storage failure: the database is unavailable", reducer.ErrUnavailable}
)

// storageError is a storage failure of a more particular kind too.
type storageError struct {
	msg  string
	kind error
}

func (e *storageError) Error() string   { return e.msg }
func (e *storageError) Unwrap() []error { return []error{e.kind, ErrStorage} }

// Event is one stored event.
type Event struct {
	Sequence    uint64
	ProjectID   string
	Kind        string
	Timestamp   int64 // Unix seconds
	TimestampMs int64 // the same instant in Unix milliseconds
	Data        string
	Hash        []byte // nil for a row the ledger did not write
	// Archived says History read it from the archive, not the live tail.
	Archived bool
}

// Snapshot is one stored snapshot of a project's state.
type Snapshot struct {
	ProjectID string
	Sequence  uint64
	Version   int
	State     []byte
	ChainHead []byte
	StateHash []byte
}

// Project is a project's row in the projects table: an index of the
// projects (names unique, held by the database), where each one's history
// ends, how much of it is live, and a summary of its derived state for
// listing and for the background work (stale runs, compaction) that must
// find projects without loading them. Everything but ID, Name and
// CreatedSeq is rewritten by the writer with each transaction that
// appends to the project; all of it can be derived again from the history.
type Project struct {
	ID         string
	Name       string
	Workspace  string
	CreatedSeq uint64 // the sequence of its project_created event
	Head       uint64 // the sequence of its newest event
	Live       int    // its events in the live tail
	// Summarized is false until the ledger has derived the summary below
	// (a database migrated from a schema that had no projects table).
	Summarized  bool
	Status      string
	Phase       string
	Tasks       int
	Done        int
	Running     int
	CreatedMs   int64
	UpdatedMs   int64
	HeartbeatMs int64 // 0 for none
}

// Found is how a project was found in the history itself (its creation
// event, or, when compaction dropped that, its snapshots), for the tools
// that read a database without trusting its projects table.
type Found struct {
	ID   string
	Name string
	// CreatedSeq is the sequence of its project_created event; 0 when
	// compaction dropped it (the project existed before its earliest
	// snapshot).
	CreatedSeq uint64
}

// Driver is one database holding a ledger.
type Driver interface {
	// Begin opens a write transaction that holds the write lock.
	Begin(ctx context.Context) (Tx, error)
	// Read runs fn in one read-only transaction.
	Read(ctx context.Context, fn func(Reader) error) error
	// Shared reports whether other daemons may write the database too: a
	// reader must then check a project's head in the database before it
	// trusts a copy it holds.
	Shared() bool
	// Now is the clock events are stamped with: one clock for everyone
	// who writes the database (a server's, for a shared one). Nil means
	// the caller's own.
	Now(ctx context.Context) (time.Time, error)
	// Name says which database this is, for messages (a path or a URL
	// without its password).
	Name() string
	Close() error
}

// Reader reads one committed state of the ledger.
type Reader interface {
	// LastSequence is the highest sequence ever appended (0 for none) and
	// the time of the newest event in Unix milliseconds (0 for none): of
	// the live tail's newest, or, when compaction took it out of the live
	// tail, of the newest a projects row records (Project.UpdatedMs).
	LastSequence(ctx context.Context) (seq uint64, timeMs int64, err error)
	// Project finds a project's row by ID, else by name.
	Project(ctx context.Context, ref string) (Project, bool, error)
	// Projects lists the rows that filter admits, in creation order.
	Projects(ctx context.Context, filter ProjectFilter) ([]Project, error)
	// LatestSnapshot is the project's newest snapshot at or before
	// sequence upTo.
	LatestSnapshot(ctx context.Context, projectID string, upTo uint64) (Snapshot, bool, error)
	// Snapshots lists a project's snapshots ("" for every project's) in
	// sequence order.
	Snapshots(ctx context.Context, projectID string) ([]Snapshot, error)
	// Live calls fn with the project's live events with a sequence in
	// (after, upTo], in order, at most limit of them (0: no limit).
	Live(ctx context.Context, projectID string, after, upTo uint64, limit int, fn func(Event) error) error
	// History calls fn with the archived and the live events of a project
	// ("" for every project) with a sequence in (after, upTo], in order.
	History(ctx context.Context, projectID string, after, upTo uint64, fn func(Event) error) error
	// CountHistory counts what History would return for a project ("" for
	// all), up to any sequence.
	CountHistory(ctx context.Context, projectID string) (int, error)
	// LiveAt is the sequence of the project's live event at offset i (0:
	// the oldest), or false past the end.
	LiveAt(ctx context.Context, projectID string, i int) (uint64, bool, error)
	// Find looks a project up in the history itself, by ID, else by name
	// (the first project of that name), with no trust in the projects
	// table.
	Find(ctx context.Context, ref string) (Found, bool, error)
	// Integrity is the database's own check of its files ("ok" when
	// sound), or "" where the database has none.
	Integrity(ctx context.Context) (string, error)
	// Leases lists the leases, by name.
	Leases(ctx context.Context) ([]Lease, error)
}

// Lease is a row of the leases table: who holds a ledger-wide job, until
// when (Unix milliseconds), in which term.
type Lease struct {
	Name      string
	Holder    string
	Term      uint64
	ExpiresMs int64
}

// ProjectFilter narrows Reader.Projects.
type ProjectFilter struct {
	// Running: only projects with a running run.
	Running bool
	// Unarchived: only projects not archived.
	Unarchived bool
	// LiveOver: only projects with more than this many live events (0:
	// any).
	LiveOver int
	// Unsummarized: only rows not summarized yet.
	Unsummarized bool
	// Status: only projects of this status ("": any).
	Status string
}

// Tx is a write transaction holding the write lock. Its reads see its own
// writes.
type Tx interface {
	Reader
	// Head is the highest sequence ever appended, as the transaction
	// sees it: the same as LastSequence's, without the newest time, and
	// cheap, since the writer reads it in every transaction.
	Head(ctx context.Context) (uint64, error)
	// InsertProject adds a project's row; false, with nothing changed,
	// when its ID or name is taken.
	InsertProject(ctx context.Context, p Project) (bool, error)
	// UpdateProject rewrites the row with p's ID (everything but ID,
	// Name, Workspace, CreatedSeq and Live) and adds liveDelta to its live
	// events.
	UpdateProject(ctx context.Context, p Project, liveDelta int) error
	// Append inserts events, whose sequences follow LastSequence: into the
	// live tail, or, for those marked Archived, straight into the archive
	// (a ledger copied from another database keeps what it had archived).
	// The last sequence is the highest appended, archived or not.
	Append(ctx context.Context, events []Event) error
	// InsertSnapshot stores a snapshot.
	InsertSnapshot(ctx context.Context, s Snapshot) error
	// Archive copies the project's live events up to sequence upTo into
	// the archive and returns how many.
	Archive(ctx context.Context, projectID string, upTo uint64) (int, error)
	// Lease takes the lease name for holder until nowMs+ttlMs, or renews
	// it when holder has it: it returns the lease's term (which grows with
	// every new holder) and whether holder has it now. Another holder's
	// unexpired lease is not taken. It runs under the write lock, so that
	// LeaseHeld, checked in a later transaction, fences the holder's
	// writes: no new holder can commit in between.
	Lease(ctx context.Context, name, holder string, ttlMs, nowMs int64) (term uint64, held bool, err error)
	// LeaseHeld reports whether holder still holds the lease name with
	// term, unexpired at nowMs.
	LeaseHeld(ctx context.Context, name, holder string, term uint64, nowMs int64) (bool, error)
	// DeleteLive removes the project's live events up to sequence upTo,
	// which a snapshot must cover (the schema refuses otherwise), and
	// returns how many.
	DeleteLive(ctx context.Context, projectID string, upTo uint64) (int, error)
	Commit() error
	// Rollback ends the transaction keeping nothing; after Commit it does
	// nothing.
	Rollback() error
}
