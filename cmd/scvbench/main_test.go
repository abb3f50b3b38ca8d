package main

import (
	"scv/control/daemon/daemonproc"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
)

// TestMain lets the test binary be the harness's status reader and
// do-nothing responder processes too (reader.go, responder.go), as the
// harness's own binary is.
func TestMain(m *testing.M) {
	if arg, ok := os.LookupEnv(readerEnv); ok {
		os.Exit(readerMain(arg))
	}
	if arg, ok := os.LookupEnv(responderEnv); ok {
		os.Exit(responderMain(arg))
	}
	os.Exit(m.Run())
}

// TestQuick runs the whole harness with -quick (it builds and starts the
// real daemon) and checks that the JSON report has every section, with
// positive numbers where something was measured. Targets are not checked:
// a smoke run on a busy machine says nothing about them.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon for a few seconds")
	}
	out := filepath.Join(t.TempDir(), "bench.json")
	cfg, err := parseFlags([]string{"-quick", "-o", out}, io.Discard)
	require.NoError(t, err)
	var table, progress strings.Builder
	_, err = Run(context.Background(), cfg, &table, &progress)
	require.NoError(t, err, "progress:\n%s", &progress)
	assert.Contains(t, table.String(), "total runtime")

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep map[string]any
	require.NoError(t, json.Unmarshal(b, &rep))

	positive := func(path string) {
		t.Helper()
		var v any = rep
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			require.True(t, ok, "%s: %q is not an object", path, k)
			v, ok = m[k]
			require.True(t, ok, "%s: no %q", path, k)
		}
		n, ok := v.(float64)
		require.True(t, ok, "%s is %T, not a number", path, v)
		assert.Greater(t, n, 0.0, path)
	}
	for _, p := range []string{
		"machine.nproc",
		"fsync.count", "fsync.per_sec", "fsync.p50_us", "fsync.p99_us",
		"raw.group.producers", "raw.group.rows_per_sec", "raw.group.commits_per_sec", "raw.group.rows_per_commit",
		"raw.single.rows_per_sec", "raw.single.commit_latency.p50_us", "raw.single.commit_latency.p99_us",
		"durability.acked", "durability.stored",
		"status.idle.p50_us", "status.idle.p99_us",
		"status.under_load.p50_us", "status.under_load.p99_us", "status.under_load_clients",
		"status.floor.count", "status.floor.p50_us", "status.floor.p99_us", "status.p99_over_floor",
		"replay.events", "replay.tasks", "replay.runs", "replay.first_open_seconds",
		"replay.scan_events_per_sec", "replay.start_events_per_sec", "replay.ratio",
		"replay.first_status_seconds", "replay.daemon_vmhwm_kib",
		"replay.compact_seconds", "replay.snapshot_first_status_seconds",
		"replay.compact_writes", "replay.compact_longest_write_ms",
		"encoders.hand.requests_per_sec", "encoders.marshal.requests_per_sec", "encoders.ratio",
		"encoders.hand.daemon_cpu_us_per_request", "encoders.marshal.daemon_cpu_us_per_request",
		"sizes.events", "sizes.first_open_seconds", "sizes.ratio", "sizes.big_tasks",
		"sizes.fresh.requests_per_sec", "sizes.big.requests_per_sec", "sizes.big.latency.p99_us",
		"many.events", "many.first_open_seconds", "many.first_project_status_seconds", "many.first_status_seconds",
		"many.touch_per_sec", "many.vmhwm_kib",
		"rss.vmhwm_kib",
		"agents.updates_per_turn", "agents.events_per_turn", "agents.turn_s",
		"mcp.calls", "mcp.socket.p50_us", "mcp.mcp.p50_us", "mcp.p50_ratio", "mcp.socket.p99_us", "mcp.mcp.p99_us", "mcp.p99_ratio",
		"mcp.line.p50_us", "mcp.line.p99_us", "mcp.line_p50_ratio", "mcp.line_p99_ratio",
		"batches.runs", "batches.raw.rows_per_sec", "batches.raw.cpu_us_per_row", "batches.durability.acked",
		"batches.raw_batched.rows_per_sec", "batches.raw_batched.cpu_us_per_row", "raw.group.cpu_us_per_row",
		"total_seconds",
	} {
		positive(p)
	}
	assert.Equal(t, 0.0, rep["durability"].(map[string]any)["missing"], "acknowledged writes missing from the database")

	levels, ok := rep["e2e"].([]any)
	require.True(t, ok, "e2e is a list")
	require.Len(t, levels, len(cfg.Levels))
	for i, l := range levels {
		m := l.(map[string]any)
		assert.Equal(t, float64(cfg.Levels[i]), m["clients"])
		assert.Equal(t, 0.0, m["errors"], "errors at %v clients: %v", m["clients"], m["first_error"])
		for _, k := range []string{"requests", "requests_per_sec", "ratio_to_raw"} {
			assert.Greater(t, m[k].(float64), 0.0, "e2e[%d].%s", i, k)
		}
		lat := m["latency"].(map[string]any)
		assert.Greater(t, lat["p50_us"].(float64), 0.0, "e2e[%d] p50", i)
		assert.Greater(t, lat["p99_us"].(float64), 0.0, "e2e[%d] p99", i)
	}
	st := rep["status"].(map[string]any)
	assert.Greater(t, st["under_load"].(map[string]any)["count"].(float64), 0.0, "project_status under load")
	w := st["under_load_writers"].(map[string]any)
	assert.Equal(t, float64(cfg.Levels[len(cfg.Levels)-1]), w["clients"], "the reader's window runs the heaviest level")
	assert.Equal(t, 0.0, w["errors"], "errors in the reader's window: %v", w["first_error"])
	assert.Greater(t, w["requests_per_sec"].(float64), 0.0, "the writers beside the reader")
	fw := st["floor_writers"].(map[string]any)
	assert.Equal(t, float64(cfg.Levels[len(cfg.Levels)-1]), fw["clients"], "the responder's window runs the heaviest level")
	assert.Equal(t, 0.0, fw["errors"], "errors in the responder's window: %v", fw["first_error"])
	kinds := rep["replay"].(map[string]any)["kinds"].(map[string]any)
	for _, k := range []string{"project_created", "task_added", "run_started", "run_progress", "heartbeat", "run_finished"} {
		assert.Greater(t, kinds[k], 0.0, "replay history has %s events", k)
	}
	sz := rep["sizes"].(map[string]any)
	assert.Len(t, sz["points"], 1+len(cfg.Sizes), "fresh and every size")
	reports := sz["reports"].([]any)
	require.Len(t, reports, 2)
	for _, r := range reports {
		m := r.(map[string]any)
		for _, k := range []string{"reply_bytes", "bytes_per_task", "evidence_notes"} {
			assert.Greater(t, m[k].(float64), 0.0, "%s: %s", m["name"], k)
		}
	}
	for _, l := range append(rep["e2e"].([]any), sz["fresh"], sz["big"]) {
		assert.Greater(t, l.(map[string]any)["daemon_cpu_us_per_request"].(float64), 0.0, "CPU per request")
	}
	bs := rep["batches"].(map[string]any)
	assert.Equal(t, 0.0, bs["durability"].(map[string]any)["missing"], "acknowledged batch writes missing from the database")
	bl := bs["levels"].([]any)
	require.Len(t, bl, len(cfg.BatchSizes))
	for i, l := range bl {
		m := l.(map[string]any)
		assert.Equal(t, float64(cfg.BatchSizes[i]), m["size"])
		lv := m["level"].(map[string]any)
		assert.Equal(t, 0.0, lv["errors"], "errors in batches of %v: %v", m["size"], lv["first_error"])
		assert.Equal(t, float64(cfg.BatchSizes[i]), lv["requests_per_unit"], "a unit is a batch")
		for _, k := range []string{"events_per_sec", "ratio_to_raw"} {
			assert.Greater(t, m[k].(float64), 0.0, "batches[%d].%s", i, k)
		}
		assert.Greater(t, lv["daemon_cpu_us_per_request"].(float64), 0.0, "CPU per event")
	}
	targets, ok := rep["targets"].([]any)
	require.True(t, ok)
	pg := rep["pg"].(map[string]any)
	if pg["skipped"] != nil {
		t.Logf("PostgreSQL section skipped: %v", pg["skipped"])
		assert.Len(t, targets, 18)
		return
	}
	assert.Len(t, targets, 20)
	positive("pg.pgbench.tps")
	positive("pg.fleet.requests_per_sec")
	positive("pg.fleet_ratio")
	positive("pg.single_pg.requests_per_sec")
	positive("pg.single_sqlite.requests_per_sec")
	assert.Equal(t, 0.0, pg["fleet_durability"].(map[string]any)["missing"])
}

// TestOnly: -only takes the names of sections, refuses others, and a
// report of some sections checks only their targets (and the errors).
func TestOnly(t *testing.T) {
	cfg, err := parseFlags([]string{"-quick", "-only", "mcp, status"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"mcp", "status"}, cfg.Only)
	assert.True(t, runs(cfg.Only, "mcp"))
	assert.True(t, runs(cfg.Only, "status"))
	assert.False(t, runs(cfg.Only, "e2e"))
	assert.False(t, runs(cfg.Only, "replay"))
	assert.True(t, runs([]string{"e2e"}, "status"), "the levels come with the status reads")
	assert.True(t, runs(nil, "pg"), "no -only: every section")

	_, err = parseFlags([]string{"-only", "mcp,nope"}, io.Discard)
	require.ErrorContains(t, err, `no section "nope"`)

	rep := &Report{Only: []string{"mcp"}}
	rep.MCP.LineP50Ratio, rep.MCP.LineP99Ratio = 2, 4
	rep.evaluate()
	var names []string
	for _, tg := range rep.Targets {
		names = append(names, tg.Name)
	}
	assert.ElementsMatch(t, []string{tgtErrors, tgtMCPP50, tgtMCPP99}, names)
	assert.False(t, rep.allPass(), "p99 is 4× the socket's")
	var table strings.Builder
	rep.printTable(&table)
	assert.Contains(t, table.String(), "line client p99 ÷ the socket's")
	assert.NotContains(t, table.String(), "replay")
}

// TestResponder: the do-nothing responder answers each request line
// with the result it was given, under the request's id, as the reader
// expects of the daemon.
func TestResponder(t *testing.T) {
	ctx := context.Background()
	result := []byte(`{"project":{"id":"p","name":"acme"}}`)
	sock, stop, err := startResponder(ctx, t.TempDir(), result)
	require.NoError(t, err)
	c, err := control.Dial(ctx, sock)
	require.NoError(t, err)
	cl := &conn{c: c}
	for i := 1; i <= 3; i++ {
		reply, err := cl.call(ctx, statusParams("p"))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, i, result), string(reply))
		got, err := resultOf(reply)
		require.NoError(t, err)
		assert.JSONEq(t, string(result), string(got))
	}
	require.NoError(t, c.Close())
	require.NoError(t, stop())
}

// buildScv builds the scv binary into a folder of the test's own, fit for
// sockets, and returns both.
func buildScv(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700), "the socket's folder")
	bin = filepath.Join(dir, "scv")
	require.NoError(t, daemonproc.Build(context.Background(), bin))
	return dir, bin
}

// TestAgentTurns: the live agents' measure runs its turns on a real
// daemon and agent, and reports the daemon's and the agent's CPU per
// update and the ledger events of a turn: run_started, run_finished, and
// between them no more than the coalesced progress and heartbeats.
func TestAgentTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon and an agent")
	}
	dir, bin := buildScv(t)
	cfg := defaultConfig()
	cfg.AgentUpdates, cfg.AgentRounds = 20_000, 2
	res, err := agentTurns(context.Background(), cfg, bin, dir, t.Logf)
	require.NoError(t, err)
	assert.Equal(t, 20_000, res.Updates)
	assert.Greater(t, res.DaemonWithRun, 0.0)
	assert.Greater(t, res.Agent, 0.0)
	assert.Greater(t, res.Ratio, 0.0)
	assert.GreaterOrEqual(t, res.EventsPerTurn, 2.0, "run_started and run_finished at least")
	assert.Less(t, res.EventsPerTurn, 20.0, "20,000 updates coalesced into a handful of progress events")
}

// TestBatches: the batch measure starts its runs with batches and sends
// batches of each size on one connection to a real daemon; every request
// of every batch appended its event.
func TestBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	dir, bin := buildScv(t)
	cfg := defaultConfig()
	cfg.Duration, cfg.Warmup = 500*time.Millisecond, 100*time.Millisecond
	cfg.BatchRuns, cfg.BatchSizes = 1500, []int{10, 1000}
	res, err := batches(context.Background(), cfg, bin, dir, t.Logf)
	require.NoError(t, err)
	assert.Equal(t, 1500, res.Runs)
	require.Len(t, res.Levels, 2)
	for _, l := range res.Levels {
		assert.Zero(t, l.Level.Errors, "batches of %d: %s", l.Size, l.Level.FirstError)
		assert.Greater(t, l.EventsPerSec, 0.0)
		assert.Greater(t, l.RatioToRaw, 0.0)
	}
	assert.Equal(t, 1000, res.largest().Size)
	assert.Positive(t, res.Durability.Acked)
	assert.Equal(t, res.Durability.Acked, res.Durability.Stored, "every acknowledged event is in the file")
}

// TestMCPLatency: the MCP measure runs its calls on the socket and
// through a real `scv mcp` with each client, against a real daemon, and
// reports the three latencies.
func TestMCPLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon and scv mcp")
	}
	dir, bin := buildScv(t)
	cfg := defaultConfig()
	cfg.MCPCalls = 200
	res, err := mcpLatency(context.Background(), cfg, bin, dir, t.Logf)
	require.NoError(t, err)
	assert.Equal(t, 200, res.Socket.Count)
	assert.Equal(t, 200, res.MCP.Count)
	assert.Equal(t, 200, res.Line.Count)
	assert.Greater(t, res.Socket.P50us, 0.0)
	assert.Greater(t, res.MCP.P50us, 0.0)
	assert.Greater(t, res.Line.P50us, 0.0)
	assert.Greater(t, res.P50Ratio, 0.0)
	assert.Greater(t, res.LineP50Ratio, 0.0)
}
