package agents

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"scv/reducer"
)

// turnRun records one turn as a run of its task: progress from the
// agent's updates and heartbeats while it is silent, each sent with the
// coalescing interval so that the reducer decides what is journaled (as
// it does for heartbeats), and the run's end. An update only notes that
// something changed; the text is made from the agent's state (text) when
// the run's own goroutine looks, and the ledger is written there, so that
// an agent's stream never waits for a commit.
type turnRun struct {
	l       Ledger
	log     *slog.Logger
	project string
	run     string
	text    func() string // the turn's progress text now
	every   time.Duration // the reducer's coalescing interval
	beat    time.Duration // how often the goroutine looks
	now     func() time.Time

	journaled string // touched by the goroutine, then by finish
	kick      chan struct{}
	done      chan struct{}
	finished  chan struct{}
}

func (m *Manager) newTurnRun(project, run string, text func() string) *turnRun {
	r := &turnRun{l: m.Ledger, log: m.logger(), project: project, run: run, text: text,
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

// loop sends the newest progress text when it changed (at most once per
// interval), and at each look with nothing new a heartbeat, which keeps a
// silent turn's run from going stale: the reducer coalesces both.
func (r *turnRun) loop() {
	defer close(r.finished)
	t := time.NewTicker(r.beat)
	defer t.Stop()
	var last time.Time // when something was last journaled
	for {
		tick := false
		select {
		case <-r.done:
			return
		case <-r.kick:
			if r.every > 0 && r.now().Sub(last) < r.every {
				continue // the next look sends it
			}
		case <-t.C:
			tick = true
		}
		text := oneLine(r.text())
		var cmd reducer.Command
		switch {
		case text != "" && text != r.journaled:
			cmd = reducer.ProgressRun{Project: r.project, RunID: r.run, Progress: text, Every: r.every.Milliseconds()}
		case tick:
			cmd, text = reducer.RecordHeartbeat{Project: r.project, RunID: r.run, Every: r.every.Milliseconds()}, ""
		default:
			continue
		}
		res, err := r.l.Execute(context.Background(), cmd)
		if err != nil {
			if !errors.Is(err, reducer.ErrRunNotRunning) {
				r.log.Warn("record a turn's progress", "run", r.run, "err", err)
			}
			continue
		}
		if len(res.Events) > 0 {
			last = r.now()
			if text != "" {
				r.journaled = text
			}
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
	return endRun(r.l, r.project, r.run, status, text)
}

// endRun records a run's end with status, its progress text first
// (journaled whatever the interval) when there is one to record.
func endRun(l Ledger, project, run string, status reducer.RunStatus, text string) error {
	ctx := context.Background()
	if text = oneLine(text); text != "" {
		if _, err := l.Execute(ctx, reducer.ProgressRun{Project: project, RunID: run, Progress: text}); err != nil {
			return err
		}
	}
	_, err := l.Execute(ctx, reducer.FinishRun{Project: project, RunID: run, Status: status})
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
