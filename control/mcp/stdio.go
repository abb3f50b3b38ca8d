package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// stdio is the MCP transport of in and out: one JSON-RPC message a line,
// as MCP's stdio transport has it, each line decoded once
// (jsonrpc.DecodeMessage) and each answer written as one line.
//
// A line is at most maxMessage bytes (its newline not counted): a longer
// line is read to its end without being kept, and a request is answered
// here with a JSON-RPC error (reason too_large), said on log too, so that
// the session lives on. A line that is not a JSON-RPC message (a message
// spread over several lines is not one either) is answered with a
// JSON-RPC error (parse_error, or invalid_request: a batch, which MCP
// dropped in 2025-06-18), said on log, and the session lives on too.
//
// The SDK ends a session at the end of its input, and leaves unanswered
// the requests it was still answering: so the end of in is handed on
// only once every request read before it is answered (inFlight).
func stdio(in io.Reader, out, log io.Writer) sdk.Transport {
	return &lineTransport{in: in, out: out, log: log}
}

// lineTransport is stdio's transport, for one session.
type lineTransport struct {
	in       io.Reader
	out, log io.Writer
}

func (t *lineTransport) Connect(context.Context) (sdk.Connection, error) {
	w := &lockedWriter{w: t.out}
	c := &lineConn{
		r:        &lineLimit{r: bufio.NewReaderSize(t.in, 64<<10), max: maxMessage, w: w, log: t.log},
		w:        w,
		calls:    newInFlight(),
		incoming: make(chan read),
		closed:   make(chan struct{}),
	}
	c.src, _ = t.in.(io.Closer)
	go c.readLines()
	return c, nil
}

// lineConn is a session's connection on lineTransport. Its lines are read
// by a goroutine of their own (readLines), so that Close ends a Read
// even when standard input's read does not end when it is closed.
type lineConn struct {
	r        *lineLimit
	src      io.Closer // r's source, if it closes
	w        *lockedWriter
	calls    *inFlight // the requests handed on, not answered yet
	incoming chan read
	closed   chan struct{}
	once     sync.Once
}

// read is a message read, or the error that ends the reading.
type read struct {
	msg jsonrpc.Message
	err error
}

// readLines hands on each message of c's lines to Read, until the end of
// the input (once every request handed on is answered) or an error.
func (c *lineConn) readLines() {
	for {
		line, err := c.r.next()
		var msg jsonrpc.Message
		switch {
		case err == io.EOF:
			c.calls.drained()
		case err == nil:
			if msg = c.r.decode(line); msg == nil {
				continue
			}
			if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
				c.calls.add(1)
			}
		}
		select {
		case c.incoming <- read{msg, err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-c.incoming:
		return r.msg, r.err
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write writes msg as one line; an answer is counted off c.calls, written
// or not (it will not be written again).
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		defer c.calls.add(-1)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode a JSON-RPC message: %w", err)
	}
	_, err = c.w.Write(append(b, '\n'))
	return err
}

func (c *lineConn) Close() error {
	var err error
	c.once.Do(func() {
		c.calls.close()
		close(c.closed)
		if c.src != nil {
			err = c.src.Close()
		}
	})
	return err
}

func (c *lineConn) SessionID() string { return "" }

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

// lockedWriter is w, written by the session's answers and by lineLimit's,
// a message at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lineLimit reads r's lines of at most max bytes, and answers the longer
// ones itself, and those that are not a JSON-RPC message.
type lineLimit struct {
	r   *bufio.Reader
	max int
	w   io.Writer // where an answer goes
	log io.Writer
}

// decode is the message of line, or nil if there is none: a blank line,
// or one answered here with a JSON-RPC error (a batch, or a line that is
// not a JSON-RPC message), which is said on log too.
func (l *lineLimit) decode(line []byte) jsonrpc.Message {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if line[0] == '[' {
		l.refuse(nil, api.CodeInvalidRequest, api.ReasonInvalidRequest,
			"a JSON-RPC batch: MCP has none since 2025-06-18; send one message a line")
		return nil
	}
	const notOne = "not a JSON-RPC message on one line of standard input"
	// DecodeMessage reads the first value and leaves what follows it.
	if !json.Valid(line) {
		l.refuse(nil, api.CodeParseError, api.ReasonParseError, notOne+": not JSON")
		return nil
	}
	// A copy: line is the reader's buffer, which its next line overwrites
	// while the message may still be read.
	msg, err := jsonrpc.DecodeMessage(bytes.Clone(line))
	if err != nil {
		l.refuse(nil, api.CodeInvalidRequest, api.ReasonInvalidRequest, notOne+": "+err.Error())
		return nil
	}
	return msg
}

// refuse answers a message with a JSON-RPC error of code and reason, with
// id for its ID (nil: null, the ID of a message whose own is not known),
// and says so on log.
func (l *lineLimit) refuse(id json.RawMessage, code int, reason, msg string) {
	fmt.Fprintf(l.log, "scv mcp: %s: answered with an error\n", msg)
	if id == nil {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int           `json:"code"`
		Message string        `json:"message"`
		Data    api.ErrorData `json:"data"`
	}
	b, err := json.Marshal(struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, msg + " [" + reason + "]", api.ErrorData{Reason: reason}}})
	if err == nil {
		l.w.Write(append(b, '\n'))
	}
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
	l.refuse(id, api.CodeInvalidRequest, api.ReasonTooLarge, msg)
}

// msgScanner reads a JSON-RPC message a piece at a time, keeping only
// what its answer needs: whether it has a method, and its ID.
type msgScanner struct {
	depth      int
	inStr, esc bool
	wantKey    bool   // at depth 1, the next string is a key
	inKey      bool   // reading a key of depth 1
	key        []byte // that key, up to 8 bytes
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
