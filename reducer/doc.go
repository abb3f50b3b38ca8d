// Package reducer is the ledger's domain: a pure state machine that turns
// commands into events and folds events into project, task and run state.
//
// # Decide and Evolve
//
// Decide(project, command) returns the events a command causes in the one
// project it names, or a sentinel error (ErrNotFound, ErrConflict,
// ErrInvalidArgument, ErrInvalidTransition, ErrRunNotRunning) saying why
// it is refused; it never changes the project. Evolve(project, event)
// returns the project with one event folded in. Deciding needs only the
// project a command names: which projects exist, and that a new name is
// free, is the ledger's to know. The ledger calls Decide and Evolve inside
// one write transaction, so a command is always decided against the state
// its events will follow.
//
// # Limits
//
// Every limit of what users send (MaxNameLen, MaxRefLen, MaxProgressLen,
// MaxQuestionLen, MaxReasonLen, MaxDependsOn) and its check is in
// limits.go. Decide checks a command's texts, lists and references before
// anything else, whether or not its project exists; Evolve never checks
// them, so older histories replay. ClipProgress makes any text a valid
// progress, for text the daemon makes itself.
//
// # Purity
//
// The package does no I/O, reads no clock, mints no IDs and does not log:
// time and IDs arrive inside the command, and outcomes are events and
// errors. The same state and the same input always give the same output.
// Every time in the package (Command.Now, Event.Time, the state's
// timestamps, windows and intervals) is in Unix milliseconds: staleness and
// heartbeat coalescing need finer steps than the wire's Unix seconds.
// Derived values (Project.Phase, Project.Status, Evidence, StaleRuns) are
// functions of the state alone.
//
// # Kinds of error
//
// errors.go names every kind of error a request can meet, once: Decide's
// refusals above, and ErrUnavailable, ErrStorage and ErrStorageFull, which
// the stores wrap around their failures. Every layer's errors are of these
// kinds, and the wire maps each kind to one code and reason.
//
// # Sharing state
//
// A *Project is immutable. Evolve returns a new one, sharing everything
// the event did not touch: tasks and runs sit in persistent collections
// (the package's own vectors, and hash maps from
// github.com/benbjohnson/immutable), so an event costs O(log n) in the
// project's tasks and runs and never copies them all. Any goroutine may
// read a project while the writer evolves newer versions of it, and a
// writer whose transaction fails simply drops the versions it made. The
// counts a reply needs (tasks by status, running runs) are kept as events
// arrive; Status and Phase are O(1).
//
// A Fold evolves a run of events (one write transaction, one replay),
// copying each path once for the run instead of once per event; only the
// newest version it returned of a project is to be kept.
package reducer
