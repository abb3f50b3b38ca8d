package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"scv/control/api"
)

// Remote is an api.Handler that reaches a daemon over its socket: the way
// in of the CLI and of `scv mcp`. Each call dials anew, unless Keep is
// set: then one connection carries the calls one after the other, dialled
// when first needed and again after one is lost (a session whose calls
// come for as long as an agent runs). A call whose connection broke is
// not sent again: it may have run. Remote is safe for concurrent use.
type Remote struct {
	Socket string
	Keep   bool

	mu   sync.Mutex
	conn *Client
}

// UnreachableError is a call that got no answer: the daemon could not be
// reached, or it closed the connection before it answered (a request it
// did not answer was not carried out). It is of the unavailable kind
// (api.ErrUnavailable): a later try may succeed.
type UnreachableError struct {
	Msg string
	Err error // what the connection said
}

func (e *UnreachableError) Error() string { return e.Msg }

// Is makes an UnreachableError match api.ErrUnavailable.
func (e *UnreachableError) Is(target error) bool { return target == api.ErrUnavailable }

func (e *UnreachableError) Unwrap() error { return e.Err }

// Handle sends cmd and returns the daemon's reply, or its refusal as an
// *api.Error, or an *UnreachableError.
func (r *Remote) Handle(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	return status(r.Raw(ctx, cmd))
}

// Raw is Handle, returning the reply's result as the daemon wrote it.
func (r *Remote) Raw(ctx context.Context, cmd api.Command) (json.RawMessage, error) {
	var raw json.RawMessage
	err := r.call(ctx, func(cl *Client) (err error) {
		raw, err = cl.CallRaw(ctx, cmd)
		return err
	})
	return raw, err
}

// Batch sends cmds as one batch (Client.CallBatch) and returns the answer
// to each, in their order; the error is the batch's own, as Handle's.
func (r *Remote) Batch(ctx context.Context, cmds []api.Command) ([]Response, error) {
	var out []Response
	err := r.call(ctx, func(cl *Client) (err error) {
		out, err = cl.CallBatch(ctx, cmds)
		return err
	})
	return out, err
}

// call makes one call on the connection to call on, which it drops when
// the call broke it.
func (r *Remote) call(ctx context.Context, call func(*Client) error) error {
	cl, err := r.client(ctx)
	if err != nil {
		return err
	}
	err = call(cl)
	if r.Keep && err != nil && !isReply(err) {
		r.mu.Lock()
		if r.conn == cl {
			r.conn = nil
		}
		r.mu.Unlock()
	}
	if !r.Keep || (err != nil && !isReply(err)) {
		cl.Close()
	}
	if err != nil && LostConnection(err) {
		return &UnreachableError{Msg: "the daemon closed the connection before it answered (it is stopping or restarting); the request was not carried out", Err: err}
	}
	return err
}

// Close closes the kept connection, if any.
func (r *Remote) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return nil
	}
	err := r.conn.Close()
	r.conn = nil
	return err
}

// client is the connection to call on: the kept one, or a new one.
func (r *Remote) client(ctx context.Context) (*Client, error) {
	if r.Keep {
		r.mu.Lock()
		cl := r.conn
		r.mu.Unlock()
		if cl != nil {
			return cl, nil
		}
	}
	cl, err := Dial(ctx, r.Socket)
	if err != nil {
		return nil, dialError(r.Socket, err)
	}
	if !r.Keep {
		return cl, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil { // another call dialled meanwhile
		cl.Close()
		return r.conn, nil
	}
	r.conn = cl
	return cl, nil
}

// isReply reports whether err is the daemon's answer, after which the
// connection is as good as before.
func isReply(err error) bool {
	var e *api.Error
	return errors.As(err, &e)
}

// dialError says why the daemon at socket could not be reached, with the
// hint that fits the usual cause: no daemon, or a socket file a dead
// daemon left.
func dialError(socket string, err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return &UnreachableError{Msg: fmt.Sprintf("cannot reach the daemon at %s: is `scv daemon` running?", socket), Err: err}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &UnreachableError{Msg: fmt.Sprintf("cannot reach the daemon at %s: %v", socket, errno), Err: err}
	}
	return &UnreachableError{Msg: fmt.Sprintf("cannot reach the daemon at %s: %v", socket, err), Err: err}
}

// LostConnection reports whether err is the daemon hanging up.
func LostConnection(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)
}
