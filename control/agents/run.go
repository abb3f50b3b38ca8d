package agents

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"scv/control/api"
	"scv/reducer"
)

// turnRun records one turn as a run of its task, through the daemon's
// Handler as any client's run is: progress from the agent's updates (at
// most once per interval, the newest text), heartbeats while it is silent
// (which the daemon coalesces, as it does everyone's), and the run's end.
// An update only notes that something changed; the text is made from the
// agent's state (text) when the run's own goroutine looks, and the
// request is sent there, so that an agent's stream never waits for a
// commit.
type turnRun struct {
	h       api.Handler
	ctx     context.Context // names the agent as the requests' caller
	log     *slog.Logger
	project string
	run     string
	text    func() string // the turn's progress text now
	every   time.Duration // at most one progress per interval
	beat    time.Duration // how often the goroutine looks
	now     func() time.Time

	journaled string // touched by the goroutine, then by finish
	kick      chan struct{}

	// base is the session's cost when the turn began (agent.begin sets
	// it): a usage_update's cost less base is the run's (noteUsage).
	base     sessionCost
	usedMu   sync.Mutex
	used     Usage // the newest the agent reported (usage)
	done     chan struct{}
	finished chan struct{}
}

func (m *Manager) newTurnRun(ctx context.Context, project, run string, text func() string) *turnRun {
	r := &turnRun{h: m.Handler, ctx: context.WithoutCancel(ctx), log: m.logger(), project: project, run: run, text: text,
		every: m.Every, beat: m.beat(), now: m.now,
		kick: make(chan struct{}, 1), done: make(chan struct{}), finished: make(chan struct{})}
	go r.loop()
	return r
}

// changed notes that the progress text may have changed.
func (r *turnRun) changed() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// usage is the one hook for what the turn's run has spent: u is the
// run's usage so far, each field the newest the agent reported
// (noteUsage, noteAnswerUsage), and it replaces the one before. It is
// kept with the run, and the log line of the turn's end shows it. It
// must not wait on the ledger (it is called while the agent's stream
// waits): loop sends it with the run's progress and heartbeats, and
// finish with the run's end, which journals the run's totals whatever
// the daemon coalesced before.
func (r *turnRun) usage(u Usage) {
	r.usedMu.Lock()
	r.used = u
	r.usedMu.Unlock()
}

// spent is the run's usage so far, as usage last recorded it.
func (r *turnRun) spent() Usage {
	r.usedMu.Lock()
	defer r.usedMu.Unlock()
	return r.used
}

// loop sends the newest progress text when it changed, at most once per
// interval, and at each look with nothing new a heartbeat, which keeps a
// silent turn's run from going stale.
func (r *turnRun) loop() {
	defer close(r.finished)
	t := time.NewTicker(r.beat)
	defer t.Stop()
	var last time.Time // when progress was last journaled
	for {
		tick := false
		select {
		case <-r.done:
			return
		case <-r.kick:
		case <-t.C:
			tick = true
		}
		text := oneLine(r.text())
		used := r.ledgerUsage()
		var cmd api.Command
		switch {
		case text != "" && text != r.journaled && r.now().Sub(last) >= r.every:
			cmd = api.CmdProjectRunProgress{Project: r.project, Run: r.run, Progress: text, Usage: used}
		case tick:
			run := r.run
			cmd, text = api.CmdProjectHeartbeat{Project: r.project, Run: &run, Usage: used}, ""
		default:
			continue // a change inside the interval: the next look sends it
		}
		if _, err := r.send(cmd); err != nil {
			if !errors.Is(err, reducer.ErrRunNotRunning) {
				r.log.Warn("record a turn's progress", "run", r.run, "err", err)
			}
			continue
		}
		if text != "" {
			last, r.journaled = r.now(), text
		}
	}
}

// finish ends the run: the newest progress text (or, given, why the turn
// failed) is journaled whatever the interval, then the run's end.
func (r *turnRun) finish(status reducer.RunStatus, why string) error {
	close(r.done)
	<-r.finished
	text := oneLine(r.text())
	if text == r.journaled {
		text = ""
	}
	if why != "" {
		text = why
	}
	if text = oneLine(text); text != "" {
		if _, err := r.send(api.CmdProjectRunProgress{Project: r.project, Run: r.run, Progress: text}); err != nil {
			return err
		}
	}
	_, err := r.send(api.CmdProjectRunFinish{Project: r.project, Run: r.run, Status: status, Usage: r.ledgerUsage()})
	return err
}

// ledgerUsage is the run's usage so far as the ledger takes it, nil when
// the agent reported none. A cost the ledger would refuse (a currency
// that is not three letters, more places than reducer.MaxCostPlaces) is
// left out, with a warning.
func (r *turnRun) ledgerUsage() *reducer.Usage {
	u := r.spent()
	if u == (Usage{}) {
		return nil
	}
	out := &reducer.Usage{Tokens: reducer.Tokens{Input: u.InputTokens, Output: u.OutputTokens, Thought: u.ThoughtTokens,
		CachedRead: u.CachedReadTokens, CachedWrite: u.CachedWriteTokens}, Model: reducer.ClipModel(u.Model)}
	if u.CostAmount != "" {
		c, err := reducer.ParseCost(u.CostAmount + strings.ToUpper(u.CostCurrency))
		if err != nil {
			r.log.Warn("the cost of a turn's run is not one the ledger takes; left out", "run", r.run, "why", err)
		} else {
			out.Cost = &c
		}
	}
	return out
}

// send sends cmd, a report of the run; usage the daemon refuses
// (invalid_argument: it went backwards, say) is dropped, with a warning,
// and the report sent again without it, so that what the agent said of
// its spend never stops its run's progress or end.
func (r *turnRun) send(cmd api.Command) (*api.DaemonStatus, error) {
	st, err := r.h.Handle(r.ctx, cmd)
	if err == nil || !errors.Is(err, reducer.ErrInvalidArgument) {
		return st, err
	}
	switch c := cmd.(type) {
	case api.CmdProjectRunProgress:
		if c.Usage == nil {
			return st, err
		}
		c.Usage, cmd = nil, c
	case api.CmdProjectHeartbeat:
		if c.Usage == nil {
			return st, err
		}
		c.Usage, cmd = nil, c
	case api.CmdProjectRunFinish:
		if c.Usage == nil {
			return st, err
		}
		c.Usage, cmd = nil, c
	default:
		return st, err
	}
	r.log.Warn("the ledger refused a turn's run's usage; sent without it", "run", r.run, "err", err)
	return r.h.Handle(r.ctx, cmd)
}

// endRun records a run's end with status, its progress text first when
// there is one to record.
func endRun(ctx context.Context, h api.Handler, project, run string, status reducer.RunStatus, text string) error {
	if text = oneLine(text); text != "" {
		if _, err := h.Handle(ctx, api.CmdProjectRunProgress{Project: project, Run: run, Progress: text}); err != nil {
			return err
		}
	}
	_, err := h.Handle(ctx, api.CmdProjectRunFinish{Project: project, Run: run, Status: status})
	return err
}

// oneLine is the last non-blank line of s as a progress text
// (reducer.ClipProgress: cut to reducer.MaxProgressLen characters, its
// control characters made spaces).
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	return reducer.ClipProgress(s)
}
