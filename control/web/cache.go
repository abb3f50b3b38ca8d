package web

import (
	"context"
	"slices"
	"sync"

	"scv/control/api"
	"scv/control/view"
	"scv/ledger"
	"scv/reducer"
)

// MaxEvents is how many of a project's newest events the UI keeps in
// memory for its drawings (beats, marks) and its events table.
const MaxEvents = 100_000

// maxCached is how many projects' events the UI keeps.
const maxCached = 32

// eventCache keeps the events of the projects the UI showed, read once
// and then only what was appended since, so that a page of a project with
// a long history does not read it all again for every refresh.
type eventCache struct {
	mu       sync.Mutex
	projects map[string]*projectEvents
}

type projectEvents struct {
	mu        sync.Mutex
	rows      []ledger.Row
	last      uint64 // the project's head when last read
	compacted uint64 // the page's CompactedBefore when first read
	cut       bool   // older events were dropped past MaxEvents
}

func newEventCache() *eventCache { return &eventCache{projects: map[string]*projectEvents{}} }

// get returns p's live events (at most MaxEvents, the newest), in order,
// reading from l what it lacks, and the sequence compaction folded up to
// (0: none).
func (c *eventCache) get(ctx context.Context, l Ledger, p *reducer.Project) ([]ledger.Row, uint64, bool, error) {
	c.mu.Lock()
	pe, ok := c.projects[p.ID]
	if !ok {
		if len(c.projects) >= maxCached {
			for id := range c.projects {
				delete(c.projects, id)
				break
			}
		}
		pe = &projectEvents{}
		c.projects[p.ID] = pe
	}
	c.mu.Unlock()

	pe.mu.Lock()
	defer pe.mu.Unlock()
	if p.LastSequence < pe.last {
		*pe = projectEvents{} // a history this cache did not see grow: read it anew
	}
	if p.LastSequence > pe.last || pe.last == 0 {
		first := pe.last == 0
		rows, _, err := view.ReadEvents(ctx, l, p.ID, pe.last, 0)
		if err != nil {
			return nil, 0, false, err
		}
		if first && len(rows) > 0 {
			page, err := l.EventsPage(ctx, p.ID, 0, 1)
			if err != nil {
				return nil, 0, false, err
			}
			pe.compacted = page.CompactedBefore
		}
		pe.rows = append(pe.rows, rows...)
		if n := len(pe.rows) - MaxEvents; n > 0 {
			pe.rows = slices.Clone(pe.rows[n:])
			pe.cut = true
		}
		pe.last = p.LastSequence
		if len(pe.rows) > 0 {
			pe.last = max(pe.last, pe.rows[len(pe.rows)-1].Sequence)
		}
	}
	// The rows are only appended to: a caller's slice never changes.
	return pe.rows[:len(pe.rows):len(pe.rows)], pe.compacted, pe.cut, nil
}

// questionSeq follows the newest record of the question log, reading only
// what changed since it last looked.
type questionSeq struct {
	mu  sync.Mutex
	seq uint64
}

// latest is the sequence of the newest question record.
func (q *questionSeq) latest(ctx context.Context, qs Questions) (uint64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	after := q.seq
	list, err := qs.List(ctx, api.CmdConfirmList{After: &after})
	if err != nil {
		return 0, err
	}
	for _, x := range list {
		q.seq = max(q.seq, x.Seq)
	}
	return q.seq, nil
}
