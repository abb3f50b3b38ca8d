package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"scv/control/api"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// Method is the one JSON-RPC method the daemon serves.
const Method = "daemon.control"

// MaxLine is the longest request line accepted, newline excluded.
const MaxLine = 1 << 20

// LineTimeout is how long the rest of a request line may take to arrive
// once its first byte has (Server.LineTimeout overrides it). A client that
// trickles a line, a byte every few seconds, is cut off when it runs out:
// its connection is closed without a reply (there is no request to answer
// yet, and a client that writes so slowly is not waiting for one), so it
// holds a connection and a goroutine for LineTimeout at most, not until
// it has sent MaxLine bytes. A connection idle between requests is never
// cut: clients such as `scv chat` keep one open for as long as they run,
// and the clock only starts with a line's first byte.
const LineTimeout = 10 * time.Second

// Server serves daemon.control over a Unix socket: newline-delimited
// JSON-RPC 2.0, one request per line, replies in order.
type Server struct {
	Service *Service
	Logger  *slog.Logger
	// LineTimeout bounds the time from a request line's first byte to its
	// newline; zero means the package's LineTimeout (10 s).
	LineTimeout time.Duration
	// Metrics records connections and the requests that could not be
	// decoded (nil: nothing); Service counts the others.
	Metrics Metrics

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]*connState
	closing bool
	// stop is closing || paused, kept under mu, read without it by the
	// connections between requests (see serveConn).
	stop     atomic.Bool
	wg       sync.WaitGroup
	allowUID map[uint32]bool

	// waits ends the requests that only wait for news (a confirm_list
	// with wait_seconds, which `scv chat` keeps open): Shutdown and Pause
	// cancel it, so that neither waits out a long poll.
	waits     context.Context
	stopWaits context.CancelFunc
	// waiting counts the waits under way: they are not work in flight.
	waiting atomic.Int64

	// Pause and Resume (a restart hands the listener over).
	paused    bool
	accepting bool          // Serve is in its accept loop, not parked
	resume    chan struct{} // closed by Resume (or Shutdown): a parked Serve goes on
	changed   chan struct{} // closed and renewed whenever a connection ends or Serve parks
}

// Metrics is what the server records (the daemon's *metrics.Recorder).
// Its methods must not block.
type Metrics interface {
	// Request: a request for action ("" when it could not be decoded)
	// was answered, refused with reason ("" for success).
	Request(action, reason string)
	ConnOpened()
	ConnClosed()
}

type noMetrics struct{}

func (noMetrics) Request(string, string) {}
func (noMetrics) ConnOpened()            {}
func (noMetrics) ConnClosed()            {}

func (s *Server) metrics() Metrics {
	if s.Metrics == nil {
		return noMetrics{}
	}
	return s.Metrics
}

// Listen creates the socket at path and listens on it. The folder that
// holds the socket is created 0700 if it is missing; the socket is created
// 0600. Both are created under a umask that never lets them be wider, not
// even for an instant: MkdirAll asks for 0700, which a umask can only
// narrow, and the socket is bound under umask 0177 (bind creates the file
// with 0777 &^ umask). The socket's mode is checked after bind, not
// repaired with chmod, so that a wider mode is an error instead of a
// window.
//
// Listen refuses, with an error naming the path:
//   - a socket folder that is not a directory, is not owned by the
//     daemon's effective uid, or has any group or other permission bit.
//     Only the folder that holds the socket is checked, not its parents
//     ($XDG_RUNTIME_DIR or ~/.local/state are the operator's). Such a
//     folder is refused rather than repaired with chmod: someone else may
//     already have put something in it, and changing the mode of an
//     operator's folder is not the daemon's decision. The error names the
//     folder, its mode and its owner.
//   - a path a live daemon answers on: it is not stolen.
//   - anything at path that is not a socket: a regular file, a folder, a
//     symlink (even one to a socket), a FIFO, a device. It is never
//     removed.
//
// A socket file nobody answers on, left behind by a daemon that crashed,
// is removed and created anew. The checks and the removal are not atomic,
// but only the folder's owner (us) and root can change the folder between
// them.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is %s, not a socket: refusing to replace it", path, describeMode(fi.Mode()))
	default:
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, errors.New("another daemon is listening on " + path)
		}
		// A stale socket: nobody answers on it.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	ln, err := listenUmask(path)
	if err != nil {
		return nil, err
	}
	// Bound under umask 0177 the socket is 0600; anything else means
	// someone changed the process umask meanwhile.
	fi, err = os.Lstat(path)
	if err == nil && (fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600) {
		err = fmt.Errorf("socket %s was created with mode %s, want 0600", path, fi.Mode())
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// umaskMu serialises the umask window of listenUmask: the umask is the
// process's, and two Listen calls at once would otherwise restore each
// other's.
var umaskMu sync.Mutex

// listenUmask binds a Unix socket at path under umask 0177, so that it is
// created 0600. The umask is process-wide: a file another goroutine
// creates during the bind is created narrower than it asked, never wider.
func listenUmask(path string) (net.Listener, error) {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.Listen("unix", path)
}

// checkSocketDir refuses a socket folder that others could enter or write:
// not a directory, not ours, or with any group or other bit.
func checkSocketDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket folder %s is %s, not a directory", dir, describeMode(fi.Mode()))
	}
	uid := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid = int(st.Uid)
	}
	if uid != os.Geteuid() {
		return fmt.Errorf("socket folder %s (mode %#o) is owned by uid %d, not by the daemon's uid %d: refusing to use it", dir, fi.Mode().Perm(), uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("socket folder %s has mode %#o, wider than 0700: refusing to use it (chmod 700 it, or choose another --socket)", dir, fi.Mode().Perm())
	}
	return nil
}

// describeMode names the kind of file a mode is, for errors.
func describeMode(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeNamedPipe:
		return "a named pipe"
	case fs.ModeSocket:
		return "a socket"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return "of type " + m.Type().String()
}

// Serve accepts connections until Shutdown. While the server is paused
// it accepts nothing and waits for Resume: a pause does not end it.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.ln = ln
	s.conns = map[net.Conn]*connState{}
	s.allowUID = map[uint32]bool{0: true, uint32(os.Getuid()): true}
	s.accepting = true
	if s.paused {
		// Paused before Serve: stop Accept at once.
		setAcceptDeadline(ln, time.Now())
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.accepting = false
		s.notify()
		s.mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// Only Pause sets a deadline: wait for Resume (or
				// go on at once if it came already).
				if !s.park() {
					return nil
				}
				continue
			}
			return err
		}
		s.mu.Lock()
		if s.paused {
			// Accepted just as Pause stopped Accept: close it unread,
			// as Pause closes idle connections. The client's contract
			// covers it: nothing sent on it was executed.
			s.mu.Unlock()
			c.Close()
			continue
		}
		if s.closing {
			s.mu.Unlock()
			c.Close()
			continue
		}
		st := &connState{}
		s.conns[c] = st
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c, st)
	}
}

// Shutdown stops accepting, lets every request being answered finish,
// closes idle connections, and waits for them, or for ctx. A request that
// only waits for news (a confirm_list long poll) does not hold it: it is
// answered unavailable at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.stop.Store(true)
	s.endWaitsLocked()
	s.wake() // a paused Serve returns
	if s.ln != nil {
		s.ln.Close()
	}
	s.wakeIdleLocked()
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pause stops accepting without closing the listener, so that new
// connections wait in the kernel's backlog and none is refused; lets every
// request being answered finish and write its reply; and closes every
// connection between requests (an idle one at once). A request line the
// server has read but not yet started is answered first; nothing more is
// read from a connection once the pause began. Pause returns when no
// connection is left and Serve has stopped accepting, or with ctx's error
// (still paused: call Resume). Serve does not return: it waits for Resume
// or Shutdown. The listener, and so the socket, can then be handed to
// another process. The listener must have SetDeadline (a Unix or TCP
// listener has): that is how Accept is stopped.
func (s *Server) Pause(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return net.ErrClosed
	}
	if s.paused {
		s.mu.Unlock()
		return errors.New("control: server already paused")
	}
	s.paused = true
	s.stop.Store(true)
	s.endWaitsLocked()
	s.resume = make(chan struct{})
	if s.ln != nil {
		setAcceptDeadline(s.ln, time.Now()) // wake Accept; Serve parks
	}
	s.wakeIdleLocked()
	s.mu.Unlock()
	for {
		s.mu.Lock()
		if !s.accepting && len(s.conns) == 0 {
			s.mu.Unlock()
			return nil
		}
		changed := s.changedLocked()
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Resume ends a pause: Serve accepts again on the same listener, starting
// with the connections that queued meanwhile.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused {
		return
	}
	s.paused = false
	s.stop.Store(s.closing)
	s.waits, s.stopWaits = nil, nil // the next wait gets a live one
	if s.ln != nil {
		setAcceptDeadline(s.ln, time.Time{})
	}
	s.wake()
}

// endWaitsLocked ends every wait in flight and every one that starts
// from now on, until Resume. s.mu is held.
func (s *Server) endWaitsLocked() {
	s.waitsLocked()
	s.stopWaits()
}

// waitsLocked is the context that ends the waits. s.mu is held.
func (s *Server) waitsLocked() context.Context {
	if s.waits == nil {
		s.waits, s.stopWaits = context.WithCancel(context.Background())
	}
	return s.waits
}

// isWait reports whether cmd only waits for news, so that ending it early
// loses nothing: a confirm_list, agent_updates or project_work_status with
// wait_seconds (a long poll).
func isWait(cmd api.Command) bool {
	var w *uint64
	switch c := cmd.(type) {
	case api.CmdConfirmList:
		w = c.WaitSeconds
	case api.CmdAgentUpdates:
		w = c.WaitSeconds
	case api.CmdProjectWorkStatus:
		w = c.WaitSeconds
	}
	return w != nil && *w > 0
}

// noWait is the wait cmd without its wait: what there is now.
func noWait(cmd api.Command) api.Command {
	switch c := cmd.(type) {
	case api.CmdConfirmList:
		c.WaitSeconds = nil
		return c
	case api.CmdAgentUpdates:
		c.WaitSeconds = nil
		return c
	case api.CmdProjectWorkStatus:
		c.WaitSeconds = nil
		return c
	}
	return cmd
}

// handle runs cmd. A wait (isWait) is ended by Shutdown and Pause instead
// of holding them for its full length: at a shutdown it is answered
// unavailable at once; at a pause (a restart) it is answered with what
// there is now, as a wait that ended with nothing new.
func (s *Server) handle(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	if !isWait(cmd) {
		return s.Service.Handle(ctx, cmd)
	}
	st, err := s.wait(ctx, cmd)
	s.Service.count(cmd, err)
	return st, err
}

// wait is handle for a wait, uncounted.
func (s *Server) wait(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	s.mu.Lock()
	waits := s.waitsLocked()
	s.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(waits, cancel)
	defer stop()
	st, err := s.Service.handle(wctx, cmd)
	if err == nil || waits.Err() == nil || ctx.Err() != nil {
		return st, err
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return nil, api.Errorf(api.ErrUnavailable, "the daemon is shutting down")
	}
	return s.Service.handle(ctx, noWait(cmd))
}

// Waiting is the number of waits (long polls) being served now.
func (s *Server) Waiting() int { return int(s.waiting.Load()) }

// InFlight is the number of requests being answered now, the waits (long
// polls, which a restart ends) aside.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.conns {
		if st.busy.Load() {
			n++
		}
	}
	return max(n-int(s.waiting.Load()), 0)
}

// park waits while the server is paused; false means it is closing.
func (s *Server) park() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.paused && !s.closing {
		s.accepting = false
		s.notify()
		resume := s.resume
		s.mu.Unlock()
		<-resume
		s.mu.Lock()
	}
	s.accepting = true
	return !s.closing
}

// wake lets a parked Serve go on. s.mu is held.
func (s *Server) wake() {
	if s.resume != nil {
		close(s.resume)
		s.resume = nil
	}
}

// changedLocked is the channel the next notify closes. s.mu is held.
func (s *Server) changedLocked() chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// notify wakes a Pause waiting for connections to end. s.mu is held.
func (s *Server) notify() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// setAcceptDeadline sets ln's accept deadline, if it has one (a Unix or
// TCP listener does).
func setAcceptDeadline(ln net.Listener, t time.Time) {
	if d, ok := ln.(interface{ SetDeadline(time.Time) error }); ok {
		d.SetDeadline(t)
	}
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// connState is what Shutdown and Pause need to know of a connection:
// whether it is answering a request. It is set without s.mu, so that the
// connections do not take turns at one lock per request. Shutdown and
// Pause set s.stop, then wake every connection they find not busy; a
// connection clears busy, then reads s.stop. The atomics are sequentially
// consistent, so at least one of the two sees the other: a connection
// that ends a request as the server stops either sees the stop or is
// woken.
type connState struct{ busy atomic.Bool }

// wakeIdleLocked sets a past read deadline on every connection that is
// not answering a request: its reader wakes and the connection ends.
// s.mu is held.
func (s *Server) wakeIdleLocked() {
	for c, st := range s.conns {
		if !st.busy.Load() {
			c.SetReadDeadline(time.Now())
		}
	}
}

// isClosing reports whether Shutdown has begun.
func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) serveConn(c net.Conn, st *connState) {
	defer s.wg.Done()
	s.metrics().ConnOpened()
	defer s.metrics().ConnClosed()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.notify()
		s.mu.Unlock()
		c.Close()
	}()
	log := s.logger().With("conn", c.RemoteAddr().String())
	w := bufio.NewWriter(c)
	peer, perr := s.checkPeer(c)
	if perr != nil {
		writeReply(w, errorReply(nil, perr))
		return
	}
	ctx := api.WithPeer(context.Background(), peer)
	r := bufio.NewReaderSize(c, 64<<10)
	rc := rawConn(c)
	timeout := s.LineTimeout
	if timeout <= 0 {
		timeout = LineTimeout
	}
	// A write the ledger commits is answered by the goroutine that
	// committed it (submit), while this one waits for the next line:
	// pending says a reply is being written, written says when it was.
	pending, written := false, make(chan bool, 1)
	answered := func() bool {
		if !pending {
			return true
		}
		pending = false
		return <-written
	}
	defer answered() // before the connection is closed
	// armed: c has a read deadline (or may have: a stopping server sets
	// one), which the next wait for a line must clear. In the common case
	// a request line arrives whole, with its first byte, and no deadline
	// is ever set.
	armed := true
	var batchBuf []byte // a batch's reply, kept for the next
	var scratch []byte  // a line longer than r's buffer, kept for the next
	for {
		// Between requests there is no deadline: wait for the first
		// byte of the next line as long as the client likes (a line
		// already buffered needs no read).
		if armed {
			s.armRead(c, time.Time{})
			armed = false
		}
		if _, err := r.Peek(1); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				log.Debug("read", "err", err)
			}
			return
		}
		// The line has begun: the rest must come within timeout, unless
		// it is here already.
		if !lineBuffered(r) {
			s.armRead(c, time.Now().Add(timeout))
			armed = true
		}
		limit := lineLimit(r)
		line, err := readLine(r, limit, &scratch)
		if errors.Is(err, errTooLong) {
			what := "request"
			if limit == MaxBatchLine {
				what = "batch"
			}
			writeReply(w, errorReply(nil, api.NewError(api.CodeInvalidRequest, api.ReasonTooLarge, "%s line longer than %d bytes", what, limit)))
			return
		}
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded) && !s.stopping():
				log.Info("request line not complete in time; connection closed", "line_timeout", timeout)
			case !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded):
				log.Debug("read", "err", err)
			}
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// Replies go out in the order of the requests: the next line
		// waits for the reply still being written.
		if !answered() {
			return
		}
		// A line read before Shutdown is answered even if the server is
		// closing by now; the connection ends after the reply.
		st.busy.Store(true)
		if isBatch(line) {
			replies, whole := s.handleBatch(ctx, line)
			batchBuf = appendBatchReply(batchBuf[:0], replies, whole)
			if len(batchBuf) > 0 {
				if err := writeLine(w, batchBuf); err != nil {
					return
				}
			}
			if cap(batchBuf) > MaxLine {
				batchBuf = nil // not kept for good
			}
			st.busy.Store(false)
		} else if req, id, e := parseRequest(line); e == nil && s.submit(ctx, c, rc, w, st, req.cmd, id, written) {
			pending = true
		} else {
			reply := s.handleRequest(ctx, req, id, e)
			if reply != nil {
				if err := writeReply(w, reply); err != nil {
					return
				}
			}
			st.busy.Store(false)
		}
		if s.stop.Load() {
			if s.isClosing() {
				return
			}
			// Paused: the lines already read (a client that pipelines)
			// are answered; armRead sets a past deadline, so nothing
			// more is read from the socket and the next read ends the
			// connection.
			armed = true
		}
	}
}

// armRead sets c's read deadline to t, or to now when the server is
// closing or paused, so that the read ends at once. Shutdown and Pause set
// the same under s.mu, so a deadline armed here never undoes theirs.
func (s *Server) armRead(c net.Conn, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.paused {
		t = time.Now()
	}
	c.SetReadDeadline(t)
}

// stopping reports whether the server is closing or paused.
func (s *Server) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing || s.paused
}

var errTooLong = errors.New("line too long")

// lineBuffered reports whether r holds a whole line already.
func lineBuffered(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// readLine returns the next line without its newline, refusing lines
// longer than limit. A line that was whole in r's buffer is returned in
// place, not copied: it is valid until the next read from r. What a
// request decodes to is copied out of it; only the reply's id refers to
// it, and submit, whose reply is written after the next read, copies that.
// A longer line is gathered in *scratch, the connection's, and is valid
// as long: the next long line reuses it (up to MaxLine of it is kept, a
// batch's lines being longer than r's buffer).
func readLine(r *bufio.Reader, limit int, scratch *[]byte) ([]byte, error) {
	line := (*scratch)[:0]
	for first := true; ; first = false {
		chunk, err := r.ReadSlice('\n')
		if err == nil && first {
			return chunk[:len(chunk)-1], nil
		}
		if len(line)+len(chunk) > limit+1 {
			return nil, errTooLong
		}
		line = append(line, chunk...)
		if cap(line) <= MaxLine {
			*scratch = line[:0]
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > limit:
			return nil, errTooLong
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// reply is one JSON-RPC response object.
type reply struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id"`
	Result  *api.DaemonStatus `json:"result,omitempty"`
	Error   *api.Error        `json:"error,omitempty"`
}

func errorReply(id json.RawMessage, e *api.Error) *reply {
	if id == nil {
		id = json.RawMessage("null")
	}
	return &reply{JSONRPC: "2.0", ID: id, Error: e}
}

func writeReply(w *bufio.Writer, r *reply) error {
	// Encoded into w's free buffer: the common reply needs no allocation.
	if _, err := w.Write(appendReply(w.AvailableBuffer(), r)); err != nil {
		return err
	}
	return w.Flush()
}

// writeLine writes a whole reply line to w.
func writeLine(w *bufio.Writer, line []byte) error {
	if _, err := w.Write(line); err != nil {
		return err
	}
	return w.Flush()
}

// appendReply appends r's line to b.
func appendReply(b []byte, r *reply) []byte {
	return append(appendResponse(b, r), '\n')
}

// appendResponse appends r, one JSON-RPC response object, to b.
func appendResponse(b []byte, r *reply) []byte {
	prefix := b // what b held before r, kept if r fails to encode
	var err error
	if r.Result != nil {
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = append(b, r.ID...)
		b = append(b, `,"result":`...)
		if b, err = appendStatus(b, r.Result); err == nil {
			b = append(b, '}')
		}
	} else {
		var m []byte
		m, err = marshal(r)
		b = append(b, m...)
	}
	if err != nil {
		m, _ := marshal(errorReply(r.ID, api.NewError(api.CodeInternal, api.ReasonInternal, "encode reply: %v", err)))
		b = append(prefix, m...)
	}
	return b
}

// rawConn is c's file descriptor, for writeNow; nil when c has none (no
// syscall.Conn). It is looked up once per connection: each lookup
// allocates.
func rawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// writeNow writes b to c, whose rawConn is rc, as far as c takes it
// without waiting, and returns how much it wrote; an error means c is
// broken. A connection without a file descriptor (rc nil) is written as
// usual.
func writeNow(c net.Conn, rc syscall.RawConn, b []byte) (int, error) {
	if rc == nil {
		return c.Write(b)
	}
	n := 0
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for n < len(b) && werr == nil {
			m, err := syscall.Write(int(fd), b[n:])
			switch {
			case err == syscall.EINTR:
			case err == syscall.EAGAIN:
				return true // full: the rest is written by someone who can wait
			case err != nil:
				werr = err
			default:
				n += m
			}
		}
		return true
	}); err != nil {
		return n, err
	}
	return n, werr
}

// submit starts cmd, whose request had id, without waiting for it when the
// ledger's writer executes it (Service.Submit), and reports whether it
// did. The goroutine that commits it writes the reply to w, clears
// st.busy, and sends on written whether the reply was written. Any other
// command is left for handleRequest.
func (s *Server) submit(ctx context.Context, c net.Conn, rc syscall.RawConn, w *bufio.Writer, st *connState, cmd api.Command, id json.RawMessage, written chan<- bool) bool {
	// The id is in the line's buffer, which is read into again before
	// the reply is written.
	id = bytes.Clone(id)
	return s.Service.Submit(ctx, cmd, func(res *api.DaemonStatus, err error) {
		end := func(ok bool) {
			st.busy.Store(false)
			if s.stop.Load() {
				// Stopping: the connection's reader, which Shutdown
				// and Pause did not wake while this was busy, ends now.
				s.armRead(c, time.Now())
			}
			written <- ok
		}
		r := s.answer(cmd, id, res, err)
		if r == nil {
			end(true)
			return
		}
		// The other answers of the batch wait for this one: a client
		// that does not read its replies must not hold them up. What
		// its socket does not take at once is written by a goroutine of
		// its own. w is flushed and idle: its buffer is borrowed.
		b := appendReply(w.AvailableBuffer(), r)
		n, err := writeNow(c, rc, b)
		if err != nil || n == len(b) {
			end(err == nil)
			return
		}
		go func() {
			_, err := c.Write(b[n:])
			end(err == nil)
		}()
	})
}

// handleRequest answers a request line that parseRequest returned req, id
// and e for.
func (s *Server) handleRequest(ctx context.Context, req *parsedRequest, id json.RawMessage, e *api.Error) *reply {
	if e != nil {
		s.metrics().Request("", e.Data.Reason)
		if req != nil && id == nil {
			return nil // a notification gets no reply, not even an error
		}
		return errorReply(id, e)
	}
	st, err := s.handle(ctx, req.cmd)
	return s.answer(req.cmd, id, st, err)
}

// answer is the reply to cmd, whose request had id (nil: a notification,
// which gets no reply), answered with st or err.
func (s *Server) answer(cmd api.Command, id json.RawMessage, st *api.DaemonStatus, err error) *reply {
	if id == nil {
		if err != nil {
			s.logger().Info("notification refused", "action", cmd.Action(), "err", err)
		}
		return nil
	}
	if err != nil {
		return errorReply(id, api.ErrorOf(err))
	}
	return &reply{JSONRPC: "2.0", ID: id, Result: st}
}

type parsedRequest struct{ cmd api.Command }

// parseRequest checks the JSON-RPC envelope and decodes the command. It
// returns the request's id (nil for a notification) for the reply; req is
// non-nil once the line was recognised as a request object.
func parseRequest(line []byte) (req *parsedRequest, id json.RawMessage, e *api.Error) {
	if !utf8.Valid(line) {
		return nil, nil, api.NewError(api.CodeParseError, api.ReasonParseError, "request is not valid UTF-8")
	}
	raw, trailing := json.RawMessage(line), false
	if !validJSON(line) {
		// Not one JSON value: either not JSON, or a value with something
		// after it, which is answered with the value's id if it has one.
		var first json.RawMessage
		if err := json.NewDecoder(bytes.NewReader(line)).Decode(&first); err != nil {
			return nil, nil, api.NewError(api.CodeParseError, api.ReasonParseError, "request is not JSON: %v", err)
		}
		raw, trailing = first, true
	}
	return parseEnvelope(raw, trailing)
}

// parseEnvelope is parseRequest for raw, one JSON value of valid UTF-8
// (a line's first, with something after it when trailing): a batch's
// elements, whose line was checked whole, start here.
func parseEnvelope(raw json.RawMessage, trailing bool) (req *parsedRequest, id json.RawMessage, e *api.Error) {
	var buf [8]member
	ms, err := splitMembers(buf[:0], raw) // valid JSON from here on
	if err != nil {
		return nil, nil, api.NewError(api.CodeInvalidRequest, api.ReasonInvalidRequest, "request is not a JSON-RPC request object")
	}
	// Each is nil when absent: a member's value is never empty.
	var version, method, params, rawID json.RawMessage
	for i := range ms {
		var slot *json.RawMessage
		switch ms[i].key {
		case "jsonrpc":
			slot = &version
		case "method":
			slot = &method
		case "params":
			slot = &params
		case "id":
			slot = &rawID
		default:
			continue
		}
		if *slot != nil {
			return nil, nil, api.NewError(api.CodeInvalidRequest, api.ReasonInvalidRequest, "duplicate member %q", ms[i].key)
		}
		*slot = ms[i].raw
	}
	if rawID != nil {
		switch c := bytes.TrimSpace(rawID)[0]; {
		case c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 'n':
			id = rawID
		default:
			return nil, nil, api.NewError(api.CodeInvalidRequest, api.ReasonInvalidRequest, "id must be a string, a number or null")
		}
	}
	if !isString(version, "2.0") {
		return nil, id, api.NewError(api.CodeInvalidRequest, api.ReasonInvalidRequest, `jsonrpc must be "2.0"`)
	}
	name := Method
	if !isString(method, Method) && (method == nil || decodeString(method, &name) != nil) {
		return nil, id, api.NewError(api.CodeInvalidRequest, api.ReasonInvalidRequest, "method must be a string")
	}
	req = &parsedRequest{}
	if name != Method {
		return req, id, api.NewError(api.CodeMethodNotFound, api.ReasonMethodNotFound, "method %q not found; the daemon serves %q", name, Method)
	}
	if trailing {
		return req, id, api.NewError(api.CodeInvalidParams, api.ReasonInvalidParams, "trailing characters after the request object")
	}
	if params == nil {
		return req, id, api.NewError(api.CodeInvalidParams, api.ReasonInvalidParams, "missing params: a DaemonCommand object")
	}
	cmd, err := decodeValid(params)
	if err != nil {
		return req, id, api.NewError(api.CodeInvalidParams, api.ReasonInvalidParams, "invalid params: %v", err)
	}
	req.cmd = cmd
	return req, id, nil
}

// isString reports whether raw (nil, or one valid JSON value) is the
// string s, written plainly or with escapes.
func isString(raw json.RawMessage, s string) bool {
	if len(raw) == len(s)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == s {
		return true // the common case, without decoding
	}
	var v string
	return raw != nil && decodeString(raw, &v) == nil && v == s
}

// checkPeer refuses a peer whose uid is neither ours nor root.
func (s *Server) checkPeer(c net.Conn) (api.Peer, *api.Error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return api.Peer{}, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return api.Peer{}, api.NewError(api.CodeForbidden, api.ReasonForbidden, "peer credentials: %v", err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return api.Peer{}, api.NewError(api.CodeForbidden, api.ReasonForbidden, "peer credentials unavailable")
	}
	if !s.allowUID[cred.Uid] {
		return api.Peer{}, api.NewError(api.CodeForbidden, api.ReasonForbidden, "uid %d may not use this daemon", cred.Uid)
	}
	return api.Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
