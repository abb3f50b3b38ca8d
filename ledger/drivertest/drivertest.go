// Package drivertest is the conformance suite of the ledger's storage
// drivers: what any driver.Driver must pass, for the ledger above it
// (scv/ledger) to keep the promises of SPEC sections 2 to 4 and 6.
//
// Each driver runs it from its own test package with a Harness, which
// makes databases, opens drivers on them and tampers with them behind the
// ledger's back:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Exercise(t, sqlitetest.Harness{})
//	}
//
// The suite holds no SQL: everything it does to a database goes through
// the ledger, the driver's interface, or the Harness. Its subtests run in
// parallel, each on databases of its own.
package drivertest

import (
	"testing"

	"scv/ledger/driver"
)

// Harness is what a driver's test gives the suite.
type Harness interface {
	// Create makes a new, empty ledger database, migrated to the newest
	// schema, and returns its name, which the other methods take (a file
	// path, a URL, a schema). It is removed when the test ends.
	Create(t *testing.T) string
	// Open opens a writable driver on the database db. The suite opens
	// db again after closing a driver on it (a restart), and while one is
	// open (two daemons on one database). Whatever the suite has not
	// closed when the test ends, the harness closes.
	Open(t *testing.T, db string) driver.Driver
	// OpenReadOnly opens db for reading only, as the offline tools
	// (ledger.Verify, ledger.Export, ledger.ProjectAt) do: a write
	// through it fails.
	OpenReadOnly(t *testing.T, db string) driver.Driver
	// Tamper changes db behind the ledger's back as x says, the way
	// someone with direct access to the database would, dropping the
	// append-only protection first where it stands in the way. It
	// returns an error wrapping errors.ErrUnsupported when this
	// database cannot be changed that way (the suite then skips the
	// case); any other failure fails t.
	Tamper(t *testing.T, db string, x Tampering) error
}

// Tampering is one change Harness.Tamper makes: one of the types below.
type Tampering interface{ tampering() }

// EditEvent rewrites the stored event at Sequence, live or archived,
// keeping its hash: its data when Data is set, its time by ShiftMs
// milliseconds (timestamp_ms and timestamp alike, so that the two still
// agree), its project when ProjectID is set.
type EditEvent struct {
	Sequence  uint64
	Data      string
	ShiftMs   int64
	ProjectID string
}

// DeleteEvent removes the stored event at Sequence, live or archived.
// Deleting a project's newest events cuts its tail.
type DeleteEvent struct{ Sequence uint64 }

// SwapEvents exchanges the contents of the events at sequences A and B:
// everything but the sequence (project, kind, times, data, hash).
type SwapEvents struct{ A, B uint64 }

// InsertEvent stores Event in the live tail as it is, as something other
// than the ledger would (with Hash nil: a row the ledger did not write). A
// zero Sequence is the next one after the newest.
type InsertEvent struct{ Event driver.Event }

// EditSnapshot replaces the state of the project's snapshot at Sequence
// with State; with FixHash its recorded state hash is made to match it.
type EditSnapshot struct {
	ProjectID string
	Sequence  uint64
	State     []byte
	FixHash   bool
}

// SetProjectRow writes Row over the projects row of Row.ID, every column
// of it (the summary left unset when Row.Summarized is false), or adds it
// when there is none.
type SetProjectRow struct{ Row driver.Project }

// DeleteProjectRow removes the projects row of ID.
type DeleteProjectRow struct{ ID string }

func (EditEvent) tampering()        {}
func (DeleteEvent) tampering()      {}
func (SwapEvents) tampering()       {}
func (InsertEvent) tampering()      {}
func (EditSnapshot) tampering()     {}
func (SetProjectRow) tampering()    {}
func (DeleteProjectRow) tampering() {}

// Exercise runs the whole suite against the driver h opens.
func Exercise(t *testing.T, h Harness) {
	t.Helper()
	for _, g := range []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"Driver", testDriver},
		{"Writes", testWrites},
		{"Names", testNames},
		{"TwoLedgers", testTwoLedgers},
		{"Close", testClose},
		{"Time", testTime},
		{"Failpoints", testFailpoints},
		{"Reads", testReads},
		{"Cache", testCache},
		{"Compaction", testCompaction},
		{"ProjectAt", testProjectAt},
		{"Chain", testChain},
		{"Verify", testVerify},
		{"Bundle", testBundle},
		{"Stale", testStale},
		{"Fold", testFold},
		{"Leases", testLeases},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, h)
		})
	}
}
