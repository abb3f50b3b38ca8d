package api

import "context"

// A Handler answers one command of the daemon.control set: the daemon's
// one way in. The daemon's own is control.Service, which every front-end
// inside the daemon calls in process: the socket server, the web UI's
// actions, the MCP server at /mcp, and the daemon's own writers (the
// live agents' runs). Outside it, rpc.Remote is a Handler that
// reaches a daemon over its socket: the CLI's, and `scv mcp`'s. So every
// request of every front-end passes the same checks, names who sent it
// (Who) and is counted in the same metrics.
//
// A refusal is an error of one of the domain's kinds (ErrNotFound,
// ErrInvalidArgument, …) or an *Error; ErrorOf is its code and reason.
type Handler interface {
	Handle(ctx context.Context, cmd Command) (*DaemonStatus, error)
}

// HandlerFunc is a function as a Handler.
type HandlerFunc func(ctx context.Context, cmd Command) (*DaemonStatus, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, cmd Command) (*DaemonStatus, error) {
	return f(ctx, cmd)
}
