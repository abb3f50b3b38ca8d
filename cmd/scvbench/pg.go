package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/control/rpc"
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
	// Clients connections, before, between and after the fleets, pooled.
	PgbenchRuns []PgbenchRun `json:"pgbench_runs"`
	Pgbench     PgbenchRun   `json:"pgbench"`
	// Fleet writes into one project; FleetOwn into a project per
	// daemon (client i into daemon i % Daemons's).
	Fleet    LevelResult `json:"fleet"`
	FleetOwn LevelResult `json:"fleet_own_projects"`
	// FleetRatio is the fleet's events per second over pgbench's
	// transactions per second.
	FleetRatio    float64          `json:"fleet_ratio"`
	FleetOwnRatio float64          `json:"fleet_own_projects_ratio"`
	Durability    DurabilityResult `json:"fleet_durability"`
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

// pgbench runs `pgbench -N` with clients connections for secs seconds on
// database db.
func pgbench(ctx context.Context, c *daemonproc.PG, db string, clients, secs, k int) (PgbenchRun, error) {
	prefix := filepath.Join(c.Root, fmt.Sprintf("pgbench-%d", k))
	out, err := c.Run(ctx, "pgbench", "-N", "-n", "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(secs),
		"-l", "--log-prefix="+prefix, "-h", c.Dir, "-U", "scv", db)
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

// pgFleet measures the fleet section.
func pgFleet(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (PGResult, error) {
	res := PGResult{Clients: cfg.PGClients, Daemons: cfg.PGDaemons}
	if !cfg.PG {
		res.Skipped = "-pg=false"
		return res, nil
	}
	t := time.Now()
	if _, err := daemonproc.PGProgram("pgbench"); err != nil {
		res.Skipped = "pgbench is not installed"
		logf("  skipped: %s", res.Skipped)
		return res, nil
	}
	c, err := daemonproc.StartPG(ctx, dir)
	if errors.Is(err, daemonproc.ErrNoPostgreSQL) {
		res.Skipped = err.Error()
		logf("  skipped: %v", err)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	defer c.Close()
	res.SetupSeconds = time.Since(t).Seconds()
	if out, err := c.Run(ctx, "pgbench", "--version"); err == nil {
		res.Server = strings.TrimSpace(string(out))
	}
	logf("  cluster up in %.1f s: %s", res.SetupSeconds, res.Server)
	if _, err := c.CreateDB(ctx, "pgbench"); err != nil {
		return res, err
	}
	if _, err := c.Run(ctx, "pgbench", "-i", "-s", "1", "-q", "-h", c.Dir, "-U", "scv", "pgbench"); err != nil {
		return res, err
	}
	fleetDB, err := c.CreateDB(ctx, "fleet")
	if err != nil {
		return res, err
	}
	secs := max(1, int(math.Round(cfg.Duration.Seconds())))
	window := time.Duration(secs) * time.Second

	pgbench := func(when string, k int) error {
		logf("  pgbench -N, %d clients, %d s, %s", cfg.PGClients, secs, when)
		r, err := pgbench(ctx, c, "pgbench", cfg.PGClients, secs, k)
		if err != nil {
			return err
		}
		r.When = when
		res.PgbenchRuns = append(res.PgbenchRuns, r)
		return nil
	}
	if err := pgbench("before the fleets", 1); err != nil {
		return res, err
	}

	// The fleets: daemons on one database, the clients round-robin over
	// them, all writing into one project; then a project per daemon.
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
	shared, err := createProject(ctx, socks[0], "fleet", dir)
	if err != nil {
		return res, err
	}
	var own []string
	for i, s := range socks {
		p, err := createProject(ctx, s, fmt.Sprintf("fleet-%d", i), dir)
		if err != nil {
			return res, err
		}
		own = append(own, p)
	}
	var acked int64
	for k, f := range []struct {
		what     string
		projects []string
		into     *LevelResult
	}{
		{"one project", []string{shared}, &res.Fleet},
		{"a project per daemon", own, &res.FleetOwn},
	} {
		logf("  fleet: %d daemons on one database, %d clients, %s", cfg.PGDaemons, cfg.PGClients, f.what)
		fl, n, _, err := progressLevel(ctx, socks, pids, f.projects, cfg.PGClients, cfg.Warmup, window, "", fmt.Sprintf("fleet-%d-daemon-0", k+1))
		if err != nil {
			return res, fmt.Errorf("fleet, %s: %w", f.what, err)
		}
		*f.into = fl
		acked += n
		if err := pgbench("after the fleet, "+f.what, k+2); err != nil {
			return res, err
		}
	}
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
		res.FleetOwnRatio = res.FleetOwn.RequestsPerSec / pool.TPS
	}

	// One daemon on PostgreSQL, one on SQLite.
	singleDB, err := c.CreateDB(ctx, "single")
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
		lr, _, _, err := progressLevel(ctx, []string{s.d.Sock}, []int{s.d.Pid()}, []string{s.project}, cfg.PGClients, cfg.Warmup/2, cfg.Duration/2, "", "single-"+s.name)
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
	c, err := rpc.Dial(ctx, sock)
	if err != nil {
		return "", err
	}
	defer c.Close()
	st, err := c.Call(ctx, api.CmdProjectCreate{Name: name, Workspace: workspace})
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
