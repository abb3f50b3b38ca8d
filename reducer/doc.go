// Package reducer is the ledger's domain: a pure state machine that turns
// commands into events and folds events into project, task and run state.
//
// # Decide and Evolve
//
// Decide(state, command) returns the events a command causes, or a
// sentinel error (ErrNotFound, ErrConflict, ErrInvalidArgument,
// ErrInvalidTransition, ErrRunNotRunning) saying why it is refused; it
// never changes the state. Evolve(state, event) folds one event in. The
// ledger calls Decide and Evolve inside one write transaction, so a command
// is always decided against the state its events will follow.
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
// # Sharing state
//
// State is copy-on-write by generation. Seal ends a generation and returns
// the projects it changed; those are immutable from then on and may be
// read concurrently while the next generation evolves. Rollback discards a
// generation whose events were not committed.
package reducer
