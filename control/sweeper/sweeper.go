// Package sweeper is the daemon's ledger maintenance, a service it starts
// and stops: it marks silent runs stale and compacts projects whose live
// tail has grown past a threshold.
//
// Staleness is the daemon's own observation. Every twentieth of the stale
// window the sweeper asks the ledger which projects have running runs
// (the projects table knows, cached or not) and has it mark the silent
// ones (ledger.MarkStale), which the writer decides again inside its
// transaction: a heartbeat committed just before keeps the run alive. The
// sweeper supplies only the time and the window; the decision is the
// reducer's.
package sweeper

import (
	"context"
	"log/slog"
	"time"

	"scv/control/startstop"
	"scv/ledger"
)

// Ledger is what the sweeper needs of the ledger (*ledger.Ledger).
type Ledger interface {
	MarkStale(ctx context.Context, window time.Duration) (int, error)
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

	loop startstop.Loop
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

func (s *Sweeper) run(ctx context.Context) {
	t := time.NewTicker(s.Every())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sweep(context.WithoutCancel(ctx))
		}
	}
}

// Sweep is one round: mark the silent runs, then compact what is due.
func (s *Sweeper) Sweep(ctx context.Context) {
	log := s.logger()
	n, err := s.Ledger.MarkStale(ctx, s.StaleAfter)
	if err != nil {
		log.Error("sweep", "err", err)
	} else if n > 0 {
		log.Info("marked runs stale", "runs", n)
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
		c, err := s.Ledger.Compact(ctx, id, ledger.CompactOptions{Retain: s.Retain, Drop: s.Drop})
		if err != nil {
			log.Error("compact", "project", id, "err", err)
			continue
		}
		log.Info("compacted", "project", id, "through", c.Sequence, "archived", c.Archived, "live", c.Live)
	}
}
