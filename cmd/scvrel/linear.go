package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/control/rpc"
	"scv/ledger/postgres/pgcluster"
	"scv/reducer"
)

// The linear check: clients race on a fleet of three daemons sharing one
// PostgreSQL ledger while faults are injected, every operation's call,
// return and outcome is recorded, and porcupine checks that the history
// is linearizable against the model of linmodel.go. One run per fault
// kind, each on a database of its own: the run here, its faults in
// linfaults.go, its verdict in lincheck.go, its clients in linclient.go.

// faultKinds are the linear check's runs, in the order they run: none
// (the baseline), then one kind of fault at a time, then all of them
// mixed, then a failover of the server.
var faultKinds = []string{"none", "kill", "pg-restart", "latency", "reset", "slow-close", "blackhole", "skew", "pause", "mixed", "failover"}

// The fleet and the workload of a run.
const (
	linDaemons = 3
	// linProjects projects take the clients' operations at a time; every
	// linEpoch the clients move on to new ones, so that each project's
	// history (a partition the checker searches alone) stays short.
	linProjects = 3
	linEpoch    = 2 * time.Second
	// linTasks tasks per project: t2 depends on t0; each may be retried
	// twice by the ledger before it fails (and is retried by a client).
	linTasks = 6
	// linOpTimeout bounds an operation: past it, its outcome is unknown.
	linOpTimeout = 5 * time.Second
	// linLease is the daemons' sweeper lease (--lease): the pause fault
	// stops its holder for longer.
	linLease = 2 * time.Second
	// linCheckTimeout bounds porcupine's search of one run's history.
	linCheckTimeout = 5 * time.Minute
)

// linDaemonArgs are the flags of every daemon of a run: no run goes stale
// while the clients work (stale marks are not in the model), a short
// lease, and no compaction (a project's events stay in one page).
var linDaemonArgs = []string{"--stale-after", "1h", "--lease", linLease.String(), "--compact-after", "0"}

// linProject is one project of a run, set up before the clients start.
type linProject struct {
	ID, Name string
	Tasks    []string // task IDs, t0 first
	init     *linState
}

// linRun is one run of the linear check: one fault kind.
type linRun struct {
	e      env
	kind   string
	dir    string
	began  time.Time
	seed   uint64
	pg     *pgcluster.Cluster // the server (the primary, for failover)
	spare  *pgcluster.Cluster // failover: the standby
	net    *netFaults         // the daemons' links, but for failover
	urls   []string           // each daemon's --db
	socks  []string           // each daemon's socket
	env    [][]string         // each daemon's extra environment
	epochs [][]*linProject    // the projects, by epoch
	byID   map[string]*linProject
	names  map[string]string // task ID → t0…, for the pictures

	mu      sync.Mutex // guards daemons and logs
	daemons []*daemonproc.Daemon
	logs    []string // ended daemons' logs

	// pauses of the lease's holder, and how many times another daemon
	// took the lease in a higher term meanwhile.
	pauses, handed int

	procs  atomic.Int64 // porcupine client IDs handed out
	opIDs  atomic.Int64 // operation IDs handed out
	faults map[string]int
	fmu    sync.Mutex
	p      *problems
	notes  []string // what a fault found, for the figure
}

// linResult is what a run measured.
type linResult struct {
	ops, unknown, violations int
	settled                  int // unknown outcomes the final state decided
	acked, lost              int
	faults                   map[string]int
	resumed                  time.Duration // until every daemon took a write after the faults
	picture                  string
	notes                    []string
}

// nextOp is a new operation's ID.
func (r *linRun) nextOp() int { return int(r.opIDs.Add(1)) }

// now is the time since the run began, porcupine's clock.
func (r *linRun) now() int64 { return int64(time.Since(r.began)) }

// linearCheck runs the linear check under each fault kind e.cfg.Faults
// names, one result per kind.
func linearCheck(ctx context.Context, e env) []Result {
	if !pgcluster.Installed() {
		return []Result{{Name: "linear", Skipped: "PostgreSQL is not installed (Debian: apt-get install postgresql)"}}
	}
	root, err := os.MkdirTemp("", "scv-lin")
	if err == nil {
		err = os.Chmod(root, 0o711) // the server's user must reach its folder
	}
	if err != nil {
		return []Result{{Name: "linear", Problems: []string{err.Error()}}}
	}
	defer os.RemoveAll(root)
	out := e.cfg.Out
	if out == "" {
		// A folder of their own, kept: the run's temporary one goes at
		// its end, unless --keep.
		if out, err = os.MkdirTemp("", "scvrel-linear"); err == nil {
			e.logf("the histories' pictures go to %s", out)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return []Result{{Name: "linear", Problems: []string{err.Error()}}}
	}
	var pg *pgcluster.Cluster
	var results []Result
	for i, kind := range e.cfg.Faults {
		t := time.Now()
		name := "linear/" + kind
		var p problems
		r := &linRun{e: e, kind: kind, dir: filepath.Join(e.dir, kind), seed: e.cfg.Seed + uint64(i), faults: map[string]int{}, p: &p,
			byID: map[string]*linProject{}, names: map[string]string{}}
		r.e.logf = func(format string, args ...any) { e.logf(kind+": "+format, args...) }
		var res linResult
		err := os.MkdirAll(r.dir, 0o700)
		if err == nil && kind == "failover" {
			err = r.failoverCluster(root)
		} else if err == nil && pg == nil {
			pg, err = startLinearPG(filepath.Join(root, "pg"))
		}
		if err == nil && kind != "failover" {
			r.pg = pg
		}
		if err == nil {
			res, err = r.run(ctx, out)
		}
		if err != nil {
			p.addf("%v", err)
		}
		if r.spare != nil {
			r.spare.Kill()
		}
		if kind == "failover" && r.pg != nil {
			r.pg.Kill()
		}
		if ctx.Err() != nil {
			break
		}
		results = append(results, linResultOf(name, res, p.all(), time.Since(t)))
	}
	if pg != nil {
		pg.Stop()
	}
	return results
}

// linResultOf is the table's row of a run.
func linResultOf(name string, res linResult, probs []string, took time.Duration) Result {
	var kinds []string
	for k, n := range res.faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	faults := "no faults"
	if len(kinds) > 0 {
		faults = "faults: " + strings.Join(kinds, ", ")
	}
	sum := fmt.Sprintf("%s operations checked, %s unknown (%s settled by the final state), %s; %d violations; %s acknowledged writes, %d lost",
		commas(res.ops), commas(res.unknown), commas(res.settled), faults, res.violations, commas(res.acked), res.lost)
	fig := sum
	if res.resumed > 0 {
		fig += fmt.Sprintf("; every daemon took a write %.1f s after the faults ended", res.resumed.Seconds())
	}
	for _, n := range res.notes {
		fig += "; " + n
	}
	if res.picture != "" {
		fig += "; history: " + res.picture
	}
	return Result{Name: name, Figure: fig, Summary: sum, Problems: probs, Elapsed: took}
}

// startLinearPG starts the server of the linear check's runs, with a TCP
// port for the proxies.
func startLinearPG(dir string) (*pgcluster.Cluster, error) {
	port, err := pgcluster.FreePort()
	if err != nil {
		return nil, err
	}
	c := &pgcluster.Cluster{Dir: dir, Port: port}
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// run runs the clients under the run's faults for e.cfg.LinearFor, then
// checks the history, writing its picture into out.
func (r *linRun) run(ctx context.Context, out string) (linResult, error) {
	var res linResult
	if err := r.startFleet(); err != nil {
		return res, err
	}
	defer r.stopFleet(out)
	if err := r.setup(ctx); err != nil {
		return res, err
	}
	r.e.logf("%d daemons, %d clients, %d projects, for %s", linDaemons, r.e.cfg.LinearClients, len(r.byID), r.e.cfg.LinearFor)
	r.began = time.Now()
	stop := make(chan struct{})
	clients := make([]*linClient, r.e.cfg.LinearClients)
	var wg sync.WaitGroup
	for i := range clients {
		c := &linClient{r: r, worker: i, proc: int(r.procs.Add(1) - 1), rng: rand.New(rand.NewPCG(r.seed, uint64(i)+100)),
			know: map[string]*clientView{}}
		clients[i] = c
		wg.Add(1)
		go func() { defer wg.Done(); c.loop(stop) }()
	}
	deadline := r.began.Add(r.e.cfg.LinearFor)
	r.inject(ctx, deadline)
	close(stop)
	wg.Wait()
	healed := time.Now()
	if err := r.heal(ctx); err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	resumed, err := r.probe(ctx)
	if err != nil {
		r.p.addf("%v", err)
	} else {
		res.resumed = resumed.Sub(healed)
	}
	var ops []porcupine.Operation
	for _, c := range clients {
		ops = append(ops, c.ops...)
	}
	final, finalOps := r.finalReads(ctx)
	r.checkTimes(final)
	for _, op := range ops {
		if op.Output.(linOutput).Unknown {
			res.unknown++
		}
	}
	ops, res.acked, res.lost, res.settled = r.settle(ops, final)
	ops = append(ops, finalOps...)
	if r.pauses > 0 {
		r.notes = append(r.notes, fmt.Sprintf("another daemon took the lease in a higher term while its holder was stopped, in %d of %d pauses", r.handed, r.pauses))
	}
	if r.kind == "skew" {
		r.notes = append(r.notes, "every event stamped within the run by the server's clock, whatever daemon 0's (1 h ahead, then behind) said")
	}
	res.ops, res.faults, res.notes = len(ops), r.faults, r.notes
	r.e.logf("check %s operations (%s unknown)", commas(res.ops), commas(res.unknown))
	t := time.Now()
	res.violations, res.picture = r.check(ops, out)
	r.e.logf("checked and drawn in %.1f s", time.Since(t).Seconds())
	return res, nil
}

// startFleet creates the run's database and starts its daemons, each on
// its own link to the server (a proxy), or, for failover, on a URL that
// names both servers.
func (r *linRun) startFleet() error {
	db := "linear"
	if r.kind != "failover" {
		db = "linear_" + strings.ReplaceAll(r.kind, "-", "_")
		if err := r.pg.CreateDB(db); err != nil {
			return err
		}
		f, err := newNetFaults(fmt.Sprintf("127.0.0.1:%d", r.pg.Port), linDaemons)
		if err != nil {
			return err
		}
		r.net = f
	}
	r.daemons = make([]*daemonproc.Daemon, linDaemons)
	r.env = make([][]string, linDaemons)
	for i := range linDaemons {
		if r.net != nil {
			r.urls = append(r.urls, fmt.Sprintf("postgres://%s@%s/%s", pgcluster.Role, r.net.addr(i), db))
		} else {
			r.urls = append(r.urls, pgcluster.MultiHostURL(db, r.pg, r.spare))
		}
		r.socks = append(r.socks, filepath.Join(r.dir, fmt.Sprintf("d%d.sock", i)))
		if fp := r.e.cfg.Failpoints; fp != "" {
			r.env[i] = append(r.env[i], "SCV_FAILPOINTS="+fp)
		}
	}
	if r.kind == "skew" {
		r.env[0] = append(r.env[0], "SCV_CLOCK_SKEW=+1h")
	}
	for i := range linDaemons {
		if err := r.startDaemon(i); err != nil {
			return err
		}
	}
	for i := range linDaemons {
		if _, err := r.daemon(i).Ready(context.Background(), time.Minute); err != nil {
			return fmt.Errorf("daemon %d: %w", i, err)
		}
	}
	return nil
}

// startDaemon starts daemon i (again, after a kill).
func (r *linRun) startDaemon(i int) error {
	args := append([]string{"--local-db", filepath.Join(r.dir, fmt.Sprintf("local-%d.db", i))}, linDaemonArgs...)
	d, err := daemonproc.StartEnv(r.env[i], r.e.bin, r.urls[i], r.socks[i], args...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.daemons[i] = d
	r.mu.Unlock()
	return nil
}

func (r *linRun) daemon(i int) *daemonproc.Daemon {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.daemons[i]
}

// kill SIGKILLs daemon i and keeps its log.
func (r *linRun) kill(i int) {
	d := r.daemon(i)
	d.Kill()
	r.keepLog(i, d)
}

func (r *linRun) keepLog(i int, d *daemonproc.Daemon) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf("== daemon %d (pid %d)\n%s", i, d.Pid(), d.Log()))
}

// stopFleet stops the daemons and the proxies, and writes the daemons'
// logs into out.
func (r *linRun) stopFleet(out string) {
	for i := range linDaemons {
		d := r.daemon(i)
		if d == nil {
			continue
		}
		syscall.Kill(d.Pid(), syscall.SIGCONT) // should a pause have been left
		if err := d.Stop(); err != nil && d.Running() {
			d.Kill()
		}
		r.keepLog(i, d)
	}
	if r.net != nil {
		r.net.close()
	}
	os.WriteFile(filepath.Join(out, "linear-"+r.kind+"-daemons.log"), []byte(strings.Join(r.logs, "\n")), 0o644)
}

// setup creates the run's projects through daemon 0 and reads each one's
// events: the model's initial states.
func (r *linRun) setup(ctx context.Context) error {
	c, err := rpc.Dial(ctx, r.socks[0])
	if err != nil {
		return err
	}
	defer c.Close()
	epochs := int(r.e.cfg.LinearFor/linEpoch) + 1
	for ep := range epochs {
		var ps []*linProject
		for j := range linProjects {
			name := fmt.Sprintf("lin-%s-%d-%d", r.kind, ep, j)
			st, err := c.Call(ctx, api.CmdProjectCreate{Name: name, Workspace: r.dir})
			if err != nil {
				return fmt.Errorf("project_create: %w", err)
			}
			p := &linProject{ID: st.Project.Project.ID, Name: name}
			for k := range linTasks {
				deps := []string{}
				if k == 2 {
					deps = []string{p.Tasks[0]}
				}
				st, err := c.Call(ctx, api.CmdProjectTaskAdd{Project: p.ID, Title: fmt.Sprintf("t%d", k), DependsOn: deps, MaxRetries: 2})
				if err != nil {
					return fmt.Errorf("project_task_add: %w", err)
				}
				p.Tasks = append(p.Tasks, st.Project.TaskID)
				r.names[st.Project.TaskID] = fmt.Sprintf("t%d", k)
			}
			st, err = c.Call(ctx, api.CmdProjectEvents{Project: p.ID})
			if err != nil {
				return fmt.Errorf("project_events: %w", err)
			}
			views, err := eventsView(st.Project.Events)
			if err != nil {
				return err
			}
			bodies := make([]reducer.Body, len(st.Project.Events))
			for k, ev := range st.Project.Events {
				if bodies[k], err = reducer.DecodeBody(ev.Kind, ev.Data); err != nil {
					return err
				}
			}
			p.init = initialState(views, bodies, p.ID)
			ps = append(ps, p)
			r.byID[p.ID] = p
		}
		r.epochs = append(r.epochs, ps)
	}
	return nil
}

// epoch is the projects the clients work on now.
func (r *linRun) epoch() []*linProject {
	i := min(int(time.Since(r.began)/linEpoch), len(r.epochs)-1)
	return r.epochs[i]
}

// fault counts one fault of kind.
func (r *linRun) fault(kind string) {
	r.fmu.Lock()
	r.faults[kind]++
	r.fmu.Unlock()
}

// probe waits, after the faults, until every daemon took a write (a
// claim in a project of its own), and returns when the last one did.
func (r *linRun) probe(ctx context.Context) (time.Time, error) {
	c, err := rpc.Dial(ctx, r.socks[0])
	if err != nil {
		return time.Time{}, err
	}
	st, err := callRetry(ctx, c, r.socks[0], api.CmdProjectCreate{Name: "lin-probe-" + r.kind, Workspace: r.dir})
	c.Close()
	if err != nil {
		return time.Time{}, fmt.Errorf("after the faults: project_create: %w", err)
	}
	project := st.Project.Project.ID
	var last time.Time
	for i := range linDaemons {
		c, err := rpc.Dial(ctx, r.socks[i])
		if err != nil {
			return time.Time{}, fmt.Errorf("after the faults, daemon %d: %w", i, err)
		}
		st, err := callRetry(ctx, c, r.socks[i], api.CmdProjectTaskAdd{Project: project, Title: fmt.Sprintf("probe %d", i), DependsOn: []string{}})
		if err == nil {
			_, err = callRetry(ctx, c, r.socks[i], api.CmdProjectRunStart{Project: project, Task: st.Project.TaskID, Agent: "probe"})
		}
		c.Close()
		if err != nil {
			return time.Time{}, fmt.Errorf("after the faults, daemon %d took no write: %w", i, err)
		}
		last = time.Now()
	}
	return last, nil
}

// callRetry sends cmd until it is answered with a result, for up to a
// minute, redialling as needed: the fleet is healing.
func callRetry(ctx context.Context, c *rpc.Client, sock string, cmd api.Command) (*api.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		if c == nil {
			var err error
			if c, err = rpc.Dial(ctx, sock); err != nil {
				last = err
			}
		}
		if c != nil {
			cctx, ccancel := context.WithTimeout(ctx, linOpTimeout)
			st, err := c.Call(cctx, cmd)
			ccancel()
			if err == nil {
				return st, nil
			}
			last = err
			if !replied(err) {
				c.Close()
				c = nil
			} else if !isUnavailable(err) {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", cmd.Action(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
