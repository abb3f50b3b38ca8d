package proc

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	TagEnv    = "SCV_DELEGATION" // the handle of the innermost delegation
	ParentEnv = "SCV_PARENT"     // comma-separated chain of handles, outermost first
)

// pollEvery is how often Stop rescans the tree.
const pollEvery = 20 * time.Millisecond

// DefaultKillGrace is the time a tree's processes get between SIGTERM and
// SIGKILL when no one chose another: the daemon's default (scv daemon
// --kill-grace), and an owner's when it stops a tree without the daemon.
const DefaultKillGrace = 2 * time.Second

// ParseChain splits a ParentEnv value into its handles; empty elements are
// dropped, and "" gives nil.
func ParseChain(s string) []string {
	var chain []string
	for h := range strings.SplitSeq(s, ",") {
		if h != "" {
			chain = append(chain, h)
		}
	}
	return chain
}

// ExtendChain appends handle to chain: "" gives handle, "a,b" gives
// "a,b,handle".
func ExtendChain(chain, handle string) string {
	return strings.Join(append(ParseChain(chain), handle), ",")
}

// Tagged reports whether the environment pid was started with carries
// handle, as TagEnv or as an element of ParentEnv's chain. A process that
// is gone, or whose environment cannot be read, is not tagged.
func Tagged(pid int, handle string) bool {
	if pid <= 0 || handle == "" {
		return false
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && taggedEnv(environ, handle)
}

// Innermost is the innermost delegation pid was started in: the value of
// TagEnv in the environment it was started with, or "" (none, or a
// process that is gone or whose environment cannot be read).
func Innermost(pid int) string {
	if pid <= 0 {
		return ""
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	return innermostEnv(environ)
}

// innermostEnv is Innermost on the text of /proc/PID/environ: the first
// TagEnv, the one getenv(3) reads.
func innermostEnv(environ []byte) string {
	for kv := range bytes.SplitSeq(environ, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte{'='}); ok && string(k) == TagEnv {
			return string(v)
		}
	}
	return ""
}

// taggedEnv is Tagged on the NUL-separated text of /proc/PID/environ. Every
// occurrence of the variables counts, not only the first.
func taggedEnv(environ []byte, handle string) bool {
	if handle == "" {
		return false
	}
	for kv := range bytes.SplitSeq(environ, []byte{0}) {
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if !ok {
			continue
		}
		switch string(k) {
		case TagEnv:
			if string(v) == handle {
				return true
			}
		case ParentEnv:
			if slices.Contains(ParseChain(string(v)), handle) {
				return true
			}
		}
	}
	return false
}

// Tree is one delegation's processes.
type Tree struct {
	Handle string
	Leader Ident // the command scv started: its PID is also the process group ID
}

// Members scans /proc once and returns the live (non-zombie) processes of
// the tree, sorted by PID: every process tagged with the handle; every
// process in the leader's group while the leader, with its recorded
// identity, is present (running, or a zombie not yet reaped, which still
// holds the group ID); and the leader itself while it is alive. The calling
// process is never a member. Processes that vanish during the scan are
// skipped.
func (t Tree) Members() []Info {
	return t.pick(scan(), os.Getpid(), Tagged)
}

// Count is len(t.Members()).
func (t Tree) Count() int { return len(t.Members()) }

// pick selects t's members from all, a scan of /proc, leaving out self.
// tagged is Tagged, or a stand-in in tests.
func (t Tree) pick(all []Info, self int, tagged func(pid int, handle string) bool) []Info {
	leaderHere := t.Leader.PID > 0 && slices.ContainsFunc(all, func(info Info) bool {
		return info.ident() == t.Leader
	})
	var members []Info
	for _, info := range all {
		switch {
		case info.PID == self || info.PID <= 0 || info.dead():
		case leaderHere && (info.ident() == t.Leader || info.PGID == t.Leader.PID):
			members = append(members, info)
		case tagged(info.PID, t.Handle):
			members = append(members, info)
		}
	}
	slices.SortFunc(members, func(a, b Info) int { return cmp.Compare(a.PID, b.PID) })
	return slices.CompactFunc(members, func(a, b Info) bool { return a.PID == b.PID })
}

// scan reads every process in /proc; processes that vanish meanwhile are
// skipped.
func scan() []Info {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	all := make([]Info, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if info, err := Read(pid); err == nil {
			all = append(all, info)
		}
	}
	return all
}

// Stop stops the tree: SIGTERM to every member, then, once grace has passed
// with members left, SIGKILL to every one of them, rescanning every 20ms
// and signalling processes that appear meanwhile, until no member is left.
// Every signal goes through Signal with the identity from the scan. If ctx
// ends during the grace, Stop goes on to SIGKILL at once; if it ends while
// members are still alive, Stop gives up and says how many are left.
//
// It returns how many distinct processes it signalled.
func (t Tree) Stop(ctx context.Context, grace time.Duration) (int, error) {
	signalled := make(map[Ident]bool)
	var lastErr error
	send := func(members []Info, sig unix.Signal, done map[Ident]bool) {
		for _, m := range members {
			id := m.ident()
			if done[id] {
				continue
			}
			switch err := Signal(id, sig); {
			case err == nil:
				done[id] = true
				signalled[id] = true
			case !errors.Is(err, ErrGone):
				lastErr = err
			}
		}
	}

	members := t.Members()
	if len(members) == 0 {
		return 0, nil
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()

	termed := make(map[Ident]bool)
	send(members, unix.SIGTERM, termed)
	if grace > 0 {
		deadline := time.NewTimer(grace)
		defer deadline.Stop()
	graceful:
		for {
			select {
			case <-ctx.Done():
				break graceful
			case <-deadline.C:
				break graceful
			case <-tick.C:
			}
			if members = t.Members(); len(members) == 0 {
				return len(signalled), nil
			}
			send(members, unix.SIGTERM, termed)
		}
	}

	killed := make(map[Ident]bool)
	for {
		if members = t.Members(); len(members) == 0 {
			return len(signalled), nil
		}
		send(members, unix.SIGKILL, killed)
		select {
		case <-ctx.Done():
			if members = t.Members(); len(members) == 0 {
				return len(signalled), nil
			}
			err := fmt.Errorf("proc: stop %s: %d processes left: %w", t.Handle, len(members), context.Cause(ctx))
			if lastErr != nil {
				err = fmt.Errorf("%w (last signal error: %v)", err, lastErr)
			}
			return len(signalled), err
		case <-tick.C:
		}
	}
}
