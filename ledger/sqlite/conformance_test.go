package sqlite_test

import (
	"testing"

	"scv/ledger/drivertest"
	"scv/ledger/sqlite/sqlitetest"
)

// TestConformance runs the drivers' conformance suite against SQLite.
func TestConformance(t *testing.T) {
	drivertest.Exercise(t, sqlitetest.Harness{})
}
