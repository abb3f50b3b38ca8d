// Package sweeper is the daemon's ledger maintenance, a service it starts
// and stops: it marks silent runs stale, expires approvals left pending
// past their deadline, and compacts projects whose live tail has grown
// past a threshold.
//
// # One sweeper for the ledger
//
// Daemons that share a ledger sweep it one at a time: each round, the
// sweeper takes (or renews) the ledger's lease named LeaseName, and only
// the holder marks and compacts, every write fenced by the lease's term
// (checked inside the write transaction: a daemon that lost the lease
// marks nothing). A holder that dies is replaced once its lease has run
// out, within LeaseTTL; a holder renews its lease at a third of its
// length, whatever the pace of its sweeps. A daemon alone on its ledger
// (SQLite, which one daemon locks) holds no lease and writes none.
//
// Staleness is the daemon's own observation. Every twentieth of the stale
// window the sweeper asks the ledger which projects have running runs
// (the projects table knows, cached or not) and has it mark the silent
// ones (ledger.MarkStale), which the writer decides again inside its
// transaction: a heartbeat committed just before keeps the run alive. The
// sweeper supplies only the time and the window; the decision is the
// reducer's.
//
// An approval is decided by the daemon that asked it, whose question log
// holds it, at its answer or its deadline. With daemons sharing a ledger
// that daemon may be gone for good (its machine lost), and the project
// would wait for ever: so the sweeper also expires, in the project, every
// approval still pending ApprovalGrace after its deadline
// (ledger.ExpireApprovals).
package sweeper

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"scv/control/startstop"
	"scv/ledger"
)

// LeaseName is the lease of the sweeper's job.
const LeaseName = "sweeper"

// DefaultLeaseTTL is the sweeper lease's length unless LeaseTTL says
// otherwise.
const DefaultLeaseTTL = 10 * time.Second

// ApprovalGrace is how long past its deadline an approval stays pending
// before the sweeper expires it: the daemon that asked expires its own at
// the deadline, so the sweeper only decides those whose daemon is gone.
const ApprovalGrace = time.Minute

// Ledger is what the sweeper needs of the ledger (*ledger.Ledger).
type Ledger interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (ledger.Lease, bool, error)
	MarkStale(ctx context.Context, window time.Duration, fence *ledger.Lease) (int, error)
	ExpireApprovals(ctx context.Context, grace time.Duration, fence *ledger.Lease) (int, error)
	CompactDue(ctx context.Context, threshold int) ([]string, error)
	Compact(ctx context.Context, project string, opts ledger.CompactOptions) (ledger.Compaction, error)
}

// Sweeper marks stale runs and compacts, once started, until stopped.
type Sweeper struct {
	Ledger Ledger
	// StaleAfter is the stale window: a running run silent for longer is
	// marked stale.
	StaleAfter time.Duration
	// CompactAfter: a project whose live tail holds more events is
	// compacted, keeping its Retain newest (Drop: deleting what is folded
	// instead of archiving it). 0 turns compaction off.
	CompactAfter int
	Retain       int
	Drop         bool
	Logger       *slog.Logger
	// Holder names this daemon for the lease; LeaseTTL is the lease's
	// length (0: DefaultLeaseTTL).
	Holder   string
	LeaseTTL time.Duration
	// Clock is the daemon's clock, which the ledger's follows (nil: the
	// system clock): the lease is renewed by it.
	Clock func() time.Time
	// Shared says other daemons may write the ledger too: only then is
	// there a lease to hold. A daemon alone on its database (SQLite, which
	// one daemon locks) sweeps without one.
	Shared bool

	loop startstop.Loop
	// mu is held by a round and by a renewal: Sweep may also be called
	// from outside the loop (Daemon.Sweep).
	mu    sync.Mutex
	lease *ledger.Lease // held, as of the last round
	taken time.Time     // when it was last taken or renewed, by this clock
}

func (s *Sweeper) ttl() time.Duration {
	if s.LeaseTTL > 0 {
		return s.LeaseTTL
	}
	return DefaultLeaseTTL
}

// hold says whether this daemon sweeps, and with which lease to fence its
// writes: on a shared ledger it takes or renews the lease when it is not
// held, or was last renewed more than a quarter of its length ago (so
// that each renewal tick, a third of the length after the last, renews,
// and sweeps more frequent than that do not write; mine is false when
// another daemon holds it); alone, it sweeps unfenced.
func (s *Sweeper) hold(ctx context.Context) (fence *ledger.Lease, mine bool, err error) {
	if !s.Shared {
		return nil, true, nil
	}
	at := time.Now()
	if s.Clock != nil {
		at = s.Clock()
	}
	if s.lease != nil && at.Sub(s.taken) < s.ttl()/4 {
		return s.lease, true, nil
	}
	lease, held, err := s.Ledger.AcquireLease(ctx, LeaseName, s.Holder, s.ttl())
	if err != nil || !held {
		if s.lease != nil {
			s.logger().Info("sweeper lease lost", "term", s.lease.Term)
		}
		s.lease = nil
		return nil, false, err
	}
	if s.lease == nil || s.lease.Term != lease.Term {
		s.logger().Info("sweeper lease taken", "holder", s.Holder, "term", lease.Term)
	}
	s.lease, s.taken = &lease, at
	return s.lease, true, nil
}

// keep takes or renews the lease between sweeps.
func (s *Sweeper) keep(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, _, err := s.hold(context.WithoutCancel(ctx)); err != nil {
		s.logger().Error("sweeper lease", "err", err)
	}
}

// Every is how often the sweeper looks for silent runs: a twentieth of
// the stale window, so that a run is marked at most that long (plus the
// time of one transaction) after its window ran out, well inside the tenth
// of the window that is promised.
func (s *Sweeper) Every() time.Duration { return max(s.StaleAfter/20, time.Millisecond) }

// Start starts sweeping.
func (s *Sweeper) Start(ctx context.Context) error {
	s.loop.Run(ctx, s.run)
	return nil
}

// Stop stops sweeping and waits for the sweep under way.
func (s *Sweeper) Stop() { s.loop.Stop() }

func (s *Sweeper) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// run sweeps every Every, and in between keeps the lease: it is renewed
// every third of its length, whatever the sweep's pace, so that a holder
// that is alive, even late by most of two thirds of it, never lets it run
// out (a stale window of 5 minutes sweeps every 15 s, longer than the
// lease's default 10 s).
func (s *Sweeper) run(ctx context.Context) {
	t := time.NewTicker(s.Every())
	defer t.Stop()
	renew := time.NewTicker(max(s.ttl()/3, time.Millisecond))
	defer renew.Stop()
	if !s.Shared {
		renew.Stop() // nothing to renew
	}
	s.keep(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			s.keep(ctx)
		case <-t.C:
			s.Sweep(context.WithoutCancel(ctx))
		}
	}
}

// Sweep is one round: unless another daemon holds the lease, mark the
// silent runs, expire the approvals left past their deadline, then
// compact what is due.
func (s *Sweeper) Sweep(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.logger()
	lease, mine, err := s.hold(ctx)
	if err != nil {
		log.Error("sweeper lease", "err", err)
		return
	}
	if !mine {
		return // another daemon sweeps
	}
	n, err := s.Ledger.MarkStale(ctx, s.StaleAfter, lease)
	if err != nil {
		log.Error("sweep", "err", err)
		s.lease = nil // taken again (or not) next round
		return
	} else if n > 0 {
		log.Info("marked runs stale", "runs", n)
	}
	if n, err := s.Ledger.ExpireApprovals(ctx, ApprovalGrace, lease); err != nil {
		log.Error("sweep approvals", "err", err)
	} else if n > 0 {
		log.Info("expired approvals past their deadline", "approvals", n)
	}
	if s.CompactAfter <= 0 {
		return
	}
	due, err := s.Ledger.CompactDue(ctx, s.CompactAfter)
	if err != nil {
		log.Error("compact", "err", err)
		return
	}
	for _, id := range due {
		c, err := s.Ledger.Compact(ctx, id, ledger.CompactOptions{Retain: s.Retain, Drop: s.Drop, Fence: lease})
		if err != nil {
			log.Error("compact", "project", id, "err", err)
			continue
		}
		log.Info("compacted", "project", id, "through", c.Sequence, "archived", c.Archived, "live", c.Live)
	}
}
