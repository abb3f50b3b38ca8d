package postgres_test

import (
	"testing"

	"scv/ledger/drivertest"
	"scv/ledger/postgres/pgtest"
)

// TestConformance runs the ledger's driver conformance suite on a real
// PostgreSQL server ($SCV_TEST_PG; skipped without one, unless
// $SCV_REQUIRE_PG is set).
func TestConformance(t *testing.T) {
	pgtest.Server(t)
	drivertest.Exercise(t, pgtest.Harness{})
}

// TestConformanceThroughPgBouncer runs the suite again with every
// connection going through a PgBouncer in session mode, the pooling
// docs/operations.md tells fleets to use (skipped without pgbouncer,
// unless $SCV_REQUIRE_PGBOUNCER is set).
func TestConformanceThroughPgBouncer(t *testing.T) {
	drivertest.Exercise(t, pgtest.Harness{Via: pgtest.Bouncer(t, "session")})
}
