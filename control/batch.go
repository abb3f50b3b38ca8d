package control

import (
	"bufio"
	"context"
	"encoding/json"
	"sync"
	"unicode/utf8"

	"scv/control/api"
	"scv/ledger"
	"scv/reducer"
)

// The limits of a batch (JSON-RPC 2.0 section 6): a line that is a JSON
// array of requests. Past either, the batch is refused whole, too_large,
// and nothing of it runs.
const (
	// MaxBatch is the most requests (elements) one batch carries.
	MaxBatch = 1000
	// MaxBatchLine is the longest batch line accepted, newline excluded.
	// A line whose first byte (after white space) is not '[' is held to
	// MaxLine.
	MaxBatchLine = 4 << 20
)

// isBatch reports whether line, not blank, is a batch: its first byte
// after white space opens an array.
func isBatch(line []byte) bool {
	i := skipSpace(line, 0)
	return i < len(line) && line[i] == '['
}

// lineLimit is the longest line the one that begins in r's buffer may be:
// MaxBatchLine for a batch, MaxLine for anything else. Only what is
// buffered is looked at: a line that begins with more white space than
// that is held to MaxLine.
func lineLimit(r *bufio.Reader) int {
	b, _ := r.Peek(r.Buffered())
	if isBatch(b) {
		return MaxBatchLine
	}
	return MaxLine
}

// batchError is a batch's one reply when it is refused whole: not a
// valid JSON array, empty, or over MaxBatch.
func (s *Server) batchError(e *api.Error) []*reply {
	s.metrics().Request("", e.Data.Reason)
	return []*reply{errorReply(nil, e)}
}

// handleBatch answers a batch line (isBatch): the replies, in the order
// of the requests, each request with an id having one and notifications
// none. When the batch is refused whole (parse error, empty, too many
// requests) the one reply is not an array's: whole reports false.
//
// Each element is a request of its own: one that is not a request object
// (a nested array included) gets its own error, with a null id, and the
// others still run. The writes among the requests (the commands the
// ledger's writer executes) share one write transaction, each decided on
// its own in the order of the batch (Service.handleAll); the other
// requests are answered after them, in order, so that a read in a batch
// sees the batch's writes.
func (s *Server) handleBatch(ctx context.Context, line []byte) (replies []*reply, whole bool) {
	if !utf8.Valid(line) {
		return s.batchError(api.NewError(api.CodeParseError, api.ReasonParseError, "batch is not valid UTF-8")), false
	}
	if !validJSON(line) {
		why := "trailing characters after the array"
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			why = err.Error()
		}
		return s.batchError(api.NewError(api.CodeParseError, api.ReasonParseError, "batch is not JSON: %s", why)), false
	}
	elems := arrayElements(line[skipSpace(line, 0):], MaxBatch)
	switch {
	case len(elems) == 0:
		return s.batchError(api.NewError(api.CodeInvalidRequest, api.ReasonInvalidRequest, "empty batch: a batch holds at least one request")), false
	case len(elems) > MaxBatch:
		return s.batchError(api.NewError(api.CodeInvalidRequest, api.ReasonTooLarge, "batch of more than %d requests", MaxBatch)), false
	}
	type element struct {
		req *parsedRequest
		id  json.RawMessage
		e   *api.Error
	}
	parsed := make([]element, len(elems))
	var cmds []api.Command
	var at []int // the element of each of cmds
	for i, raw := range elems {
		el := &parsed[i]
		if isBatch(raw) {
			el.e = api.NewError(api.CodeInvalidRequest, api.ReasonInvalidRequest, "a batch's element must be a request object, not an array")
		} else {
			el.req, el.id, el.e = parseEnvelope(raw, false) // the line is valid UTF-8 and JSON
		}
		if el.e == nil {
			cmds, at = append(cmds, el.req.cmd), append(at, i)
		}
	}
	replies = make([]*reply, len(elems))
	ran := make([]bool, len(elems))
	s.Service.handleAll(ctx, cmds, func(j int, st *api.DaemonStatus, err error) {
		i := at[j]
		replies[i], ran[i] = s.answer(parsed[i].req.cmd, parsed[i].id, st, err), true
	})
	for i := range parsed {
		if !ran[i] {
			el := &parsed[i]
			replies[i] = s.handleRequest(ctx, el.req, el.id, el.e)
		}
	}
	return replies, true
}

// appendBatchReply appends the reply line of a batch that handleBatch
// answered with replies (whole: as an array) to b; it appends nothing
// when no reply is left (notifications only).
func appendBatchReply(b []byte, replies []*reply, whole bool) []byte {
	if !whole {
		return appendReply(b, replies[0])
	}
	n := 0
	for _, r := range replies {
		if r == nil {
			continue
		}
		if n++; n == 1 {
			b = append(b, '[')
		} else {
			b = append(b, ',')
		}
		b = appendResponse(b, r)
	}
	if n == 0 {
		return b
	}
	return append(b, ']', '\n')
}

// handleAll runs the writes among cmds (the commands the ledger's writer
// executes) in one write transaction, each decided on its own in the
// order of cmds, and calls done with the index and the answer of each,
// counted as Handle counts it, once all are answered. The other commands
// are not run: done is not called for them.
func (s *Service) handleAll(ctx context.Context, cmds []api.Command, done func(i int, st *api.DaemonStatus, err error)) {
	var (
		ws   []write
		rcs  []reducer.Command
		at   []int
		wg   sync.WaitGroup
		sts  = make([]*api.DaemonStatus, len(cmds))
		errs = make([]error, len(cmds))
		ok   = make([]bool, len(cmds))
	)
	for i, cmd := range cmds {
		w, isWrite, err := s.write(ctx, cmd)
		switch {
		case !isWrite:
			continue
		case err != nil:
			s.count(cmd, err)
			errs[i] = err
		default:
			ws, rcs, at = append(ws, w), append(rcs, w.cmd), append(at, i)
		}
		ok[i] = true
	}
	wg.Add(len(rcs))
	s.Ledger.SubmitAll(ctx, rcs, func(j int, res ledger.Result, err error) {
		i := at[j]
		sts[i], errs[i] = ws[j].answer(s, res, err)
		s.count(cmds[i], errs[i])
		wg.Done()
	})
	wg.Wait()
	for i := range cmds {
		if ok[i] {
			done(i, sts[i], errs[i])
		}
	}
}
