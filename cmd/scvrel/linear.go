package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"

	"scv/cmd/internal/daemonproc"
	"scv/control"
	"scv/control/api"
	"scv/ledger/postgres"
	"scv/ledger/postgres/pgcluster"
	"scv/reducer"
)

// The linear check: clients race on a fleet of three daemons sharing one
// PostgreSQL ledger while faults are injected, every operation's call,
// return and outcome is recorded, and porcupine checks that the history
// is linearizable against the model of linmodel.go. One run per fault
// kind, each on a database of its own.

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
		out = e.dir
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

// failoverCluster starts the failover run's primary and its synchronous
// standby.
func (r *linRun) failoverCluster(root string) error {
	r.pg = &pgcluster.Cluster{Dir: filepath.Join(root, "primary")}
	if err := r.pg.Start(); err != nil {
		return err
	}
	// The database first: with a synchronous standby named and none
	// there, its commit would wait.
	if err := r.pg.CreateDB("linear"); err != nil {
		return err
	}
	standby, err := r.pg.StartStandby(filepath.Join(root, "standby"), "standby")
	if err != nil {
		return err
	}
	r.spare = standby
	if err := r.pg.SetSynchronous("standby"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.pg.WaitSync(ctx, "standby")
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
		r.notes = append(r.notes, fmt.Sprintf("while its holder was stopped, another daemon took the lease in a higher term %d times of %d", r.handed, r.pauses))
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
	c, err := control.Dial(ctx, r.socks[0])
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

// finalState is what the final reads found of one project.
type finalState struct {
	events []api.ProjectEvent
}

// checkTimes checks that the events were stamped by the server's clock:
// within the run, whatever a daemon's own clock said (the skew fault).
func (r *linRun) checkTimes(final map[string]*finalState) {
	lo, hi := uint64(r.began.Add(-time.Minute).Unix()), uint64(time.Now().Add(time.Minute).Unix())
	for id, f := range final {
		for _, ev := range f.events {
			if ev.TimestampUnixSeconds < lo || ev.TimestampUnixSeconds > hi {
				r.p.addf("event %d of project %s is stamped %s, outside the run (%s to %s): a daemon's clock stamped it",
					ev.Sequence, id, time.Unix(int64(ev.TimestampUnixSeconds), 0).Format(time.TimeOnly),
					time.Unix(int64(lo), 0).Format(time.TimeOnly), time.Unix(int64(hi), 0).Format(time.TimeOnly))
				return
			}
		}
	}
}

// probe waits, after the faults, until every daemon took a write (a
// claim in a project of its own), and returns when the last one did.
func (r *linRun) probe(ctx context.Context) (time.Time, error) {
	c, err := control.Dial(ctx, r.socks[0])
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
		c, err := control.Dial(ctx, r.socks[i])
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
func callRetry(ctx context.Context, c *control.Client, sock string, cmd api.Command) (*api.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		if c == nil {
			var err error
			if c, err = control.Dial(ctx, sock); err != nil {
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

// finalReads reads every project's tasks and events once the faults are
// over, through each daemon in turn: operations of the history after all
// others, so the checker sees that they show every acknowledged write.
func (r *linRun) finalReads(ctx context.Context) (map[string]*finalState, []porcupine.Operation) {
	final := map[string]*finalState{}
	var ops []porcupine.Operation
	i := 0
	for _, ps := range r.epochs {
		for _, p := range ps {
			sock := r.socks[i%linDaemons]
			i++
			proc := int(r.procs.Add(1) - 1)
			c, _ := control.Dial(ctx, sock)
			call := r.now()
			st, err := callRetry(ctx, c, sock, api.CmdProjectTasks{Project: p.ID})
			if err != nil {
				r.p.addf("final read of project %s: %v", p.Name, err)
				continue
			}
			ops = append(ops, porcupine.Operation{ClientId: proc, Input: linInput{ID: -1, Kind: opTasks, Project: p.ID}, Call: call,
				Output: linOutput{Tasks: tasksView(st.Project.Tasks)}, Return: r.now()})
			call = r.now()
			st, err = callRetry(ctx, nil, sock, api.CmdProjectEvents{Project: p.ID})
			if c != nil {
				c.Close()
			}
			if err != nil {
				r.p.addf("final read of project %s: %v", p.Name, err)
				continue
			}
			views, err := eventsView(st.Project.Events)
			if err != nil {
				r.p.addf("project %s: %v", p.Name, err)
				continue
			}
			ops = append(ops, porcupine.Operation{ClientId: proc, Input: linInput{ID: -1, Kind: opEvents, Project: p.ID}, Call: call,
				Output: linOutput{Events: views}, Return: r.now()})
			final[p.ID] = &finalState{events: st.Project.Events}
		}
	}
	return final, ops
}

// check checks the history with porcupine, writes its picture into out,
// and returns the number of projects whose history is not linearizable
// (a problem for each, naming the operation that could not be placed).
func (r *linRun) check(ops []porcupine.Operation, out string) (int, string) {
	init := map[string]*linState{}
	for id, p := range r.byID {
		init[id] = p.init
	}
	model := linModel(init, r.names)
	res, info := porcupine.CheckOperationsVerbose(model, ops, linCheckTimeout)
	picture := filepath.Join(out, "linear-"+r.kind+".html")
	if err := porcupine.VisualizePath(model, info, picture); err != nil {
		r.p.addf("picture: %v", err)
		picture = ""
	}
	if res == porcupine.Ok {
		return 0, picture
	}
	// The history itself, to look into.
	dump := filepath.Join(out, "linear-"+r.kind+"-history.jsonl")
	if err := writeHistory(dump, ops); err != nil {
		r.p.addf("history: %v", err)
	}
	if res == porcupine.Unknown {
		r.p.addf("the checker gave up after %s (history in %s)", linCheckTimeout, dump)
		r.slowest(model, ops)
		return 0, picture
	}
	// Which projects: each partition alone.
	violations := 0
	for _, part := range model.Partition(ops) {
		if porcupine.CheckOperations(model, part) {
			continue
		}
		violations++
		in := part[0].Input.(linInput)
		p := r.byID[in.Project]
		_, pinfo := porcupine.CheckOperationsVerbose(model, part, linCheckTimeout)
		r.p.addf("project %s is not linearizable: %s", p.Name, unplaced(model, part, pinfo))
	}
	return violations, picture
}

// slowest checks each project's history alone, all at once, for a
// while, and names those the checker could not decide, with their
// operations whose outcome stayed unknown: what a search that gave up
// most likely spent its time on.
func (r *linRun) slowest(model porcupine.Model, ops []porcupine.Operation) {
	parts := model.Partition(ops)
	results := make([]porcupine.CheckResult, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = porcupine.CheckOperationsTimeout(model, part, linCheckTimeout/10)
		}()
	}
	wg.Wait()
	for i, part := range parts {
		var unknown []string
		for _, op := range part {
			if op.Return == math.MaxInt64 {
				unknown = append(unknown, fmt.Sprintf("%s (client %d at %.3f s)", model.DescribeOperation(op.Input, op.Output),
					op.ClientId, float64(op.Call)/1e9))
			}
		}
		name := r.byID[part[0].Input.(linInput).Project].Name
		switch results[i] {
		case porcupine.Unknown:
			r.p.addf("project %s (%d operations): undecided after %s; never returned: %s", name, len(part), linCheckTimeout/10,
				strings.Join(unknown, "; "))
		case porcupine.Illegal:
			r.p.addf("project %s (%d operations): not linearizable", name, len(part))
		}
	}
}

// unplaced describes where the longest linearization of a partition
// stopped: the operations it placed last, and the first it could not.
func unplaced(model porcupine.Model, part []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var longest []int
	for _, lins := range info.PartialLinearizations() {
		for _, l := range lins {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	placed := make([]bool, len(part))
	for _, i := range longest {
		placed[i] = true
	}
	// The first operation, by call, that no linearization placed.
	order := make([]int, len(part))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return part[order[a]].Call < part[order[b]].Call })
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d operations placed", len(longest), len(part))
	if n := len(longest); n > 0 {
		op := part[longest[n-1]]
		fmt.Fprintf(&b, "; the last: %s", model.DescribeOperation(op.Input, op.Output))
	}
	for _, i := range order {
		if !placed[i] {
			op := part[i]
			fmt.Fprintf(&b, "; the first not placed: %s (client %d, at %.3f s)", model.DescribeOperation(op.Input, op.Output),
				op.ClientId, float64(op.Call)/1e9)
			break
		}
	}
	return b.String()
}

// heal ends every fault: toxics removed, paused daemons resumed, the
// server up, dead daemons started again; then waits for each daemon to
// answer.
func (r *linRun) heal(ctx context.Context) error {
	if r.net != nil {
		r.net.heal()
	}
	if !r.pg.Ready() && r.kind != "failover" {
		if err := r.pg.Start(); err != nil {
			return err
		}
	}
	for i := range linDaemons {
		d := r.daemon(i)
		syscall.Kill(d.Pid(), syscall.SIGCONT)
		if !d.Running() {
			r.keepLog(i, d)
			if err := r.startDaemon(i); err != nil {
				return err
			}
		}
	}
	for i := range linDaemons {
		if _, err := r.daemon(i).Ready(ctx, time.Minute); err != nil {
			return fmt.Errorf("after the faults, daemon %d: %w", i, err)
		}
	}
	return nil
}

// sleepCtx sleeps d, or less if ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// between is a duration drawn from [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// inject makes the run's faults until deadline.
func (r *linRun) inject(ctx context.Context, deadline time.Time) {
	rng := rand.New(rand.NewPCG(r.seed, 7))
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	switch r.kind {
	case "none":
		<-ctx.Done()
	case "failover":
		r.failover(ctx, rng)
	case "skew":
		r.skew(ctx)
	default:
		kinds := []string{r.kind}
		if r.kind == "mixed" {
			kinds = []string{"kill", "pg-restart", "latency", "reset", "slow-close", "blackhole", "pause"}
		}
		for sleepCtx(ctx, between(rng, 200*time.Millisecond, 800*time.Millisecond)) {
			k := kinds[rng.IntN(len(kinds))]
			if err := r.one(ctx, rng, k); err != nil {
				r.p.addf("%s: %v", k, err)
				return
			}
		}
	}
}

// one makes one fault of kind k and ends it.
func (r *linRun) one(ctx context.Context, rng *rand.Rand, k string) error {
	i := rng.IntN(linDaemons)
	switch k {
	case "kill":
		r.kill(i)
		r.fault(k)
		return r.startDaemon(i)
	case "pg-restart":
		if err := r.pg.Stop(); err != nil {
			return err
		}
		r.fault(k)
		time.Sleep(between(rng, 100*time.Millisecond, 600*time.Millisecond))
		return r.pg.Start()
	case "pause":
		return r.pause(ctx)
	}
	// The network's: on one daemon's link (all of them for latency), for
	// a while.
	links := []int{i}
	var err error
	switch k {
	case "latency":
		links = []int{0, 1, 2}
		for _, l := range links {
			if err = r.net.both(l, "latency", `{"latency": 20, "jitter": 20}`); err != nil {
				break
			}
		}
	case "reset":
		// Every connection of the link is cut (RST) within 20 ms of its
		// next bytes: in the middle of its transactions.
		_, err = r.net.add(i, "reset_peer", "upstream", fmt.Sprintf(`{"timeout": %d}`, rng.IntN(20)))
	case "slow-close":
		// Connections are cut after a few kilobytes, and their closing
		// reaches the daemon a second or more late.
		if err = r.net.both(i, "slow_close", fmt.Sprintf(`{"delay": %d}`, 1000+rng.IntN(1000))); err == nil {
			_, err = r.net.add(i, "limit_data", "downstream", fmt.Sprintf(`{"bytes": %d}`, 2000+rng.IntN(20000)))
		}
	case "blackhole":
		// Nothing gets through, and nothing is closed: the server's
		// answers vanish.
		_, err = r.net.add(i, "timeout", "downstream", `{"timeout": 0}`)
	}
	if err != nil {
		return err
	}
	r.fault(k)
	if k == "blackhole" && r.kind == k {
		time.Sleep(between(rng, linOpTimeout, 2*linOpTimeout)) // past the clients' patience, even past the run's end
	} else {
		sleepCtx(ctx, between(rng, 300*time.Millisecond, 1500*time.Millisecond))
	}
	r.net.heal()
	return nil
}

// pause stops the holder of the sweeper's lease with SIGSTOP for longer
// than the lease (and the server's idle timeout), and resumes it: meanwhile another daemon must have
// taken the lease in a higher term, and the resumed one must not hold it
// in its old term.
func (r *linRun) pause(ctx context.Context) error {
	before, err := r.lease(ctx)
	if err != nil {
		return err
	}
	pid, _ := strconv.Atoi(before.Holder[strings.LastIndex(before.Holder, ":")+1:]) // host:pid
	r.mu.Lock()
	i := slices.IndexFunc(r.daemons, func(d *daemonproc.Daemon) bool { return d.Pid() == pid && d.Running() })
	r.mu.Unlock()
	if i < 0 {
		return nil // held by a daemon since killed: nothing to pause
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	r.fault("pause")
	// Past its lease, and past the server's patience with a session
	// idle in its transaction: a daemon stopped inside its write
	// transaction holds the write lock until then.
	time.Sleep(linLease + postgres.DefaultIdleTimeout + 1500*time.Millisecond)
	during, err := r.lease(ctx)
	syscall.Kill(pid, syscall.SIGCONT)
	if err != nil {
		return err
	}
	r.pauses++
	if during.Term > before.Term && during.Holder != before.Holder {
		r.handed++
	} else {
		r.p.addf("pause: while %s (term %d) was stopped past its lease, no other daemon took it (%s, term %d)",
			before.Holder, before.Term, during.Holder, during.Term)
	}
	time.Sleep(500 * time.Millisecond)
	after, err := r.lease(ctx)
	if err != nil {
		return err
	}
	if after.Holder == before.Holder && after.Term == before.Term {
		r.p.addf("pause: resumed, %s holds the lease in its old term %d", before.Holder, before.Term)
	}
	return nil
}

// leaseRow is `scv ledger lease --json`'s row.
type leaseRow struct {
	Lease  string `json:"lease"`
	Holder string `json:"holder"`
	Term   uint64 `json:"term"`
}

// lease reads the sweeper's lease with `scv ledger lease`.
func (r *linRun) lease(ctx context.Context) (leaseRow, error) {
	// Not bounded by the run's end: a pause under way finishes.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out, err := scv(ctx, r.e.bin, "--json", "ledger", "lease", "--db", r.urls[0])
	if err != nil {
		return leaseRow{}, fmt.Errorf("scv ledger lease: %v: %s", err, out)
	}
	var rows []leaseRow
	if err := json.Unmarshal(out, &rows); err != nil {
		return leaseRow{}, fmt.Errorf("scv ledger lease: %v: %s", err, out)
	}
	for _, l := range rows {
		if l.Lease == "sweeper" {
			return l, nil
		}
	}
	return leaseRow{}, errors.New("no sweeper lease")
}

// skew runs daemon 0 with its clock an hour ahead for the first half of
// the run, and an hour behind for the second.
func (r *linRun) skew(ctx context.Context) {
	r.fault("skew")
	deadline, _ := ctx.Deadline()
	if !sleepCtx(ctx, time.Until(deadline)/2) {
		return
	}
	r.kill(0)
	r.env[0] = slices.DeleteFunc(r.env[0], func(s string) bool { return strings.HasPrefix(s, "SCV_CLOCK_SKEW=") })
	r.env[0] = append(r.env[0], "SCV_CLOCK_SKEW=-1h")
	if err := r.startDaemon(0); err != nil {
		r.p.addf("skew: %v", err)
		return
	}
	r.fault("skew")
	<-ctx.Done()
}

// failover kills the primary hard a third into the run and promotes the
// standby: the daemons, not restarted, must go on on it.
func (r *linRun) failover(ctx context.Context, rng *rand.Rand) {
	deadline, _ := ctx.Deadline()
	if !sleepCtx(ctx, time.Until(deadline)/3) {
		return
	}
	pids := make([]int, linDaemons)
	for i := range pids {
		pids[i] = r.daemon(i).Pid()
	}
	if err := r.pg.Kill(); err != nil {
		r.p.addf("failover: %v", err)
		return
	}
	r.fault("failover")
	time.Sleep(between(rng, 200*time.Millisecond, 800*time.Millisecond))
	t := time.Now()
	if err := r.spare.Promote(); err != nil {
		r.p.addf("failover: promote: %v", err)
		return
	}
	r.notes = append(r.notes, fmt.Sprintf("the standby promoted in %.1f s", time.Since(t).Seconds()))
	r.pg, r.spare = r.spare, r.pg
	<-ctx.Done()
	for i := range pids {
		if d := r.daemon(i); d.Pid() != pids[i] || !d.Running() {
			r.p.addf("failover: daemon %d did not survive the failover: %v", i, d.Err())
		}
	}
}

// settle rewrites the history with what the final state says of the
// operations whose outcome was unknown (as etcd's robustness tests patch
// theirs). Every write leaves its own event: a progress its unique text,
// a finish its run's run_finished, a claim a run_started of its task by
// its agent, a retry a task_retried. Once the final events are read
// (after every daemon took a write of its own, so that nothing sent
// before is still on its way), an unknown write whose event is not there
// never took effect, and leaves the history; one whose event is there,
// and is the only unknown write that could have made it, took effect,
// with that outcome (its return time stays unknown). The rest stay
// unknown: the checker tries both. Unknown reads constrain nothing and
// leave the history. It also counts the acknowledged writes, and those
// whose event is not there (lost: a problem each), and an event that no
// write explains is a problem too.
func (r *linRun) settle(ops []porcupine.Operation, final map[string]*finalState) (out []porcupine.Operation, acked, lost, settled int) {
	// What the final events hold, by what made them.
	type key struct{ project, a, b, c string }
	events := map[key][]string{} // → the runs started (claims), or one "" per event
	keyOf := func(in linInput) key {
		switch in.Kind {
		case opClaim:
			return key{in.Project, "claim", in.Task, in.Agent}
		case opProgress:
			return key{in.Project, "progress", in.Run, in.Text}
		case opFinish:
			return key{in.Project, "finish", in.Run, string(in.Status)}
		}
		return key{in.Project, "retry", in.Task, ""}
	}
	for id, f := range final {
		for _, ev := range f.events {
			b, err := reducer.DecodeBody(ev.Kind, ev.Data)
			if err != nil {
				continue
			}
			switch b := b.(type) {
			case reducer.RunStarted:
				k := key{id, "claim", b.TaskID, b.Agent}
				events[k] = append(events[k], b.RunID)
			case reducer.RunProgress:
				k := key{id, "progress", b.RunID, b.Progress}
				events[k] = append(events[k], "")
			case reducer.RunFinished:
				k := key{id, "finish", b.RunID, string(b.Status)}
				events[k] = append(events[k], "")
			case reducer.TaskRetried:
				k := key{id, "retry", b.TaskID, ""}
				events[k] = append(events[k], "")
			}
		}
	}
	// Take out what the acknowledged writes made.
	unknown := map[key][]int{}
	for i, op := range ops {
		in, o := op.Input.(linInput), op.Output.(linOutput)
		if !in.Kind.writes() || final[in.Project] == nil {
			if !o.Unknown {
				out = append(out, op)
			}
			continue
		}
		k := keyOf(in)
		switch {
		case o.Unknown:
			unknown[k] = append(unknown[k], i)
		case o.Reason == "":
			acked++
			made := events[k]
			j := 0
			if in.Kind == opClaim {
				j = slices.Index(made, o.Run)
			}
			if j >= 0 && j < len(made) {
				events[k] = slices.Delete(made, j, j+1)
			} else {
				lost++
				r.p.addf("acknowledged %s of %s in project %s (%s %s) is not in the ledger", in.Kind, r.names[in.Task], in.Project, in.Run+o.Run, in.Text+string(in.Status))
			}
			out = append(out, op)
		default:
			out = append(out, op)
		}
	}
	for k, idx := range unknown {
		made := events[k]
		delete(events, k)
		switch {
		case len(made) == 0:
			settled += len(idx) // none took effect
			continue
		case len(made) == len(idx) && (len(idx) == 1 || k.a == "retry"):
			for n, i := range idx {
				op := ops[i]
				op.Output = linOutput{Run: made[n]} // took effect
				ops[i] = op
			}
			settled += len(idx)
		case len(made) > len(idx):
			r.p.addf("project %s: %d %s events of %s %s, and only %d writes that could have made them", k.project, len(made), k.a, k.b, k.c, len(idx))
		}
		for _, i := range idx {
			out = append(out, ops[i])
		}
	}
	for k, made := range events {
		if len(made) > 0 {
			r.p.addf("project %s: %d %s events of %s %s that no write of a client made", k.project, len(made), k.a, k.b, k.c)
		}
	}
	return out, acked, lost, settled
}

// writeHistory writes the operations to path, one JSON object a line.
func writeHistory(path string, ops []porcupine.Operation) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, op := range ops {
		if err := enc.Encode(map[string]any{"client": op.ClientId, "call": op.Call, "return": op.Return,
			"input": op.Input, "output": op.Output}); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
