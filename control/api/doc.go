// Package api is the vocabulary of daemon.control that the server, its
// client and the daemon's subsystems share, so that none of them imports
// the socket server (package control) for a type.
//
// # Commands
//
// Command is one DaemonCommand of ../shared/seed/daemon.rs: the Cmd*
// types, tagged by Action, the seed's own and the extensions of
// docs/protocol.md. Commands lists them; EncodeCommand writes one as
// serde does.
//
// # Replies
//
// DaemonStatus and every type it holds mirror the seed field for field
// and in serde's order, so that encoding/json writes what serde writes.
// ProjectSummaryOf, ProjectTasksOf and ProjectReportOf are the views of a
// project's state that replies carry; Seconds turns the reducer's
// milliseconds into the wire's seconds.
//
// # Errors
//
// A service refuses with one of the sentinels (ErrNotFound, ErrConflict,
// ErrInvalidArgument, ErrInvalidTransition, ErrUnavailable) and its
// detail, through Errorf, or with an *Error of its own. The sentinels are
// the domain's kinds of error (package reducer), which every layer below
// wraps its errors in, the stores' storage failures included. ErrorOf is
// the one mapping of those kinds to codes and stable reasons.
//
// The package knows no storage: it imports the reducer and the standard
// library only (cmd/internal/archtest checks it).
//
// # Chats
//
// ParseChat is the one parser of a chat, `<channel>:<account>`, wherever
// one comes in (agent_start, delegation_register, --notify, the command
// line); CheckChatName is its rule of one side, which channel accounts
// follow too.
package api
