package daemonproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBuiltFrom reads the commit and the modified tracked files of a real
// git checkout, and ignores untracked ones.
func TestBuiltFrom(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	for _, f := range []string{"a.go", "b.go"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("package a\n"), 0o644))
	}
	git("add", "a.go", "b.go")
	git("commit", "-q", "-m", "first")
	head := git("rev-parse", "--short=12", "HEAD")
	t.Chdir(dir)

	clean := BuiltFrom()
	require.Equal(t, Source{Commit: head, Modified: []string{}}, clean)
	require.Equal(t, head, clean.String())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.go"), []byte("package b\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new.go"), []byte("package a\n"), 0o644))
	dirty := BuiltFrom()
	require.Equal(t, Source{Commit: head, Modified: []string{"b.go"}}, dirty)
	require.Equal(t, head+" (modified: b.go)", dirty.String())

	t.Chdir(t.TempDir())
	require.Equal(t, Source{Commit: "?", Modified: []string{}}, BuiltFrom(), "outside a checkout")
}
