// Package follow keeps asking a daemon for what is new: `scv project
// events --follow`, `scv agent prompt` following a turn, `scv chat` and
// the MCP server's resources use it, and those that wait for the owner's
// answer to a question. A Follower sends one request after another, each made from what
// the replies so far said (a cursor: the last sequence seen), hands each
// reply to its caller, and waits for a daemon that went away.
//
// It imports the wire's types, scv/control/api, and no other package of
// the module: it takes the daemon as an api.Handler. The CLI gives it a
// rpc.Remote on a connection kept for the follow; the daemon's own
// control.Service works too.
//
// # A follow
//
// Request makes the next request; Reply takes its reply and says what
// comes next: Wait (the next request after Pause, for a poll that does not
// wait at the daemon), Now (at once: a long poll, or a full page), or Stop
// (the follow is done). A reply is handed on once, in order, and Request
// is asked again only after Reply returned, so a cursor that Reply moves
// is what the next request sends: nothing is missed and nothing comes
// twice, whatever happens to the daemon in between.
//
// # When the daemon goes away
//
// A request that gets no answer (the daemon could not be reached or closed
// the connection), the answer unavailable (it is shutting down), or no
// answer within a minute (RequestTimeout) means the daemon went away. The
// follower calls Away once and sends the same request again after a pause
// that doubles from FirstRetry up to MaxRetry, each one cut by a random
// part of up to half so that many followers do not come back at once.
// The first answer resets the pause and calls Back once. A daemon that
// has not answered for GiveUp (a minute) ends the follow with an
// *AwayError: a restart hands the socket over in well under a second and
// a daemon started again by a service manager is back in seconds, so a
// minute is a daemon that stopped.
//
// Until the daemon has answered once, there is nothing to wait for: the
// first request's error ends the follow at once (no daemon running).
// Answered says a request before the follow was answered already.
//
// # How it ends
//
// Run returns nil when Reply says Stop; Reply's error; a refusal that is
// not unavailable (not_found, invalid_argument, …), as the Handler
// returned it; an *AwayError; or, when ctx ends, ctx's error.
//
// # The owner's answer
//
// Answer waits for the owner's answer to a question (`scv confirm ask
// --wait`, MCP's owner_ask with wait_seconds): it asks where the question
// stands every AnswerPoll, which keeps a pending question alive, until it
// is decided, a deadline passes or its context ends. Question sends a
// question's ask or status and returns where it stands.
package follow
