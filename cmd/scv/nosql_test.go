package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sqlImports are the packages that talk to a database: only the drivers
// may import them.
var sqlImports = []string{"database/sql", "github.com/jmoiron/sqlx", "modernc.org/sqlite", "github.com/jackc/pgx"}

// sqlAllowed reports whether the package pkg may import them: the SQLite
// driver and its test helpers, the PostgreSQL driver and its
// subpackages, and the migrations.
func sqlAllowed(pkg string) bool {
	switch pkg {
	case "scv/ledger/sqlite", "scv/ledger/sqlite/sqlitetest", "scv/ledger/postgres", "scv/migrations":
		return true
	}
	return strings.HasPrefix(pkg, "scv/ledger/postgres/")
}

// TestNoSQLOutsideDrivers: no package of the module outside the drivers
// imports database/sql, sqlx, modernc.org/sqlite or pgx (or a package
// under them), in its code or in its tests: the SQL of each database
// stays in its driver (ledger/driver), and tests reach a database file
// through the driver or sqlitetest's helpers.
func TestNoSQLOutsideDrivers(t *testing.T) {
	t.Parallel()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD")
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	list := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "scv/...")
	list.Dir = root
	out, err := list.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.NoError(t, err, "go list: %s", exit.Stderr)
	}
	require.NoError(t, err, "go list")
	var offences []string
	packages := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		packages++
		pkg, imports := fields[0], fields[1:]
		if sqlAllowed(pkg) {
			continue
		}
		slices.Sort(imports)
		for _, imp := range slices.Compact(imports) {
			for _, s := range sqlImports {
				if imp == s || strings.HasPrefix(imp, s+"/") {
					offences = append(offences, pkg+" imports "+imp)
				}
			}
		}
	}
	require.Greater(t, packages, 20, "go list listed the module's packages")
	if len(offences) > 0 {
		t.Errorf("SQL outside the drivers (only scv/ledger/sqlite, scv/ledger/sqlite/sqlitetest, scv/ledger/postgres/... and scv/migrations may import %s):\n\t%s",
			strings.Join(sqlImports, ", "), strings.Join(offences, "\n\t"))
	}
}
