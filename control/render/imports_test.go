package render

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportsOnlyStandardLibrary: the package reaches the standard library
// and nothing else, no other package of the module included, so it can be
// used (and moved) while the rest of the code base changes. It does no
// I/O of its own either: it writes only to the io.Writer it is given.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH")
	list := func(args ...string) []string {
		out, err := exec.Command(goBin, append([]string{"list"}, args...)...).Output()
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		require.NoError(t, err)
		return strings.Fields(string(out))
	}
	nonStd := list("-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, "scv/control/render")
	assert.Equal(t, []string{"scv/control/render"}, nonStd)
	direct := list("-f", `{{join .Imports " "}}`, "scv/control/render")
	for _, f := range []string{"os", "os/exec", "net", "net/http", "log", "log/slog", "math/rand", "math/rand/v2", "unsafe", "syscall"} {
		assert.NotContains(t, direct, f)
	}
}
