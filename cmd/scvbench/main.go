// Command scvbench measures the scv daemon against baselines taken in the
// same run on the same disk: the raw SQLite insert ceiling with the
// ledger's driver and pragmas, the disk's fsync rate, durable writes end
// to end over the socket (and the daemon's CPU per request), read
// latency, the two reply encoders against each other, lifecycle writes
// into a project of 50,000 tasks against a fresh one, a ledger of 10,000
// projects (start-up and memory), project_report on deep dependency
// graphs, a fleet of daemons on PostgreSQL against the server's own
// pgbench, and a daemon's start on a long history against a plain
// scan-and-decode of the same rows, the daemon's CPU per update of a
// live agent's turn against the agent's own, run_progress through `scv
// mcp` against the same on the socket, and JSON-RPC batches of
// run_progress on one connection against the raw ceiling. It prints one
// table and writes the numbers as JSON.
//
//	go run ./cmd/scvbench -o bin/bench.json
//
// Each figure that has a target is compared with a baseline measured in
// the same run, because the machine it runs on is shared and noisy:
// absolute numbers move from run to run, ratios much less. What each line
// measures, and the results of a run, are in docs/performance.md.
package main

import (
	"scv/control/daemon/daemonproc"

	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Config is what one run measures and for how long.
type Config struct {
	// Out is the path of the JSON report.
	Out string
	// Duration is the measured window of each load level and of the
	// one-producer ceiling; the group-commit ceiling is measured in two
	// windows of half of it, on both sides of the loaded level.
	Duration time.Duration
	// Warmup runs before each measured window and is not counted.
	Warmup time.Duration
	// FsyncFor is how long the fsync loop runs in all, in two windows on
	// both sides of the 1-client level.
	FsyncFor time.Duration
	// Levels are the numbers of concurrent clients, in order; the last is
	// the loaded level the targets speak of.
	Levels []int
	// Producers is the number of producers of the raw group-commit ceiling.
	Producers int
	// Events is the size of the replay history.
	Events int
	// ReplayRounds is how many times each replay measure is taken (the
	// median is reported), after one unmeasured warm-up of the baseline.
	ReplayRounds int
	// StatusIdle is the number of sequential project_status requests on
	// an idle daemon.
	StatusIdle int
	// SizeClients write lifecycle units into projects of Sizes tasks
	// (the last, the largest, twice) and into fresh ones.
	SizeClients int
	Sizes       []int
	// ChainTasks and DiamondLayers shape the two project_report cases;
	// ReportRounds is how many reports of each are timed.
	ChainTasks    int
	DiamondLayers int
	ReportRounds  int
	// ManyProjects of ManyTasks tasks each: the start-up and memory
	// measure.
	ManyProjects int
	ManyTasks    int
	// PG runs the PostgreSQL section (when PostgreSQL is installed):
	// PGDaemons on one database and PGClients clients.
	PG        bool
	PGDaemons int
	PGClients int
	// Encoders runs the reply-encoder experiment.
	Encoders bool
	// AgentUpdates is how many session/update a live agent sends in each
	// of AgentRounds turns (agents.go).
	AgentUpdates int
	AgentRounds  int
	// BatchRuns running runs get run_progress in JSON-RPC batches of
	// BatchSizes requests, one connection (batches.go).
	BatchRuns  int
	BatchSizes []int
	// MCPCalls is how many run_progress calls go each way, through `scv
	// mcp` and on the socket (mcp.go).
	MCPCalls int
	// Profile, when set, is a folder for CPU profiles of the daemon over
	// the load windows (a profiling build: see profile.go).
	Profile string
	// Only, when not empty, are the sections the run measures (-only):
	// names of sections, the rest skipped.
	Only []string
	// Keep leaves the temporary folder in place.
	Keep bool
	// Daemon is a prebuilt scv binary; empty builds one.
	Daemon string
}

// defaultConfig is a full run: it fits in six minutes on two cores.
func defaultConfig() Config {
	return Config{
		Out:           "bench.json",
		Duration:      5 * time.Second,
		Warmup:        time.Second,
		FsyncFor:      2 * time.Second,
		Levels:        []int{1, 16, 64, 256},
		Producers:     256,
		Events:        1_000_000,
		ReplayRounds:  3,
		StatusIdle:    2000,
		SizeClients:   256,
		Sizes:         []int{1_000, 10_000, 50_000},
		ChainTasks:    5_000,
		DiamondLayers: 40,
		ReportRounds:  20,
		ManyProjects:  10_000,
		ManyTasks:     20,
		PG:            true,
		PGDaemons:     3,
		PGClients:     64,
		Encoders:      true,
		AgentUpdates:  20_000,
		AgentRounds:   5,
		MCPCalls:      1000,
		BatchRuns:     10_000,
		BatchSizes:    []int{100, 1000},
	}
}

// quick shrinks c to a smoke test of a few seconds.
func (c *Config) quick() {
	c.Duration = 250 * time.Millisecond
	c.Warmup = 100 * time.Millisecond
	c.FsyncFor = 200 * time.Millisecond
	c.Events = 5000
	c.ReplayRounds = 1
	c.StatusIdle = 200
	c.SizeClients = 32
	c.Sizes = []int{100, 500, 2000}
	c.ChainTasks = 500
	c.DiamondLayers = 10
	c.ReportRounds = 3
	c.ManyProjects = 300
	// 64 connections may not even be made within a window this short on
	// a loaded machine (pgbench counted 0 transactions in its second).
	c.PGClients = 16
	c.AgentUpdates = 5000
	c.AgentRounds = 2
	c.MCPCalls = 100
	c.BatchRuns = 2000
}

// parseFlags reads the command line into a Config.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet("scvbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Out, "o", c.Out, "write the JSON report to `path`")
	dur := fs.Duration("duration", c.Duration, "measured window per load level and raw ceiling")
	events := fs.Int("events", c.Events, "events in the replay history")
	quick := fs.Bool("quick", false, "small sizes and short windows: a smoke test of a few seconds")
	fs.BoolVar(&c.Keep, "keep", false, "keep the temporary folder (databases, daemon logs)")
	fs.StringVar(&c.Daemon, "daemon", "", "use this scv `binary` instead of building ./cmd/scv")
	fs.BoolVar(&c.PG, "pg", c.PG, "run the PostgreSQL section (skipped anyway when PostgreSQL is not installed)")
	fs.StringVar(&c.Profile, "profile", "", "build a daemon that serves pprof and write a CPU profile of each load window into `dir` (not for the figures)")
	fs.BoolVar(&c.Encoders, "encoders", c.Encoders, "run the reply-encoder experiment (builds a second daemon)")
	only := fs.String("only", "", "measure only these `sections`, comma-separated: "+strings.Join(sections, ", "))
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *quick {
		c.quick()
	}
	// Flags given explicitly win over -quick.
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "duration":
			c.Duration = *dur
		case "events":
			c.Events = *events
		}
	})
	if c.Duration <= 0 || c.Events < 1000 {
		return c, fmt.Errorf("-duration must be positive and -events at least 1000")
	}
	if *only != "" {
		for _, s := range strings.Split(*only, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(sections, s) {
				return c, fmt.Errorf("-only: no section %q (the sections: %s)", s, strings.Join(sections, ", "))
			}
			c.Only = append(c.Only, s)
		}
	}
	return c, nil
}

// sections are what -only selects, in the order a run measures them.
// "e2e" is the load levels with their baselines and the status reads
// beside them; "status" is the status reads alone (idle, then under the
// heaviest level, beside the daemon and beside the do-nothing responder),
// with none of the levels.
var sections = []string{"e2e", "status", "batches", "encoders", "sizes", "many", "pg", "replay", "agents", "mcp"}

// runs says whether a run with only measures section (every section
// when only is empty; "status" when "e2e" is measured).
func runs(only []string, section string) bool {
	return len(only) == 0 || slices.Contains(only, section) || section == "status" && slices.Contains(only, "e2e")
}

func main() {
	if arg, ok := os.LookupEnv(readerEnv); ok {
		os.Exit(readerMain(arg))
	}
	if arg, ok := os.LookupEnv(responderEnv); ok {
		os.Exit(responderMain(arg))
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return
		}
		fmt.Fprintln(os.Stderr, "scvbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, cfg, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scvbench:", err)
		os.Exit(1)
	}
	if !rep.allPass() {
		fmt.Fprintln(os.Stderr, "scvbench: some targets were missed (see MISS above)")
	}
}

// Run measures everything cfg asks for, prints the table to out and
// progress to logw, and writes the JSON report to cfg.Out.
func Run(ctx context.Context, cfg Config, out, logw io.Writer) (*Report, error) {
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "scvbench: %6.1fs  "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}
	dir, err := os.MkdirTemp("", "scvbench")
	if err != nil {
		return nil, err
	}
	if cfg.Keep {
		logf("keeping %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	rep := &Report{Machine: machine(), Source: daemonproc.BuiltFrom(), Config: cfg.report(), Only: cfg.Only}
	phase := func(name string, f func() error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.Now()
		logf("%s", name)
		err := f()
		rep.Phases = append(rep.Phases, PhaseTime{Name: name, Seconds: time.Since(t).Seconds()})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}

	bin := cfg.Daemon
	if cfg.Profile != "" {
		if err := os.MkdirAll(cfg.Profile, 0o755); err != nil {
			return nil, err
		}
		profileDir = cfg.Profile
		bin = filepath.Join(dir, "scv")
		if err := phase("build a profiling daemon", func() error { return buildProfilingDaemon(ctx, dir, bin) }); err != nil {
			return nil, err
		}
	} else if bin == "" {
		bin = filepath.Join(dir, "scv")
		if err := phase("build daemon", func() error { return daemonproc.Build(ctx, bin) }); err != nil {
			return nil, err
		}
	}
	// The baselines that targets compare with are measured on both sides
	// of what they are compared with, and pooled: the machine is shared,
	// and its disk and CPUs do not stay equally fast for the length of a
	// run.
	fsync := func(when string) error {
		logf("  fsync rate, %s", when)
		lat, secs, err := measureFsync(filepath.Join(dir, "fsync.dat"), cfg.FsyncFor/2)
		if err == nil {
			rep.Fsync.add(when, lat, secs)
		}
		return err
	}
	raw := func(when string) error {
		logf("  raw ceiling, %d producers, %s", cfg.Producers, when)
		w, err := rawGroup(ctx, filepath.Join(dir, "raw-group.db"), cfg.Producers, cfg.Warmup, cfg.Duration/2)
		if err == nil {
			w.When = when
			rep.Raw.Group.Producers = cfg.Producers
			rep.Raw.Group.add(w)
		}
		return err
	}
	single := func() (err error) {
		logf("  raw ceiling, one producer")
		rep.Raw.Single, err = rawSingle(ctx, filepath.Join(dir, "raw-single.db"), cfg.Warmup/2, cfg.Duration)
		return err
	}
	loaded := cfg.Levels[len(cfg.Levels)-1]
	around := func(stage string, clients int) error {
		var errs []error
		if clients == 1 && stage == "before" {
			errs = append(errs, fsync("before the 1-client level"), single())
		}
		if clients == 1 && stage == "after" {
			errs = append(errs, fsync("after the 1-client level"))
		}
		if clients == loaded {
			errs = append(errs, raw(fmt.Sprintf("%s the %d-client level", stage, clients)))
		}
		return errors.Join(errs...)
	}
	steps := []struct {
		section, name string
		f             func() error
	}{
		{"status", "end to end, with the baselines next to the levels they are compared with", func() error {
			return endToEnd(ctx, cfg, bin, dir, rep, runs(cfg.Only, "e2e"), around, logf)
		}},
		{"batches", "batches on one connection", func() (err error) {
			rep.Batches, err = batches(ctx, cfg, bin, dir, logf)
			return err
		}},
		{"encoders", "reply encoders", func() (err error) {
			if !cfg.Encoders {
				rep.Encoders.Skipped = "-encoders=false"
				return nil
			}
			rep.Encoders, err = encoders(ctx, cfg, bin, dir, logf)
			return err
		}},
		{"sizes", "size independence and report evidence", func() (err error) {
			rep.Sizes, err = sizes(ctx, cfg, bin, dir, logf)
			return err
		}},
		{"many", "many projects", func() (err error) {
			rep.Many, err = manyProjects(ctx, cfg, bin, dir, logf)
			return err
		}},
		{"pg", "fleet on PostgreSQL", func() (err error) {
			rep.PG, err = pgFleet(ctx, cfg, bin, dir, logf)
			return err
		}},
		{"replay", "replay", func() (err error) {
			rep.Replay, err = replay(ctx, cfg, bin, dir, logf)
			return err
		}},
		{"agents", "live agents' turns", func() (err error) {
			rep.Agents, err = agentTurns(ctx, cfg, bin, dir, logf)
			return err
		}},
		{"mcp", "run_progress through MCP", func() (err error) {
			rep.MCP, err = mcpLatency(ctx, cfg, bin, dir, logf)
			return err
		}},
	}
	for _, s := range steps {
		if !runs(cfg.Only, s.section) {
			continue
		}
		if err := phase(s.name, s.f); err != nil {
			return nil, err
		}
	}
	rep.TotalSeconds = time.Since(began).Seconds()
	rep.evaluate()
	rep.printTable(out)
	if err := writeJSON(cfg.Out, rep); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "\nJSON report: %s\n", cfg.Out)
	return rep, nil
}

func writeJSON(path string, rep *Report) error {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
