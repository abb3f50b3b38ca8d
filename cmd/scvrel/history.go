package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"scv/reducer"
)

// clientLog is what one writing client of the crash check did, as the
// client saw it: the input of the history check.
type clientLog struct {
	// Task is the client's task.
	Task string
	// Run is the client's run, once it knows it: from the reply to its
	// project_run_start, or, when that reply was lost, from project_tasks.
	Run string
	// RunAcked is whether project_run_start was answered with Run.
	RunAcked bool
	// Sent is how many progress requests the client sent: their texts are
	// c<client>-1 to c<client>-<Sent>, one text per request, retries
	// included, so that a request applied twice shows.
	Sent uint32
	// Acked are the numbers n of the progress requests that were answered
	// with a result, in the order they were sent (increasing).
	Acked []uint32
	// Refused are those answered `unavailable` (the ledger's database was
	// away), in the order they were sent.
	Refused []uint32
}

// progressText is the text of client i's n-th progress request.
func progressText(i int, n uint32) string { return fmt.Sprintf("c%d-%d", i, n) }

// parseProgress reads a text progressText wrote.
func parseProgress(s string) (i int, n uint32, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(s, "c"), "-")
	if !found || !strings.HasPrefix(s, "c") {
		return 0, 0, false
	}
	ci, err1 := strconv.Atoi(a)
	cn, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil || ci < 0 || cn == 0 {
		return 0, 0, false
	}
	return ci, uint32(cn), true
}

// stored is one of a client's progress events in the database.
type stored struct {
	n   uint32
	seq uint64
}

// historyCheck compares what the clients were told with the events in the
// database. Feed it every event, archived and live, in sequence order with
// add, then call finish.
type historyCheck struct {
	// project was created, and every client's task added, with
	// acknowledged requests before the clients started.
	project string
	clients []clientLog
	byTask  map[string]int
	created bool       // project_created of project seen
	added   []bool     // each client's task_added seen
	runSeq  []uint64   // the sequence of each client's run_started, 0 if none
	stored  [][]stored // each client's progress events, in sequence order
	maxN    []uint32   // the highest n stored of each client so far
	// unordered marks the clients whose stored progress is not in the
	// order they sent it (a problem already reported).
	unordered []bool
	last      uint64 // the last sequence seen
	seen      bool
	p         *problems

	// Figures.
	Events int // every event
	Acked  int // acknowledged progress requests
	Lost   int // acknowledged progress requests not in the database
	Landed int // unacknowledged progress requests that are in the database
	Doubt  int // unacknowledged progress requests that are not
	// RefusedLanded counts the progress requests refused `unavailable`
	// that are in the database all the same (a commit whose outcome the
	// daemon could not learn).
	RefusedLanded int
}

func newHistoryCheck(project string, clients []clientLog, p *problems) *historyCheck {
	h := &historyCheck{
		project:   project,
		clients:   clients,
		added:     make([]bool, len(clients)),
		byTask:    map[string]int{},
		runSeq:    make([]uint64, len(clients)),
		stored:    make([][]stored, len(clients)),
		maxN:      make([]uint32, len(clients)),
		unordered: make([]bool, len(clients)),
		p:         p,
	}
	for i, c := range clients {
		h.byTask[c.Task] = i
	}
	return h
}

// add checks one event, given in sequence order.
func (h *historyCheck) add(seq uint64, projectID, kind, data string) {
	if h.seen && seq <= h.last {
		if seq == h.last {
			h.p.addf("sequence %d is stored twice (the live tail and the archive overlap, or a sequence was reused)", seq)
		} else {
			h.p.addf("sequence %d follows %d: sequences do not strictly increase", seq, h.last)
		}
	}
	h.seen, h.last = true, max(h.last, seq)
	h.Events++
	switch kind {
	case reducer.KindProjectCreated:
		if projectID == h.project {
			h.created = true
		}
	case reducer.KindTaskAdded:
		var b reducer.TaskAdded
		if err := json.Unmarshal([]byte(data), &b); err != nil {
			h.p.addf("sequence %d: task_added data %q: %v", seq, data, err)
			return
		}
		if i, ok := h.byTask[b.TaskID]; ok {
			h.added[i] = true
		}
	case reducer.KindRunStarted:
		var b reducer.RunStarted
		if err := json.Unmarshal([]byte(data), &b); err != nil {
			h.p.addf("sequence %d: run_started data %q: %v", seq, data, err)
			return
		}
		i, ok := h.byTask[b.TaskID]
		if !ok {
			return // not a client's task
		}
		c := h.clients[i]
		switch {
		case h.runSeq[i] != 0:
			h.p.addf("sequence %d: a second run %s of client %d's task %s (the first at %d)", seq, b.RunID, i, c.Task, h.runSeq[i])
		case c.Run != "" && b.RunID != c.Run:
			h.p.addf("sequence %d: run %s of client %d's task is not the run %s the client was told of", seq, b.RunID, i, c.Run)
		}
		if h.runSeq[i] == 0 {
			h.runSeq[i] = seq
		}
	case reducer.KindRunProgress:
		var b reducer.RunProgress
		if err := json.Unmarshal([]byte(data), &b); err != nil {
			h.p.addf("sequence %d: run_progress data %q: %v", seq, data, err)
			return
		}
		i, n, ok := parseProgress(b.Progress)
		if !ok || i >= len(h.clients) {
			h.p.addf("sequence %d: progress %q of run %s was never sent", seq, b.Progress, b.RunID)
			return
		}
		c := h.clients[i]
		switch {
		case b.RunID != c.Run:
			h.p.addf("sequence %d: progress %q is recorded for run %s; client %d sent it for run %s", seq, b.Progress, b.RunID, i, c.Run)
			return
		case n > c.Sent:
			h.p.addf("sequence %d: progress %q was never sent (client %d sent %d)", seq, b.Progress, i, c.Sent)
			return
		case h.runSeq[i] == 0:
			h.p.addf("sequence %d: progress %q of run %s comes before the run started", seq, b.Progress, b.RunID)
		}
		if s := h.stored[i]; len(s) > 0 {
			prev := s[len(s)-1]
			switch {
			case n == prev.n:
				h.p.addf("sequence %d: progress %q is stored twice (also at %d): one request applied twice", seq, b.Progress, prev.seq)
			case n < h.maxN[i]:
				h.p.addf("sequence %d: progress %q comes after %q (at %d), which client %d sent later, or is stored twice",
					seq, b.Progress, progressText(i, prev.n), prev.seq, i)
				h.unordered[i] = true
			}
		}
		h.maxN[i] = max(h.maxN[i], n)
		h.stored[i] = append(h.stored[i], stored{n: n, seq: seq})
	}
}

// finish checks that every acknowledged request is in the database.
func (h *historyCheck) finish() {
	if !h.created {
		h.p.addf("acknowledged project_create of %s is not in the ledger", h.project)
	}
	for i, c := range h.clients {
		if !h.added[i] {
			h.p.addf("client %d: acknowledged project_task_add of task %s is not in the ledger", i, c.Task)
		}
		if c.RunAcked && h.runSeq[i] == 0 {
			h.p.addf("client %d: acknowledged project_run_start (run %s) is not in the ledger", i, c.Run)
		}
		// Both lists in increasing n, each n once: the acknowledged
		// ones are as sent, the stored ones as add found them unless it
		// reported otherwise.
		s := h.stored[i]
		if h.unordered[i] {
			s = slices.Clone(s)
			slices.SortStableFunc(s, func(a, b stored) int { return cmp.Compare(a.n, b.n) })
		}
		s = slices.CompactFunc(s, func(a, b stored) bool { return a.n == b.n })
		j, lost := 0, 0
		for _, n := range c.Acked {
			for j < len(s) && s[j].n < n {
				j++
			}
			if j < len(s) && s[j].n == n {
				continue
			}
			lost++
			h.p.addf("client %d: acknowledged progress %q of run %s is not in the ledger", i, progressText(i, n), c.Run)
		}
		j = 0
		for _, n := range c.Refused {
			for j < len(s) && s[j].n < n {
				j++
			}
			if j < len(s) && s[j].n == n {
				h.RefusedLanded++
			}
		}
		landed := len(s) - (len(c.Acked) - lost)
		h.Acked += len(c.Acked)
		h.Lost += lost
		h.Landed += landed
		h.Doubt += int(c.Sent) - len(c.Acked) - landed
	}
}
