// Package supervise is the owner's side of a delegation: it runs one
// command as a delegation the daemon tracks (Delegation, `scv delegate`),
// and as a supervised run of a task (Run, `scv project run exec`).
//
// A Delegation makes the calling process a child subreaper, starts the
// command in a process group of its own, tagged with a new handle
// (control/proc), and registers it with the daemon. While the command's
// leader is not yet reaped it sends the signals it is given on to the
// group. When the leader exits it reaps it, unregisters the delegation (the
// daemon stops what is left of the tree), and reaps the orphans the tree
// left with it. A daemon that does not answer the unregistration is tried
// again for a while, since it may be restarting; after that the owner
// stops the tree itself. A command that is not registered is not run.
//
// A Run starts a run of a task, runs its command as a Delegation, records
// the lines of its output that start with ProgressPrefix as the run's
// progress, sends heartbeats while it lives, and finishes the run by how
// the command ended: succeeded, failed, or cancelled when it was stopped
// by SIGINT or SIGTERM.
//
// Both talk to the daemon only through the api.Handler they are given.
// A delegation outlives connections and the daemon may restart while its
// command runs, so the command line gives a rpc.Remote that dials for
// each call. The package imports the wire's types (control/api) and the
// process primitives (control/proc), never the server (control) nor the
// ledger.
//
// Supervision waits for any child of the process (proc.WaitTree), so a
// process runs one at a time and waits for no children of its own by
// other means.
//
// docs/delegations.md is the contract.
package supervise
