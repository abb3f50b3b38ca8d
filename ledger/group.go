package ledger

import (
	"context"
	"sync"

	"scv/reducer"
)

// SubmitAll is Submit for several commands that share one write
// transaction, one group commit: they are queued at once, and the writer
// takes them whole into the same batch, in their order. Each is decided
// on its own, as if submitted alone: one refused refuses nothing else, and
// a command sees the state the ones before it left. done is called once
// per command, with its index in cmds, as Submit calls it, in the order
// of cmds and from one goroutine (the group's). Only a failed
// transaction (a storage error) fails them all, as it fails every command
// of a batch.
func (l *Ledger) SubmitAll(ctx context.Context, cmds []reducer.Command, done func(i int, res Result, err error)) {
	if len(cmds) == 0 {
		return
	}
	reqs := make([]*request, len(cmds))
	for i, cmd := range cmds {
		reqs[i] = &request{cmd: cmd, rest: len(cmds) - 1 - i, done: func(res Result, err error) { done(i, res, err) }}
	}
	lead, err := l.queueUp(ctx, reqs...)
	if err != nil {
		for i := range reqs {
			done(i, Result{}, err)
		}
		return
	}
	if lead {
		l.lead()
	}
}

// ExecuteAll is Execute for several commands that share one write
// transaction (see SubmitAll): it returns once every one is answered, with
// each one's result and error, in the order of cmds.
func (l *Ledger) ExecuteAll(ctx context.Context, cmds []reducer.Command) ([]Result, []error) {
	res, errs := make([]Result, len(cmds)), make([]error, len(cmds))
	var wg sync.WaitGroup
	wg.Add(len(cmds))
	l.SubmitAll(ctx, cmds, func(i int, r Result, err error) {
		res[i], errs[i] = r, err
		wg.Done()
	})
	wg.Wait()
	return res, errs
}

// cut is how many requests at the head of queue the next transaction
// takes: up to MaxBatch, but a maintenance op alone, and a group
// (SubmitAll) never split, so it is cut before a group that would not fit
// (or, heading the queue, taken whole).
func cut(queue []*request) int {
	n := min(len(queue), MaxBatch)
	for i := 0; i < n; {
		req := queue[i]
		if req.op != nil {
			return max(i, 1)
		}
		end := i + 1 + req.rest
		if end > n {
			if i > 0 {
				return i
			}
			return end
		}
		i = end
	}
	return n
}
