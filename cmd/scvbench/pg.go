package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"scv/cmd/internal/daemonproc"
	"scv/control"
	"scv/ledger/driver"
	"scv/ledger/postgres"
	"scv/reducer"
)

// PGResult is the fleet on PostgreSQL: a private cluster (cmd/scvpg),
// three daemons on one database under the run-progress load, against
// the same server's own pgbench measured in the same run; and one daemon
// on PostgreSQL against one on SQLite, same load.
type PGResult struct {
	Skipped string `json:"skipped,omitempty"`
	Server  string `json:"server"`
	Clients int    `json:"clients"`
	Daemons int    `json:"daemons"`
	// SetupSeconds is the cluster's start (initdb included).
	SetupSeconds float64 `json:"setup_seconds"`
	// Pgbench is `pgbench -N` (the built-in simple-update script) with
	// Clients connections, before and after the fleet, pooled.
	PgbenchRuns []PgbenchRun `json:"pgbench_runs"`
	Pgbench     PgbenchRun   `json:"pgbench"`
	Fleet       LevelResult  `json:"fleet"`
	// FleetRatio is the fleet's events per second over pgbench's
	// transactions per second.
	FleetRatio float64          `json:"fleet_ratio"`
	Durability DurabilityResult `json:"fleet_durability"`
	// One daemon on PostgreSQL and one on SQLite, same load, windows
	// PG, SQLite, SQLite, PG, pooled.
	SinglePG     LevelResult `json:"single_pg"`
	SingleSQLite LevelResult `json:"single_sqlite"`
	PGToSQLite   float64     `json:"pg_to_sqlite"`
}

// PgbenchRun is one pgbench run, or the pool of several.
type PgbenchRun struct {
	When         string  `json:"when,omitempty"`
	Transactions int     `json:"transactions"`
	Seconds      float64 `json:"seconds"`
	// TPS is pgbench's own figure (without the initial connection
	// time); pooled, the transactions over the seconds.
	TPS     float64 `json:"tps"`
	Latency Latency `json:"latency"`

	samples []time.Duration
}

// pgProgram finds a PostgreSQL program: on PATH, else in Debian's newest
// /usr/lib/postgresql/N/bin.
func pgProgram(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s", name)
}

// withDatabase is the URL u naming database name.
func withDatabase(u, name string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Path = "/" + name
	return p.String()
}

// pgCluster is the private cluster of the run, managed with cmd/scvpg.
type pgCluster struct {
	scvpg string // the built scvpg binary
	root  string // a folder others may traverse: the server runs as another user when we are root
	dir   string // the cluster (data and socket)
	url   string // its admin URL
}

func (c *pgCluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	p, err := pgProgram(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, p, args...)
	cmd.Dir = c.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// createdb creates database name and returns its URL.
func (c *pgCluster) createdb(ctx context.Context, name string) (string, error) {
	if _, err := c.run(ctx, "createdb", "-h", c.dir, "-U", "scv", name); err != nil {
		return "", err
	}
	return withDatabase(c.url, name), nil
}

// pgbench runs `pgbench -N` with clients connections for secs seconds on
// database db.
func (c *pgCluster) pgbench(ctx context.Context, db string, clients, secs, k int) (PgbenchRun, error) {
	prefix := filepath.Join(c.root, fmt.Sprintf("pgbench-%d", k))
	out, err := c.run(ctx, "pgbench", "-N", "-n", "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(secs),
		"-l", "--log-prefix="+prefix, "-h", c.dir, "-U", "scv", db)
	if err != nil {
		return PgbenchRun{}, err
	}
	r := PgbenchRun{Seconds: float64(secs)}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "tps = "); ok {
			r.TPS, _ = strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
		if v, ok := strings.CutPrefix(l, "number of transactions actually processed: "); ok {
			r.Transactions, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	if r.TPS == 0 {
		return r, fmt.Errorf("no tps in pgbench's output: %s", out)
	}
	// Each line of the per-transaction log: client, transaction, latency
	// in µs, script, epoch s, µs.
	logs, _ := filepath.Glob(prefix + ".*")
	for _, f := range logs {
		fh, err := os.Open(f)
		if err != nil {
			return r, err
		}
		s := bufio.NewScanner(fh)
		for s.Scan() {
			if f := strings.Fields(s.Text()); len(f) >= 3 {
				if us, err := strconv.ParseInt(f[2], 10, 64); err == nil {
					r.samples = append(r.samples, time.Duration(us)*time.Microsecond)
				}
			}
		}
		fh.Close()
		os.Remove(f)
	}
	r.Latency = latencyOf(append([]time.Duration(nil), r.samples...))
	return r, nil
}

// startPG starts the private cluster in a folder of its own.
func startPG(ctx context.Context, dir string) (*pgCluster, error) {
	if _, err := pgProgram("initdb"); err != nil {
		return nil, errors.New("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin)")
	}
	if _, err := pgProgram("pgbench"); err != nil {
		return nil, errors.New("pgbench is not installed")
	}
	root, err := os.MkdirTemp("", "scvbench-pg")
	if err != nil {
		return nil, err
	}
	// As root, scvpg runs the server as the user postgres, which must be
	// able to reach the cluster's folder.
	if err := os.Chmod(root, 0o711); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	c := &pgCluster{scvpg: filepath.Join(dir, "scvpg"), root: root, dir: filepath.Join(root, "pg")}
	fail := func(err error) (*pgCluster, error) {
		os.RemoveAll(root)
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", c.scvpg, "scv/cmd/scvpg").CombinedOutput(); err != nil {
		return fail(fmt.Errorf("go build scvpg: %v: %s", err, out))
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.scvpg, "start", c.dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fail(fmt.Errorf("scvpg start: %v: %s", err, stderr.Bytes()))
	}
	c.url = strings.TrimSpace(string(out))
	return c, nil
}

func (c *pgCluster) stop() {
	exec.Command(c.scvpg, "stop", c.dir).Run()
	os.RemoveAll(c.root)
}

// pgFleet measures the fleet section.
func pgFleet(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (PGResult, error) {
	res := PGResult{Clients: cfg.PGClients, Daemons: cfg.PGDaemons}
	if !cfg.PG {
		res.Skipped = "-pg=false"
		return res, nil
	}
	t := time.Now()
	c, err := startPG(ctx, dir)
	if err != nil {
		res.Skipped = err.Error()
		logf("  skipped: %v", err)
		return res, nil
	}
	defer c.stop()
	res.SetupSeconds = time.Since(t).Seconds()
	if out, err := c.run(ctx, "pgbench", "--version"); err == nil {
		res.Server = strings.TrimSpace(string(out))
	}
	logf("  cluster up in %.1f s: %s", res.SetupSeconds, res.Server)
	if _, err := c.createdb(ctx, "pgbench"); err != nil {
		return res, err
	}
	if _, err := c.run(ctx, "pgbench", "-i", "-s", "1", "-q", "-h", c.dir, "-U", "scv", "pgbench"); err != nil {
		return res, err
	}
	fleetDB, err := c.createdb(ctx, "fleet")
	if err != nil {
		return res, err
	}
	secs := max(1, int(math.Round(cfg.Duration.Seconds())))
	window := time.Duration(secs) * time.Second

	pgbench := func(when string, k int) error {
		logf("  pgbench -N, %d clients, %d s, %s", cfg.PGClients, secs, when)
		r, err := c.pgbench(ctx, "pgbench", cfg.PGClients, secs, k)
		if err != nil {
			return err
		}
		r.When = when
		res.PgbenchRuns = append(res.PgbenchRuns, r)
		return nil
	}
	if err := pgbench("before the fleet", 1); err != nil {
		return res, err
	}

	// The fleet: daemons on one database, the clients round-robin over
	// them, all writing into one project.
	var daemons []*daemonproc.Daemon
	defer func() {
		for _, d := range daemons {
			d.Kill()
		}
	}()
	var socks []string
	var pids []int
	for i := range cfg.PGDaemons {
		d, err := daemonproc.Start(bin, fleetDB, filepath.Join(dir, fmt.Sprintf("fleet-%d.sock", i)),
			"--local-db", filepath.Join(dir, fmt.Sprintf("fleet-%d-local.db", i)), "--stale-after", "1h")
		if err != nil {
			return res, err
		}
		daemons = append(daemons, d)
		if _, err := d.Ready(ctx, time.Minute); err != nil {
			return res, err
		}
		socks, pids = append(socks, d.Sock), append(pids, d.Pid())
	}
	project, err := createProject(ctx, socks[0], "fleet", dir)
	if err != nil {
		return res, err
	}
	logf("  fleet: %d daemons on one database, %d clients", cfg.PGDaemons, cfg.PGClients)
	fl, acked, _, err := progressLevel(ctx, socks, pids, project, cfg.PGClients, cfg.Warmup, window, false)
	if err != nil {
		return res, fmt.Errorf("fleet: %w", err)
	}
	res.Fleet = fl
	for _, d := range daemons {
		if err := d.Stop(); err != nil {
			return res, fmt.Errorf("fleet daemon: %w", err)
		}
	}
	daemons = nil
	stored, err := countKindPG(ctx, fleetDB, reducer.KindRunProgress)
	if err != nil {
		return res, err
	}
	res.Durability = DurabilityResult{Acked: acked, Stored: stored, Missing: max(0, acked-stored)}
	if err := pgbench("after the fleet", 2); err != nil {
		return res, err
	}
	var pool PgbenchRun
	for _, r := range res.PgbenchRuns {
		pool.Transactions += r.Transactions
		pool.Seconds += r.Seconds
		pool.samples = append(pool.samples, r.samples...)
	}
	pool.TPS = float64(pool.Transactions) / pool.Seconds
	pool.Latency = latencyOf(pool.samples)
	res.Pgbench = pool
	if pool.TPS > 0 {
		res.FleetRatio = res.Fleet.RequestsPerSec / pool.TPS
	}

	// One daemon on PostgreSQL, one on SQLite.
	singleDB, err := c.createdb(ctx, "single")
	if err != nil {
		return res, err
	}
	type side struct {
		name    string
		d       *daemonproc.Daemon
		project string
		levels  []LevelResult
	}
	var sides []*side
	for _, s := range []struct {
		name, db string
		extra    []string
	}{
		{"PostgreSQL", singleDB, []string{"--local-db", filepath.Join(dir, "single-local.db")}},
		{"SQLite", filepath.Join(dir, "single.db"), nil},
	} {
		d, err := daemonproc.Start(bin, s.db, filepath.Join(dir, "single-"+strings.ToLower(s.name)+".sock"), append(s.extra, "--stale-after", "1h")...)
		if err != nil {
			return res, err
		}
		daemons = append(daemons, d)
		if _, err := d.Ready(ctx, time.Minute); err != nil {
			return res, err
		}
		p, err := createProject(ctx, d.Sock, "single", dir)
		if err != nil {
			return res, err
		}
		sides = append(sides, &side{name: s.name, d: d, project: p})
	}
	for _, i := range []int{0, 1, 1, 0} {
		s := sides[i]
		logf("  one daemon on %s, %d clients", s.name, cfg.PGClients)
		lr, _, _, err := progressLevel(ctx, []string{s.d.Sock}, []int{s.d.Pid()}, s.project, cfg.PGClients, cfg.Warmup/2, cfg.Duration/2, false)
		if err != nil {
			return res, fmt.Errorf("one daemon on %s: %w", s.name, err)
		}
		s.levels = append(s.levels, lr)
	}
	res.SinglePG, res.SingleSQLite = poolLevels(sides[0].levels), poolLevels(sides[1].levels)
	if res.SingleSQLite.RequestsPerSec > 0 {
		res.PGToSQLite = res.SinglePG.RequestsPerSec / res.SingleSQLite.RequestsPerSec
	}
	for _, s := range sides {
		if err := s.d.Stop(); err != nil {
			return res, fmt.Errorf("one daemon on %s: %w", s.name, err)
		}
	}
	return res, nil
}

// createProject creates a project through the daemon at sock.
func createProject(ctx context.Context, sock, name, workspace string) (string, error) {
	c, err := control.Dial(ctx, sock)
	if err != nil {
		return "", err
	}
	defer c.Close()
	st, err := c.Call(ctx, control.CmdProjectCreate{Name: name, Workspace: workspace})
	if err != nil {
		return "", fmt.Errorf("project_create: %w", err)
	}
	return st.Project.Project.ID, nil
}

// countKindPG counts the events of one kind in the ledger at the
// PostgreSQL URL u, through the driver, read-only.
func countKindPG(ctx context.Context, u, kind string) (int64, error) {
	db, err := postgres.Open(ctx, u, postgres.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.Read(ctx, func(r driver.Reader) error {
		return r.History(ctx, "", 0, 1<<63-1, func(e driver.Event) error {
			if e.Kind == kind {
				n++
			}
			return nil
		})
	})
	return n, err
}
