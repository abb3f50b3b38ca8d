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
// them, numbered from 1; readers wait on it for news.
type updateLog struct {
	mu      sync.Mutex
	ups     []api.AgentUpdate // oldest first
	last    uint64            // the newest's Seq
	changed chan struct{}     // closed and replaced at each append
}

func newUpdateLog() *updateLog { return &updateLog{changed: make(chan struct{})} }

// add appends u, numbered, and returns its Seq.
func (l *updateLog) add(u api.AgentUpdate) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	u.Seq = l.last
	if len(l.ups) == api.MaxAgentUpdates {
		l.ups = append(l.ups[:0], l.ups[1:]...)
	}
	l.ups = append(l.ups, u)
	close(l.changed)
	l.changed = make(chan struct{})
	return u.Seq
}

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
	if len(l.ups) == 0 || after >= l.last {
		return ups, next, 0
	}
	first := l.ups[0].Seq
	if after+1 < first {
		dropped = first - after - 1
		after = first - 1
	}
	size := 0
	for _, u := range l.ups[after+1-first:] {
		size += len(u.Text) + len(u.Update) + len(u.Title) + 128
		if len(ups) == maxPageUpdates || (len(ups) > 0 && size > maxPageBytes) {
			break
		}
		ups = append(ups, u)
		next = u.Seq
	}
	return ups, next, dropped
}
