package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"scv/control/daemon/daemonproc"
	"scv/ledger/postgres"
	"scv/ledger/postgres/pgcluster"
)

// The linear check's faults: how each kind of fault is injected and
// healed, one at a time or mixed, and how the failover run's primary and
// standby are set up.

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
	var err error
	switch k {
	case "latency":
		for _, l := range []int{0, 1, 2} {
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
