package daemonproc

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Source is the code a harness built the daemon from: the commit, and the
// tracked files that differed from it (a harness runs the working tree).
type Source struct {
	Commit   string   `json:"commit"`
	Modified []string `json:"modified"`
}

// BuiltFrom asks git, in the current folder, what Build compiles: HEAD and
// the tracked files modified since. Commit is "?" outside a git checkout.
func BuiltFrom() Source {
	s := Source{Commit: "?", Modified: []string{}}
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		s.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if len(l) > 3 {
				s.Modified = append(s.Modified, l[3:])
			}
		}
	}
	return s
}

// String is the commit, followed by the modified files if there are any.
func (s Source) String() string {
	if len(s.Modified) == 0 {
		return s.Commit
	}
	return fmt.Sprintf("%s (modified: %s)", s.Commit, strings.Join(s.Modified, ", "))
}

// Kernel is the running kernel's release, or "?".
func Kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
