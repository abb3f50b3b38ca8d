// Package control serves the daemon.control command set over a Unix
// socket; control/rpc is the client the CLI and the tests use to speak it.
//
// # Wire
//
// Newline-delimited JSON-RPC 2.0: one request per line, one reply per line
// in order, method "daemon.control", params one DaemonCommand (the Cmd*
// types of package api, tagged by "action"), result one DaemonStatus.
// A line that is a JSON array is a batch (JSON-RPC 2.0 section 6,
// handleBatch): one reply line, an array in the order of the requests,
// the writes in one group commit, within MaxBatch and MaxBatchLine.
// The wire's types live in package api, which the daemon's subsystems
// import instead of this one. DecodeCommand refuses what serde would
// refuse, naming the field.
//
// # Serving
//
// Listen creates the socket (0600, in a 0700 folder); Server accepts
// connections, checks the peer's uid, and hands each decoded command to
// Service, which makes one ledger call and builds the reply. Errors are
// mapped to codes and stable reasons in one place (api.ErrorOf).
//
// # Calling
//
// Package control/rpc is the client side: Dial and Client.Call, or
// Remote, an api.Handler that dials for the caller.
package control
