package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"
	"golang.org/x/sys/unix"

	"scv/control/api"
	"scv/control/proc"
)

// Exit codes of a command that did not run to its own end, after the
// conventions of env(1) and the shells: the supervisor failed (the daemon
// refused or could not be reached, the process could not be started), or
// the command could not be found.
const (
	ExitFailed   = 125
	ExitNotFound = 127
)

// ChatEnv names the chat that started the work (`<channel>:<account>`),
// where the questions of a delegation go.
const ChatEnv = "SCV_CHAT"

const (
	// callTimeout bounds one call to the daemon.
	callTimeout = 30 * time.Second
	// unregisterFor is how long an unanswered delegation_done is tried
	// again before the owner stops the tree itself.
	unregisterFor = 10 * time.Second
	retryEvery    = 200 * time.Millisecond
	reapEvery     = 20 * time.Millisecond
)

// Delegation is one command run as a delegation of the daemon.
type Delegation struct {
	// Daemon is the daemon the delegation is registered with. It must be
	// safe for concurrent use.
	Daemon api.Handler
	// Command is the command and its arguments; Command[0] is looked up
	// as exec.LookPath does.
	Command []string
	// Agent names the agent (default: Command[0]'s file name); Session
	// is the SCV session that starts it.
	Agent, Session string
	// Dir is the command's working directory ("": the current one).
	Dir string
	// Env is the command's environment (nil: this process's). Its
	// proc.ParentEnv is the chain of the delegations around this one, and
	// its ChatEnv the chat the delegation's questions go to.
	Env []string
	// Stdin, Stdout and Stderr are the command's (nil: /dev/null).
	Stdin, Stdout, Stderr *os.File
	// Signals are sent on to the command's process group while its
	// leader is not yet reaped. The command line relays its own SIGINT,
	// SIGTERM and SIGHUP.
	Signals <-chan os.Signal
	// Notes gets the supervisor's own lines for people, each starting
	// "scv: " (nil: none).
	Notes io.Writer

	// onSignal sees each signal (and SIGTERM when ctx ends) before it is
	// sent on.
	onSignal func(os.Signal)
}

// Run starts the command, registers it, waits for it and for its tree,
// and unregisters it. It returns the command's wait status. An error
// means the command did not run to its end, and nothing of it is left
// running; ExitCode says which code it is.
//
// When ctx ends while the command runs, its process group gets SIGTERM,
// as if Signals had delivered it. The calls to the daemon carry ctx's
// values but not its end: the delegation is unregistered all the same.
func (d Delegation) Run(ctx context.Context) (unix.WaitStatus, error) {
	path, err := lookPath(d.Command)
	if err != nil {
		return 0, err
	}
	return d.run(ctx, path)
}

// ExitCode is the exit code of a supervisor whose Run returned ws and
// err: ExitNotFound when the command could not be found (an
// *exec.Error), ExitFailed for any other error, else the command's own
// (proc.ExitCode).
func ExitCode(ws unix.WaitStatus, err error) int {
	var notFound *exec.Error
	switch {
	case errors.As(err, &notFound):
		return ExitNotFound
	case err != nil:
		return ExitFailed
	}
	return proc.ExitCode(ws)
}

func lookPath(command []string) (string, error) {
	if len(command) == 0 {
		return "", errors.New("no command to run")
	}
	return exec.LookPath(command[0])
}

func (d *Delegation) agent() string {
	if d.Agent != "" {
		return d.Agent
	}
	return filepath.Base(d.Command[0])
}

// run is Run with the command found at path.
func (d *Delegation) run(ctx context.Context, path string) (unix.WaitStatus, error) {
	// Descendants orphaned inside the tree are re-parented to this
	// process, which reaps them.
	if err := proc.BecomeSubreaper(); err != nil {
		return 0, err
	}
	dir, err := filepath.Abs(d.Dir)
	if err != nil {
		return 0, err
	}
	env := d.Env
	if env == nil {
		env = os.Environ()
	}
	handle := ulid.Make().String()
	chain := lookupEnv(env, proc.ParentEnv)
	argv := append([]string{path}, d.Command[1:]...)
	p, err := proc.Start(argv, dir, env, handle, chain, d.Stdin, d.Stdout, d.Stderr)
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	// The leader's identity, taken while it cannot be reaped, finds its
	// tree after it is.
	leader, err := proc.Identify(pid)
	if err == nil {
		_, err = d.call(ctx, api.CmdDelegationRegister{
			Handle: handle, Agent: d.agent(), Session: d.Session, Parent: proc.ExtendChain(chain, handle),
			PID: uint32(pid), OwnerPID: uint32(os.Getpid()), Cwd: dir, Chat: lookupEnv(env, ChatEnv),
		})
		if err != nil {
			err = fmt.Errorf("register the delegation: %w", err)
		}
	}
	tree := proc.Tree{Handle: handle, Leader: leader}
	if err != nil {
		// Not registered, so not run: stop what was started.
		stop(tree)
		proc.WaitTree(pid)
		reap(tree)
		return 0, err
	}

	// Send signals on to the command's group while its leader is not yet
	// reaped: until then its PID (and so its group ID) cannot be reused.
	// The leader is reaped only once this has stopped.
	forwarded := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(forwarded)
		sigs, ended := d.Signals, ctx.Done()
		for {
			var sig os.Signal
			select {
			case <-quit:
				return
			case s, ok := <-sigs:
				if !ok {
					sigs = nil
					continue
				}
				sig = s
			case <-ended:
				ended, sig = nil, syscall.SIGTERM
			}
			if d.onSignal != nil {
				d.onSignal(sig)
			}
			if s, ok := sig.(syscall.Signal); ok {
				syscall.Kill(-pid, s)
			}
		}
	}()
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	close(quit)
	<-forwarded
	ws, werr := proc.WaitTree(pid)
	if err == nil {
		err = werr
	}
	d.done(ctx, tree)
	reap(tree)
	if err != nil {
		return 0, fmt.Errorf("wait for the command: %w", err)
	}
	return ws, nil
}

// done unregisters the delegation; the daemon stops whatever is left of
// its tree. A daemon that does not answer (it may be restarting) is tried
// again for a while, then the tree is stopped here. A handle the daemon no
// longer knows was stopped by delegation_kill, or as an orphan.
func (d *Delegation) done(ctx context.Context, tree proc.Tree) {
	deadline := time.Now().Add(unregisterFor)
	for {
		_, err := d.call(ctx, api.CmdDelegationDone{Handle: tree.Handle})
		switch {
		case err == nil, api.ErrorOf(err).Data.Reason == api.ReasonNotFound:
			return
		case time.Now().After(deadline):
			notef(d.Notes, "unregister delegation %s: %v; stopping what is left of it here", tree.Handle, err)
			stop(tree)
			return
		}
		time.Sleep(retryEvery)
	}
}

// reap reaps what is left of the tree, waiting (as long as a stop takes)
// for its processes to end: someone else may still be stopping them, such
// as a delegation_kill.
func reap(tree proc.Tree) {
	deadline := time.Now().Add(proc.DefaultKillGrace + 5*time.Second)
	for tree.Count() > 0 && time.Now().Before(deadline) {
		proc.ReapOrphans()
		time.Sleep(reapEvery)
	}
	proc.ReapOrphans()
}

// call sends cmd to the daemon, with a deadline of its own.
func (d *Delegation) call(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	return d.Daemon.Handle(ctx, cmd)
}

// stop stops the tree without the daemon.
func stop(tree proc.Tree) {
	ctx, cancel := context.WithTimeout(context.Background(), proc.DefaultKillGrace+5*time.Second)
	defer cancel()
	tree.Stop(ctx, proc.DefaultKillGrace)
}

// lookupEnv is key's value in env ("" if unset).
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// notef writes one line for people to w, if any.
func notef(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "scv: "+format+"\n", args...)
	}
}
