// Package rpc is the client of daemon.control, the daemon's JSON-RPC 2.0
// socket (package control serves it; docs/protocol.md is the wire).
//
// Dial and Client.Call (or CallRaw for the reply's bytes, CallBatch for
// a batch, Send for a line written by hand), or Remote, an api.Handler
// that dials for the caller and dials again after a lost connection. A
// daemon error comes back as an *api.Error with its Code and
// Data.Reason. A call ends at its context's deadline or when the context
// is cancelled (a long poll too). DefaultSocketPath and StateDir say
// where the daemon's socket and state are by default.
//
// It imports the wire's types (package api) and nothing else of the
// module, so that a client carries nothing of the server.
package rpc
