package daemon

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/rpc"
	"scv/ledger/drivertest"
	"scv/ledger/sqlite/sqlitetest"
)

// TestCompactThroughTheDaemon: a project with 600+ events compacted with
// retain 100 keeps exactly its 100 newest events live, reports
// compacted_before, keeps identical status, tasks and report before and
// after, and after a daemon restart; verify passes, and fails naming the
// sequence of an event someone edits after dropping the triggers.
func TestCompactThroughTheDaemon(t *testing.T) {
	d, stop := serve(t, Config{})
	cfg := d.Config()
	c := dial(t, cfg.Socket)
	ws := t.TempDir()
	must(t, c, api.CmdProjectCreate{Name: "acme", Workspace: ws})
	task := must(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}}).Project.TaskID
	must(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "test", DependsOn: []string{task}})
	run := must(t, c, api.CmdProjectRunStart{Project: "acme", Task: task, Agent: "codex"}).Project.RunID
	for i := range 620 {
		must(t, c, api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: "step " + strconv.Itoa(i)})
	}

	// The report's generated_unix_seconds is the clock: compare the rest.
	generated := regexp.MustCompile(`"generated_unix_seconds":\d+`)
	views := func(c *rpc.Client) []string {
		var out []string
		for _, cmd := range []api.Command{api.CmdProjectStatus{Project: "acme"}, api.CmdProjectTasks{Project: "acme"}, api.CmdProjectReport{Project: "acme"}} {
			raw, err := c.CallRaw(context.Background(), cmd)
			require.NoError(t, err, "%s", cmd.Action())
			out = append(out, generated.ReplaceAllString(string(raw), ""))
		}
		return out
	}
	before := views(c)

	must(t, c, api.CmdLedgerCompact{Project: "acme", Retain: ptr[uint64](100)})
	ev := must(t, c, api.CmdProjectEvents{Project: "acme"})
	require.Len(t, ev.Project.Events, 100)
	require.NotNil(t, ev.Project.CompactedBefore)
	assert.Less(t, *ev.Project.CompactedBefore, ev.Project.Events[0].Sequence)
	assert.Equal(t, before, views(c), "the same state after compaction")

	stop()
	_, stop = serve(t, cfg)
	assert.Equal(t, before, views(dial(t, cfg.Socket)), "the same state after a restart")
	stop()

	verifyIntact(t, cfg.DB)
	edited := ev.Project.Events[50].Sequence
	require.NoError(t, sqlitetest.Harness{}.Tamper(t, cfg.DB, drivertest.EditEvent{Sequence: edited, Data: `{"run_id":"x","progress":"forged"}`}))
	rep, err := verifyLedger(cfg.DB)
	require.NoError(t, err)
	require.NotEmpty(t, rep.Problems, "verify found a problem")
	assert.Equal(t, edited, rep.Problems[0].Sequence)
	assert.Contains(t, rep.Problems[0].String(), "sequence "+strconv.FormatUint(edited, 10)+": the hash does not match")
}

// TestAutoCompaction: with CompactAfter 50 and Retain 10 the sweeper
// compacts a project whose live tail outgrew 50 events, and the state is
// unchanged by it.
func TestAutoCompaction(t *testing.T) {
	d, _ := serve(t, Config{StaleAfter: time.Hour, CompactAfter: 50, Retain: 10})
	c := dial(t, d.Config().Socket)
	must(t, c, api.CmdProjectCreate{Name: "acme", Workspace: t.TempDir()})
	task := must(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}}).Project.TaskID
	run := must(t, c, api.CmdProjectRunStart{Project: "acme", Task: task, Agent: "codex"}).Project.RunID
	for i := range 80 {
		must(t, c, api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: "step " + strconv.Itoa(i)})
	}
	tasks := func() string {
		raw, err := c.CallRaw(context.Background(), api.CmdProjectTasks{Project: "acme"})
		require.NoError(t, err)
		return string(raw)
	}
	before := tasks()

	ctx := context.Background()
	d.Sweep(ctx) // one sweep, as the ticker would run it
	ev := must(t, c, api.CmdProjectEvents{Project: "acme"})
	assert.Len(t, ev.Project.Events, 10)
	assert.NotNil(t, ev.Project.CompactedBefore)
	assert.Equal(t, before, tasks())

	d.Sweep(ctx) // nothing due any more
	ev2 := must(t, c, api.CmdProjectEvents{Project: "acme"})
	assert.Equal(t, ev.Project.Events, ev2.Project.Events)
}
