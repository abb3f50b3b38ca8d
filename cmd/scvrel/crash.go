package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/control/rpc"
	"scv/ledger/driver"
	"scv/ledger/postgres"
	"scv/ledger/postgres/pgcluster"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// Kill times: most kills land uniformly between killMin and killMax after
// the restarted daemon first answered, while the clients write; one in
// earlyOneIn lands within earlyMax of the restart instead, while the
// daemon opens the database and recovers its write-ahead log.
const (
	killMin    = 50 * time.Millisecond
	killMax    = 400 * time.Millisecond
	earlyOneIn = 10
	earlyMax   = 30 * time.Millisecond
	// compactRetain is what each requested compaction keeps live.
	compactRetain = 1000
	// settleLimit guards the wait for every client to be answered after the
	// last restart: a hang fails the check instead of stalling it.
	settleLimit = time.Minute
)

// crashClient is one writing client of the crash check: it starts a run
// of its task and records progress on it, one request after another,
// reconnecting whenever the daemon goes away.
type crashClient struct {
	i       int
	project string
	log     clientLog
	acks    atomic.Int64 // len(log.Acked), readable while it runs
	failure string       // what stopped it early; "" if nothing did
	drops   int          // requests that got no reply (the connection broke)
	stopped atomic.Bool  // loop returned
	// outages: the ledger's database may be away for a while (the
	// PostgreSQL server stopped): a refusal `unavailable` is then not a
	// failure, only a request not acknowledged.
	outages     bool
	unavailable atomic.Int64 // such refusals
	// sending is the progress request step is sending (its n), 0 for
	// another request.
	sending uint32
}

// loop runs until stop is closed; a request in flight then is finished.
func (c *crashClient) loop(sock string, stop <-chan struct{}) {
	var cl *rpc.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
		c.stopped.Store(true)
	}()
	unsure := false // a run start may have landed without its reply
	for {
		select {
		case <-stop:
			return
		default:
		}
		if cl == nil {
			var err error
			if cl, err = rpc.Dial(context.Background(), sock); err != nil {
				cl = nil
				time.Sleep(5 * time.Millisecond)
				continue
			}
		}
		err := c.step(cl, unsure)
		switch {
		case err == nil:
		case c.outages && isUnavailable(err):
			c.unavailable.Add(1)
			if c.sending != 0 {
				c.log.Refused = append(c.log.Refused, c.sending)
			}
			unsure = c.log.Run == ""
			time.Sleep(5 * time.Millisecond)
		case replied(err):
			c.failure = err.Error() // no refusal is expected
			return
		case timedOut(err):
			c.failure = fmt.Sprintf("no reply within %s: %v", callTimeout, err)
			return
		default: // the connection broke: the daemon is gone
			cl.Close()
			cl = nil
			c.drops++
			unsure = c.log.Run == ""
		}
	}
}

// step sends the client's next request: its run start until it knows its
// run, then the next progress. When unsure, it first asks project_tasks
// whether an earlier run start landed.
func (c *crashClient) step(cl *rpc.Client, unsure bool) error {
	c.sending = 0
	if c.log.Run == "" && unsure {
		run, err := runOf(cl, c.project, c.log.Task)
		if err != nil || run != "" {
			c.log.Run = run
			return err
		}
	}
	if c.log.Run == "" {
		raw, err := call(cl, api.CmdProjectRunStart{Project: c.project, Task: c.log.Task, Agent: "scvrel"})
		if err != nil {
			return err
		}
		var st api.DaemonStatus
		if err := json.Unmarshal(raw, &st); err != nil || st.Project == nil || st.Project.RunID == "" {
			// A reply, but not the one expected: it stops the client as
			// a refusal does.
			return &api.Error{Message: fmt.Sprintf("project_run_start reply %s: %v", raw, err)}
		}
		c.log.Run, c.log.RunAcked = st.Project.RunID, true
		return nil
	}
	c.log.Sent++
	c.sending = c.log.Sent
	_, err := call(cl, api.CmdProjectRunProgress{Project: c.project, Run: c.log.Run, Progress: progressText(c.i, c.log.Sent)})
	if err != nil {
		return err
	}
	c.log.Acked = append(c.log.Acked, c.log.Sent)
	c.acks.Add(1)
	return nil
}

// crashRun is what the crash check observed while it ran.
type crashRun struct {
	project      string
	kills, early int
	restarts     []time.Duration // from start to first reply, per restart
	compactions  int
	live         map[string]json.RawMessage // action → the last daemon's reply, before its clean stop
	clients      []*crashClient
	// PostgreSQL outages under load: how many, the requests refused
	// `unavailable`, and from each server start to every client answered
	// again by the same daemon.
	outages     int
	unavailable int64
	recoveries  []time.Duration
}

// target is the ledger the crash check runs against: a SQLite file, or
// a database on a private PostgreSQL cluster (--pg).
type target struct {
	db string // the daemon's --db
	// local is the SQLite file the daemon keeps on this machine: the
	// ledger itself, or, on PostgreSQL, its --local-db.
	local string
	args  []string // the daemon's flags after --db and --socket
	pg    *daemonproc.PG
	// bouncer is the PgBouncer between the daemon and pg (--pgbouncer).
	bouncer *pgcluster.Bouncer
}

func (t target) name() string {
	switch {
	case t.bouncer != nil:
		return "PostgreSQL through PgBouncer"
	case t.pg != nil:
		return "PostgreSQL"
	}
	return "SQLite"
}

// crashCheck is the crash check: see the package documentation and
// docs/reliability.md.
func crashCheck(ctx context.Context, e env) Result {
	r := Result{Name: "crash"}
	var p problems
	sock := filepath.Join(e.dir, "d.sock")
	t := target{db: filepath.Join(e.dir, "ledger.db"), args: daemonArgs}
	t.local = t.db
	if e.cfg.PG {
		r.Name = "crash (PostgreSQL)"
		pg, err := daemonproc.StartPG(ctx, e.dir)
		if errors.Is(err, daemonproc.ErrNoPostgreSQL) {
			r.Figure, r.Summary, r.Skipped = "skipped: "+err.Error(), "skipped", err.Error()
			return r
		}
		if err == nil {
			defer pg.Close()
			t.db, err = pg.CreateDB(ctx, "crash")
		}
		if err != nil {
			r.Figure, r.Summary, r.Problems = "could not run: "+err.Error(), "could not run", []string{err.Error()}
			return r
		}
		t.pg, t.local = pg, filepath.Join(e.dir, "local.db")
		t.args = append(slices.Clone(daemonArgs), "--local-db", t.local)
		if e.cfg.PgBouncer {
			r.Name = "crash (PgBouncer)"
			if !pgcluster.BouncerInstalled() {
				err := errors.New("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
				r.Figure, r.Summary, r.Skipped = "skipped: "+err.Error(), "skipped", err.Error()
				return r
			}
			t.bouncer = &pgcluster.Bouncer{Dir: filepath.Join(pg.Root, "bouncer"), Upstream: pg.URL, Mode: "session"}
			if err := t.bouncer.Start(); err != nil {
				r.Figure, r.Summary, r.Problems = "could not run: "+err.Error(), "could not run", []string{err.Error()}
				return r
			}
			defer t.bouncer.Stop()
			t.db = t.bouncer.URL("crash")
		}
	}
	run, err := e.crashLoad(ctx, t, sock, &p)
	if err != nil {
		p.addf("%v", err)
		r.Figure = "could not run: " + err.Error()
		r.Summary = "could not run"
		r.Problems = p.all()
		return r
	}
	e.logf("checking the database")
	h, states := e.crashVerify(ctx, t, sock, run, &p)

	lat := slices.Clone(run.restarts)
	slices.Sort(lat)
	restart := "no restart answered"
	if len(lat) > 0 {
		restart = fmt.Sprintf("restart to first reply p50 %d ms, max %d ms", lat[len(lat)/2].Milliseconds(), lat[len(lat)-1].Milliseconds())
	}
	outages := ""
	if t.pg != nil {
		rec := slices.Clone(run.recoveries)
		slices.Sort(rec)
		outages = fmt.Sprintf("%d PostgreSQL stops and starts under load (%s requests refused unavailable, of which %s progress events landed all the same",
			run.outages, commas(run.unavailable), commas(h.RefusedLanded))
		if len(rec) > 0 {
			outages += fmt.Sprintf("; server start to every client answered by the same daemon p50 %d ms, max %d ms",
				rec[len(rec)/2].Milliseconds(), rec[len(rec)-1].Milliseconds())
		}
		outages += "); "
	}
	r.Figure = fmt.Sprintf("on %s: %d SIGKILLs (%d within %d ms of a restart) under %d clients, %s%s of %s acknowledged progress events lost "+
		"(%s unacknowledged ones landed, %s did not); %d compactions; %s events; %s; ",
		t.name(), run.kills, run.early, earlyMax.Milliseconds(), len(run.clients), outages, commas(h.Lost), commas(h.Acked),
		commas(h.Landed), commas(h.Doubt), run.compactions, commas(h.Events), restart)
	if len(p.list) == 0 && t.pg != nil {
		r.Figure += "sequences strictly increasing, none twice or out of order; state equals a fresh replay (" + states + "); verify ok"
	} else if len(p.list) == 0 {
		r.Figure += "sequences strictly increasing, none twice or out of order; state equals a fresh replay (" + states + "); verify and integrity_check ok"
	} else {
		r.Figure += "the history, the state or the file is not as promised (see the problems)"
	}
	r.Summary = fmt.Sprintf("%d kills, %d clients: %s of %s acknowledged lost", run.kills, len(run.clients), commas(h.Lost), commas(h.Acked))
	if t.pg != nil {
		r.Summary = fmt.Sprintf("%d kills, %d outages, %d clients: %s of %s acknowledged lost", run.kills, run.outages, len(run.clients), commas(h.Lost), commas(h.Acked))
	}
	r.Problems = p.all()
	return r
}

// crashLoad runs the daemon under the clients and kills it e.cfg.Kills
// times, restarting it on the same files each time. It ends with the
// clients stopped and the last daemon stopped cleanly. It returns an
// error only when it could not get as far as starting the clients; what
// goes wrong after that is a problem, and the database is checked all
// the same.
func (e env) crashLoad(ctx context.Context, t target, sock string, p *problems) (*crashRun, error) {
	run := &crashRun{live: map[string]json.RawMessage{}}
	d, err := daemonproc.Start(e.bin, t.db, sock, t.args...)
	if err != nil {
		return nil, err
	}
	defer func() { d.Kill() }() // on every path: a no-op once it stopped
	if _, err := d.Ready(ctx, time.Minute); err != nil {
		return nil, err
	}
	project, tasks, err := setup(ctx, sock, "crash", e.dir, e.cfg.Clients)
	if err != nil {
		return nil, err
	}
	run.project = project

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, task := range tasks {
		c := &crashClient{i: i, project: project, log: clientLog{Task: task}, outages: t.pg != nil}
		run.clients = append(run.clients, c)
		wg.Go(func() { c.loop(sock, stop) })
	}
	var compactions int
	var compactRefused string
	if e.cfg.CompactEvery > 0 {
		wg.Go(func() { compactions, compactRefused = compactor(sock, project, e.cfg.CompactEvery, t.pg != nil, stop) })
	}
	e.logf("%d clients writing; %d kills to go", len(tasks), e.cfg.Kills)

	ready := false // the last daemon answered after the kills
	if err := e.kill(ctx, t, sock, &d, run, p); err != nil {
		p.addf("%v", err)
	} else if took, err := d.Ready(ctx, time.Minute); err != nil {
		p.addf("last restart: %v", err)
	} else {
		ready = true
		run.restarts = append(run.restarts, took)
		e.settle(ctx, run, p)
		if t.pg != nil {
			ready = e.outages(ctx, t, d, run, p)
		}
	}
	close(stop)
	wg.Wait()
	for _, c := range run.clients {
		run.unavailable += c.unavailable.Load()
	}
	run.compactions = compactions
	if compactRefused != "" {
		p.addf("ledger_compact refused: %s", compactRefused)
	}
	clientFailures(run.clients, p)
	if !ready {
		return run, ctx.Err()
	}

	// What the last daemon says before it stops, to compare with what a
	// daemon restarted on the file and a replay say.
	if cl, err := rpc.Dial(ctx, sock); err != nil {
		p.addf("last daemon: %v", err)
	} else {
		for _, cmd := range []api.Command{api.CmdProjectTasks{Project: project}, api.CmdProjectStatus{Project: project}} {
			raw, err := call(cl, cmd)
			if err != nil {
				p.addf("last daemon: %s: %v", cmd.Action(), err)
				continue
			}
			run.live[cmd.Action()] = raw
		}
		cl.Close()
	}
	if err := d.Stop(); err != nil {
		p.addf("clean stop after the last restart: %v", err)
	}
	for _, f := range []string{t.local + "-wal", t.local + "-shm"} {
		if _, err := os.Stat(f); err == nil {
			p.addf("the clean stop left %s behind", filepath.Base(f))
		}
	}
	return run, ctx.Err()
}

// clientFailures reports the clients that stopped early: one problem for
// all, with the first client's reason, since they usually share it.
func clientFailures(clients []*crashClient, p *problems) {
	var failed []int
	for i, c := range clients {
		if c.failure != "" {
			failed = append(failed, i)
		}
	}
	if len(failed) > 0 {
		c := clients[failed[0]]
		p.addf("%d of %d clients stopped on an unexpected reply; client %d: %s", len(failed), len(clients), c.i, c.failure)
	}
}

// kill kills the daemon *d e.cfg.Kills times and starts a new one on the
// same files after each kill, leaving the last one in *d, started.
func (e env) kill(ctx context.Context, t target, sock string, d **daemonproc.Daemon, run *crashRun, p *problems) error {
	rng := rand.New(rand.NewPCG(e.cfg.Seed, 1))
	sleep := func(dur time.Duration) error {
		select {
		case <-time.After(dur):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	fresh := false // *d was just started and has not answered yet
	for k := 1; k <= e.cfg.Kills; k++ {
		if fresh && rng.IntN(earlyOneIn) == 0 {
			run.early++
			if err := sleep(time.Duration(rng.Int64N(int64(earlyMax)))); err != nil {
				return err
			}
		} else {
			if fresh {
				took, err := (*d).Ready(ctx, time.Minute)
				if err != nil {
					return fmt.Errorf("restart %d: %w", k-1, err)
				}
				run.restarts = append(run.restarts, took)
			}
			if err := sleep(killMin + time.Duration(rng.Int64N(int64(killMax-killMin)))); err != nil {
				return err
			}
		}
		if !(*d).Kill() {
			p.addf("kill %d: the daemon had exited by itself: %v", k, (*d).Err())
		}
		run.kills++
		if k%10 == 0 || k == e.cfg.Kills {
			var acks int64
			for _, c := range run.clients {
				acks += c.acks.Load()
			}
			e.logf("%d kills, %s acknowledged", k, commas(acks))
		}
		next, err := daemonproc.Start(e.bin, t.db, sock, t.args...)
		if err != nil {
			return err
		}
		*d, fresh = next, true
	}
	return nil
}

// Outages: each stop of the PostgreSQL server comes a time drawn from
// killMin to killMax after the daemon answered everyone, and lasts from
// outageMin to outageMax.
const (
	outageMin = 200 * time.Millisecond
	outageMax = 800 * time.Millisecond
)

// outages stops and starts the PostgreSQL server e.cfg.Outages times
// under the clients' load: while it is down the daemon refuses requests
// `unavailable`; once it is up again the same daemon, not restarted, must
// answer every client again by itself. It reports whether the daemon is
// still serving.
func (e env) outages(ctx context.Context, t target, d *daemonproc.Daemon, run *crashRun, p *problems) bool {
	rng := rand.New(rand.NewPCG(e.cfg.Seed, 2))
	sleep := func(dur time.Duration) bool {
		select {
		case <-time.After(dur):
			return true
		case <-ctx.Done():
			return false
		}
	}
	var refused int64
	for k := 1; k <= e.cfg.Outages; k++ {
		if !sleep(killMin + time.Duration(rng.Int64N(int64(killMax-killMin)))) {
			return false
		}
		if err := t.pg.Stop(ctx); err != nil {
			p.addf("outage %d: stopping PostgreSQL: %v", k, err)
			return false
		}
		run.outages++
		if !sleep(outageMin + time.Duration(rng.Int64N(int64(outageMax-outageMin)))) {
			return false
		}
		if err := t.pg.Start(ctx); err != nil {
			p.addf("outage %d: starting PostgreSQL again: %v", k, err)
			return false
		}
		up := time.Now()
		e.settle(ctx, run, p)
		run.recoveries = append(run.recoveries, time.Since(up))
		if !d.Running() {
			p.addf("outage %d: the daemon exited: %v", k, d.Err())
			return false
		}
		refused = 0
		for _, c := range run.clients {
			refused += c.unavailable.Load()
		}
		e.logf("%d PostgreSQL outages, %s requests refused unavailable", k, commas(refused))
	}
	if e.cfg.Outages > 0 && refused == 0 {
		p.addf("no request was refused unavailable in %d PostgreSQL outages: the harness did not stop the server", e.cfg.Outages)
	}
	return true
}

// settle waits until every client has been answered once more since the
// last restart (or has stopped, saying why): the daemon recovered for
// everyone. settleLimit only guards against a hang.
func (e env) settle(ctx context.Context, run *crashRun, p *problems) {
	base := make([]int64, len(run.clients))
	for i, c := range run.clients {
		base[i] = c.acks.Load()
	}
	limit := time.Now().Add(settleLimit)
	for i := 0; i < len(run.clients) && ctx.Err() == nil; {
		c := run.clients[i]
		switch {
		case c.acks.Load() > base[i] || c.stopped.Load():
			i++
		case time.Now().After(limit):
			p.addf("client %d was not answered within %s of the last restart", i, settleLimit)
			i++
		default:
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// compactor asks the daemon to compact the project every so often, so
// that kills also land in compactions, until stop is closed. It returns
// how many were answered, and the last refusal, if any.
func compactor(sock, project string, every time.Duration, outages bool, stop <-chan struct{}) (int, string) {
	var cl *rpc.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	done, refused := 0, ""
	retain := uint64(compactRetain)
	for {
		select {
		case <-stop:
			return done, refused
		case <-t.C:
		}
		if cl == nil {
			var err error
			if cl, err = rpc.Dial(context.Background(), sock); err != nil {
				cl = nil
				continue
			}
		}
		_, err := call(cl, api.CmdLedgerCompact{Project: project, Retain: &retain})
		switch {
		case err == nil:
			done++
		case outages && isUnavailable(err):
		case replied(err):
			refused = err.Error()
		default:
			cl.Close()
			cl = nil
		}
	}
}

// crashVerify checks the database after the crash load; it returns the
// history check's figures and which views of the state agreed.
func (e env) crashVerify(ctx context.Context, t target, sock string, run *crashRun, p *problems) (*historyCheck, string) {
	logs := make([]clientLog, len(run.clients))
	for i, c := range run.clients {
		logs[i] = c.log
	}
	project := run.project
	h := newHistoryCheck(project, logs, p)
	replay, last, err := readHistory(ctx, t, project, h, p)
	if err != nil {
		// What cannot be read is lost: finish counts it.
		p.addf("reading the database: %v", err)
		h.finish()
		return h, "not compared"
	}

	// The same state, four ways: the last daemon before it stopped, a
	// daemon started on the file, `scv project … --at LAST --db FILE`
	// (snapshot plus events, offline), and the replay of every event
	// from the first (readHistory).
	views := map[string]map[string]string{} // action → view → canonical project
	add := func(action, view string, raw []byte) {
		s, err := projectOf(raw)
		if err != nil {
			p.addf("%s from %s: %v: %.300s", action, view, err, raw)
			return
		}
		if views[action] == nil {
			views[action] = map[string]string{}
		}
		views[action][view] = s
	}
	for action, raw := range run.live {
		add(action, "the last daemon", raw)
	}
	for action, raw := range replay {
		add(action, "replay", raw)
	}
	for _, c := range []struct{ action, verb string }{{"project_tasks", "tasks"}, {"project_status", "status"}} {
		out, err := scv(ctx, e.bin, "project", c.verb, project, "--at", fmt.Sprint(last), "--db", t.db, "--json")
		if err != nil {
			p.addf("scv project %s --at %d: %v", c.verb, last, err)
			continue
		}
		add(c.action, "--at", out)
	}
	d, err := daemonproc.Start(e.bin, t.db, sock, t.args...)
	if err == nil {
		_, err = d.Ready(ctx, time.Minute)
	}
	if err != nil {
		p.addf("daemon on the file after the run: %v", err)
	} else {
		cl, err := rpc.Dial(ctx, sock)
		if err == nil {
			for _, cmd := range []api.Command{api.CmdProjectTasks{Project: project}, api.CmdProjectStatus{Project: project}} {
				raw, err := call(cl, cmd)
				if err != nil {
					p.addf("restarted daemon: %s: %v", cmd.Action(), err)
					continue
				}
				add(cmd.Action(), "a restarted daemon", raw)
			}
			cl.Close()
		}
		if err := d.Stop(); err != nil {
			p.addf("restarted daemon: %v", err)
		}
	}
	if d != nil {
		d.Kill()
	}
	names := []string{"the last daemon", "a restarted daemon", "--at", "replay"}
	for _, action := range []string{"project_tasks", "project_status"} {
		want, ok := views[action]["replay"]
		if !ok {
			continue
		}
		for _, v := range names {
			got, ok := views[action][v]
			switch {
			case !ok:
				p.addf("%s: no reply from %s to compare", action, v)
			case got != want:
				p.addf("%s: %s differs from the replay: %s", action, v, firstDifference(got, want))
			}
		}
	}

	if out, err := scv(ctx, e.bin, "ledger", "verify", "--db", t.db); err != nil {
		p.addf("scv ledger verify: %v", err)
	} else if !bytes.Contains(out, []byte(": intact")) {
		p.addf("scv ledger verify exited 0 without saying intact: %s", out)
	} else if t.pg == nil && !bytes.Contains(out, []byte("integrity_check: ok")) {
		p.addf("scv ledger verify exited 0 without integrity_check ok: %s", out)
	}
	return h, "the last daemon, a restarted daemon, --at and an in-process replay agree on project_tasks and project_status"
}

// readHistory reads every event of the database at path (archive and
// live tail) in sequence order into h and finishes h, folds each
// project's events from its first through the reducer (reducer.Evolve),
// and checks SQLite's integrity_check and the sequence counter, all
// through sqlitetest.ReadAll. It returns the replayed project's
// project_tasks and project_status replies, as the daemon would encode
// them (none if the replay failed), and the last sequence.
func readHistory(ctx context.Context, t target, project string, h *historyCheck, p *problems) (map[string]json.RawMessage, uint64, error) {
	if t.pg != nil {
		return readHistoryPG(ctx, t.db, project, h, p)
	}
	c, err := sqlitetest.ReadAll(ctx, t.db)
	if err != nil {
		return nil, 0, err
	}
	if c.Integrity != "ok" {
		p.addf("integrity_check: %s", c.Integrity)
	}
	last, folded := replayEvents(c.Events, h, p)
	if c.LastSequence < last {
		p.addf("the sequence counter is %d, below the last sequence %d: the next event would reuse a sequence", c.LastSequence, last)
	}
	h.finish()
	return replies(folded, project, last, p)
}

// readHistoryPG is readHistory on PostgreSQL: every event and the
// sequence counter, read in one read-only transaction through the
// driver (PostgreSQL has no integrity_check of its own to run).
func readHistoryPG(ctx context.Context, u, project string, h *historyCheck, p *problems) (map[string]json.RawMessage, uint64, error) {
	db, err := postgres.Open(ctx, u, postgres.Options{ReadOnly: true})
	if err != nil {
		return nil, 0, err
	}
	defer db.Close()
	var events []driver.Event
	var counter uint64
	if err := db.Read(ctx, func(r driver.Reader) error {
		var err error
		if counter, _, err = r.LastSequence(ctx); err != nil {
			return err
		}
		return r.History(ctx, "", 0, 1<<63-1, func(e driver.Event) error {
			events = append(events, e)
			return nil
		})
	}); err != nil {
		return nil, 0, err
	}
	last, folded := replayEvents(events, h, p)
	if counter < last {
		p.addf("the sequence counter is %d, below the last sequence %d: the next event would reuse a sequence", counter, last)
	}
	h.finish()
	return replies(folded, project, last, p)
}

// replayEvents feeds every event, in the order given, to h, and folds
// each project's events through the reducer from its first. A project
// whose events the reducer refuses is reported and left out.
func replayEvents(events []driver.Event, h *historyCheck, p *problems) (uint64, map[string]*reducer.Project) {
	folded := map[string]*reducer.Project{}
	broken := map[string]bool{}
	var last uint64
	for _, e := range events {
		h.add(e.Sequence, e.ProjectID, e.Kind, e.Data)
		last = max(last, e.Sequence)
		if broken[e.ProjectID] {
			continue
		}
		b, err := reducer.DecodeBody(e.Kind, []byte(e.Data))
		if err == nil {
			var q *reducer.Project
			q, err = evolve(folded[e.ProjectID], reducer.Event{Sequence: e.Sequence, ProjectID: e.ProjectID, Time: e.TimestampMs, Body: b, Hash: e.Hash})
			folded[e.ProjectID] = q
		}
		if err != nil {
			p.addf("replay: sequence %d of project %s: %v", e.Sequence, e.ProjectID, err)
			broken[e.ProjectID] = true
			delete(folded, e.ProjectID)
		}
	}
	return last, folded
}

// replies are project's project_tasks and project_status replies as the
// daemon encodes them, from its folded state.
func replies(folded map[string]*reducer.Project, project string, last uint64, p *problems) (map[string]json.RawMessage, uint64, error) {
	pr, ok := folded[project]
	if !ok {
		p.addf("replay: no project %s", project)
		return nil, last, nil
	}
	out := map[string]json.RawMessage{}
	for _, cmd := range []api.Command{api.CmdProjectTasks{Project: project}, api.CmdProjectStatus{Project: project}} {
		b, err := json.Marshal(api.DaemonStatus{Project: api.ProjectReplyOf(cmd, pr, 0)})
		if err != nil {
			return nil, last, err
		}
		out[cmd.Action()] = b
	}
	return out, last, nil
}

// evolve folds e into p, turning the reducer's panic on a contradiction
// into an error.
func evolve(p *reducer.Project, e reducer.Event) (q *reducer.Project, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the reducer refused the event: %v", v)
		}
	}()
	return reducer.Evolve(p, e), nil
}

// projectOf returns the project member of a DaemonStatus (a reply's
// result, or a line of `scv … --json`), canonically encoded: keys sorted,
// so that two encodings of the same state compare equal.
func projectOf(raw []byte) (string, error) {
	var st struct {
		Project json.RawMessage `json:"project"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", err
	}
	if st.Project == nil {
		return "", errors.New("no project in the reply")
	}
	d := json.NewDecoder(bytes.NewReader(st.Project))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// firstDifference shows where two canonical encodings part.
func firstDifference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-80)
	return fmt.Sprintf("at byte %d: …%.200s… against …%.200s…", i, got[from:], want[from:])
}

// scv runs the scv binary with args and returns its stdout; a non-zero
// exit is an error carrying its stderr.
func scv(ctx context.Context, bin string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}
