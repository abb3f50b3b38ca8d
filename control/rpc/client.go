package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"scv/control/api"
	"strconv"
	"sync"
	"time"
)

// Client speaks daemon.control over one connection. The CLI and the tests
// use it; it is safe for concurrent use (calls are serialised). A call
// ends at its context's deadline or when the context is cancelled; the
// connection is then good only for Close.
type Client struct {
	mu     sync.Mutex
	conn   net.Conn
	r      *bufio.Reader
	nextID uint64
}

// Dial connects to the daemon socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to daemon at %s: %w", path, err)
	}
	return &Client{conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Call sends cmd and returns the daemon's status, or the daemon's error as
// an *Error.
func (c *Client) Call(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	return status(c.CallRaw(ctx, cmd))
}

// status decodes a reply's result, or passes its error on.
func status(raw json.RawMessage, err error) (*api.DaemonStatus, error) {
	if err != nil {
		return nil, err
	}
	var st api.DaemonStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("decode reply: %w", err)
	}
	return &st, nil
}

// CallRaw sends cmd and returns the reply's result exactly as the daemon
// wrote it.
func (c *Client) CallRaw(ctx context.Context, cmd api.Command) (json.RawMessage, error) {
	resp, first, err := c.send(ctx, []api.Command{cmd}, false)
	if err != nil {
		return nil, err
	}
	rid, result, err := parseResponse(resp)
	if _, refused := err.(*api.Error); err != nil && !refused {
		return nil, err
	}
	if id := strconv.FormatUint(first, 10); string(rid) != id {
		return nil, fmt.Errorf("reply id %s does not match request id %s", rid, id)
	}
	return result, err
}

// send writes cmds as one line, with the next ids from first on, a batch
// (an array) if batch, and reads the reply's line.
func (c *Client) send(ctx context.Context, cmds []api.Command, batch bool) (resp []byte, first uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first = c.nextID + 1
	var line []byte
	for i, cmd := range cmds {
		params, err := api.EncodeCommand(cmd)
		if err != nil {
			return nil, 0, err
		}
		if i > 0 {
			line = append(line, ',')
		}
		line = fmt.Appendf(line, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, first+uint64(i), api.Method, params)
	}
	if batch {
		line = append(append([]byte{'['}, line...), ']')
	}
	c.nextID += uint64(len(cmds))
	resp, err = c.roundTrip(ctx, append(line, '\n'))
	return resp, first, err
}

// parseResponse splits one response object into its id and its result,
// or returns its error (an *api.Error), or why it is not a response.
func parseResponse(resp []byte) (id, result json.RawMessage, err error) {
	var r struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *api.Error      `json:"error"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, nil, fmt.Errorf("decode reply: %w", err)
	}
	if r.Error != nil {
		return r.ID, nil, r.Error
	}
	if r.Result == nil {
		return r.ID, nil, errors.New("decode reply: neither result nor error")
	}
	return r.ID, r.Result, nil
}

// Response is the daemon's answer to one request of a batch: its result
// exactly as the daemon wrote it, or its refusal (an *api.Error).
type Response struct {
	Raw json.RawMessage
	Err error
}

// Status decodes the result, or returns the refusal.
func (r Response) Status() (*api.DaemonStatus, error) { return status(r.Raw, r.Err) }

// CallBatch sends cmds as one JSON-RPC batch, one line, and returns the
// answer to each, in the order of cmds: each is decided on its own, and
// the writes among them share one write transaction (see docs/protocol.md).
// The error is the batch's own: it could not be sent or its reply read, or
// the daemon refused it whole (an *api.Error: more than control.MaxBatch commands,
// a line longer than control.MaxBatchLine). No commands send nothing.
func (c *Client) CallBatch(ctx context.Context, cmds []api.Command) ([]Response, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	resp, first, err := c.send(ctx, cmds, true)
	if err != nil {
		return nil, err
	}
	var els []json.RawMessage
	if len(resp) == 0 || resp[0] != '[' || json.Unmarshal(resp, &els) != nil {
		// Refused whole: one response object, not an array.
		if _, _, err := parseResponse(resp); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("decode reply: a batch's reply is not an array: %.100s", resp)
	}
	out := make([]Response, len(cmds))
	seen := make([]bool, len(cmds))
	for _, el := range els {
		id, result, err := parseResponse(el)
		n, perr := strconv.ParseUint(string(id), 10, 64)
		if perr != nil || n < first || n-first >= uint64(len(cmds)) || seen[n-first] {
			return nil, fmt.Errorf("decode reply: a response with id %s, not one of the batch's requests", id)
		}
		out[n-first], seen[n-first] = Response{Raw: result, Err: err}, true
	}
	for i := range out {
		if !seen[i] {
			out[i].Err = fmt.Errorf("decode reply: no response to request %d of the batch", i)
		}
	}
	return out, nil
}

// Send writes one raw line and reads one reply line: for tests and tools
// that speak the protocol by hand.
func (c *Client) Send(ctx context.Context, line []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.roundTrip(ctx, line)
}

// roundTrip writes line and reads the reply's line, until ctx's deadline
// or its end: then the connection is left in the middle of a request, and
// only good for Close.
func (c *Client) roundTrip(ctx context.Context, line []byte) ([]byte, error) {
	deadline, _ := ctx.Deadline()
	c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.conn.Write(line); err != nil {
		return nil, fmt.Errorf("send: %w", ctxErr(ctx, err))
	}
	resp, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read reply: %w", ctxErr(ctx, err))
	}
	return bytes.TrimSuffix(resp, []byte("\n")), nil
}

// ctxErr is err, or ctx's error when ctx was cancelled (which cut the
// read or write short).
func ctxErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return err
}

// DefaultSocketPath is $SCV_SOCKET, else $XDG_RUNTIME_DIR/scv/daemon.sock,
// else $XDG_STATE_HOME/scv/daemon.sock (~/.local/state/scv/daemon.sock).
func DefaultSocketPath() string {
	if p := os.Getenv("SCV_SOCKET"); p != "" {
		return p
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "scv", "daemon.sock")
	}
	return filepath.Join(StateDir(), "daemon.sock")
}

// StateDir is $XDG_STATE_HOME/scv, else ~/.local/state/scv.
func StateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "scv")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/"
	}
	return filepath.Join(home, ".local", "state", "scv")
}
