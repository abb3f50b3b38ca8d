package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"scv/control"
	"scv/control/api"
	"scv/control/follow"
	"scv/control/rpc"

	"golang.org/x/term"
)

// callTimeout bounds one client command: dialling, sending and reading the
// reply. The daemon answers in milliseconds; a daemon that does not answer
// within this is stuck, and saying so beats hanging a script forever.
const callTimeout = 30 * time.Second

// streams are where an invocation reads and writes.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// openInput opens the file name, or standard input for - (a FILE|-
// argument); what it holds is what, for the note on a terminal.
func (c *client) openInput(name, what string) (io.ReadCloser, error) {
	if name == "-" {
		if c.stdin == nil {
			return nil, usagef("-: no standard input to read")
		}
		c.readingNote(what)
		return io.NopCloser(c.stdin), nil
	}
	return os.Open(name)
}

// readingNote says, when standard input is a terminal, that what is read
// from it.
func (c *client) readingNote(what string) {
	if f, ok := c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		c.note("reading %s from standard input; end it with Ctrl-D", what)
	}
}

// client is one scv invocation: its streams, its global flags and its
// clock. It is the daemon as the invocation reaches it, an api.Handler
// (Handle). Every command's Options struct points at it.
type client struct {
	streams
	socket string // --socket
	json   bool   // --json
	now    func() time.Time
}

// printer is how the human output of this invocation looks.
func (c *client) printer() *printer {
	return &printer{w: c.stdout, width: widthOf(c.stdout), color: colorFor(c.stdout, c.json), now: c.now()}
}

// note writes a line for people on stderr (never under --json, whose
// stderr carries only the error object).
func (c *client) note(format string, a ...any) {
	if !c.json {
		fmt.Fprintf(c.stderr, "scv: "+format+"\n", a...)
	}
}

// call sends cmd on a connection of its own and prints the reply: the
// daemon's bytes under --json, else print's form. It returns the reply.
func (c *client) call(cmd api.Command, print func(*printer, *api.DaemonStatus) error) (*api.DaemonStatus, error) {
	raw, err := c.raw(cmd)
	if err != nil {
		return nil, err
	}
	var st api.DaemonStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("decode reply: %w", err)
	}
	if c.json {
		_, err = fmt.Fprintf(c.stdout, "%s\n", raw)
		return &st, err
	}
	if print == nil {
		return &st, nil
	}
	return &st, print(c.printer(), &st)
}

// raw sends cmd and returns the daemon's reply as it came, printing
// nothing.
func (c *client) raw(cmd api.Command) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	raw, err := c.remote().Raw(ctx, cmd)
	if err != nil {
		return nil, callError(err)
	}
	return raw, nil
}

// batch sends cmds in batches of at most control.MaxBatch, each on a
// connection of its own within callTimeout, and returns the answer to
// each, in their order; the error is a batch's own, as scv reports it.
func (c *client) batch(cmds []api.Command) ([]rpc.Response, error) {
	var out []rpc.Response
	for chunk := range slices.Chunk(cmds, control.MaxBatch) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		res, err := c.remote().Batch(ctx, chunk)
		cancel()
		if err != nil {
			return nil, callError(err)
		}
		out = append(out, res...)
	}
	return out, nil
}

// Handle sends cmd and returns the reply, printing nothing, or the error
// as scv reports it: on a connection of its own (a delegation outlives
// connections, and the daemon may restart while its command runs), within
// callTimeout.
func (c *client) Handle(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st, err := c.remote().Handle(ctx, cmd)
	if err != nil {
		return nil, callError(err)
	}
	return st, nil
}

// do is Handle, for a command that nothing cancels.
func (c *client) do(cmd api.Command) (*api.DaemonStatus, error) {
	return c.Handle(context.Background(), cmd)
}

// remote is the daemon as this invocation reaches it: a connection for
// each call.
func (c *client) remote() *rpc.Remote {
	return &rpc.Remote{Socket: c.socket}
}

// follow runs f against the daemon on a connection kept for it, and
// returns its end as scv reports it. When the daemon goes away, note says
// so (once until it answers again).
func (c *client) follow(ctx context.Context, f *follow.Follower, note func(format string, a ...any)) error {
	rem := &rpc.Remote{Socket: c.socket, Keep: true}
	defer rem.Close()
	f.Handler = rem
	away := f.Away
	f.Away = func(err error) {
		note("the daemon went away; waiting up to %v for it to come back", follow.GiveUp)
		if away != nil {
			away(err)
		}
	}
	return callError(f.Run(ctx))
}

// printJSON writes v as one line of JSON.
func (c *client) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
