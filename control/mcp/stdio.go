package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/control/api"
)

const (
	// maxMessage bounds one MCP message on standard input.
	maxMessage = 1 << 20
	// maxID bounds the ID of a request that is answered too_large.
	maxID = 64
)

// Run serves one session with opts on in and out, MCP's transport of
// standard input and output, its tools reaching the daemon through h,
// until ctx ends or in does; at the end of in, every request read is
// answered before Run returns. log takes what the transport says of
// itself (a message too large).
func Run(ctx context.Context, h api.Handler, opts Options, in io.Reader, out, log io.Writer) error {
	return NewServer(h, opts).Run(ctx, stdio(in, out, log))
}

// stdio is the MCP transport of in and out. A message on in, one line as
// MCP's stdio transport has it, is at most maxMessage bytes (its newline
// not counted): a longer line is read to its end without being kept, and
// a request is answered here with a JSON-RPC error (reason too_large),
// said on log too, so that the session lives on. A message spread over
// several lines is bounded by the SDK's frame limit only, twice as much,
// past which the session ends.
//
// The SDK ends a session at the end of its input, and leaves unanswered
// the requests it was still answering: so the end of in is handed on
// only once every request read before it is answered (inFlight).
func stdio(in io.Reader, out, log io.Writer) sdk.Transport {
	w := &lockedWriter{w: out}
	calls := newInFlight()
	r := &lineLimit{r: bufio.NewReaderSize(in, 64<<10), max: maxMessage, w: w, log: log, calls: calls}
	r.c, _ = in.(io.Closer)
	return &sdk.IOTransport{Reader: r, Writer: &answers{w: w, calls: calls}, MaxLineLength: 2 * maxMessage}
}

// inFlight counts the requests handed on to the SDK that it has not
// answered yet.
type inFlight struct {
	mu     sync.Mutex
	cond   *sync.Cond
	n      int
	closed bool
}

func newInFlight() *inFlight {
	f := &inFlight{}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *inFlight) add(n int) {
	if n == 0 {
		return
	}
	f.mu.Lock()
	f.n += n
	f.mu.Unlock()
	f.cond.Broadcast()
}

// close ends every wait: the transport is closed.
func (f *inFlight) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cond.Broadcast()
}

// drained waits until every request handed on is answered, or the
// transport is closed.
func (f *inFlight) drained() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n > 0 && !f.closed {
		f.cond.Wait()
	}
}

// envelope is what tells JSON-RPC messages apart: a request has a method
// and an ID, a response an ID and no method.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
}

// count is how many of the messages in b, one message or a batch of
// them, are requests (calls) or responses (!calls). It is counted on
// every message in and out: a message alone, the usual, is scanned once
// by msgScanner (a response is as long as the tool's result, which the
// decoder below took several times as long to read); a batch, a message
// not valid JSON (on the way in: the SDK's own are) and one whose keys
// have escapes are decoded.
func count(b []byte, calls bool) int {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' && (!calls || json.Valid(b)) {
		var s msgScanner
		s.feed(b)
		if !s.escKey {
			id := bytes.TrimSpace(s.id)
			if s.gotID && len(id) > 0 && !bytes.Equal(id, []byte("null")) && s.method == calls {
				return 1
			}
			return 0
		}
	}
	return countDecoded(b, calls)
}

// countDecoded is count, decoding b.
func countDecoded(b []byte, calls bool) int {
	var msgs []envelope
	if len(b) > 0 && b[0] == '[' {
		if json.Unmarshal(b, &msgs) != nil {
			return 0
		}
	} else {
		var e envelope
		if json.Unmarshal(b, &e) != nil {
			return 0
		}
		msgs = []envelope{e}
	}
	n := 0
	for _, e := range msgs {
		if len(e.ID) > 0 && !bytes.Equal(e.ID, []byte("null")) && (len(e.Method) > 0) == calls {
			n++
		}
	}
	return n
}

// answers is the SDK's writer: each Write is one message, or a batch, and
// the responses among them are counted off calls.
type answers struct {
	w     io.Writer
	calls *inFlight
}

func (a *answers) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	a.calls.add(-count(p, false))
	return n, err
}

func (a *answers) Close() error { return nil }

// lockedWriter is w, written by the SDK and by lineLimit's answers, a
// message at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lineLimit hands on r's lines of at most max bytes as they are, and
// answers the longer ones itself.
type lineLimit struct {
	r     *bufio.Reader
	c     io.Closer // r's source, if it closes
	max   int
	w     io.Writer // where an answer goes
	log   io.Writer
	calls *inFlight // the requests handed on
	line  []byte    // what is left to hand on of the current line
}

func (l *lineLimit) Read(p []byte) (int, error) {
	for len(l.line) == 0 {
		line, err := l.next()
		if err == io.EOF {
			l.calls.drained()
		}
		if err != nil {
			return 0, err
		}
		l.calls.add(count(line, true))
		l.line = line
	}
	n := copy(p, l.line)
	l.line = l.line[n:]
	return n, nil
}

func (l *lineLimit) Close() error {
	l.calls.close()
	if l.c == nil {
		return nil
	}
	return l.c.Close()
}

// next is the next line of at most max bytes, with its newline (the last
// line may have none); a longer one is answered and passed over.
func (l *lineLimit) next() ([]byte, error) {
	var (
		line []byte
		n    int         // the line's bytes so far, newline excluded
		over *msgScanner // once the line is too long: what is read of it
	)
	for {
		chunk, err := l.r.ReadSlice('\n')
		if err == nil && line == nil && over == nil && len(chunk)-1 <= l.max {
			return chunk, nil // whole in the buffer, and read only once handed on
		}
		n += len(bytes.TrimSuffix(chunk, []byte("\n")))
		switch {
		case over != nil:
			over.feed(chunk)
		case n > l.max:
			over = &msgScanner{}
			over.feed(line)
			over.feed(chunk)
			line = nil
		default:
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if over != nil {
			l.tooLarge(n, over)
			line, n, over = nil, 0, nil
			if err == nil {
				continue
			}
		}
		if len(line) > 0 {
			return line, nil // the error, if any, comes at the next call
		}
		return nil, err
	}
}

// tooLarge answers a line of n bytes, more than max, with a JSON-RPC
// error if it is a request, and says so on log.
func (l *lineLimit) tooLarge(n int, m *msgScanner) {
	msg := fmt.Sprintf("message too large: %d bytes on one line of standard input, more than the %d allowed", n, l.max)
	id, ok := m.requestID()
	if !ok {
		fmt.Fprintf(l.log, "scv mcp: %s: passed over (no request ID found, so no answer)\n", msg)
		return
	}
	fmt.Fprintf(l.log, "scv mcp: %s: answered with an error\n", msg)
	type rpcError struct {
		Code    int           `json:"code"`
		Message string        `json:"message"`
		Data    api.ErrorData `json:"data"`
	}
	b, err := json.Marshal(struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{api.CodeInvalidRequest, msg + " [" + api.ReasonTooLarge + "]", api.ErrorData{Reason: api.ReasonTooLarge}}})
	if err == nil {
		l.w.Write(append(b, '\n'))
	}
}

// msgScanner reads a JSON-RPC message a piece at a time, keeping only
// what its answer needs: whether it has a method, and its ID.
type msgScanner struct {
	depth      int
	inStr, esc bool
	wantKey    bool   // at depth 1, the next string is a key
	inKey      bool   // reading a key of depth 1
	key        []byte // that key, up to 8 bytes
	escKey     bool   // a key of depth 1 had an escape: keys are not known
	lastKey    string
	method     bool // the message has a method: a request or a notification
	inID       bool // reading the ID's value
	gotID      bool
	id         []byte // the ID's value, up to 65 bytes
}

func (s *msgScanner) feed(p []byte) {
	for _, b := range p {
		if s.inID {
			if !s.inStr && s.depth == 1 && (b == ',' || b == '}') {
				s.inID = false
			} else if len(s.id) <= maxID {
				s.id = append(s.id, b)
			}
		}
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case b == '\\':
				s.esc = true
				s.escKey = s.escKey || s.inKey
			case b == '"':
				s.inStr = false
				if s.inKey {
					s.inKey, s.lastKey = false, string(s.key)
					s.method = s.method || s.lastKey == "method"
				}
			case s.inKey && len(s.key) < 8:
				s.key = append(s.key, b)
			}
			continue
		}
		switch b {
		case '"':
			s.inStr = true
			if s.depth == 1 && s.wantKey {
				s.wantKey, s.inKey, s.key = false, true, s.key[:0]
			}
		case '{', '[':
			s.depth++
			s.wantKey = s.depth == 1 && b == '{'
		case '}', ']':
			s.depth--
		case ',':
			s.wantKey = s.depth == 1
		case ':':
			if s.depth == 1 && s.lastKey == "id" && !s.gotID {
				s.inID, s.gotID = true, true
			}
		}
	}
}

// requestID is the message's ID, if it is a request with a string or a
// number for an ID.
func (s *msgScanner) requestID() (json.RawMessage, bool) {
	id := bytes.TrimSpace(s.id)
	if !s.method || !s.gotID || len(id) == 0 || len(id) > maxID || !json.Valid(id) {
		return nil, false
	}
	if c := id[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	return id, true
}
