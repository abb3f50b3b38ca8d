// Package acpagenttest builds the project's scripted ACP agent
// (cmd/internal/acpagent) for tests that drive a real agent process: live
// agents, the projects' work, the email accounts' triage. Only tests
// import it.
package acpagenttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	bin  string
	err  error
)

// Binary is the path of the scripted agent, built once per test binary
// (in a folder of the system's temporary folder, left for the next run's
// cache to miss: go build is quick when nothing changed).
func Binary(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, e := os.MkdirTemp("", "acpagent")
		if e != nil {
			err = e
			return
		}
		bin = filepath.Join(dir, "acpagent")
		if out, e := exec.Command("go", "build", "-o", bin, "scv/cmd/internal/acpagent").CombinedOutput(); e != nil {
			err = fmt.Errorf("build the scripted agent: %v: %s", e, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
