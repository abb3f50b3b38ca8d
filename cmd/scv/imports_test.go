package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

// moduleImports is what each package of the module imports, in its code
// and in its tests, as go list reports it.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
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
	pkgs := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if fields := strings.Fields(line); len(fields) > 0 {
			imports := fields[1:]
			slices.Sort(imports)
			pkgs[fields[0]] = slices.Compact(imports)
		}
	}
	require.Greater(t, len(pkgs), 20, "go list listed the module's packages")
	return pkgs
}

// TestNoSQLOutsideDrivers: no package of the module outside the drivers
// imports database/sql, sqlx, modernc.org/sqlite or pgx (or a package
// under them), in its code or in its tests: the SQL of each database
// stays in its driver (ledger/driver), and tests reach a database file
// through the driver or sqlitetest's helpers.
func TestNoSQLOutsideDrivers(t *testing.T) {
	t.Parallel()
	var offences []string
	for pkg, imports := range moduleImports(t) {
		if sqlAllowed(pkg) {
			continue
		}
		for _, imp := range imports {
			for _, s := range sqlImports {
				if imp == s || strings.HasPrefix(imp, s+"/") {
					offences = append(offences, pkg+" imports "+imp)
				}
			}
		}
	}
	if len(offences) > 0 {
		slices.Sort(offences)
		t.Errorf("SQL outside the drivers (only scv/ledger/sqlite, scv/ledger/sqlite/sqlitetest, scv/ledger/postgres/... and scv/migrations may import %s):\n\t%s",
			strings.Join(sqlImports, ", "), strings.Join(offences, "\n\t"))
	}
}

// TestSubsystemsDoNotImportTheWire: the daemon's subsystems (every package
// under control/ but control/daemon, which wires them to the server), the
// MCP server control/mcp among them, import the wire's types from
// scv/control/api, never the socket server scv/control, in their code or
// in their tests; control/mcp imports no package of the ledger either,
// and the command line no package of the MCP SDK (its server is
// control/mcp's); and the root package control holds at most 3,000 lines
// of code besides its tests.
func TestSubsystemsDoNotImportTheWire(t *testing.T) {
	t.Parallel()
	var offences []string
	subsystems := 0
	pkgs := moduleImports(t)
	for pkg, imports := range pkgs {
		if !strings.HasPrefix(pkg, "scv/control/") || pkg == "scv/control/daemon" {
			continue
		}
		subsystems++
		if slices.Contains(imports, "scv/control") {
			offences = append(offences, pkg)
		}
	}
	require.Greater(t, subsystems, 10, "the subsystems under control/")
	require.Contains(t, pkgs, "scv/control/mcp", "the MCP server is one of them")
	slices.Sort(offences)
	assert.Empty(t, offences, "subsystems that import scv/control")
	for _, imp := range pkgs["scv/control/mcp"] {
		assert.False(t, imp == "scv/ledger" || strings.HasPrefix(imp, "scv/ledger/"), "control/mcp imports %s", imp)
	}
	for _, imp := range pkgs["scv/cmd/scv"] {
		assert.False(t, strings.HasPrefix(imp, "github.com/modelcontextprotocol/"), "cmd/scv imports %s", imp)
	}

	files, err := filepath.Glob("../../control/*.go")
	require.NoError(t, err)
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		lines += bytes.Count(b, []byte("\n"))
	}
	require.Greater(t, lines, 1000, "control's files were read")
	assert.LessOrEqual(t, lines, 3000, "lines of code in package control, tests aside")
}
