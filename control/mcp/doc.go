// Package mcp is the ledger as tools for agents (docs/mcp.md): a Model
// Context Protocol server whose tools are the daemon's actions, sent to
// the daemon through the one way in, an api.Handler, so that every rule
// stays the daemon's. Its tools read projects, claim a task's run and
// report on it, add tasks and ask the owner; its resources are each
// project's report and task graph.
//
// The same server serves two ways:
//
//   - `scv mcp` serves one session on standard input and output (Run),
//     through a transport of its own, one message a line, each decoded
//     once (stdio.go), its Handler a rpc.Remote that reaches the daemon
//     on its socket;
//   - the daemon serves sessions over streamable HTTP at /mcp of its web
//     listener (HTTPHandler), its Handler the daemon's own control.Service,
//     in process, each request named HTTPCaller (api.WithCaller).
//
// Options give a session its scope: one project, only the reading tools,
// one run. The server checks what only it has (the scope, the types of a
// tool's arguments, the arguments a tool takes, wait_seconds, limit); a
// length or a count the daemon checks is advertised in the input schemas
// (reducer's limits) and refused by the daemon, so that a tool is refused
// with the daemon's own message and reason, as the socket and the CLI
// are.
//
// The package imports the wire's types (control/api), never the socket
// server (control) nor the ledger.
package mcp
