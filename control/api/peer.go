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

type peerKey struct{}

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
