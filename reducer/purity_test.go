package reducer_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbiddenImports would give the reducer I/O, a clock, randomness, ID
// minting, logging or cancellation.
var forbiddenImports = []string{
	"os", "net", "time", "log", "log/slog", "context", "database/sql",
	"math/rand", "math/rand/v2", "crypto/rand", "github.com/oklog/ulid/v2",
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH")
	out, err := exec.Command(goBin, append([]string{"list"}, args...)...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
	}
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// pureData are the only packages outside the standard library the reducer
// may reach: persistent collections, which do no I/O (their own imports
// are checked with the reducer's below).
var pureData = []string{"github.com/benbjohnson/immutable", "golang.org/x/exp/constraints"}

// TestReducerImportsArePure checks the package's imports. The standard
// library itself pulls os and time into every package that uses fmt or
// path/filepath, so those two are checked on the direct imports only;
// everything else must be absent from the transitive closure, and no
// package outside the standard library may be reached but pureData.
func TestReducerImportsArePure(t *testing.T) {
	direct := goList(t, "-f", `{{join .Imports " "}}`, "scv/reducer")
	require.NotEmpty(t, direct)
	for _, f := range forbiddenImports {
		assert.NotContains(t, direct, f, "scv/reducer imports %s", f)
	}

	deps := goList(t, "-deps", "scv/reducer")
	require.Contains(t, deps, "scv/reducer")
	for _, f := range forbiddenImports {
		if f == "os" || f == "time" {
			continue
		}
		assert.NotContains(t, deps, f, "scv/reducer depends on %s", f)
	}

	nonStd := goList(t, "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, "scv/reducer")
	assert.ElementsMatch(t, append([]string{"scv/reducer"}, pureData...), nonStd,
		"the reducer reaches only the standard library and pureData: no other package of the module, nothing else third-party")
}
