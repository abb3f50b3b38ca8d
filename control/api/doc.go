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
// ProjectSummaryOf, ProjectTasksOf, ProjectReportOf and ProjectListOf are
// the views of a project's state that replies carry.
//
// # Errors
//
// A service refuses with one of the sentinels (ErrNotFound, ErrConflict,
// ErrInvalidArgument, ErrInvalidTransition, ErrUnavailable) and its
// detail, through Errorf, or with an *Error of its own. ErrorOf is the one
// mapping of an error of any layer to its code and stable reason.
//
// # Chats
//
// ParseChat is the one parser of a chat, `<channel>:<account>`, wherever
// one comes in (agent_start, delegation_register, --notify, the command
// line); CheckChatName is its rule of one side, which channel accounts
// follow too.
package api
