package api

import (
	"context"
	"fmt"
)

// Peer is the process at the other end of a connection, as SO_PEERCRED
// tells it when the connection was made.
type Peer struct {
	PID      int32
	UID, GID uint32
}

func (p Peer) String() string { return fmt.Sprintf("uid %d pid %d", p.UID, p.PID) }

type (
	peerKey   struct{}
	callerKey struct{}
)

// WithPeer is ctx carrying the peer of the connection a request came on.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerOf is the peer of the connection a request came on, if the request
// came on one.
func PeerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// WithCaller is ctx carrying the name of a caller inside the daemon (the
// web UI, a live agent), which the events that record who decided name.
func WithCaller(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, callerKey{}, name)
}

// UnknownCaller is who a request is from when its context says nothing.
const UnknownCaller = "unknown peer"

// Who names who sent the request in ctx, for the events that record who
// decided: the peer of its connection ("uid U pid P"), else the caller
// inside the daemon (WithCaller), else UnknownCaller.
func Who(ctx context.Context) string {
	if p, ok := PeerOf(ctx); ok {
		return p.String()
	}
	if name, ok := ctx.Value(callerKey{}).(string); ok && name != "" {
		return name
	}
	return UnknownCaller
}
