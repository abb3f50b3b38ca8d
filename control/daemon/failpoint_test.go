package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/rpc"
	"scv/ledger"
	"scv/ledger/sqlite/sqlitetest"
)

// TestReliabilityFailpoints runs the real binary with SCV_FAILPOINTS set
// to crash at each failpoint (ledger/failpoint.go) on a database that
// already holds a project, sends the one write that passes the point, and
// checks that the daemon died by SIGKILL without answering and that the
// database it left is, for a fresh daemon and for ledger.Verify,
// exactly as before the write (every point before COMMIT) or exactly as
// after it (after-commit). The reads a client sees are compared byte for
// byte, and for "before" (and a compaction's "after") the whole database
// too, table by table. restart-exec is checked on a restart_when_idle:
// with error the old daemon serves on, same version, same state; with
// crash it dies mid-restart and a fresh daemon finds the state as before.
func TestReliabilityFailpoints(t *testing.T) {
	bin, newBin := scvBinary(t, oldRelease), scvBinary(t, newRelease)

	// The database every case starts from: a project with two tasks (three
	// events), written by a daemon without failpoints and stopped cleanly.
	baseDir := shortDir(t)
	base := filepath.Join(baseDir, "l.db")
	d := startProcess(t, bin, base, filepath.Join(baseDir, "d.sock"), "")
	d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: baseDir})
	task := d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "first", DependsOn: []string{}}).Project.TaskID
	d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "second", DependsOn: []string{task}})
	before := fpRead(t, d.Sock)
	d.stop(t)
	baseDump := fpDump(t, base)
	baseVerify := verifyIntact(t, base)

	addTask := api.CmdProjectTaskAdd{Project: "acme", Title: "in flight", DependsOn: []string{}}
	compact := api.CmdLedgerCompact{Project: "acme", Retain: ptr[uint64](1)}

	// What the compaction leaves when nothing fails: the same command on
	// a copy, through a daemon without failpoints.
	dir := shortDir(t)
	fpCopyDB(t, base, filepath.Join(dir, "l.db"))
	d = startProcess(t, bin, filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock"), "")
	d.must(t, compact)
	compacted := fpRead(t, d.Sock)
	d.stop(t)
	require.NotEqual(t, before.Events, compacted.Events, "the compaction changes the live tail")
	compactedDump := fpDump(t, filepath.Join(dir, "l.db"))
	compactedVerify := verifyIntact(t, filepath.Join(dir, "l.db"))
	require.NotEqual(t, baseDump, compactedDump, "the compaction changes the tables")

	passed := map[ledger.Failpoint]bool{}
	for _, tc := range []struct {
		point ledger.Failpoint
		write api.Command
		after bool // the write is durable: the state is exactly after it
	}{
		{ledger.FailAfterBegin, addTask, false},
		{ledger.FailAfterInsert, addTask, false},
		{ledger.FailAfterCommit, addTask, true},
		{ledger.FailAfterBegin, compact, false},
		{ledger.FailSnapshot, compact, false},
		{ledger.FailCompactArchive, compact, false},
		{ledger.FailCompactDelete, compact, false},
		{ledger.FailAfterCommit, compact, true},
	} {
		t.Run(string(tc.point)+"/"+tc.write.Action(), func(t *testing.T) {
			dir := shortDir(t)
			db, sock := filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock")
			fpCopyDB(t, base, db)
			d := startProcess(t, bin, db, sock, string(tc.point)+"=crash")
			require.Equal(t, before, fpRead(t, sock), "the copy serves the base state")

			_, err := d.call(tc.write)
			require.Error(t, err, "the client must get no reply")
			var ce *api.Error
			assert.False(t, errors.As(err, &ce), "no reply at all, not an error reply: %v", err)
			d.assertKilled(t, tc.point)

			// The file as the crash left it, before any daemon opens it.
			verified := verifyIntact(t, db)
			switch {
			case !tc.after:
				assert.Equal(t, baseVerify, verified)
			case tc.write == compact:
				assert.Equal(t, compactedVerify, verified)
			}

			d = startProcess(t, bin, db, sock, "")
			got := fpRead(t, sock)
			switch {
			case !tc.after:
				assert.Equal(t, before, got, "exactly before")
			case tc.write == compact:
				assert.Equal(t, compacted, got, "exactly after")
			default:
				assertOneTaskMore(t, before, got, addTask.Title)
			}
			// The ledger goes on: the next write is answered.
			d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "next", DependsOn: []string{}})
			d.stop(t)
			verifyIntact(t, db)
			if !t.Failed() {
				passed[tc.point] = true
			}
		})
	}
	// "exactly before" for the whole file, not only what a client reads:
	// the cases above compared the reads; here the tables, once per kind
	// of outcome, on a fresh crash each.
	t.Run("whole database", func(t *testing.T) {
		for _, tc := range []struct {
			point ledger.Failpoint
			write api.Command
			want  string
		}{
			{ledger.FailAfterInsert, addTask, baseDump},
			{ledger.FailCompactDelete, compact, baseDump},
			{ledger.FailAfterCommit, compact, compactedDump},
		} {
			dir := shortDir(t)
			db := filepath.Join(dir, "l.db")
			fpCopyDB(t, base, db)
			d := startProcess(t, bin, db, filepath.Join(dir, "d.sock"), string(tc.point)+"=crash")
			_, err := d.call(tc.write)
			require.Error(t, err)
			d.assertKilled(t, tc.point)
			assert.Equal(t, tc.want, fpDump(t, db), "%s: the tables after the crash", tc.point)
		}
	})

	// restart-exec: the daemon, started from a path a second release is
	// then installed over, is asked to restart into it.
	restartInto := func(t *testing.T, spec string) (*process, *api.DaemonStatus) {
		dir := shortDir(t)
		exe := filepath.Join(dir, "bin", "scv")
		install(t, bin, exe)
		fpCopyDB(t, base, filepath.Join(dir, "l.db"))
		d := startProcess(t, exe, filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock"), spec)
		require.Equal(t, before, fpRead(t, d.Sock))
		install(t, newBin, exe)
		st := d.must(t, api.CmdRestartWhenIdle{Version: ptr(newRelease)})
		require.NotNil(t, st.Restart, "the restart is scheduled")
		return d, st
	}
	t.Run("restart-exec=error", func(t *testing.T) {
		d, _ := restartInto(t, "restart-exec=error")
		require.Eventually(t, func() bool { return strings.Contains(d.Log(), "restart failed") },
			30*time.Second, 20*time.Millisecond, "the restart fails: %s", d.Log())
		assert.Contains(t, d.Log(), "injected failure at failpoint restart-exec")
		st := d.must(t, api.CmdStatus{})
		assert.Equal(t, oldRelease, st.Version, "the old release serves on")
		assert.Equal(t, uint32(d.Pid()), st.PID)
		assert.Nil(t, st.Restart, "the failed restart is cleared")
		assert.Equal(t, before, fpRead(t, d.Sock), "the same state")
		d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "next", DependsOn: []string{}})
		d.stop(t)
		verifyIntact(t, d.db)
		if !t.Failed() {
			passed[ledger.FailRestartExec] = true
		}
	})
	t.Run("restart-exec=crash", func(t *testing.T) {
		d, _ := restartInto(t, "restart-exec=crash")
		assertSIGKILL(t, d.waitExit(t), d.Log())
		assert.Contains(t, d.Log(), "scv: failpoint restart-exec: crash (SIGKILL)")
		assert.NotContains(t, d.Log(), "inherited_socket=true", "no successor started")
		// The old daemon had closed its ledger: the file is exactly as
		// before, and a fresh daemon (the new release, as a service
		// manager would start) on it serves the same state.
		assert.Equal(t, baseVerify, verifyIntact(t, d.db))
		assert.Equal(t, baseDump, fpDump(t, d.db))
		fresh := startProcess(t, d.bin, d.db, d.Sock, "")
		assert.Equal(t, newRelease, fresh.must(t, api.CmdStatus{}).Version)
		assert.Equal(t, before, fpRead(t, d.Sock), "exactly before")
		fresh.stop(t)
		if !t.Failed() {
			passed[ledger.FailRestartExec] = true
		}
	})

	// Logged only when every case passed: each point counted was
	// reached (the daemon said so and died by SIGKILL) and left the
	// ledger as it should.
	if !t.Failed() {
		t.Logf("RELIABILITY: failpoints: %d points, each left the ledger exactly before or exactly after", len(passed))
	}
}

// fpReads is what a client reads of project acme: the project member of
// the project_status, project_tasks and project_events replies, as the
// daemon wrote them.
type fpReads struct{ Status, Tasks, Events string }

func fpRead(t *testing.T, sock string) fpReads {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, sock)
	require.NoError(t, err)
	defer c.Close()
	member := func(cmd api.Command) string {
		raw, err := c.CallRaw(ctx, cmd)
		require.NoError(t, err, "%s", cmd.Action())
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m))
		require.Contains(t, m, "project")
		return string(m["project"])
	}
	return fpReads{
		Status: member(api.CmdProjectStatus{Project: "acme"}),
		Tasks:  member(api.CmdProjectTasks{Project: "acme"}),
		Events: member(api.CmdProjectEvents{Project: "acme"}),
	}
}

// assertOneTaskMore checks that got is before with exactly one task
// more, titled title, and exactly one event more, its task_added: the
// reads of before are a prefix of got's, byte for byte.
func assertOneTaskMore(t *testing.T, before, got fpReads, title string) {
	t.Helper()
	list := func(reads, key string) []json.RawMessage {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(reads), &m))
		var l []json.RawMessage
		require.NoError(t, json.Unmarshal(m[key], &l), "%s", reads)
		return l
	}
	bt, gt := list(before.Tasks, "tasks"), list(got.Tasks, "tasks")
	require.Len(t, gt, len(bt)+1, "exactly one task more")
	assert.Equal(t, bt, gt[:len(bt)])
	var tk api.ProjectTask
	require.NoError(t, json.Unmarshal(gt[len(bt)], &tk))
	assert.Equal(t, title, tk.Title)
	be, ge := list(before.Events, "events"), list(got.Events, "events")
	require.Len(t, ge, len(be)+1, "exactly one event more")
	assert.Equal(t, be, ge[:len(be)])
	var ev struct {
		Kind string
		Data json.RawMessage
	}
	require.NoError(t, json.Unmarshal(ge[len(be)], &ev))
	assert.Equal(t, "task_added", ev.Kind)
	assert.Contains(t, string(ev.Data), `"task_id":"`+tk.ID+`"`)
	var bs, gs api.ProjectSummary
	require.NoError(t, json.Unmarshal([]byte(before.Status), &struct{ Project *api.ProjectSummary }{&bs}))
	require.NoError(t, json.Unmarshal([]byte(got.Status), &struct{ Project *api.ProjectSummary }{&gs}))
	assert.Equal(t, bs.TaskCount+1, gs.TaskCount)
}

// fpCopyDB copies the database at src (with its WAL, if any) to dst.
func fpCopyDB(t *testing.T, src, dst string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		in, err := os.Open(src + suffix)
		if errors.Is(err, os.ErrNotExist) && suffix != "" {
			continue
		}
		require.NoError(t, err)
		out, err := os.OpenFile(dst+suffix, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		_, err = io.Copy(out, in)
		in.Close()
		require.NoError(t, err)
		require.NoError(t, out.Close())
	}
}

// fpDump is every row of every table of the database at db, in rowid
// order, one line each: two dumps are equal when the tables are. No
// daemon may have the file open.
func fpDump(t *testing.T, db string) string {
	t.Helper()
	dump, err := sqlitetest.Dump(context.Background(), db)
	require.NoError(t, err)
	return dump
}
