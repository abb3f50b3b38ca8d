// Command scvrel checks the scv daemon's reliability promises against the
// real binary, real SQLite files, real sockets and real processes, and
// prints one line per check with what it did and its figure, then a
// summary table. It exits 1 if any check fails.
//
//	go run ./cmd/scvrel crash readers          # 10 SIGKILLs, readers for 5 s
//	go run ./cmd/scvrel --long crash readers   # 200 SIGKILLs, readers for 60 s
//	go run ./cmd/scvrel --long --pg crash      # on PostgreSQL, which also stops
//	go run ./cmd/scvrel --long --pg --pgbouncer crash  # through a PgBouncer
//
// The checks:
//
//   - crash: 64 clients write to a running daemon while it is killed with
//     SIGKILL again and again and restarted on the same files; afterwards
//     every acknowledged write is in the database, once, in the order it
//     was acknowledged, sequences strictly increase, the state a fresh
//     replay derives equals the daemon's, and `scv ledger verify` and
//     SQLite's integrity_check pass.
//   - readers: reader processes (`scv ledger verify`, `scv project events`,
//     `scv project tasks --at`) run in loops beside a daemon under write
//     load; none may fail or see SQLITE_BUSY, and once they stop the
//     write-ahead log is checkpointed back under a bound.
//
// What each check promises and the figures of a long run are in
// docs/reliability.md.
package main

import (
	"scv/control/daemon/daemonproc"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Config is what one run checks and how hard.
type Config struct {
	// Checks are the checks to run, in order.
	Checks []string
	// Kills is the number of SIGKILLs of the crash check.
	Kills int
	// Clients is the number of writing clients of the crash check.
	Clients int
	// CompactEvery is how often the crash check asks the daemon to compact
	// (ledger_compact), so that kills also land in compactions; 0: never.
	CompactEvery time.Duration
	// Writers is the number of writing clients of the readers check.
	Writers int
	// Readers is the number of reader processes of the readers check.
	Readers int
	// ReadFor is how long the readers run.
	ReadFor time.Duration
	// After is how long the writers go on alone once the readers stopped,
	// before the write-ahead log is measured.
	After time.Duration
	// PG runs the crash check on a database of a private PostgreSQL
	// cluster (cmd/scvpg) instead of a SQLite file, and then stops and
	// starts the server Outages times under load.
	PG      bool
	Outages int
	// PgBouncer, with PG, has the daemon reach the server through a
	// PgBouncer in session mode (the server's stops are then behind it).
	PgBouncer bool
	// Seed seeds the kill times; 0 picks one (printed, to repeat a run).
	Seed uint64
	// Keep leaves the temporary folder in place.
	Keep bool
	// Daemon is a prebuilt scv binary; empty builds one.
	Daemon string
	// LinearClients clients race for LinearFor under each fault kind of
	// Faults in the linear check, on daemons run with Failpoints
	// (SCV_FAILPOINTS; the broken variant); the pictures of the histories
	// and the daemons' logs go to Out (empty: the temporary folder).
	LinearClients int
	LinearFor     time.Duration
	Faults        []string
	Failpoints    string
	Out           string
}

// shortConfig is the default run: a minute or so on two cores.
func shortConfig() Config {
	return Config{
		Kills:         15,
		Clients:       64,
		CompactEvery:  250 * time.Millisecond,
		Writers:       16,
		Readers:       8,
		ReadFor:       5 * time.Second,
		After:         2 * time.Second,
		Outages:       3,
		LinearClients: 16,
		LinearFor:     3 * time.Second,
		Faults:        faultKinds,
	}
}

// long makes c the long run of `make reliability`.
func (c *Config) long() {
	c.Kills = 200
	c.ReadFor = 60 * time.Second
	c.After = 5 * time.Second
	c.Outages = 20
	c.LinearFor = 30 * time.Second
}

// checks are the known checks, in the order they run.
var checks = []string{"crash", "readers", "linear"}

// parseFlags reads the command line into a Config.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	c := shortConfig()
	fs := flag.NewFlagSet("scvrel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: scvrel [flags] CHECK...\nchecks: %s\n", strings.Join(checks, ", "))
		fs.PrintDefaults()
	}
	long := fs.Bool("long", false, "the long run: 200 kills, readers for 60 s")
	kills := fs.Int("kills", c.Kills, "crash: SIGKILLs of the daemon")
	fs.IntVar(&c.Clients, "clients", c.Clients, "crash: concurrent writing clients")
	fs.DurationVar(&c.CompactEvery, "compact-every", c.CompactEvery, "crash: ask for a compaction this often (0: never)")
	fs.IntVar(&c.Writers, "writers", c.Writers, "readers: concurrent writing clients")
	fs.IntVar(&c.Readers, "readers", c.Readers, "readers: reader processes")
	readFor := fs.Duration("read-for", c.ReadFor, "readers: how long the readers run")
	fs.BoolVar(&c.PG, "pg", false, "crash: run against a private PostgreSQL cluster (cmd/scvpg), and stop and start the server under load")
	outages := fs.Int("outages", c.Outages, "crash --pg: PostgreSQL stops and starts under load")
	fs.BoolVar(&c.PgBouncer, "pgbouncer", false, "crash --pg: the daemon reaches the server through a PgBouncer in session mode")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the kill times (0: random, printed)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the temporary folder (databases, daemon logs)")
	fs.StringVar(&c.Daemon, "daemon", "", "use this scv `binary` instead of building ./cmd/scv")
	fs.IntVar(&c.LinearClients, "clients-linear", c.LinearClients, "linear: concurrent clients across the three daemons")
	linearFor := fs.Duration("linear-for", c.LinearFor, "linear: how long the clients run under each fault kind")
	faults := fs.String("faults", strings.Join(faultKinds, ","), "linear: the fault kinds to run under, comma-separated")
	fs.StringVar(&c.Failpoints, "failpoints", "", "linear: SCV_FAILPOINTS for the daemons (head-check=off: the broken variant the checker must catch)")
	fs.StringVar(&c.Out, "out", "", "linear: the `folder` for the histories' pictures and the daemons' logs (default: a new temporary folder, kept)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *long {
		c.long()
	}
	// Flags given explicitly win over --long.
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "kills":
			c.Kills = *kills
		case "read-for":
			c.ReadFor = *readFor
		case "outages":
			c.Outages = *outages
		case "linear-for":
			c.LinearFor = *linearFor
		}
	})
	c.Faults = strings.Split(*faults, ",")
	for i, f := range c.Faults {
		if !slices.Contains(faultKinds, f) {
			return c, fmt.Errorf("unknown fault kind %q (known: %s)", f, strings.Join(faultKinds, ", "))
		}
		if slices.Contains(c.Faults[:i], f) {
			return c, fmt.Errorf("fault kind %q named twice", f)
		}
	}
	c.Checks = fs.Args()
	if len(c.Checks) == 0 {
		return c, fmt.Errorf("name at least one check: %s", strings.Join(checks, ", "))
	}
	for _, name := range c.Checks {
		if !slices.Contains(checks, name) {
			return c, fmt.Errorf("unknown check %q (known: %s)", name, strings.Join(checks, ", "))
		}
	}
	if c.Kills < 1 || c.Clients < 1 || c.Writers < 1 || c.Readers < 1 || c.ReadFor <= 0 || c.Outages < 0 {
		return c, errors.New("--kills, --clients, --writers, --readers and --read-for must be positive, --outages not negative")
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "scvrel:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := Run(ctx, cfg, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scvrel:", err)
		os.Exit(1)
	}
	for _, r := range results {
		if !r.Pass() {
			os.Exit(1)
		}
	}
}

// Result is the outcome of one check.
type Result struct {
	Name string
	// Figure is the one line of what the check did and what it found.
	Figure string
	// Summary is the figure's gist, for the table.
	Summary string
	// Problems are what failed; none when the check passed.
	Problems []string
	// Skipped says why the check did not run (PostgreSQL not installed);
	// a skipped check has no problems.
	Skipped string
	Elapsed time.Duration
}

// Pass reports whether the check found nothing wrong.
func (r Result) Pass() bool { return len(r.Problems) == 0 }

// Line is the check's line of output: its name, its figure, and its
// first problem if it failed.
func (r Result) Line() string {
	if r.Skipped != "" {
		return r.Name + ": skipped: " + r.Skipped
	}
	if r.Pass() {
		return r.Name + ": " + r.Figure
	}
	return fmt.Sprintf("%s: FAIL: %s (%d problems; the first: %s)", r.Name, r.Figure, len(r.Problems), r.Problems[0])
}

// problems collects what a check found wrong, keeping the first few of
// each kind in full and counting the rest.
type problems struct {
	list    []string
	dropped int
}

// maxProblems bounds a check's list; the first problems are what one
// debugs from.
const maxProblems = 50

func (p *problems) addf(format string, args ...any) {
	if len(p.list) >= maxProblems {
		p.dropped++
		return
	}
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *problems) all() []string {
	if p.dropped > 0 {
		return append(slices.Clone(p.list), fmt.Sprintf("… and %d more", p.dropped))
	}
	return p.list
}

// env is what every check is given.
type env struct {
	cfg  Config
	bin  string // the scv binary
	dir  string // a folder of the check's own
	logf func(format string, args ...any)
}

// Run builds the daemon (unless cfg.Daemon names one), runs the checks
// cfg names, prints each check's line and then the summary table to out,
// and progress to logw. An error is a failure to run at all (no binary,
// interrupted); a check that ran and failed is a Result with problems.
func Run(ctx context.Context, cfg Config, out, logw io.Writer) ([]Result, error) {
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "scvrel: %6.1fs  "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}
	dir, err := os.MkdirTemp("", "scvrel")
	if err != nil {
		return nil, err
	}
	if cfg.Keep {
		logf("keeping %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin := cfg.Daemon
	if bin == "" {
		bin = filepath.Join(dir, "scv")
		logf("build daemon")
		if err := daemonproc.Build(ctx, bin); err != nil {
			return nil, err
		}
	}
	logf("seed %d", cfg.Seed)
	var results []Result
	for _, name := range cfg.Checks {
		sub := filepath.Join(dir, name)
		if err := os.Mkdir(sub, 0o700); err != nil {
			return nil, err
		}
		e := env{cfg: cfg, bin: bin, dir: sub, logf: func(format string, args ...any) { logf(name+": "+format, args...) }}
		t := time.Now()
		var rs []Result
		switch name {
		case "crash":
			rs = []Result{crashCheck(ctx, e)}
		case "readers":
			rs = []Result{readersCheck(ctx, e)}
		case "linear":
			rs = linearCheck(ctx, e) // one per fault kind, each timed
		}
		if len(rs) == 1 && rs[0].Elapsed == 0 {
			rs[0].Elapsed = time.Since(t)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, r := range rs {
			fmt.Fprintln(out, r.Line())
			for _, p := range r.Problems {
				fmt.Fprintln(out, "  problem:", p)
			}
		}
		results = append(results, rs...)
	}
	printTable(out, results, time.Since(began), cfg.Seed)
	return results, nil
}

// printTable writes the summary of the run.
func printTable(out io.Writer, results []Result, total time.Duration, seed uint64) {
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tRESULT\tTIME\tFIGURE")
	failed, skipped := 0, 0
	for _, r := range results {
		res, sum := "PASS", r.Summary
		switch {
		case r.Skipped != "":
			res, sum = "SKIP", r.Skipped
			skipped++
		case !r.Pass():
			res = fmt.Sprintf("FAIL (%d)", len(r.Problems))
			failed++
		}
		fmt.Fprintf(w, "%s\t%s\t%.1f s\t%s\n", r.Name, res, r.Elapsed.Seconds(), sum)
	}
	w.Flush()
	fmt.Fprintf(out, "\n%d of %d checks passed in %.1f s (seed %d)", len(results)-failed-skipped, len(results), total.Seconds(), seed)
	if skipped > 0 {
		fmt.Fprintf(out, "; %d skipped", skipped)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%d CPUs, %s, kernel %s; daemon built from the working tree at %s\n",
		runtime.NumCPU(), runtime.Version(), daemonproc.Kernel(), daemonproc.BuiltFrom())
}

// commas writes n with thousands separators: 49,852.
func commas[T int | int64 | uint64](n T) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// mib formats a size in bytes as MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
