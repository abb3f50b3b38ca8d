package control_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
)

// Seed inputs of the targets are committed under testdata/fuzz/<target>/
// (go test fuzz v1); the wire examples, a valid example of every action
// (control.SeedCommandParams) and the malformed and hostile cases of
// dispatch_internal_test.go are added as seeds too. FuzzDispatch, beside
// those lists, drives handleLine directly. Without -fuzz, `go test` runs
// every target over its seeds and committed corpus as an ordinary test.
// Run a target with
//
//	go test -run '^$' -fuzz '^FuzzDecodeCommand$' -fuzztime 60s ./control/
//
// and commit what it finds under testdata/fuzz once the bug is fixed.

// addSeeds adds every seed params object and malformed line, params
// wrapped by wrap; lines (the envelope cases) only when withLines.
func addSeeds(f *testing.F, wrap func(string) string, withLines bool) {
	for _, p := range slices.Concat(control.SeedCommandParams, control.SeedMalformedParams, control.SeedHostileParams) {
		f.Add([]byte(wrap(p)))
	}
	if withLines {
		for _, l := range control.SeedMalformedLines {
			f.Add([]byte(l))
		}
	}
}

func addWireSeeds(f *testing.F, wrap func([]byte) []byte) {
	b, err := os.ReadFile(wireExamples)
	require.NoError(f, err)
	for _, line := range bytes.Split(b, []byte("\n")) {
		var ex wireExample
		if json.Unmarshal(line, &ex) == nil && bytes.HasPrefix([]byte(ex.Name), []byte("DaemonCommand ")) {
			f.Add(wrap(ex.JSON))
		}
	}
}

// FuzzDecodeCommand: DecodeCommand never panics, and what it accepts
// encodes to bytes it accepts again, as the same value, and those bytes
// are a fixed point of decode and encode. The decoder's own JSON check
// agrees with encoding/json's Valid on every input.
func FuzzDecodeCommand(f *testing.F) {
	addWireSeeds(f, func(b []byte) []byte { return b })
	addSeeds(f, func(p string) string { return p }, false)
	f.Fuzz(func(t *testing.T, in []byte) {
		require.Equal(t, json.Valid(in), control.ValidJSON(in), "validJSON against json.Valid on %q", in)
		cmd, err := control.DecodeCommand(in)
		if err != nil {
			require.Nil(t, cmd, "a refusal returns no command")
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotNil(t, cmd)
		// serde_json::from_slice takes exactly one JSON value of valid
		// UTF-8: nothing truncated, nothing after it.
		require.True(t, json.Valid(in), "accepted input that is not one JSON value: %q", in)
		require.True(t, utf8.Valid(in), "accepted input that is not UTF-8: %q", in)
		enc, err := api.EncodeCommand(cmd)
		require.NoError(t, err, "encode %#v", cmd)
		require.True(t, json.Valid(enc), "encoding is JSON: %s", enc)
		again, err := control.DecodeCommand(enc)
		require.NoError(t, err, "re-decode %s (from %q)", enc, in)
		assert.Equal(t, cmd, again, "round trip of %q through %s", in, enc)
		enc2, err := api.EncodeCommand(again)
		require.NoError(t, err)
		assert.Equal(t, string(enc), string(enc2), "encoding is stable")
	})
}

// pipeListener is an in-memory net.Listener: each dial is a net.Pipe.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial() (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// codeReasons is which reasons each error code may carry.
var codeReasons = map[int][]string{
	-32700: {"parse_error"},
	-32600: {"invalid_request", "too_large"},
	-32601: {"method_not_found"},
	-32602: {"invalid_params", "invalid_argument"},
	-32603: {"internal"},
	-32001: {"not_found"},
	-32002: {"conflict"},
	-32003: {"invalid_transition"},
	-32004: {"run_not_running"},
	-32005: {"unavailable"},
	-32006: {"storage"},
	-32007: {"unimplemented"},
	-32008: {"forbidden"},
	-32009: {"storage_full"},
}

// FuzzParseLine feeds arbitrary bytes as request lines to a real Server
// (over an in-memory connection, with a real ledger) and checks every
// reply: the server never panics or hangs, each reply is one JSON-RPC 2.0
// response with a known code and reason or a DaemonStatus serde would
// write back unchanged (a batch's reply, an array of such), and a request
// after the input is answered last.
func FuzzParseLine(f *testing.F) {
	addWireSeeds(f, func(params []byte) []byte {
		return []byte(request("1", string(params)))
	})
	addSeeds(f, func(p string) string { return request("1", p) }, true)
	// Several lines in one input: a notification, then requests.
	f.Add([]byte(request("", control.SeedCommandParams[0]) + "\n" + strings.Join(control.SeedMalformedLines[:5], "\n")))
	d := startDaemon(f, nil)
	ln := newPipeListener()
	srv := &control.Server{Service: d.srv.Service}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
	})
	var n atomic.Uint64

	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ln.dial()
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetDeadline(time.Now().Add(ioTimeout)))
		sentinel := fmt.Sprintf(`"end-%d"`, n.Add(1))
		go func() {
			// net.Pipe is unbuffered: write while the replies are read.
			c.Write(append(append(bytes.Clone(in), '\n'), request(sentinel, `{"action":"status"}`)+"\n"...))
		}()
		lines := bytes.Count(in, []byte("\n")) + 1
		r := bufio.NewReader(c)
		var last reply
		for replies := 0; ; replies++ {
			line, err := r.ReadBytes('\n')
			if errors.Is(err, io.EOF) && len(line) == 0 {
				// Only a too-large line closes the connection.
				require.NotNil(t, last.err, "connection closed after %q", in)
				require.Equal(t, "too_large", last.err.Data.Reason, "connection closed after %q", in)
				return
			}
			require.NoError(t, err, "reading a reply to %q", in)
			require.LessOrEqual(t, replies, lines, "more replies than lines for %q", in)
			line = bytes.TrimSuffix(line, []byte("\n"))
			if line[0] == '[' { // a batch's
				var rs []json.RawMessage
				require.NoError(t, json.Unmarshal(line, &rs), "batch reply %s", line)
				require.NotEmpty(t, rs, "an empty batch reply")
				for _, r := range rs {
					last = checkReply(t, r)
				}
				continue
			}
			if last = checkReply(t, line); string(last.id) == sentinel {
				return
			}
		}
	})
}

// checkReply checks one response object of the daemon's: a known code and
// reason, or a DaemonStatus serde would write back unchanged.
func checkReply(t *testing.T, line []byte) reply {
	t.Helper()
	r := parseReply(t, line)
	if r.err != nil {
		reasons, known := codeReasons[r.err.Code]
		require.True(t, known, "unknown code in %s", line)
		require.Contains(t, reasons, r.err.Data.Reason, "reason of %s", line)
		require.NotEmpty(t, r.err.Message)
		return r
	}
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal(r.result, &st), "result of %s", line)
	// The same value: encoding/json escapes <, >, & where serde does not,
	// so bytes are compared in TestFixtures instead.
	again, err := json.Marshal(st)
	require.NoError(t, err)
	require.JSONEq(t, string(r.result), string(again), "result round trip")
	return r
}
