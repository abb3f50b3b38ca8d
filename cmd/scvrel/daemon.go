package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"scv/control"
)

// buildDaemon compiles the scv binary (the same main package `make build`
// compiles) to bin, without the race detector whatever the harness runs
// under.
func buildDaemon(ctx context.Context, bin string) error {
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "scv/cmd/scv").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %v: %s", err, out)
	}
	return nil
}

// daemonArgs are the flags every daemon of the harness runs with: a stale
// window long enough that no run goes stale while the harness writes.
var daemonArgs = []string{"--stale-after", "1h"}

// daemon is one `scv daemon` process.
type daemon struct {
	cmd     *exec.Cmd
	sock    string
	started time.Time
	logs    bytes.Buffer // read only after the process ended
	exited  chan struct{}
	waitErr error
}

// startDaemon starts `scv daemon --db DB --socket SOCK` and returns at
// once; ready waits for it to answer.
func startDaemon(bin, db, sock string) (*daemon, error) {
	d := &daemon{sock: sock, exited: make(chan struct{})}
	args := append([]string{"daemon", "--db", db, "--socket", sock}, daemonArgs...)
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stderr = &d.logs
	// Should the harness die, the kernel kills the daemon with it.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()
	return d, nil
}

// running reports whether the process has not exited.
func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// ready polls `status` until the daemon answers and returns the time since
// the process was started. limit only guards against a hang.
func (d *daemon) ready(ctx context.Context, limit time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		select {
		case <-d.exited:
			return 0, fmt.Errorf("daemon exited: %v: %s", d.waitErr, d.logs.String())
		case <-ctx.Done():
			return 0, fmt.Errorf("no status reply within %s", limit)
		default:
		}
		c, err := control.Dial(ctx, d.sock)
		if err != nil {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		_, err = c.Call(ctx, control.CmdStatus{})
		c.Close()
		if err == nil {
			return time.Since(d.started), nil
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the process is reaped. It reports
// whether the daemon was still running when it was killed.
func (d *daemon) kill() bool {
	alive := d.running()
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	return alive
}

// stop sends SIGTERM and waits for a clean exit (status 0).
func (d *daemon) stop() error {
	if !d.running() {
		return fmt.Errorf("daemon had exited: %v: %s", d.waitErr, d.logs.String())
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.kill()
		return errors.New("daemon did not stop within 30s of SIGTERM")
	}
	if d.waitErr != nil {
		return fmt.Errorf("daemon: %v: %s", d.waitErr, d.logs.String())
	}
	return nil
}

// callTimeout bounds one request, only so that a hung daemon fails the
// check instead of hanging it.
const callTimeout = 30 * time.Second

// call sends one command on c with callTimeout.
func call(c *control.Client, cmd control.Command) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return c.CallRaw(ctx, cmd)
}

// replied reports whether err is the daemon's answer (a refusal), as
// opposed to no answer at all (the connection broke, or timed out).
func replied(err error) bool {
	var e *control.Error
	return errors.As(err, &e)
}

// timedOut reports whether err is a request that ran out of callTimeout.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// setup creates the project name with n tasks in the daemon at sock and
// returns the project's ID and the tasks' IDs.
func setup(ctx context.Context, sock, name, workspace string, n int) (string, []string, error) {
	c, err := control.Dial(ctx, sock)
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	st, err := c.Call(ctx, control.CmdProjectCreate{Name: name, Workspace: workspace})
	if err != nil {
		return "", nil, fmt.Errorf("project_create: %w", err)
	}
	project := st.Project.Project.ID
	tasks := make([]string, n)
	for i := range n {
		st, err := c.Call(ctx, control.CmdProjectTaskAdd{Project: project, Title: fmt.Sprintf("task %d", i), DependsOn: []string{}})
		if err != nil {
			return "", nil, fmt.Errorf("project_task_add: %w", err)
		}
		tasks[i] = st.Project.TaskID
	}
	return project, tasks, nil
}

// runOf returns the run of task in project as project_tasks shows it: the
// way a client whose project_run_start got no reply learns whether the run
// was started.
func runOf(c *control.Client, project, task string) (string, error) {
	raw, err := call(c, control.CmdProjectTasks{Project: project})
	if err != nil {
		return "", err
	}
	var st control.DaemonStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", err
	}
	for _, t := range st.Project.Tasks {
		if t.ID == task && t.RunID != nil {
			return *t.RunID, nil
		}
	}
	return "", nil
}

// fileSize is the size of the file at path, 0 if there is none.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
