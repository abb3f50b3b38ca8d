package agents

import (
	"context"
	"sync"
	"time"

	"scv/control/api"
)

// maxPageUpdates and maxPageBytes bound one page of agent_updates, in updates and in bytes of
// their text and raw updates.
const (
	maxPageUpdates = 1000
	maxPageBytes   = 4 << 20
)

// updateLog is one agent's updates, the newest api.MaxAgentUpdates of
// them, numbered from 1, in a ring; readers wait on it for news.
type updateLog struct {
	mu      sync.Mutex
	ring    []api.AgentUpdate // update Seq s is at (s-1) % cap, while kept
	last    uint64            // the newest's Seq
	changed chan struct{}     // closed and replaced at an append a reader waits for
	waited  bool              // a reader waits on changed
}

func newUpdateLog() *updateLog { return &updateLog{changed: make(chan struct{})} }

// add appends u, numbered, and returns its Seq.
func (l *updateLog) add(u api.AgentUpdate) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	u.Seq = l.last
	if len(l.ring) < api.MaxAgentUpdates {
		l.ring = append(l.ring, u)
	} else {
		l.ring[(u.Seq-1)%api.MaxAgentUpdates] = u
	}
	if l.waited {
		close(l.changed)
		l.changed, l.waited = make(chan struct{}), false
	}
	return u.Seq
}

// at is the kept update of Seq s.
func (l *updateLog) at(s uint64) api.AgentUpdate { return l.ring[(s-1)%api.MaxAgentUpdates] }

// first is the Seq of the oldest kept update (last+1 when none is).
func (l *updateLog) first() uint64 { return l.last - uint64(len(l.ring)) + 1 }

// seq is the newest update's Seq.
func (l *updateLog) seq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// page is the updates after after, as many as fit a page, and how many
// after after are no longer kept; with wait, when there is none yet, it
// waits up to wait (or until ctx ends) for one.
func (l *updateLog) page(ctx context.Context, after uint64, wait time.Duration) (ups []api.AgentUpdate, next, dropped uint64) {
	var timer <-chan time.Time
	for {
		l.mu.Lock()
		if l.last > after || wait <= 0 {
			ups, next, dropped = l.pageLocked(after)
			l.mu.Unlock()
			return ups, next, dropped
		}
		changed := l.changed
		l.waited = true
		l.mu.Unlock()
		if timer == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-changed:
		case <-timer:
			wait = 0
		case <-ctx.Done():
			wait = 0
		}
	}
}

func (l *updateLog) pageLocked(after uint64) (ups []api.AgentUpdate, next, dropped uint64) {
	ups = []api.AgentUpdate{}
	next = after
	if after >= l.last {
		return ups, next, 0
	}
	if first := l.first(); after+1 < first {
		dropped = first - after - 1
		after = first - 1
	}
	size := 0
	for s := after + 1; s <= l.last; s++ {
		u := l.at(s)
		size += len(u.Text) + len(u.Update) + len(u.Title) + 128
		if len(ups) == maxPageUpdates || (len(ups) > 0 && size > maxPageBytes) {
			break
		}
		ups = append(ups, u)
		next = u.Seq
	}
	return ups, next, dropped
}
