package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"scv/control/api"
	"scv/control/rpc"
)

// daemonArgs are the flags every daemon of the harness runs with: a stale
// window long enough that no run goes stale while the harness writes.
var daemonArgs = []string{"--stale-after", "1h"}

// callTimeout bounds one request, only so that a hung daemon fails the
// check instead of hanging it.
const callTimeout = 30 * time.Second

// call sends one command on c with callTimeout.
func call(c *rpc.Client, cmd api.Command) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return c.CallRaw(ctx, cmd)
}

// replied reports whether err is the daemon's answer (a refusal), as
// opposed to no answer at all (the connection broke, or timed out).
func replied(err error) bool {
	var e *api.Error
	return errors.As(err, &e)
}

// isUnavailable reports whether err is the daemon's refusal
// `unavailable`: its ledger's database could not be reached, and nothing
// of the request was kept.
func isUnavailable(err error) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Data.Reason == api.ReasonUnavailable
}

// timedOut reports whether err is a request that ran out of callTimeout.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// setup creates the project name with n tasks in the daemon at sock and
// returns the project's ID and the tasks' IDs.
func setup(ctx context.Context, sock, name, workspace string, n int) (string, []string, error) {
	c, err := rpc.Dial(ctx, sock)
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	st, err := c.Call(ctx, api.CmdProjectCreate{Name: name, Workspace: workspace})
	if err != nil {
		return "", nil, fmt.Errorf("project_create: %w", err)
	}
	project := st.Project.Project.ID
	tasks := make([]string, n)
	for i := range n {
		st, err := c.Call(ctx, api.CmdProjectTaskAdd{Project: project, Title: fmt.Sprintf("task %d", i), DependsOn: []string{}})
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
func runOf(c *rpc.Client, project, task string) (string, error) {
	raw, err := call(c, api.CmdProjectTasks{Project: project})
	if err != nil {
		return "", err
	}
	var st api.DaemonStatus
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
