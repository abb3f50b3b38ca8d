// Package daemonproc runs the real `scv daemon` binary for the harnesses
// (cmd/scvbench, cmd/scvrel) and for the tests that need the daemon as a
// process of its own (control/daemon's: killed with SIGKILL, stopped by a
// signal, restarted into another release): it builds it, starts it on a
// database and a socket, waits until it answers, and stops or kills it;
// and it says what the binary was built from, for the harnesses' reports.
package daemonproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"scv/control/api"
	"scv/control/rpc"
)

// Build compiles the scv binary (the main package `make build` compiles)
// to bin, without the race detector whatever the harness runs under;
// flags go to `go build` (such as -overlay, for a variant of the daemon
// built for one experiment).
func Build(ctx context.Context, bin string, flags ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", bin, "scv/cmd/scv")
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %v: %s", err, out)
	}
	return nil
}

// Daemon is one `scv daemon` process.
type Daemon struct {
	Cmd     *exec.Cmd
	Sock    string
	Started time.Time
	// LogPath is the file its standard output and error go to: SOCK.log,
	// emptied at the start. A file, not a pipe: it can be read while the
	// daemon runs, and a daemon that a restart started, which inherits
	// it, does not keep Wait waiting.
	LogPath string
	exited  chan struct{}
	waitErr error
}

// Start starts `scv daemon --db DB --socket SOCK EXTRA...` and returns at
// once; Ready waits for it to answer. Should the harness die, the kernel
// kills the daemon with it.
func Start(bin, db, sock string, extra ...string) (*Daemon, error) {
	return StartEnv(nil, bin, db, sock, extra...)
}

// StartEnv is Start with env added to the harness's environment (such as
// SCV_FAILPOINTS or SCV_CLOCK_SKEW for one daemon of a fleet; a variable
// given here wins over the harness's own).
func StartEnv(env []string, bin, db, sock string, extra ...string) (*Daemon, error) {
	d := &Daemon{Sock: sock, LogPath: sock + ".log", exited: make(chan struct{})}
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		return nil, err
	}
	// Appending: a successor that inherits the file writes after the
	// others, wherever their offsets are.
	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	d.Cmd = exec.Command(bin, append([]string{"daemon", "--db", db, "--socket", sock}, extra...)...)
	if env != nil {
		d.Cmd.Env = append(os.Environ(), env...)
	}
	d.Cmd.Stdout, d.Cmd.Stderr = logf, logf
	d.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d.Started = time.Now()
	if err := d.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { d.waitErr = d.Cmd.Wait(); close(d.exited) }()
	return d, nil
}

// Err is how the process ended, with its log; nil while it runs or after
// a clean exit.
func (d *Daemon) Err() error {
	if d.Running() || d.waitErr == nil {
		return nil
	}
	return fmt.Errorf("daemon: %v: %s", d.waitErr, d.Log())
}

// Log is what the process (and any daemon a restart started from it)
// wrote so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.LogPath)
	return string(b)
}

// Exited is closed once the process has ended; Cmd.ProcessState then
// says how.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Running reports whether the process has not exited.
func (d *Daemon) Running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// Ready polls `status` until the daemon answers and returns the time since
// the process was started. limit only guards against a hang.
func (d *Daemon) Ready(ctx context.Context, limit time.Duration) (time.Duration, error) {
	return d.ReadyWith(ctx, limit, api.CmdStatus{})
}

// ReadyWith polls cmd until the daemon answers it with a result (not an
// error) and returns the time since the process was started: with
// project_status, the time until a project is loaded and answered. limit
// only guards against a hang.
func (d *Daemon) ReadyWith(ctx context.Context, limit time.Duration, cmd api.Command) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		select {
		case <-d.exited:
			return 0, fmt.Errorf("daemon exited: %v: %s", d.waitErr, d.Log())
		case <-ctx.Done():
			if last != nil {
				return 0, fmt.Errorf("no %s reply within %s (last: %v)", cmd.Action(), limit, last)
			}
			return 0, fmt.Errorf("no %s reply within %s", cmd.Action(), limit)
		default:
		}
		// The socket listens before the ledger opens: a connection made
		// early waits in the backlog and is answered once serving starts.
		c, err := rpc.Dial(ctx, d.Sock)
		if err != nil {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		_, err = c.Call(ctx, cmd)
		c.Close()
		if err == nil {
			return time.Since(d.Started), nil
		}
		last = err
		time.Sleep(2 * time.Millisecond)
	}
}

// Pid is the process's pid.
func (d *Daemon) Pid() int { return d.Cmd.Process.Pid }

// Kill sends SIGKILL and waits until the process is reaped. It reports
// whether the daemon was still running when it was killed.
func (d *Daemon) Kill() bool {
	alive := d.Running()
	d.Cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	return alive
}

// Stop sends SIGTERM and waits for a clean exit (status 0).
func (d *Daemon) Stop() error {
	if !d.Running() {
		return fmt.Errorf("daemon had exited: %v: %s", d.waitErr, d.Log())
	}
	d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.Kill()
		return errors.New("daemon did not stop within 30s of SIGTERM")
	}
	return d.Err()
}
