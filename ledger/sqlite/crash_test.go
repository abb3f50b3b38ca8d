package sqlite_test

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// In a re-run of this test binary, crashChildDB names the database the
// child writes to, crashChildWrite what it writes ("compact" or a
// command).
const (
	crashChildDB    = "SCV_FAILPOINT_TEST_DB"
	crashChildWrite = "SCV_FAILPOINT_TEST_WRITE"
)

// crashTask is the task the child adds.
const crashTask = "01J0000000000000000000CRSH"

// TestFailpointCrash runs this test binary again as a child process with
// SCV_FAILPOINTS set in its environment, as the daemon is started: the
// crash action kills the child with SIGKILL in the middle of a write (a
// command, or a compaction), and the file it leaves is exactly as before
// the write (every point before COMMIT), or exactly as after it
// (after-commit), and verifies.
func TestFailpointCrash(t *testing.T) {
	if path := os.Getenv(crashChildDB); path != "" {
		crashChild(path) // does not return
	}
	for _, tc := range []struct {
		point   ledger.Failpoint
		compact bool // the write is a compaction, else a command
		after   bool // the write is durable
	}{
		{ledger.FailAfterBegin, false, false},
		{ledger.FailAfterBegin, true, false},
		{ledger.FailAfterInsert, false, false},
		{ledger.FailAfterCommit, false, true},
		{ledger.FailSnapshot, true, false},
		{ledger.FailCompactArchive, true, false},
		{ledger.FailCompactDelete, true, false},
	} {
		name := string(tc.point)
		if tc.compact {
			name += "/compact"
		}
		t.Run(name, func(t *testing.T) {
			path := dbPath(t)
			l := open(t, path, ledger.Options{})
			f := newFixture(t, l, "acme")
			for range 10 {
				exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "step"})
			}
			want := state(t, project(t, l, f.project))
			require.NoError(t, l.Close())
			before := contents(t, path)

			cmd := osexec.Command(os.Args[0], "-test.run=^TestFailpointCrash$", "-test.count=1")
			cmd.Env = append(withoutFailpoints(os.Environ()), ledger.FailpointsEnv+"="+string(tc.point)+"=crash", crashChildDB+"="+path,
				crashChildWrite+"="+map[bool]string{true: "compact", false: "command"}[tc.compact])
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var ee *osexec.ExitError
			require.ErrorAs(t, err, &ee, "the child must die: %s", &out)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed by SIGKILL, not %v: %s", ws, &out)
			assert.Contains(t, out.String(), "scv: failpoint "+string(tc.point)+": crash (SIGKILL)")

			after := contents(t, path)
			l = open(t, path, ledger.Options{})
			if !tc.after {
				assert.Equal(t, before, after, "the file is exactly as before")
				assert.Equal(t, want, state(t, project(t, l, f.project)))
			} else {
				require.Len(t, after.Events, len(before.Events)+1, "exactly the one event more")
				assert.Equal(t, before.Events, after.Events[:len(before.Events)])
				added, ok := eventOf(t, after.Events[len(before.Events)]).Body.(reducer.TaskAdded)
				require.True(t, ok)
				assert.Equal(t, crashTask, added.TaskID)
				tk, ok := project(t, l, f.project).Task(crashTask)
				require.True(t, ok, "the task the child added is there after a reopen")
				assert.Equal(t, "crash", tk.Title)
			}
			exec(t, l, reducer.AddTask{Project: f.project, TaskID: id(), Title: "next"})
			_, err = l.Compact(context.Background(), f.project, ledger.CompactOptions{Retain: 2})
			require.NoError(t, err)
			require.NoError(t, l.Close())
			assert.Empty(t, problems(verify(t, path)))
		})
	}
}

// crashChild is the child's part: one write to the database at path
// (a compaction for the compaction's failpoints, else a command), which
// its failpoint must not survive.
func crashChild(path string) {
	ctx := context.Background()
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "child: %s: %v\n", what, err)
		os.Exit(3)
	}
	fp, err := ledger.ParseFailpoints(os.Getenv(ledger.FailpointsEnv))
	if err != nil {
		fail("failpoints", err)
	}
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		fail("open", err)
	}
	l, err := ledger.Open(ctx, db, ledger.Options{Failpoints: fp})
	if err != nil {
		fail("open", err)
	}
	p, err := l.Project(ctx, "acme")
	if err != nil {
		fail("project", err)
	}
	if os.Getenv(crashChildWrite) == "compact" {
		_, err = l.Compact(ctx, p.ID, ledger.CompactOptions{Retain: 3})
	} else {
		_, err = l.Execute(ctx, reducer.AddTask{Project: p.ID, TaskID: crashTask, Title: "crash"})
	}
	fail("the write returned, the failpoint did not fire", err)
}

// withoutFailpoints is env without SCV_FAILPOINTS.
func withoutFailpoints(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, ledger.FailpointsEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}
