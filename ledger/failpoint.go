// # Failpoints
//
// A failpoint is a named place on the write path where a test can make
// the process die, as a crash or a power cut would, or make the operation
// fail there. They are set by the environment variable SCV_FAILPOINTS,
// which the daemon reads once at start (ParseFailpoints) and hands to the
// ledger (Options.Failpoints), as comma-separated NAME=ACTION pairs:
//
//	SCV_FAILPOINTS=after-insert=crash
//	SCV_FAILPOINTS=compact-archive=error,restart-exec=crash
//
// The action crash sends the process SIGKILL from inside (no deferred
// call, no rollback, no reply: what a crash looks like to the database
// and to clients); error makes the operation return an error naming the
// failpoint, as a failed write would; off turns a safeguard off, to
// prove that the checks which must see its absence do. An unknown name or action, or an
// action a point does not take, is an error at start: a misspelt
// failpoint must not be silently ignored. Unset, each failpoint costs one
// nil check.
//
// The points, in the order a write passes them:
//
//   - after-begin: appendBatch, right after the write transaction began,
//     before anything is read or written (every write transaction: command
//     batches and maintenance ops such as compaction);
//   - after-insert: appendBatch, after the batch's INSERTs, before COMMIT
//     (command batches);
//   - after-commit: appendBatch, after COMMIT returned, before any request
//     of the batch is answered, so the events are durable but no caller
//     hears back (every write transaction; crash only, since an error
//     there would deny a durable write);
//   - snapshot: Compact, after the snapshot row is inserted, before the
//     archive copy;
//   - compact-archive: Compact, after the copy into the archive, before
//     the delete (not reached when compaction drops instead of
//     archiving);
//   - compact-delete: Compact, after the delete from the live tail,
//     before COMMIT;
//   - restart-exec: cmd/scv's restart_when_idle, after the ledger was
//     closed and the locks released, just before the new release is
//     started.
//
// And one safeguard, which takes off only:
//
//   - head-check: a ledger that other daemons write too trusts its cached
//     projects as a ledger alone on its database does: it decides a
//     command, and answers a read, on the cached state of a project
//     without checking it against the database's head of the project (the
//     head read under the write lock, Ledger.current and Ledger.Project).
//     Its sequences still come from the locked head, so nothing collides:
//     a daemon simply acts on what it last saw, as a stale replica would.
//     scvrel's linear check runs a fleet with it to prove that the
//     linearizability checker sees the stale reads and double claims that
//     follow (docs/reliability.md).
//
// A crash at any point before COMMIT must leave the database exactly as
// before the write, at after-commit exactly as after it, and at
// restart-exec (the ledger already closed) as it was; the tests in
// cmd/scv/failpoint_test.go check each point with the real binary.
package ledger

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Failpoint is the name of a failpoint.
type Failpoint string

// The failpoints (see the package documentation). The names are the
// contract with SCV_FAILPOINTS.
const (
	FailAfterBegin     Failpoint = "after-begin"
	FailAfterInsert    Failpoint = "after-insert"
	FailAfterCommit    Failpoint = "after-commit"
	FailSnapshot       Failpoint = "snapshot"
	FailCompactArchive Failpoint = "compact-archive"
	FailCompactDelete  Failpoint = "compact-delete"
	FailRestartExec    Failpoint = "restart-exec"
	FailHeadCheck      Failpoint = "head-check"
)

// FailpointsEnv is the environment variable the failpoints are read from.
const FailpointsEnv = "SCV_FAILPOINTS"

// failAction is what a set failpoint does.
type failAction uint8

const (
	failNone  failAction = iota
	failCrash            // SIGKILL the process
	failError            // return an error
	failOff              // turn a safeguard off
)

var failActions = map[string]failAction{"crash": failCrash, "error": failError, "off": failOff}

// failpointActions are the points and the actions each takes.
var failpointActions = map[Failpoint][]failAction{
	FailAfterBegin:     {failCrash, failError},
	FailAfterInsert:    {failCrash, failError},
	FailAfterCommit:    {failCrash},
	FailSnapshot:       {failCrash, failError},
	FailCompactArchive: {failCrash, failError},
	FailCompactDelete:  {failCrash, failError},
	FailRestartExec:    {failCrash, failError},
	FailHeadCheck:      {failOff},
}

// ErrFailpoint is the error a failpoint set to error returns, wrapped
// with the point's name.
var ErrFailpoint = errors.New("injected failure at failpoint")

// Failpoints are the failpoints set, each with its action; nil (the
// production case) when none.
type Failpoints map[Failpoint]failAction

// ParseFailpoints reads a SCV_FAILPOINTS value; nil for none.
func ParseFailpoints(spec string) (Failpoints, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	m := Failpoints{}
	for item := range strings.SplitSeq(spec, ",") {
		name, act, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" || act == "" {
			return nil, fmt.Errorf("%s: %q is not NAME=ACTION (in %q)", FailpointsEnv, item, spec)
		}
		p := Failpoint(name)
		allowed, known := failpointActions[p]
		if !known {
			return nil, fmt.Errorf("%s: unknown failpoint %q (known: %s)", FailpointsEnv, name, knownFailpoints())
		}
		a, ok := failActions[act]
		if !ok {
			return nil, fmt.Errorf("%s: failpoint %s: unknown action %q (crash, error or off)", FailpointsEnv, name, act)
		}
		if !slices.Contains(allowed, a) {
			return nil, fmt.Errorf("%s: failpoint %s takes %s only, not %q", FailpointsEnv, name, actionNames(allowed), act)
		}
		if _, dup := m[p]; dup {
			return nil, fmt.Errorf("%s: failpoint %s is set twice", FailpointsEnv, name)
		}
		m[p] = a
	}
	return m, nil
}

// knownFailpoints lists the names in the order a write passes them.
func knownFailpoints() string {
	return strings.Join([]string{string(FailAfterBegin), string(FailAfterInsert), string(FailAfterCommit),
		string(FailSnapshot), string(FailCompactArchive), string(FailCompactDelete), string(FailRestartExec),
		string(FailHeadCheck)}, ", ")
}

// actionNames names actions, for a refusal: "crash or error".
func actionNames(as []failAction) string {
	var names []string
	for _, a := range as {
		names = append(names, [...]string{failCrash: "crash", failError: "error", failOff: "off"}[a])
	}
	return strings.Join(names, " or ")
}

// Off reports whether the safeguard p is turned off.
func (f Failpoints) Off(p Failpoint) bool { return f != nil && f[p] == failOff }

// Hit passes the failpoint p: with nothing set for it, it returns nil;
// set to crash, the process dies here; set to error, it returns an error
// wrapping ErrFailpoint.
func (f Failpoints) Hit(p Failpoint) error {
	if f == nil {
		return nil
	}
	switch f[p] {
	case failCrash:
		// The one line a test can find in the daemon's log.
		fmt.Fprintf(os.Stderr, "scv: failpoint %s: crash (SIGKILL)\n", p)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		for {
			time.Sleep(time.Hour) // the signal is on its way
		}
	case failError:
		return fmt.Errorf("%w %s", ErrFailpoint, p)
	}
	return nil
}

// crashAt passes a failpoint that takes crash only (the parser refuses
// error for it): it returns only when the point is not set.
func (f Failpoints) crashAt(p Failpoint) {
	if err := f.Hit(p); err != nil {
		panic(fmt.Sprintf("failpoint %s returned %v; it takes crash only", p, err))
	}
}
