package ledger_test

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestFailpointErrorKeepsNothing: the error action at after-begin and
// after-insert fails the whole batch with ErrStorage (every command queued
// with it too), and nothing of it is kept: not in the served state, not in
// the database after a reopen. The next write takes the next sequence, and
// verify passes.
func TestFailpointErrorKeepsNothing(t *testing.T) {
	for _, point := range []ledger.Failpoint{ledger.FailAfterBegin, ledger.FailAfterInsert} {
		t.Run(string(point), func(t *testing.T) {
			ctx := context.Background()
			path := dbPath(t)
			l := open(t, path, ledger.Options{})
			f := newFixture(t, l, "acme", t.TempDir())
			db := rawDB(t, path)
			before := rows(t, db)
			p, _ := l.Project(f.project)
			want := observe(p)

			undo, err := ledger.SetFailpoints(string(point) + "=error")
			require.NoError(t, err)
			// Several writers at once, so that a batch may carry more
			// than one command: each of them fails.
			const writers = 8
			errs := make([]error, writers)
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					_, errs[i] = l.Execute(ctx, reducer.AddTask{Project: f.project, TaskID: id(), Title: "lost"})
				})
			}
			wg.Wait()
			if point == ledger.FailAfterBegin {
				// A maintenance op passes after-begin too (after-insert
				// is for command batches only).
				_, err := l.Compact(ctx, f.project, 0)
				require.ErrorIs(t, err, ledger.ErrStorage)
				assert.Contains(t, err.Error(), "failpoint after-begin")
			}
			undo()
			for _, err := range errs {
				require.ErrorIs(t, err, ledger.ErrStorage)
				assert.Contains(t, err.Error(), "failpoint "+string(point))
			}

			p, _ = l.Project(f.project)
			assert.Equal(t, want, observe(p), "the served state is as before")
			assert.Equal(t, before, rows(t, db), "the database is as before")
			require.NoError(t, l.Close())

			l = open(t, path, ledger.Options{})
			p, _ = l.Project(f.project)
			assert.Equal(t, want, observe(p), "the state after a reopen is as before")
			res := exec(t, l, reducer.AddTask{Project: f.project, TaskID: id(), Title: "kept"})
			last := f.setup[len(f.setup)-1].Sequence
			assert.Equal(t, last+1, res.Events[0].Sequence, "no sequence was used by what failed")
			require.NoError(t, l.Close())
			assert.Empty(t, verify(t, path, ledger.VerifyOptions{}).Problems)
		})
	}
}

// TestParseFailpoints: SCV_FAILPOINTS takes comma-separated NAME=ACTION
// pairs of known names and actions; anything else is refused with a
// message naming what is wrong, never ignored.
func TestParseFailpoints(t *testing.T) {
	for spec, want := range map[string]map[ledger.Failpoint]string{
		"":                   nil,
		"  ":                 nil,
		"after-insert=crash": {ledger.FailAfterInsert: "crash"},
		" after-begin=error , restart-exec=crash ": {ledger.FailAfterBegin: "error", ledger.FailRestartExec: "crash"},
		"after-begin=crash,after-insert=error,after-commit=crash,snapshot=error,compact-archive=crash,compact-delete=error,restart-exec=error": {
			ledger.FailAfterBegin: "crash", ledger.FailAfterInsert: "error", ledger.FailAfterCommit: "crash",
			ledger.FailSnapshot: "error", ledger.FailCompactArchive: "crash", ledger.FailCompactDelete: "error",
			ledger.FailRestartExec: "error",
		},
	} {
		got, err := ledger.ParseFailpoints(spec)
		if assert.NoError(t, err, "%q", spec) {
			assert.Equal(t, want, got, "%q", spec)
		}
	}
	for spec, msg := range map[string]string{
		"after-insrt=crash":                     `unknown failpoint "after-insrt" (known: after-begin, after-insert, after-commit, snapshot, compact-archive, compact-delete, restart-exec)`,
		"after-insert=boom":                     `failpoint after-insert: unknown action "boom" (crash or error)`,
		"after-insert":                          `"after-insert" is not NAME=ACTION`,
		"=crash":                                `"=crash" is not NAME=ACTION`,
		"after-insert=":                         `"after-insert=" is not NAME=ACTION`,
		"after-insert=crash,":                   `"" is not NAME=ACTION`,
		"after-insert=crash,after-insert=error": `failpoint after-insert is set twice`,
		"after-commit=error":                    `failpoint after-commit takes crash only, not "error"`,
		"AFTER-INSERT=crash":                    `unknown failpoint "AFTER-INSERT"`,
		"after-insert=crash;after-begin=crash":  `unknown action "crash;after-begin=crash"`,
	} {
		_, err := ledger.ParseFailpoints(spec)
		if assert.Error(t, err, "%q", spec) {
			assert.Contains(t, err.Error(), msg, "%q", spec)
		}
	}
}

// failpointChildDB names, in a re-run of this test binary, the database
// the child writes to.
const failpointChildDB = "SCV_FAILPOINT_TEST_DB"

// TestFailpointCrash runs this test binary again as a child process with
// SCV_FAILPOINTS set in its environment, as the daemon is started: a
// misspelt name makes the process panic at start, saying why; a crash
// point kills the child with SIGKILL in the middle of a write, and the
// database it leaves is exactly as before the write (after-begin,
// after-insert) or exactly as after it (after-commit), and verifies.
func TestFailpointCrash(t *testing.T) {
	if path := os.Getenv(failpointChildDB); path != "" {
		crashChild(path) // does not return
	}
	child := func(spec, path string) (*osexec.Cmd, *strings.Builder) {
		cmd := osexec.Command(os.Args[0], "-test.run=^TestFailpointCrash$", "-test.count=1")
		cmd.Env = append(withoutFailpoints(os.Environ()), ledger.FailpointsEnv+"="+spec, failpointChildDB+"="+path)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		return cmd, &stderr
	}

	t.Run("misspelt", func(t *testing.T) {
		cmd, out := child("after-insrt=crash", "unused")
		err := cmd.Run()
		var ee *osexec.ExitError
		require.ErrorAs(t, err, &ee, "%s", out)
		assert.Equal(t, 2, ee.ExitCode(), "a panic at start: %s", out)
		assert.Contains(t, out.String(), `panic: SCV_FAILPOINTS: unknown failpoint "after-insrt"`)
	})

	for _, tc := range []struct {
		point ledger.Failpoint
		after bool // the write is durable
	}{
		{ledger.FailAfterBegin, false},
		{ledger.FailAfterInsert, false},
		{ledger.FailAfterCommit, true},
	} {
		t.Run(string(tc.point), func(t *testing.T) {
			path := dbPath(t)
			l := open(t, path, ledger.Options{})
			f := newFixture(t, l, "acme", t.TempDir())
			p, _ := l.Project(f.project)
			want := observe(p)
			require.NoError(t, l.Close())
			db := rawDB(t, path)
			before := rows(t, db)

			cmd, out := child(string(tc.point)+"=crash", path)
			err := cmd.Run()
			var ee *osexec.ExitError
			require.ErrorAs(t, err, &ee, "the child must die: %s", out)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed by SIGKILL, not %v: %s", ws, out)
			assert.Contains(t, out.String(), "scv: failpoint "+string(tc.point)+": crash (SIGKILL)")

			after := rows(t, db)
			l = open(t, path, ledger.Options{})
			p, _ = l.Project(f.project)
			if !tc.after {
				assert.Equal(t, before, after, "the database is exactly as before")
				assert.Equal(t, want, observe(p))
			} else {
				require.Len(t, after, len(before)+1, "exactly the one event more")
				assert.Equal(t, before, after[:len(before)])
				e, err := after[len(before)].Event()
				require.NoError(t, err)
				added, ok := e.Body.(reducer.TaskAdded)
				require.True(t, ok, "%#v", e.Body)
				assert.Equal(t, crashTask, added.TaskID)
				assert.Equal(t, "crash", added.Title)
				tk, ok := p.Task(crashTask)
				require.True(t, ok, "the task the child added is there after a reopen")
				assert.Equal(t, "crash", tk.Title)
			}
			exec(t, l, reducer.AddTask{Project: f.project, TaskID: id(), Title: "next"})
			require.NoError(t, l.Close())
			assert.Empty(t, verify(t, path, ledger.VerifyOptions{}).Problems)
		})
	}
}

// crashTask is the task the child adds.
const crashTask = "01J0000000000000000000CRSH"

// crashChild is the child's part: one write to the project of the
// database at path, which its failpoint must not survive.
func crashChild(path string) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, path, ledger.Options{})
	if err != nil {
		os.Stderr.WriteString("child: open: " + err.Error() + "\n")
		os.Exit(3)
	}
	p, _ := l.Project("acme")
	_, err = l.Execute(ctx, reducer.AddTask{Project: p.ID, TaskID: crashTask, Title: "crash"})
	os.Stderr.WriteString("child: the write returned (" + fmt.Sprint(err) + "), the failpoint did not fire\n")
	os.Exit(3)
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
