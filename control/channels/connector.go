package channels

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Connector connects one account to its platform. The Manager makes a new
// one for every run of a component (Connectors), and hands Deliver to the
// one that runs.
type Connector interface {
	// Run connects the account and serves until ctx ends (then it returns
	// nil, promptly) or it fails. A returned error is retried after a
	// backoff, unless it is Permanent. Returning nil without ctx ending
	// means the connector ended cleanly: the component is stopped and not
	// restarted. It reports through h.
	Run(ctx context.Context, a Settings, h Health) error
	// Deliver hands one message to the owner of the account; an error
	// means it could not be handed over.
	Deliver(ctx context.Context, a Settings, m Message) error
}

// Health is how a running connector reports to its component. Reports
// after Run's ctx ended are ignored.
type Health interface {
	// Connected: the account is connected to its platform (a success).
	Connected()
	// Disconnected: the connection is lost; err says why, if known. The
	// connector is still running and may connect again.
	Disconnected(err error)
	// Success: a successful exchange with the platform.
	Success()
	// Identity: the platform's IDs of the account's owner and bot; an
	// empty one is unknown. They fill in what the settings leave empty.
	Identity(ownerID, botID string)
}

// Message is one message to the owner of an account: a question or a
// notice.
type Message struct {
	ID   string
	Text string
}

// Permanent marks err as one a connector cannot recover from by retrying,
// such as expired credentials: the component fails and is not restarted.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// DefaultConnectors is the connectors this package builds alone: local.
// The daemon adds email (control/mail's Service.Connector, which needs
// the daemon's stores, agents and question log). The other kinds are kept
// and shown, but an enabled one fails with "no <kind> connector in this
// build".
func DefaultConnectors() map[Kind]func() Connector {
	uid := os.Getuid()
	return map[Kind]func() Connector{
		KindLocal: func() Connector { return Local{UID: uid} },
	}
}

// Local is the owner's chat on this machine, through the daemon socket:
// `scv chat` reads it from the daemon's question log. It is connected as
// soon as it runs; its owner is the daemon's user.
type Local struct {
	// UID is the daemon's user ID: the owner is "uid:<UID>".
	UID int
}

// LocalBotID is the local connector's bot ID.
const LocalBotID = "scv"

// OwnerID is the local owner's ID, "uid:<UID>".
func (c Local) OwnerID() string { return "uid:" + strconv.Itoa(c.UID) }

// Run reports the identity and connected at once, then waits for ctx.
func (c Local) Run(ctx context.Context, _ Settings, h Health) error {
	h.Identity(c.OwnerID(), LocalBotID)
	h.Connected()
	<-ctx.Done()
	return nil
}

// Deliver always succeeds: the message is read from the question log,
// where the caller keeps it.
func (Local) Deliver(context.Context, Settings, Message) error { return nil }

// errNoConnector is why an enabled account of a kind without a connector
// fails.
func errNoConnector(k Kind) error { return fmt.Errorf("no %s connector in this build", k) }
