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

	"scv/cmd/internal/daemonproc"
)

// Report is everything one run measured; it is written as JSON.
type Report struct {
	Machine Machine           `json:"machine"`
	Source  daemonproc.Source `json:"source"`
	Config  ConfigReport      `json:"config"`
	Fsync   FsyncResult       `json:"fsync"`
	Raw     struct {
		Group  RawGroupResult  `json:"group"`
		Single RawSingleResult `json:"single"`
	} `json:"raw"`
	E2E        []LevelResult    `json:"e2e"`
	Durability DurabilityResult `json:"durability"`
	Status     struct {
		Idle      Latency `json:"idle"`
		UnderLoad Latency `json:"under_load"`
		// Clients is the number of writing clients during UnderLoad.
		Clients int `json:"under_load_clients"`
	} `json:"status"`
	Replay       ReplayResult `json:"replay"`
	RSS          RSSResult    `json:"rss"`
	Targets      []Target     `json:"targets"`
	Phases       []PhaseTime  `json:"phases"`
	TotalSeconds float64      `json:"total_seconds"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs      int    `json:"nproc"`
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
}

func (c Config) report() ConfigReport {
	return ConfigReport{
		DurationSeconds: c.Duration.Seconds(), WarmupSeconds: c.Warmup.Seconds(),
		Levels: c.Levels, Producers: c.Producers, Events: c.Events, ReplayRounds: c.ReplayRounds,
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

// level returns the result for c clients.
func (r *Report) level(c int) (LevelResult, bool) {
	for _, l := range r.E2E {
		if l.Clients == c {
			return l, true
		}
	}
	return LevelResult{}, false
}

// evaluate checks every target against ratios of this run.
func (r *Report) evaluate() {
	for i := range r.E2E {
		if r.Raw.Group.RowsPerSec > 0 {
			r.E2E[i].RatioToRaw = r.E2E[i].RequestsPerSec / r.Raw.Group.RowsPerSec
		}
	}
	hi := r.loaded()
	r.Targets = append(r.Targets,
		check(fmt.Sprintf("%d clients: req/s ÷ raw %d-producer rows/s", hi.Clients, r.Raw.Group.Producers), hi.RatioToRaw, ">=", 0.25),
		check(fmt.Sprintf("%d clients: p99 latency (µs)", hi.Clients), hi.Latency.P99us, "<=", 10_000),
	)
	errs := 0
	for _, l := range r.E2E {
		errs += l.Errors
	}
	r.Targets = append(r.Targets, check("errors at every level", float64(errs), "==", 0))
	if one, ok := r.level(1); ok {
		limit := 2*r.Fsync.P50us + 100
		r.Targets = append(r.Targets, check("1 client: p50 latency (µs) ≤ 2× fsync p50 + 100 µs", one.Latency.P50us, "<=", limit))
	}
	r.Targets = append(r.Targets,
		check("replay: ledger.Open ÷ scan-and-decode", r.Replay.Ratio, ">=", 0.8),
		check("start-up behind snapshots (s)", r.Replay.SnapshotFirstStatusSeconds, "<", 1),
		check(fmt.Sprintf("project_status p99 (µs) while %d clients write", r.Status.Clients), r.Status.UnderLoad.P99us, "<", 1000),
		check("acknowledged writes found in the database", float64(r.Durability.Missing), "==", 0),
		check("total runtime (s)", r.TotalSeconds, "<", 180),
	)
}

// printTable writes the one table of the run.
func (r *Report) printTable(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(w, strings.Join(cols, "\t")) }
	row("MEASURE", "RESULT", "TARGET (same run)", "")
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
		fmt.Sprintf("%.0f rows/s, %.0f commits/s, %.1f rows/commit (per window: %s rows/s)",
			g.RowsPerSec, g.CommitsPerSec, g.RowsPerCommit, strings.Join(gw, ", ")), "", "")
	s := r.Raw.Single
	row("raw SQLite: 1 producer, 1 row/commit",
		fmt.Sprintf("%.0f rows/s, commit p50 %.0f µs, p99 %.0f µs", s.RowsPerSec, s.Latency.P50us, s.Latency.P99us), "", "")
	targets := map[string]Target{}
	for _, t := range r.Targets {
		targets[t.Name] = t
	}
	mark := func(name string) (string, string) {
		t, ok := targets[name]
		if !ok {
			return "", ""
		}
		res := "PASS"
		if !t.Pass {
			res = "MISS"
		}
		return fmt.Sprintf("%s %g", t.Rule, round(t.Limit)), res
	}
	for _, l := range r.E2E {
		row(fmt.Sprintf("socket: %d client(s), run_progress", l.Clients),
			fmt.Sprintf("%.0f req/s, p50 %.0f µs, p99 %.0f µs, %d errors, %.3f× raw",
				l.RequestsPerSec, l.Latency.P50us, l.Latency.P99us, l.Errors, l.RatioToRaw), "", "")
		if l.Clients == 1 {
			tg, res := mark("1 client: p50 latency (µs) ≤ 2× fsync p50 + 100 µs")
			row("  1 client p50 (µs)", fmt.Sprintf("%.0f", l.Latency.P50us), tg+" (2×fsync p50+100)", res)
			floor := s.Latency.P50us + r.Status.Idle.P50us
			row("  budget: raw commit p50 + idle read round trip",
				fmt.Sprintf("%.0f + %.0f = %.0f µs; the daemon's write path adds %.0f µs",
					s.Latency.P50us, r.Status.Idle.P50us, floor, l.Latency.P50us-floor), "", "")
		}
	}
	hi := r.loaded()
	tg, res := mark(fmt.Sprintf("%d clients: req/s ÷ raw %d-producer rows/s", hi.Clients, g.Producers))
	row(fmt.Sprintf("  %d clients ÷ raw ceiling", hi.Clients), fmt.Sprintf("%.4f×", hi.RatioToRaw), tg+"×", res)
	tg, res = mark(fmt.Sprintf("%d clients: p99 latency (µs)", hi.Clients))
	row(fmt.Sprintf("  %d clients p99 (µs)", hi.Clients), fmt.Sprintf("%.0f", hi.Latency.P99us), tg, res)
	tg, res = mark("errors at every level")
	errs := 0
	for _, l := range r.E2E {
		errs += l.Errors
	}
	row("  errors, all levels", fmt.Sprint(errs), tg, res)
	tg, res = mark("acknowledged writes found in the database")
	row("  acknowledged writes in the database", fmt.Sprintf("%d acked, %d stored, %d missing",
		r.Durability.Acked, r.Durability.Stored, r.Durability.Missing), "missing "+tg, res)
	row("project_status, idle", fmt.Sprintf("p50 %.0f µs, p99 %.0f µs (%d requests)",
		r.Status.Idle.P50us, r.Status.Idle.P99us, r.Status.Idle.Count), "", "")
	tg, res = mark(fmt.Sprintf("project_status p99 (µs) while %d clients write", r.Status.Clients))
	row(fmt.Sprintf("project_status, %d clients writing", r.Status.Clients), fmt.Sprintf("p50 %.0f µs, p99 %.0f µs (%d requests)",
		r.Status.UnderLoad.P50us, r.Status.UnderLoad.P99us, r.Status.UnderLoad.Count), "p99 "+tg+" µs", res)
	rp := r.Replay
	row(fmt.Sprintf("replay baseline: scan + decode, %d events", rp.Events),
		fmt.Sprintf("%.0f events/s (%.2f s)", rp.ScanEventsPerSec, rp.ScanSeconds), "", "")
	tg, res = mark("replay: ledger.Open ÷ scan-and-decode")
	row(fmt.Sprintf("replay: ledger.Open, %d events", rp.Events),
		fmt.Sprintf("%.0f events/s (%.2f s), %.3f× baseline", rp.OpenEventsPerSec, rp.OpenSeconds, rp.Ratio), tg+"×", res)
	row(fmt.Sprintf("daemon start to first status, %d events", rp.Events),
		fmt.Sprintf("%.2f s (peak RSS %.1f MiB)", rp.FirstStatusSeconds, float64(rp.DaemonVmHWMKiB)/1024), "", "")
	tg, res = mark("start-up behind snapshots (s)")
	row(fmt.Sprintf("  the same behind snapshots (%d live)", rp.LiveAfterCompaction),
		fmt.Sprintf("%.2f s (compaction took %.1f s)", rp.SnapshotFirstStatusSeconds, rp.CompactSeconds), tg+" s", res)
	row("daemon peak RSS after the load levels", fmt.Sprintf("%.1f MiB (VmHWM)", float64(r.RSS.VmHWMKiB)/1024), "", "")
	tg, res = mark("total runtime (s)")
	row("total runtime", fmt.Sprintf("%.1f s", r.TotalSeconds), tg+" s", res)
	w.Flush()
	mod := "none"
	if len(r.Source.Modified) > 0 {
		mod = strings.Join(r.Source.Modified, ", ")
	}
	fmt.Fprintf(out, "\n%d CPUs, %s, kernel %s, %s; daemon built from the working tree at %s (modified: %s)\n",
		r.Machine.CPUs, r.Machine.GoVersion, r.Machine.Kernel, r.Machine.MemTotal, r.Source.Commit, mod)
}

func round(x float64) float64 {
	if x >= 100 {
		return float64(int64(x + 0.5))
	}
	return x
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Kernel: daemonproc.Kernel(), When: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
			}
		}
	}
	return m
}
