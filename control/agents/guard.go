package agents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
)

// DefaultMaxMessage is the longest line an agent may write: one ACP
// message, newline excluded.
const DefaultMaxMessage = 4 << 20

// guard stands between an agent's standard output and the ACP connection,
// which reads it: it passes on one line at a time, each of at most max
// bytes and a JSON object (JSON-RPC's messages are; blank lines are
// skipped). At the first line that is not, it gives the reason to onBad
// and ends the stream with it, so that the connection closes: the SDK
// would skip the line and read on.
//
// The agent's session/update notifications it hands to onUpdate (their
// `sessionId` and `update`, as the agent wrote them) there and then, instead of passing
// them on: the SDK queues at most 1,024 notifications and closes the
// connection when an agent outruns its handler, where here a fast agent's
// writes wait on the pipe until the daemon has taken each update; and an
// update is taken before any later message, a turn's answer included, is
// read. An update onUpdate refuses is a violation.
type guard struct {
	r        *bufio.Reader
	max      int
	onBad    func(error)
	onUpdate func(session string, update json.RawMessage) error

	line []byte // what is left of the current line, newline included
	mu   sync.Mutex
	err  error // the first violation, kept
	// open is closed once the connection that reads is set up: nothing
	// is read before (the SDK's connection reads at once, and its
	// settings may not change while it does).
	open chan struct{}
}

func newGuard(r io.Reader, max int, onBad func(error), onUpdate func(string, json.RawMessage) error) *guard {
	if max <= 0 {
		max = DefaultMaxMessage
	}
	return &guard{r: bufio.NewReaderSize(r, 64<<10), max: max, onBad: onBad, onUpdate: onUpdate, open: make(chan struct{})}
}

// start lets the connection read.
func (g *guard) start() { close(g.open) }

// Read passes on the current line, reading and checking the next one when
// it is used up.
func (g *guard) Read(p []byte) (int, error) {
	<-g.open
	for len(g.line) == 0 {
		line, err := g.next()
		if err != nil {
			return 0, err
		}
		g.line = line
	}
	n := copy(p, g.line)
	g.line = g.line[n:]
	return n, nil
}

// update takes body if it is a session/update notification (method
// session/update, no id), reporting whether it was.
func (g *guard) update(body []byte) (bool, error) {
	if !bytes.Contains(body, []byte(`"session/update"`)) {
		return false, nil // the cheap answer for every other message
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.ID != nil || m.Method != string(acp.ClientMethodSessionUpdate) {
		return false, nil // not one, or not JSON: the checks of any other line
	}
	if len(m.Params.Update) == 0 {
		return true, errors.New("wrote a session/update without an update")
	}
	if err := g.onUpdate(m.Params.SessionID, m.Params.Update); err != nil {
		return true, fmt.Errorf("wrote a session/update that is not one: %v", err)
	}
	return true, nil
}

// next reads one line and checks it.
func (g *guard) next() ([]byte, error) {
	var line []byte
	for {
		chunk, err := g.r.ReadSlice('\n')
		if len(line)+len(chunk) > g.max+1 { // +1: the newline
			return nil, g.bad(fmt.Errorf("wrote a message longer than the %d-byte limit", g.max))
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0:
			return nil, g.bad(fmt.Errorf("ended its output in the middle of a message: %s", quote(line)))
		default:
			return nil, err
		}
		body := bytes.TrimSpace(line)
		if len(body) == 0 {
			line = line[:0]
			continue
		}
		taken, err := g.update(body)
		switch {
		case err != nil:
			return nil, g.bad(err)
		case taken:
			line = nil // its update is kept: a new line for the next
			continue
		}
		if body[0] != '{' || !json.Valid(body) {
			return nil, g.bad(fmt.Errorf("wrote a line that is not a JSON-RPC message: %s", quote(body)))
		}
		return line, nil
	}
}

// bad records the first violation, tells onBad, and returns it.
func (g *guard) bad(err error) error {
	g.mu.Lock()
	first := g.err == nil
	if first {
		g.err = err
	}
	g.mu.Unlock()
	if first && g.onBad != nil {
		g.onBad(err)
	}
	return err
}

// violation is the first line refused, or nil.
func (g *guard) violation() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// quote is b as a quoted string of at most 80 characters, for messages.
func quote(b []byte) string {
	const max = 80
	s := string(bytes.TrimSpace(b))
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// tail keeps the last bytes written to it: an agent's standard error, for
// the messages that say why it failed.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is what was kept, trimmed, its last line first cut to whole
// characters.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := bytes.TrimSpace(t.buf)
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return string(b)
}

// raw is what was kept, as it was written.
func (t *tail) raw() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
