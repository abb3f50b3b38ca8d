// Package proc holds the operating-system primitives behind delegations:
// finding the processes of one delegated command, stopping them without
// ever signalling a stranger, and, on the owner's side, starting the
// command and reaping it. It is Linux only, reads /proc, and knows nothing
// of sockets, JSON or the ledger.
//
// # Trees
//
// A delegation runs one command, the leader, which Start puts in a new
// process group of its own (its PID is the group ID) and tags through its
// environment: TagEnv holds the delegation's handle and ParentEnv the chain
// of handles of the enclosing delegations, outermost first, ending with its
// own. Children inherit both, so a Tree is every process that
//
//   - carries the handle in TagEnv or in ParentEnv's chain (Tagged), which
//     finds descendants that left the group, say after setsid, and the
//     processes of nested delegations; or
//   - is in the leader's process group while the leader, with the identity
//     recorded when it started (Identify), still exists; or
//   - is the leader itself.
//
// Tree.Members scans /proc once and returns the live ones; Tree.Count is
// their number. The calling process is never a member, even when it
// carries the tag.
//
// # Identity and PID recycling
//
// A PID names a process only until the process is reaped; the kernel then
// hands the number to the next process it creates. A PID recorded a minute
// ago may name a shell of someone else's by now. An Ident pairs the PID with
// the start time from /proc/PID/stat (clock ticks since boot), which the
// recycled PID does not share, and every signal this package sends is
// checked against it first. The group rule leans on the same fact: a group
// ID cannot be handed out again while any process still uses it, and the
// leader, alive or a zombie not yet reaped, holds it; so while the leader
// with its recorded start time is present, its group is the one Start made.
//
// # Signals
//
// Checking the start time and then calling kill(2) leaves a window in which
// the process can exit, be reaped and its PID be reused. Signal closes it
// with a pidfd: pidfd_open pins the process that holds the PID at that
// moment, the start time is read again, and only if it still matches is the
// signal sent through the pidfd, which can reach no other process. A process
// that is gone, a zombie, or has another start time gives ErrGone and is
// not signalled. On kernels without pidfd_open (before 5.3), or where a
// seccomp filter forbids it, Signal falls back to check-then-kill, which has
// the window above.
//
// Tree.Stop sends SIGTERM to every member, waits up to a grace period for
// them to exit, then sends SIGKILL to whatever is left and keeps rescanning,
// signalling processes forked meanwhile, until no member is left or its
// context ends.
//
// # Owner side
//
// The owner of a delegation (control/supervise, in `scv delegate`) starts
// the command with Start and, having called BecomeSubreaper, reaps it with
// WaitTree, which also collects the orphaned descendants the kernel
// re-parents to it; ReapOrphans collects stragglers without blocking. Both wait for any child (wait4(-1)), so a process using
// them must not also wait for children by other means, such as exec.Cmd or
// os.Process.Wait: the statuses would be stolen from one or the other.
//
// # Limits
//
//   - A process that both clears TagEnv and ParentEnv (exec with a fresh
//     environment) and leaves the leader's group is found only while the
//     leader exists; once the leader is gone it is not found. Processes of
//     other users, whose environment cannot be read, are found by group only.
//   - Tagged reads the environment a process was started with
//     (/proc/PID/environ); changes it makes to its own environment later are
//     not seen, and a process that execs with a fresh environment loses the
//     tag.
//   - Members skips zombies, and Stop is done when every member has exited,
//     reaped or not. Zombies are reaped by their parent, not by this package
//     (except by an owner through WaitTree and ReapOrphans).
//   - Start times have a resolution of one clock tick (usually 10ms); a PID
//     reused within the same tick would not be told apart.
package proc
