package supervise

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"scv/control/api"
	"scv/reducer"
)

// DefaultHeartbeat is how often a Run sends a heartbeat while its command
// lives: a tenth of the daemon's default stale window.
const DefaultHeartbeat = 30 * time.Second

// ProgressPrefix marks a line of a supervised command's output that is
// recorded as the run's progress (the text after it).
const ProgressPrefix = "progress: "

// Run is one run of a task whose work is a command, run as a delegation.
type Run struct {
	// Delegation is the command. Its output is copied to Stdout line by
	// line, and its environment gets SCV_PROJECT, SCV_TASK and SCV_RUN.
	Delegation
	// Project and Task name the task.
	Project, Task string
	// HeartbeatEvery is how often a heartbeat is sent while the command
	// lives (0: DefaultHeartbeat).
	HeartbeatEvery time.Duration
}

// Run starts a run of the task, runs the command as Delegation.Run does,
// and finishes the run by how the command ended: succeeded on exit 0,
// cancelled when SIGINT or SIGTERM came through Signals (or ctx ended),
// failed otherwise. It returns the command's wait status; an error means
// the command did not run to its end (a run that was started is then
// finished failed). A progress, heartbeat or finish the daemon refuses is
// said in Notes; the command goes on.
func (r Run) Run(ctx context.Context) (unix.WaitStatus, error) {
	path, err := lookPath(r.Command)
	if err != nil {
		return 0, err
	}
	d := r.Delegation
	if d.Notes != nil { // written from more than one goroutine
		d.Notes = &lockedWriter{w: d.Notes}
	}
	st, err := d.call(ctx, api.CmdProjectRunStart{Project: r.Project, Task: r.Task, Agent: d.agent()})
	if err != nil {
		return 0, fmt.Errorf("start a run of task %s: %w", r.Task, err)
	}
	if st.Project == nil || st.Project.Project == nil {
		return 0, errors.New("start a run: the daemon's reply carries no project")
	}
	s := &supervised{d: &d, project: st.Project.Project.ID, run: st.Project.RunID}
	notef(d.Notes, "run %s of task %s started", s.run, r.Task)

	pr, pw, err := os.Pipe()
	if err != nil {
		s.finish(ctx, reducer.RunFailed)
		return 0, err
	}
	var out io.Writer = io.Discard
	if d.Stdout != nil {
		out = d.Stdout
	}
	env := d.Env
	if env == nil {
		env = os.Environ()
	}
	d.Env = append(slices.Clip(env), "SCV_PROJECT="+s.project, "SCV_TASK="+r.Task, "SCV_RUN="+s.run)
	d.Stdout = pw
	d.onSignal = func(sig os.Signal) {
		if sig == syscall.SIGINT || sig == syscall.SIGTERM {
			s.cancelled.Store(true)
		}
	}
	every := r.HeartbeatEvery
	if every <= 0 {
		every = DefaultHeartbeat
	}
	var wg sync.WaitGroup
	quit := make(chan struct{})
	wg.Go(func() { s.copyOutput(ctx, pr, out) })
	wg.Go(func() { s.heartbeats(ctx, every, quit) })

	ws, err := d.run(ctx, path)
	pw.Close() // the copy ends when the tree, gone now, closed its ends too
	close(quit)
	wg.Wait()
	status := reducer.RunSucceeded
	switch {
	case err != nil:
		status = reducer.RunFailed
	case s.cancelled.Load():
		status = reducer.RunCancelled
	case !ws.Exited() || ws.ExitStatus() != 0:
		status = reducer.RunFailed
	}
	s.finish(ctx, status)
	return ws, err
}

// supervised is one run's reports to the daemon.
type supervised struct {
	d            *Delegation
	project, run string
	cancelled    atomic.Bool
}

// copyOutput copies the command's output to w, line by line, recording the
// lines that start with ProgressPrefix as the run's progress.
func (s *supervised) copyOutput(ctx context.Context, from io.ReadCloser, w io.Writer) {
	defer from.Close()
	br := bufio.NewReaderSize(from, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			io.WriteString(w, line)
			if text, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), ProgressPrefix); ok && text != "" {
				s.report(ctx, api.CmdProjectRunProgress{Project: s.project, Run: s.run, Progress: text})
			}
		}
		if err != nil {
			return
		}
	}
}

// heartbeats sends a heartbeat every interval until quit.
func (s *supervised) heartbeats(ctx context.Context, every time.Duration, quit <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
			s.report(ctx, api.CmdProjectHeartbeat{Project: s.project, Run: &s.run})
		}
	}
}

// report sends cmd, saying so in Notes when it fails: the command goes on
// whatever the ledger says.
func (s *supervised) report(ctx context.Context, cmd api.Command) {
	if _, err := s.d.call(ctx, cmd); err != nil {
		notef(s.d.Notes, "%s: %v", cmd.Action(), err)
	}
}

func (s *supervised) finish(ctx context.Context, status reducer.RunStatus) {
	if _, err := s.d.call(ctx, api.CmdProjectRunFinish{Project: s.project, Run: s.run, Status: status}); err != nil {
		notef(s.d.Notes, "finish run %s as %s: %v", s.run, status, err)
		return
	}
	notef(s.d.Notes, "run %s %s", s.run, status)
}

// lockedWriter writes to w one Write at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
