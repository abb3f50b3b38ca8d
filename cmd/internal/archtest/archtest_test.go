package archtest

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

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD")
	return filepath.Dir(strings.TrimSpace(string(gomod)))
}

// goList runs go list with args in the module's root and returns its
// output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	list := exec.Command("go", append([]string{"list"}, args...)...)
	list.Dir = moduleRoot(t)
	out, err := list.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.NoError(t, err, "go list: %s", exit.Stderr)
	}
	require.NoError(t, err, "go list")
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// pkgImports is what a package imports: in its code, and in its code and
// its tests together.
type pkgImports struct {
	code, all []string
}

// moduleImports is what each package of the module imports, as go list
// reports it.
func moduleImports(t *testing.T) map[string]pkgImports {
	t.Helper()
	sorted := func(s []string) []string {
		s = slices.Clone(s)
		slices.Sort(s)
		return slices.Compact(s)
	}
	pkgs := map[string]pkgImports{}
	for _, line := range goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}} | {{join .TestImports " "}} {{join .XTestImports " "}}`, "scv/...") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		bar := slices.Index(fields, "|")
		require.Positive(t, bar, "go list: %s", line)
		imports := slices.Delete(slices.Clone(fields[1:]), bar-1, bar)
		pkgs[fields[0]] = pkgImports{code: sorted(fields[1:bar]), all: sorted(imports)}
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
		for _, imp := range imports.all {
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

// clientSide are the packages under control/ that the daemon's clients
// use: their code imports no package of the module but the wire's types,
// scv/control/api.
var clientSide = []string{"scv/control/follow", "scv/control/rpc"}

// handlerTests are the packages under control/ whose tests reach them
// through the daemon's own way in, as the daemon and the CLI do: the
// Service of package control, or a Remote on a daemon's socket. Their
// code never imports scv/control.
var handlerTests = []string{"scv/control/follow", "scv/control/agents"}

// TestSubsystemsDoNotImportTheWire: the daemon's subsystems (every package
// under control/ but control/daemon, which wires them to the server, and
// its daemonproc, which runs the daemon as a process)
// import the wire's types from scv/control/api, never the socket server
// scv/control, in their code or (but for handlerTests) in their tests;
// the client side's code
// imports scv/control/api alone; the owner's side of a delegation,
// control/supervise, and the MCP server, control/mcp, import no ledger
// package either, and the command line no package of the MCP SDK; and
// the root package control, the server, holds at most 3,000 lines of
// code besides its tests (its client is control/rpc's).
func TestSubsystemsDoNotImportTheWire(t *testing.T) {
	t.Parallel()
	var offences []string
	subsystems := 0
	pkgs := moduleImports(t)
	for pkg, imports := range pkgs {
		if !strings.HasPrefix(pkg, "scv/control/") || pkg == "scv/control/daemon" || strings.HasPrefix(pkg, "scv/control/daemon/") {
			continue
		}
		subsystems++
		checked := imports.all
		if slices.Contains(handlerTests, pkg) {
			checked = imports.code
		}
		if slices.Contains(checked, "scv/control") {
			offences = append(offences, pkg)
		}
	}
	require.Greater(t, subsystems, 10, "the subsystems under control/")
	slices.Sort(offences)
	assert.Empty(t, offences, "subsystems that import scv/control")
	for _, pkg := range clientSide {
		require.Contains(t, pkgs, pkg)
		for _, imp := range pkgs[pkg].code {
			if strings.HasPrefix(imp, "scv/") {
				assert.Equal(t, "scv/control/api", imp, "%s imports only the wire's types of the module", pkg)
			}
		}
	}

	// The front-ends that reach the daemon through an api.Handler alone
	// know nothing of its storage.
	for _, pkg := range []string{"scv/control/supervise", "scv/control/mcp"} {
		require.Contains(t, pkgs, pkg)
		for _, imp := range pkgs[pkg].all {
			assert.False(t, imp == "scv/ledger" || strings.HasPrefix(imp, "scv/ledger/"), "%s imports %s", pkg, imp)
		}
	}
	// The MCP server is control/mcp's: the command line imports no package
	// of the MCP SDK.
	for _, imp := range pkgs["scv/cmd/scv"].all {
		assert.False(t, strings.HasPrefix(imp, "github.com/modelcontextprotocol/"), "cmd/scv imports %s", imp)
	}

	files, err := filepath.Glob(filepath.Join(moduleRoot(t), "control", "*.go"))
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

// moduleDeps is every package of the module that pkg's code reaches,
// itself included.
func moduleDeps(t *testing.T, pkg string) []string {
	t.Helper()
	var deps []string
	for _, p := range goList(t, "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, pkg) {
		if strings.HasPrefix(p, "scv/") {
			deps = append(deps, p)
		}
	}
	require.Contains(t, deps, pkg, "go list -deps %s", pkg)
	return deps
}

// TestVocabularyKnowsNoStorage: control/api, the wire's vocabulary that
// the server, the client and every subsystem share, reaches no package of
// the module but the reducer and what the reducer reaches; above all no
// scv/ledger package. Errors reach it as the reducer's kinds, and the
// ledger's rows are converted by its callers.
func TestVocabularyKnowsNoStorage(t *testing.T) {
	t.Parallel()
	allowed := append(moduleDeps(t, "scv/reducer"), "scv/control/api")
	var offences []string
	for _, dep := range moduleDeps(t, "scv/control/api") {
		if !slices.Contains(allowed, dep) {
			offences = append(offences, dep)
		}
	}
	assert.Empty(t, offences, "packages of the module that scv/control/api reaches (only scv/reducer and its own may be)")
}
