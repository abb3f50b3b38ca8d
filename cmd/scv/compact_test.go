package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/control/daemon"
	"scv/ledger/drivertest"
	"scv/ledger/sqlite/sqlitetest"
)

// TestCompactThroughTheDaemon: a project with 600+ events compacted with
// --retain 100 keeps exactly its 100 newest events live, reports
// compacted_before, keeps identical status, tasks and report before and
// after, and after a daemon restart; verify passes, and fails naming the
// sequence of an event someone edits after dropping the triggers.
func TestCompactThroughTheDaemon(t *testing.T) {
	cfg := daemon.Config{DB: filepath.Join(t.TempDir(), "l.db"), Socket: filepath.Join(cliShortDir(t), "d.sock")}
	_, stop := inDaemonStop(t, cfg)
	sock := cfg.Socket
	cliOK(t, sock, "project", "create", "acme", "--workspace", t.TempDir())
	task := cliNewID(t, cliOK(t, sock, "project", "task", "add", "acme", "build"), "task", "added")
	cliNewID(t, cliOK(t, sock, "project", "task", "add", "acme", "test", "--depends-on", task), "task", "added")
	run := cliNewID(t, cliOK(t, sock, "project", "run", "start", "acme", task, "--agent", "codex"), "run", "started")
	ctx := context.Background()
	c, err := control.Dial(ctx, sock)
	require.NoError(t, err)
	for i := range 620 {
		_, err := c.Call(ctx, api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: "step " + strconv.Itoa(i)})
		require.NoError(t, err)
	}
	c.Close()

	// The report's generated_unix_seconds is the clock: compare the rest.
	generated := regexp.MustCompile(`"generated_unix_seconds":\d+`)
	views := func() []string {
		var out []string
		for _, what := range []string{"status", "tasks", "report"} {
			out = append(out, generated.ReplaceAllString(cliOK(t, sock, "--json", "project", what, "acme"), ""))
		}
		return out
	}
	before := views()

	out := cliOK(t, sock, "ledger", "compact", "acme", "--retain", "100")
	assert.Regexp(t, `acme: events up to \d+ are in the snapshot and the archive; 100 live`, out)
	st, err := control.Dial(ctx, sock)
	require.NoError(t, err)
	ev, err := st.Call(ctx, api.CmdProjectEvents{Project: "acme"})
	require.NoError(t, err)
	st.Close()
	require.Len(t, ev.Project.Events, 100)
	require.NotNil(t, ev.Project.CompactedBefore)
	assert.Less(t, *ev.Project.CompactedBefore, ev.Project.Events[0].Sequence)
	assert.Equal(t, before, views(), "the same state after compaction")

	stop()
	_, stop = inDaemonStop(t, cfg)
	assert.Equal(t, before, views(), "the same state after a restart")
	stop()

	r := cliRun(t, sock, "ledger", "verify", "--db", cfg.DB)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "intact")

	edited := ev.Project.Events[50].Sequence
	require.NoError(t, sqlitetest.Harness{}.Tamper(t, cfg.DB, drivertest.EditEvent{Sequence: edited, Data: `{"run_id":"x","progress":"forged"}`}))
	r = cliRun(t, sock, "ledger", "verify", "--db", cfg.DB)
	assert.Equal(t, 4, r.code, "verify found a problem")
	assert.Contains(t, r.stderr, "sequence "+strconv.FormatUint(edited, 10)+": the hash does not match")
}

// TestAutoCompaction: with --compact-after 50 --retain 10 the sweeper
// compacts a project whose live tail outgrew 50 events, and the state is
// unchanged by it.
func TestAutoCompaction(t *testing.T) {
	d := inDaemon(t, daemon.Config{StaleAfter: time.Hour, CompactAfter: 50, Retain: 10})
	sock := d.Config().Socket
	cliOK(t, sock, "project", "create", "acme", "--workspace", t.TempDir())
	task := cliNewID(t, cliOK(t, sock, "project", "task", "add", "acme", "build"), "task", "added")
	run := cliNewID(t, cliOK(t, sock, "project", "run", "start", "acme", task, "--agent", "codex"), "run", "started")
	ctx := context.Background()
	c, err := control.Dial(ctx, sock)
	require.NoError(t, err)
	defer c.Close()
	for i := range 80 {
		_, err := c.Call(ctx, api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: "step " + strconv.Itoa(i)})
		require.NoError(t, err)
	}
	before := cliOK(t, sock, "--json", "project", "tasks", "acme")

	d.Sweep(ctx) // one sweep, as the ticker would run it
	ev, err := c.Call(ctx, api.CmdProjectEvents{Project: "acme"})
	require.NoError(t, err)
	assert.Len(t, ev.Project.Events, 10)
	assert.NotNil(t, ev.Project.CompactedBefore)
	assert.Equal(t, before, cliOK(t, sock, "--json", "project", "tasks", "acme"))

	d.Sweep(ctx) // nothing due any more
	ev2, err := c.Call(ctx, api.CmdProjectEvents{Project: "acme"})
	require.NoError(t, err)
	assert.Equal(t, ev.Project.Events, ev2.Project.Events)
}
