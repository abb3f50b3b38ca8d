package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"scv/control/daemon/daemonproc"
)

// Report is everything one run measured; it is written as JSON.
type Report struct {
	Machine Machine           `json:"machine"`
	Source  daemonproc.Source `json:"source"`
	Config  ConfigReport      `json:"config"`
	// Only are the sections measured, when -only chose them (none: all).
	Only  []string    `json:"only,omitempty"`
	Fsync FsyncResult `json:"fsync"`
	Raw   struct {
		Group  RawGroupResult  `json:"group"`
		Single RawSingleResult `json:"single"`
	} `json:"raw"`
	E2E        []LevelResult    `json:"e2e"`
	Durability DurabilityResult `json:"durability"`
	Status     struct {
		Idle      Latency `json:"idle"`
		UnderLoad Latency `json:"under_load"`
		// Clients is the number of writing clients during UnderLoad, and
		// Writers what they did in that window.
		Clients int         `json:"under_load_clients"`
		Writers LevelResult `json:"under_load_writers"`
		// Floor is the same reader asking the do-nothing responder
		// (responder.go) under the same load, FloorWriters the writers
		// then, and OverFloor UnderLoad's p99 over Floor's.
		Floor        Latency     `json:"floor"`
		FloorWriters LevelResult `json:"floor_writers"`
		OverFloor    float64     `json:"p99_over_floor"`
	} `json:"status"`
	Encoders     EncoderResult `json:"encoders"`
	Sizes        SizesResult   `json:"sizes"`
	Many         ManyResult    `json:"many"`
	PG           PGResult      `json:"pg"`
	Replay       ReplayResult  `json:"replay"`
	Agents       AgentResult   `json:"agents"`
	MCP          MCPResult     `json:"mcp"`
	Batches      BatchesResult `json:"batches"`
	RSS          RSSResult     `json:"rss"`
	Targets      []Target      `json:"targets"`
	Phases       []PhaseTime   `json:"phases"`
	TotalSeconds float64       `json:"total_seconds"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs      int    `json:"nproc"`
	CPUModel  string `json:"cpu_model"`
	GoVersion string `json:"go_version"`
	Kernel    string `json:"kernel"`
	MemTotal  string `json:"mem_total"`
	When      string `json:"when"`
}

// ConfigReport is the part of Config worth recording.
type ConfigReport struct {
	DurationSeconds float64 `json:"duration_s"`
	WarmupSeconds   float64 `json:"warmup_s"`
	Levels          []int   `json:"levels"`
	Producers       int     `json:"producers"`
	Events          int     `json:"events"`
	ReplayRounds    int     `json:"replay_rounds"`
	SizeClients     int     `json:"size_clients"`
	Sizes           []int   `json:"sizes"`
	ChainTasks      int     `json:"chain_tasks"`
	DiamondLayers   int     `json:"diamond_layers"`
	ManyProjects    int     `json:"many_projects"`
	ManyTasks       int     `json:"many_tasks"`
	AgentUpdates    int     `json:"agent_updates"`
	AgentRounds     int     `json:"agent_rounds"`
	MCPCalls        int     `json:"mcp_calls"`
	BatchRuns       int     `json:"batch_runs"`
	BatchSizes      []int   `json:"batch_sizes"`
	PGDaemons       int     `json:"pg_daemons"`
	PGClients       int     `json:"pg_clients"`
}

func (c Config) report() ConfigReport {
	return ConfigReport{
		DurationSeconds: c.Duration.Seconds(), WarmupSeconds: c.Warmup.Seconds(),
		Levels: c.Levels, Producers: c.Producers, Events: c.Events, ReplayRounds: c.ReplayRounds,
		SizeClients: c.SizeClients, Sizes: c.Sizes, ChainTasks: c.ChainTasks, DiamondLayers: c.DiamondLayers,
		ManyProjects: c.ManyProjects, ManyTasks: c.ManyTasks, PGDaemons: c.PGDaemons, PGClients: c.PGClients,
		AgentUpdates: c.AgentUpdates, AgentRounds: c.AgentRounds, MCPCalls: c.MCPCalls,
		BatchRuns: c.BatchRuns, BatchSizes: c.BatchSizes,
	}
}

// PhaseTime is how long one phase of the run took.
type PhaseTime struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Latency summarises a set of request latencies.
type Latency struct {
	Count int     `json:"count"`
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
	Maxus float64 `json:"max_us"`
}

// latencyOf returns the nearest-rank percentiles of ds (which it sorts).
func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	return Latency{
		Count: len(ds),
		P50us: us(percentile(ds, 0.50)),
		P99us: us(percentile(ds, 0.99)),
		Maxus: us(ds[len(ds)-1]),
	}
}

// percentile is the nearest-rank percentile of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds))*p+0.999999) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// median of a few values.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Target is one goal checked against this run's numbers.
type Target struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Rule   string  `json:"rule"` // ">=", "<=", "<", "=="
	Pass   bool    `json:"pass"`
	Margin string  `json:"margin"` // by how much it was met or missed
}

func check(name string, value float64, rule string, limit float64) Target {
	t := Target{Name: name, Value: value, Limit: limit, Rule: rule}
	switch rule {
	case ">=":
		t.Pass = value >= limit
	case "<=":
		t.Pass = value <= limit
	case "<":
		t.Pass = value < limit
	case "==":
		t.Pass = value == limit
	}
	switch {
	case rule == "==":
		t.Margin = fmt.Sprintf("%g vs %g", value, limit)
	case limit != 0:
		t.Margin = fmt.Sprintf("%.3f× the limit", value/limit)
	}
	return t
}

func (r *Report) allPass() bool {
	for _, t := range r.Targets {
		if !t.Pass {
			return false
		}
	}
	return true
}

// loaded is the highest load level.
func (r *Report) loaded() LevelResult {
	if len(r.E2E) == 0 {
		return LevelResult{}
	}
	return r.E2E[len(r.E2E)-1]
}

// errors counts the failed requests of every load level, the reader's
// window and the batches included.
func (r *Report) errors() int {
	n := r.Status.Writers.Errors
	for _, l := range r.E2E {
		n += l.Errors
	}
	for _, b := range r.Batches.Levels {
		n += b.Level.Errors
	}
	return n
}

// sliceOf points at each element of ls.
func sliceOf[T any](ls []T) []*T {
	ps := make([]*T, len(ls))
	for i := range ls {
		ps[i] = &ls[i]
	}
	return ps
}

// level returns the result for c clients.
func (r *Report) level(c int) (LevelResult, bool) {
	for _, l := range r.E2E {
		if l.Clients == c {
			return l, true
		}
	}
	return LevelResult{}, false
}

// Target names, shared by evaluate and printTable.
const (
	tgtRatio256     = "256 clients: req/s ÷ raw 256-producer rows/s"
	tgtP99256       = "256 clients: p99 latency (µs)"
	tgtErrors       = "errors at every level"
	tgtOneClient    = "1 client: p50 latency (µs) ≤ 2× fsync p50 + 100 µs"
	tgtReplay       = "replay: scan-and-decode ÷ daemon start to first project_status"
	tgtSnapshot     = "start-up behind snapshots (s)"
	tgtStatusLoad   = "project_status p99 (µs) while 256 clients write"
	tgtDurable      = "acknowledged writes found in the database"
	tgtTotal        = "total runtime (s)"
	tgtSizes        = "lifecycle units/s: largest project ÷ fresh"
	tgtManyStart    = "10,000 projects: start to first project_status (s)"
	tgtManyRSS      = "10,000 projects: peak RSS after touching all (MiB)"
	tgtFleet        = "fleet (one project) events/s ÷ pgbench tps"
	tgtFleetDurable = "fleet: acknowledged writes found in the database"
	tgtBatchRatio   = "largest batches: events/s ÷ raw 256-producer rows/s"
	tgtBatchCPU     = "largest batches: daemon CPU per event (µs)"
	tgtBatchDurable = "batches: acknowledged writes found in the database"
	tgtStatusFloor  = "project_status p99 ÷ the do-nothing responder's, 256 clients writing"
	tgtMCPP50       = "run_progress through scv mcp, line client: p50 ÷ the socket's"
	tgtMCPP99       = "run_progress through scv mcp, line client: p99 ÷ the socket's"
)

// ran says whether the run measured section (-only).
func (r *Report) ran(section string) bool { return runs(r.Only, section) }

// maxTotal is the whole run's budget.
const maxTotal = 360

// evaluate checks every target against ratios of this run.
func (r *Report) evaluate() {
	for _, l := range append(sliceOf(r.E2E), &r.Status.Writers, &r.Status.FloorWriters) {
		if r.Raw.Group.RowsPerSec > 0 {
			l.RatioToRaw = l.RequestsPerSec / r.Raw.Group.RowsPerSec
		}
	}
	if r.Status.Floor.P99us > 0 {
		r.Status.OverFloor = r.Status.UnderLoad.P99us / r.Status.Floor.P99us
	}
	add := func(section string, ts ...Target) {
		if r.ran(section) {
			r.Targets = append(r.Targets, ts...)
		}
	}
	hi := r.loaded()
	add("e2e",
		check(tgtRatio256, hi.RatioToRaw, ">=", 0.5),
		check(tgtP99256, hi.Latency.P99us, "<=", 10_000),
	)
	r.Targets = append(r.Targets, check(tgtErrors, float64(r.errors()), "==", 0))
	if one, ok := r.level(1); ok {
		limit := 2*r.Fsync.P50us + 100
		r.Targets = append(r.Targets, check(tgtOneClient, one.Latency.P50us, "<=", limit))
	}
	add("status",
		check(tgtStatusLoad, r.Status.UnderLoad.P99us, "<", 1000),
		check(tgtStatusFloor, r.Status.OverFloor, "<=", 3),
		check(tgtDurable, float64(r.Durability.Missing), "==", 0),
	)
	add("sizes", check(tgtSizes, r.Sizes.Ratio, ">=", 0.8))
	add("many",
		check(tgtManyStart, r.Many.StartSeconds, "<", 0.5),
		check(tgtManyRSS, float64(r.Many.VmHWMKiB)/1024, "<", 150),
	)
	if r.PG.Skipped == "" {
		add("pg",
			check(tgtFleet, r.PG.FleetRatio, ">=", 1),
			check(tgtFleetDurable, float64(r.PG.Durability.Missing), "==", 0),
		)
	}
	if b := r.Batches.largest(); b.Size > 0 {
		r.Targets = append(r.Targets,
			check(tgtBatchRatio, b.RatioToRaw, ">=", 0.8),
			check(tgtBatchCPU, b.Level.CPUus, "<=", 3),
			check(tgtBatchDurable, float64(r.Batches.Durability.Missing), "==", 0),
		)
	}
	add("replay",
		check(tgtReplay, r.Replay.Ratio, ">=", 0.8),
		check(tgtSnapshot, r.Replay.SnapshotFirstStatusSeconds, "<", 1),
	)
	add("mcp",
		check(tgtMCPP50, r.MCP.LineP50Ratio, "<=", 3),
		check(tgtMCPP99, r.MCP.LineP99Ratio, "<=", 3),
	)
	if len(r.Only) == 0 {
		r.Targets = append(r.Targets, check(tgtTotal, r.TotalSeconds, "<", maxTotal))
	}
}

// printTable writes the one table of the run.
func (r *Report) printTable(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(w, strings.Join(cols, "\t")) }
	targets := map[string]Target{}
	for _, t := range r.Targets {
		targets[t.Name] = t
	}
	// mark is a target's limit and its verdict with the ratio of value
	// to limit.
	mark := func(name, unit string) (string, string) {
		t, ok := targets[name]
		if !ok {
			return "", ""
		}
		res := "PASS"
		if !t.Pass {
			res = "MISS"
		}
		if t.Rule != "==" && t.Limit != 0 {
			res += fmt.Sprintf(" (%.2f× the limit)", t.Value/t.Limit)
		}
		return fmt.Sprintf("%s %g%s", t.Rule, round(t.Limit), unit), res
	}
	level := func(l LevelResult, unit string) string {
		return fmt.Sprintf("%.0f %s/s, p50 %.0f µs, p99 %.0f µs, %d errors, %.0f µs CPU/req",
			l.RequestsPerSec, unit, l.Latency.P50us, l.Latency.P99us, l.Errors, l.CPUus)
	}
	row("MEASURE", "RESULT", "TARGET (same run)", "")
	var tg, res string
	if r.ran("e2e") {
		var fw, gw []string
		for _, w := range r.Fsync.Windows {
			fw = append(fw, fmt.Sprintf("%.0f", w.P50us))
		}
		row("disk: 4 KiB write + fdatasync",
			fmt.Sprintf("%.0f fsync/s, p50 %.0f µs, p99 %.0f µs (p50 per window: %s µs)",
				r.Fsync.PerSec, r.Fsync.P50us, r.Fsync.P99us, strings.Join(fw, ", ")), "", "")
		g := r.Raw.Group
		for _, w := range g.Windows {
			gw = append(gw, fmt.Sprintf("%.0f", w.RowsPerSec))
		}
		row(fmt.Sprintf("raw SQLite: %d producers, group commit", g.Producers),
			fmt.Sprintf("%.0f rows/s, %.0f commits/s, %.1f rows/commit, %.1f µs CPU/row (per window: %s rows/s)",
				g.RowsPerSec, g.CommitsPerSec, g.RowsPerCommit, g.CPUus, strings.Join(gw, ", ")), "", "")
		s := r.Raw.Single
		row("raw SQLite: 1 producer, 1 row/commit",
			fmt.Sprintf("%.0f rows/s, commit p50 %.0f µs, p99 %.0f µs", s.RowsPerSec, s.Latency.P50us, s.Latency.P99us), "", "")
		for _, l := range r.E2E {
			row(fmt.Sprintf("socket: %d client(s), run_progress", l.Clients), level(l, "req")+fmt.Sprintf(", %.3f× raw", l.RatioToRaw), "", "")
			if l.Clients == 1 {
				tg, res := mark(tgtOneClient, "")
				row("  1 client p50 (µs)", fmt.Sprintf("%.0f", l.Latency.P50us), tg+" (2×fsync p50+100)", res)
				floor := s.Latency.P50us + r.Status.Idle.P50us
				row("  budget: raw commit p50 + idle read round trip",
					fmt.Sprintf("%.0f + %.0f = %.0f µs; the daemon's write path adds %.0f µs",
						s.Latency.P50us, r.Status.Idle.P50us, floor, l.Latency.P50us-floor), "", "")
			}
		}
		hi := r.loaded()
		tg, res = mark(tgtRatio256, "×")
		row(fmt.Sprintf("  %d clients ÷ raw ceiling", hi.Clients), fmt.Sprintf("%.3f×", hi.RatioToRaw), tg, res)
		tg, res = mark(tgtP99256, " µs")
		row(fmt.Sprintf("  %d clients p99", hi.Clients), fmt.Sprintf("%.0f µs", hi.Latency.P99us), tg, res)
	}
	tg, res = mark(tgtErrors, "")
	row("  errors, all levels", fmt.Sprint(r.errors()), tg, res)
	if r.ran("status") {
		tg, res = mark(tgtDurable, "")
		row("  acknowledged writes in the database", fmt.Sprintf("%d acked, %d stored, %d missing",
			r.Durability.Acked, r.Durability.Stored, r.Durability.Missing), "missing "+tg, res)
		row("project_status, idle", fmt.Sprintf("p50 %.0f µs, p99 %.0f µs (%d requests)",
			r.Status.Idle.P50us, r.Status.Idle.P99us, r.Status.Idle.Count), "", "")
		tg, res = mark(tgtStatusLoad, " µs")
		row(fmt.Sprintf("project_status, %d clients writing", r.Status.Clients), fmt.Sprintf("p50 %.0f µs, p99 %.0f µs (%d requests)",
			r.Status.UnderLoad.P50us, r.Status.UnderLoad.P99us, r.Status.UnderLoad.Count), "p99 "+tg, res)
		sw := r.Status.Writers
		row("  the writers in that window", level(sw, "req")+fmt.Sprintf(", %.3f× raw", sw.RatioToRaw), "", "")
		row(fmt.Sprintf("do-nothing responder, %d clients writing", r.Status.Clients), fmt.Sprintf("p50 %.0f µs, p99 %.0f µs (%d requests)",
			r.Status.Floor.P50us, r.Status.Floor.P99us, r.Status.Floor.Count), "", "")
		tg, res = mark(tgtStatusFloor, "×")
		row("  project_status p99 ÷ the responder's", fmt.Sprintf("%.2f×", r.Status.OverFloor), tg, res)
		ew := r.Status.FloorWriters
		row("  the writers in that window", level(ew, "req")+fmt.Sprintf(", %.3f× raw", ew.RatioToRaw), "", "")
		row("daemon peak RSS after the load levels", fmt.Sprintf("%.1f MiB (VmHWM)", float64(r.RSS.VmHWMKiB)/1024), "", "")
	}
	if r.ran("batches") {
		bs := r.Batches
		var bw []string
		for _, w := range bs.Raw.Windows {
			bw = append(bw, fmt.Sprintf("%.0f", w.RowsPerSec))
		}
		row(fmt.Sprintf("raw SQLite: %d producers, around the batches", bs.Raw.Producers),
			fmt.Sprintf("%.0f rows/s, %.1f rows/commit, %.1f µs CPU/row (per window: %s rows/s)",
				bs.Raw.RowsPerSec, bs.Raw.RowsPerCommit, bs.Raw.CPUus, strings.Join(bw, ", ")), "", "")
		for _, b := range bs.Levels {
			row(fmt.Sprintf("socket: 1 client, batches of %d run_progress, %d runs", b.Size, bs.Runs),
				fmt.Sprintf("%.0f events/s, %.3f× raw; a batch p50 %.0f µs, p99 %.0f µs; %d errors, %.2f µs CPU/event",
					b.EventsPerSec, b.RatioToRaw, b.Level.Latency.P50us, b.Level.Latency.P99us, b.Level.Errors, b.Level.CPUus), "", "")
		}
		if b := bs.largest(); b.Size > 0 {
			row(fmt.Sprintf("raw SQLite: 1 producer, %d rows/commit", b.Size),
				fmt.Sprintf("%.0f rows/s, %.1f µs CPU/row", bs.Batched.RowsPerSec, bs.Batched.CPUus), "", "")
			tg, res := mark(tgtBatchRatio, "×")
			row(fmt.Sprintf("  batches of %d ÷ raw ceiling", b.Size), fmt.Sprintf("%.3f×", b.RatioToRaw), tg, res)
			tg, res = mark(tgtBatchCPU, " µs")
			row(fmt.Sprintf("  batches of %d: CPU per event", b.Size), fmt.Sprintf("%.2f µs", b.Level.CPUus), tg, res)
			tg, res = mark(tgtBatchDurable, "")
			row("  acknowledged writes in the database", fmt.Sprintf("%d acked, %d stored, %d missing",
				bs.Durability.Acked, bs.Durability.Stored, bs.Durability.Missing), "missing "+tg, res)
		}
	}
	if r.ran("encoders") {
		if e := r.Encoders; e.Skipped != "" {
			row("reply encoders", "skipped: "+e.Skipped, "", "")
		} else {
			row(fmt.Sprintf("encoder: appendStatus, %d clients", e.Clients), level(e.Hand, "req"), "", "")
			row(fmt.Sprintf("encoder: marshal only, %d clients", e.Clients), level(e.Marshal, "req"), "", "")
			row("  marshal ÷ appendStatus", fmt.Sprintf("%.3f× req/s, %+.1f µs CPU/req", e.Ratio, e.Marshal.CPUus-e.Hand.CPUus), "", "")
		}
	}
	if r.ran("sizes") {
		z := r.Sizes
		for _, p := range z.Points {
			name := fmt.Sprintf("lifecycle: %d clients, project of %d tasks", z.Clients, p.Tasks)
			if p.Tasks == 0 {
				name = fmt.Sprintf("lifecycle: %d clients, fresh project", z.Clients)
			}
			row(name, level(p.Level, "units")+fmt.Sprintf(", %.3f× fresh", p.RatioToFresh), "", "")
		}
		tg, res = mark(tgtSizes, "×")
		row(fmt.Sprintf("  %d tasks ÷ fresh", z.BigSize), fmt.Sprintf("%.3f×", z.Ratio), tg, res)
		for _, c := range z.Reports {
			row("project_report: "+c.Name, fmt.Sprintf("p50 %.0f µs (%.1f× project_status), %d bytes, %.0f B/task; evidence %d notes, %.0f B/task",
				c.Report.P50us, c.Ratio, c.ReplyBytes, c.BytesPerTask, c.EvidenceNotes, c.EvidenceBytesPerTask), "", "")
		}
	}
	if r.ran("many") {
		m := r.Many
		row(fmt.Sprintf("%d projects × %d tasks: first open", m.Projects, m.TasksPer),
			fmt.Sprintf("%.2f s (migration, summaries, first project_status)", m.FirstOpenSeconds), "", "")
		tg, res = mark(tgtManyStart, " s")
		row("  start to first project_status", fmt.Sprintf("%.3f s (to first status %.3f s)", m.StartSeconds, m.BaselineSeconds), tg, res)
		tg, res = mark(tgtManyRSS, " MiB")
		row(fmt.Sprintf("  peak RSS after touching all %d", m.Projects), fmt.Sprintf("%.1f MiB (%.1f before; %.0f loads/s, p99 %.0f µs)",
			float64(m.VmHWMKiB)/1024, float64(m.VmHWMBeforeKiB)/1024, m.TouchPerSec, m.TouchLatency.P99us), tg, res)
	}
	if r.ran("pg") {
		pg := r.PG
		if pg.Skipped != "" {
			row("fleet on PostgreSQL", "skipped: "+pg.Skipped, "", "")
		} else {
			row(fmt.Sprintf("pgbench -N, %d clients", pg.Clients), fmt.Sprintf("%.0f tps, p50 %.0f µs, p99 %.0f µs (per run: %s tps)",
				pg.Pgbench.TPS, pg.Pgbench.Latency.P50us, pg.Pgbench.Latency.P99us, pgbenchRuns(pg.PgbenchRuns)), "", "")
			row(fmt.Sprintf("fleet: %d daemons × %d clients, one project", pg.Daemons, pg.Clients), level(pg.Fleet, "events"), "", "")
			tg, res = mark(tgtFleet, "×")
			row("  fleet ÷ pgbench", fmt.Sprintf("%.3f×", pg.FleetRatio), tg, res)
			row(fmt.Sprintf("fleet: %d daemons × %d clients, a project per daemon", pg.Daemons, pg.Clients), level(pg.FleetOwn, "events"), "", "")
			row("  fleet ÷ pgbench", fmt.Sprintf("%.3f×", pg.FleetOwnRatio), "", "")
			tg, res = mark(tgtFleetDurable, "")
			row("  acknowledged writes in the database", fmt.Sprintf("%d acked, %d stored, %d missing",
				pg.Durability.Acked, pg.Durability.Stored, pg.Durability.Missing), "missing "+tg, res)
			row(fmt.Sprintf("one daemon on PostgreSQL, %d clients", pg.Clients), level(pg.SinglePG, "req"), "", "")
			row(fmt.Sprintf("one daemon on SQLite, %d clients", pg.Clients), level(pg.SingleSQLite, "req"), "", "")
			row("  PostgreSQL ÷ SQLite", fmt.Sprintf("%.3f×", pg.PGToSQLite), "", "")
		}
	}
	if r.ran("replay") {
		rp := r.Replay
		row(fmt.Sprintf("replay: first open, %d events", rp.Events), fmt.Sprintf("%.2f s (migration, summary, first project_status)", rp.FirstOpenSeconds), "", "")
		row("replay baseline: scan + decode", fmt.Sprintf("%.0f events/s (%.2f s)", rp.ScanEventsPerSec, rp.ScanSeconds), "", "")
		tg, res = mark(tgtReplay, "×")
		row("replay: daemon start to first project_status",
			fmt.Sprintf("%.0f events/s (%.2f s, peak RSS %.1f MiB), %.3f× baseline", rp.StartEventsPerSec, rp.FirstStatusSeconds,
				float64(rp.DaemonVmHWMKiB)/1024, rp.Ratio), tg, res)
		tg, res = mark(tgtSnapshot, " s")
		row(fmt.Sprintf("  the same behind a snapshot (%d live)", rp.LiveAfterCompaction),
			fmt.Sprintf("%.2f s (compaction took %.1f s)", rp.SnapshotFirstStatusSeconds, rp.CompactSeconds), tg, res)
		row("  appends during that compaction", fmt.Sprintf("%d, the longest waited %.1f ms (the longest step's hold of the writer)",
			rp.CompactWrites, rp.CompactLongestWriteMs), "", "")
	}
	if r.ran("agents") {
		a := r.Agents
		row(fmt.Sprintf("live agent: a turn of %d session/update (%d turns)", a.Updates, a.Rounds),
			fmt.Sprintf("daemon %.1f µs CPU/update with its run, %.1f without; the agent %.1f µs to send one: %.2f× the agent; %.1f events/turn, %.2f s/turn",
				a.DaemonWithRun, a.DaemonWithoutRun, a.Agent, a.Ratio, a.EventsPerTurn, a.TurnSeconds), "", "")
	}
	if r.ran("mcp") {
		mr := r.MCP
		call := func(l Latency, cpu CallCPU) string {
			return fmt.Sprintf("p50 %.0f µs, p99 %.0f µs; CPU per call: client %.0f µs, scv mcp %.0f µs, daemon %.0f µs",
				l.P50us, l.P99us, cpu.Client, cpu.Server, cpu.Daemon)
		}
		row(fmt.Sprintf("run_progress on the socket, %d calls", mr.Calls), call(mr.Socket, mr.SocketCPU), "", "")
		row(fmt.Sprintf("run_progress through scv mcp, line client, %d calls", mr.Calls), call(mr.Line, mr.LineCPU), "", "")
		tg, res = mark(tgtMCPP50, "×")
		row("  line client p50 ÷ the socket's", fmt.Sprintf("%.2f×", mr.LineP50Ratio), tg, res)
		tg, res = mark(tgtMCPP99, "×")
		row("  line client p99 ÷ the socket's", fmt.Sprintf("%.2f×", mr.LineP99Ratio), tg, res)
		row(fmt.Sprintf("run_progress through scv mcp, Go SDK client, %d calls", mr.Calls), call(mr.MCP, mr.MCPCPU), "", "")
		row("  SDK client p50, p99 ÷ the socket's", fmt.Sprintf("%.2f×, %.2f× (scv mcp peak RSS %.1f MiB)",
			mr.P50Ratio, mr.P99Ratio, float64(mr.ServerVmHWMKiB)/1024), "", "")
	}
	if len(r.Only) == 0 {
		tg, res = mark(tgtTotal, " s")
		row("total runtime", fmt.Sprintf("%.1f s", r.TotalSeconds), tg, res)
	} else {
		row("total runtime", fmt.Sprintf("%.1f s (only %s)", r.TotalSeconds, strings.Join(r.Only, ", ")), "", "")
	}
	w.Flush()
	mod := "none"
	if len(r.Source.Modified) > 0 {
		mod = strings.Join(r.Source.Modified, ", ")
	}
	fmt.Fprintf(out, "\n%s × %d, %s, kernel %s, %s; daemon built from the working tree at %s (modified: %s); %s\n",
		r.Machine.CPUModel, r.Machine.CPUs, r.Machine.GoVersion, r.Machine.Kernel, r.Machine.MemTotal, r.Source.Commit, mod, r.Machine.When)
}

func pgbenchRuns(rs []PgbenchRun) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf("%.0f", r.TPS))
	}
	return strings.Join(s, ", ")
}

func round(x float64) float64 {
	if x >= 100 {
		return float64(int64(x + 0.5))
	}
	return x
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), CPUModel: cpuModel(), GoVersion: runtime.Version(), Kernel: daemonproc.Kernel(), When: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
			}
		}
	}
	return m
}
