package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"scv/control/api"
	"scv/control/delegations"
	"scv/control/proc"
	"scv/reducer"
)

// Exit codes of `scv delegate` and `scv project run exec` when the command
// did not run to its own end, after the conventions of env(1) and the
// shells: scv itself failed (125), the command could not be started (127).
const (
	exitFailed   = 125
	exitNotFound = 127
)

// DefaultRunHeartbeat is how often `scv project run exec` sends a
// heartbeat while its command lives: a tenth of the daemon's default stale
// window.
const DefaultRunHeartbeat = 30 * time.Second

// progressPrefix marks a line of a supervised command's output that is
// recorded as run progress.
const progressPrefix = "progress: "

// delegation is one command run as a registered delegation of the daemon:
// started in its own process group, tagged, registered, waited for, and
// unregistered.
type delegation struct {
	c       *client
	argv    []string
	agent   string
	session string
	env     []string // added to scv's own environment
	stdout  *os.File // nil: scv's own
	stderr  io.Writer
	// onSignal is called (before the signal is forwarded to the command's
	// process group) when scv gets SIGINT, SIGTERM or SIGHUP.
	onSignal func(os.Signal)

	handle string
	pid    int
}

// run starts the command, registers it, waits for it, and unregisters it.
// It returns the command's wait status; an error means the command did
// not run (and nothing of it is left running).
func (d *delegation) run() (unix.WaitStatus, error) {
	path, err := exec.LookPath(d.argv[0])
	if err != nil {
		return 0, exitError{exitNotFound, err}
	}
	// Descendants orphaned inside the tree are re-parented to scv, which
	// reaps them.
	if err := proc.BecomeSubreaper(); err != nil {
		return 0, exitError{exitFailed, err}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return 0, exitError{exitFailed, err}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	d.handle = ulid.Make().String()
	chain := os.Getenv(proc.ParentEnv)
	argv := append([]string{path}, d.argv[1:]...)
	stdout := d.stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	p, err := proc.Start(argv, cwd, append(os.Environ(), d.env...), d.handle, chain, os.Stdin, stdout, os.Stderr)
	if err != nil {
		return 0, exitError{exitFailed, err}
	}
	d.pid = p.Pid
	_, err = d.c.do(api.CmdDelegationRegister{
		Handle: d.handle, Agent: d.agent, Session: d.session, Parent: proc.ExtendChain(chain, d.handle),
		PID: uint32(p.Pid), OwnerPID: uint32(os.Getpid()), Cwd: cwd,
		// The chat that started the work, where its questions go.
		Chat: os.Getenv("SCV_CHAT"),
	})
	if err != nil {
		// Not registered, so not run: stop what was started.
		d.stopLocally()
		return 0, exitError{exitFailed, fmt.Errorf("register the delegation: %w", err)}
	}

	// Forward signals to the command's group while its leader is not yet
	// reaped: until then its PID (and so its group ID) cannot be reused.
	var mu sync.Mutex
	exited := false
	go func() {
		for sig := range sigs {
			if d.onSignal != nil {
				d.onSignal(sig)
			}
			mu.Lock()
			if !exited {
				syscall.Kill(-d.pid, sig.(syscall.Signal))
			}
			mu.Unlock()
		}
	}()
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, d.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	mu.Lock()
	exited = true
	mu.Unlock()
	ws, werr := proc.WaitTree(d.pid)
	if err == nil {
		err = werr
	}
	d.done()
	proc.ReapOrphans()
	if err != nil {
		return 0, exitError{exitFailed, fmt.Errorf("wait for the command: %w", err)}
	}
	return ws, nil
}

// done unregisters the delegation; the daemon stops whatever is left of
// its tree. A daemon that is restarting is retried for a while; a handle
// the daemon no longer knows was stopped by `delegation_kill` or reaped.
func (d *delegation) done() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := d.c.do(api.CmdDelegationDone{Handle: d.handle})
		var e *api.Error
		switch {
		case err == nil, errors.As(err, &e) && e.Data.Reason == api.ReasonNotFound:
			return
		case time.Now().After(deadline):
			fmt.Fprintf(d.stderr, "scv: unregister delegation %s: %v; stopping what is left of it here\n", d.handle, err)
			d.stopLocally()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopLocally stops the command's tree without the daemon.
func (d *delegation) stopLocally() {
	start, err := proc.Identify(d.pid)
	if err != nil {
		return
	}
	t := proc.Tree{Handle: d.handle, Leader: start}
	ctx, cancel := context.WithTimeout(context.Background(), delegations.DefaultKillGrace+5*time.Second)
	defer cancel()
	t.Stop(ctx, delegations.DefaultKillGrace)
	proc.WaitTree(d.pid)
	proc.ReapOrphans()
}

// DelegateOptions is `scv delegate`.
type DelegateOptions struct {
	c       *client
	Agent   string
	Session string
	Command []string
}

// agentFlags declares the flags `scv delegate` and `scv project run exec`
// share.
func agentFlags(cmd *cobra.Command, agent, session *string) {
	cmd.Flags().StringVar(agent, "agent", "", "the agent's `NAME` (default: the command's file name)")
	cmd.Flags().StringVar(session, "session", os.Getenv("SCV_SESSION"), "the SCV `SESSION` that starts it (env SCV_SESSION)")
}

// commandArgs splits `POSITIONAL... -- CMD ARGS...` at the dash: names
// are the positional arguments wanted before it.
func commandArgs(cmd *cobra.Command, args []string, names ...string) (pos, command []string, err error) {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 || dash == len(args) {
		return nil, nil, usagef("%s: missing the command: give it after --", cmd.CommandPath())
	}
	pos, command = args[:dash], args[dash:]
	if len(pos) < len(names) {
		return nil, nil, usagef("%s: missing %s before --", cmd.CommandPath(), strings.Join(names[len(pos):], " "))
	}
	if len(pos) > len(names) {
		return nil, nil, usagef("%s: unexpected argument %q before --", cmd.CommandPath(), pos[len(names)])
	}
	return pos, command, nil
}

func newDelegateCmd(c *client) *cobra.Command {
	o := &DelegateOptions{c: c}
	cmd := &cobra.Command{
		Use:   "delegate [--agent NAME] -- CMD [ARGS...]",
		Short: "Run a command as a delegation the daemon tracks",
		Long: `Run CMD as a delegation: in a process group of its own, tagged, and
registered with the daemon, so that scv delegations lists it with its live
processes, scv delegations kill stops its whole tree, and the daemon stops
it by itself if this scv process dies. scv exits with CMD's code (125 when
scv itself failed, 127 when CMD could not be started).`,
		Example: `  scv delegate --agent codex -- codex exec "fix the build"
  scv delegate -- make test`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, command, err := commandArgs(cmd, args)
			if err != nil {
				return err
			}
			o.Command = command
			return o.run()
		},
	}
	agentFlags(cmd, &o.Agent, &o.Session)
	return cmd
}

func (o *DelegateOptions) run() error {
	d := &delegation{c: o.c, argv: o.Command, agent: agentName(o.Agent, o.Command), session: o.Session, stderr: o.c.stderr}
	ws, err := d.run()
	if err != nil {
		return err
	}
	return exitError{code: proc.ExitCode(ws)}
}

func agentName(flagValue string, command []string) string {
	if flagValue != "" {
		return flagValue
	}
	return filepath.Base(command[0])
}

// RunExecOptions is `scv project run exec`.
type RunExecOptions struct {
	c              *client
	Project, Task  string
	Agent, Session string
	HeartbeatEvery time.Duration
	Command        []string
}

func newRunExecCmd(c *client) *cobra.Command {
	o := &RunExecOptions{c: c}
	cmd := &cobra.Command{
		Use:   "exec PROJECT TASK [--agent NAME] -- CMD [ARGS...]",
		Short: "Run a command as a supervised run of a task",
		Long: `Start a run of TASK, run CMD as a delegation (see scv delegate), send
heartbeats while it lives (--heartbeat-every), record every line of its
output that starts "progress: " as the run's progress, and finish the run
succeeded (exit 0), failed (any other exit) or cancelled (Ctrl-C or
SIGTERM to scv). scv exits with CMD's code (125 when scv itself failed,
127 when CMD could not be started). CMD sees SCV_PROJECT, SCV_TASK and
SCV_RUN.`,
		Example: `  scv project run exec acme $T --agent codex -- codex exec "fix the build"
  scv project run exec acme $T -- sh -c 'echo "progress: compiling"; make'`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeProjectTask(),
		RunE: func(cmd *cobra.Command, args []string) error {
			pos, command, err := commandArgs(cmd, args, "PROJECT", "TASK")
			if err != nil {
				return err
			}
			if o.HeartbeatEvery <= 0 {
				return usagef("--heartbeat-every must be positive")
			}
			o.Project, o.Task, o.Command = pos[0], pos[1], command
			return o.run()
		},
	}
	agentFlags(cmd, &o.Agent, &o.Session)
	cmd.Flags().DurationVar(&o.HeartbeatEvery, "heartbeat-every", DefaultRunHeartbeat, "send a heartbeat this often while the command lives")
	return cmd
}

func (o *RunExecOptions) run() error {
	c, command, stdout, stderr := o.c, o.Command, o.c.stdout, o.c.stderr
	pos := []string{o.Project, o.Task}
	if _, err := exec.LookPath(command[0]); err != nil {
		return exitError{exitNotFound, err}
	}
	name := agentName(o.Agent, command)
	st, err := c.do(api.CmdProjectRunStart{Project: pos[0], Task: pos[1], Agent: name})
	if err != nil {
		return exitError{exitFailed, err}
	}
	if st.Project == nil || st.Project.Project == nil {
		return exitError{exitFailed, errors.New("run start: the daemon's reply carries no project")}
	}
	project, run := st.Project.Project.ID, st.Project.RunID
	fmt.Fprintf(stderr, "scv: run %s of task %s started\n", run, pos[1])

	r := &supervisedRun{c: c, project: project, run: run, stderr: stderr}
	pr, pw, err := os.Pipe()
	if err != nil {
		r.finish(reducer.RunFailed)
		return exitError{exitFailed, err}
	}
	d := &delegation{
		c: c, argv: command, agent: name, session: o.Session, stdout: pw, stderr: stderr,
		env: []string{"SCV_PROJECT=" + project, "SCV_TASK=" + pos[1], "SCV_RUN=" + run},
		onSignal: func(sig os.Signal) {
			if sig == syscall.SIGINT || sig == syscall.SIGTERM {
				r.cancel()
			}
		},
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		r.copyOutput(pr, stdout)
	}()
	stop := make(chan struct{})
	go r.heartbeats(o.HeartbeatEvery, stop)

	ws, err := d.run()
	pw.Close()
	<-copied // the command's output is read to its end (its descendants gone)
	close(stop)
	if err != nil {
		r.finish(reducer.RunFailed)
		return err
	}
	status := reducer.RunSucceeded
	switch {
	case r.cancelled():
		status = reducer.RunCancelled
	case !ws.Exited() || ws.ExitStatus() != 0:
		status = reducer.RunFailed
	}
	r.finish(status)
	return exitError{code: proc.ExitCode(ws)}
}

// supervisedRun reports one run's progress, heartbeats and finish.
type supervisedRun struct {
	c            *client
	project, run string
	stderr       io.Writer

	mu       sync.Mutex
	signaled bool
}

func (r *supervisedRun) cancel() {
	r.mu.Lock()
	r.signaled = true
	r.mu.Unlock()
}

func (r *supervisedRun) cancelled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.signaled
}

// copyOutput copies the command's output to w, line by line, recording
// the lines that start with progressPrefix as run progress.
func (r *supervisedRun) copyOutput(from io.ReadCloser, w io.Writer) {
	defer from.Close()
	br := bufio.NewReaderSize(from, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			io.WriteString(w, line)
			if text, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), progressPrefix); ok && text != "" {
				r.report(api.CmdProjectRunProgress{Project: r.project, Run: r.run, Progress: text})
			}
		}
		if err != nil {
			return
		}
	}
}

// heartbeats sends a heartbeat every interval until stop.
func (r *supervisedRun) heartbeats(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			run := r.run
			r.report(api.CmdProjectHeartbeat{Project: r.project, Run: &run})
		}
	}
}

// report sends cmd, saying on stderr when the daemon refused it: the
// command goes on whatever the ledger says.
func (r *supervisedRun) report(cmd api.Command) {
	if _, err := r.c.do(cmd); err != nil {
		fmt.Fprintf(r.stderr, "scv: %s: %v\n", cmd.Action(), err)
	}
}

func (r *supervisedRun) finish(status reducer.RunStatus) {
	if _, err := r.c.do(api.CmdProjectRunFinish{Project: r.project, Run: r.run, Status: status}); err != nil {
		fmt.Fprintf(r.stderr, "scv: finish run %s as %s: %v\n", r.run, status, err)
		return
	}
	fmt.Fprintf(r.stderr, "scv: run %s %s\n", r.run, status)
}
