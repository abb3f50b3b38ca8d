package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"scv/control/api"
	"scv/control/rpc"
	"scv/reducer"
)

// linClient is one client of the linear check: it sends one operation at
// a time to its daemon, on the projects of the current epoch, and records
// each with its call and return times.
type linClient struct {
	r      *linRun
	worker int // its index: its daemon is worker % linDaemons
	// proc is its client ID in the history: a client whose operation's
	// outcome is unknown goes on as a new one, since that operation never
	// returns (as Jepsen's processes do).
	proc int
	rng  *rand.Rand
	conn *rpc.Client
	know map[string]*clientView // what it last saw, by project
	ops  []porcupine.Operation
	sent int
}

// clientView is what a client last saw of a project: enough to choose
// operations that may succeed (the model, not this, decides what is
// right).
type clientView struct {
	tasks   []taskView
	lastSeq uint64
	runs    map[string]string // a run it knows was running → its task
}

// The mix of operations, in parts of 100.
var opMix = []struct {
	kind opKind
	part int
}{{opClaim, 25}, {opProgress, 20}, {opFinish, 15}, {opRetry, 10}, {opTasks, 20}, {opEvents, 10}}

func (c *linClient) loop(stop <-chan struct{}) {
	defer func() {
		if c.conn != nil {
			c.conn.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		ps := c.r.epoch()
		p := ps[c.rng.IntN(len(ps))]
		in, ok := c.choose(p)
		if !ok {
			continue
		}
		c.do(in)
	}
}

// choose picks the next operation on project p.
func (c *linClient) choose(p *linProject) (linInput, bool) {
	v := c.know[p.ID]
	if v == nil {
		v = &clientView{runs: map[string]string{}}
		c.know[p.ID] = v
	}
	n := c.rng.IntN(100)
	kind := opTasks
	for _, m := range opMix {
		if n < m.part {
			kind = m.kind
			break
		}
		n -= m.part
	}
	in := linInput{ID: c.r.nextOp(), Kind: kind, Project: p.ID}
	pick := func(status reducer.TaskStatus) string {
		var ids []string
		for _, t := range v.tasks {
			if t.Status == status {
				ids = append(ids, t.ID)
			}
		}
		if len(ids) == 0 || c.rng.IntN(5) == 0 {
			return p.Tasks[c.rng.IntN(len(p.Tasks))] // now and then, any
		}
		return ids[c.rng.IntN(len(ids))]
	}
	switch kind {
	case opClaim:
		in.Task, in.Agent = pick(reducer.TaskReady), fmt.Sprintf("c%d", c.worker)
	case opRetry:
		if in.Task = pick(reducer.TaskFailed); c.rng.IntN(2) == 0 {
			in.Kind, in.Task = opTasks, "" // retries of tasks not failed are seldom worth one
		}
	case opProgress, opFinish:
		if len(v.runs) == 0 {
			in.Kind, in.Task, in.Agent = opClaim, pick(reducer.TaskReady), fmt.Sprintf("c%d", c.worker)
			break
		}
		runs := make([]string, 0, len(v.runs))
		for r := range v.runs {
			runs = append(runs, r)
		}
		in.Run = runs[c.rng.IntN(len(runs))]
		in.Task = v.runs[in.Run]
		if kind == opProgress {
			c.sent++
			in.Text = fmt.Sprintf("c%d-%d", c.worker, c.sent)
		} else {
			// Mostly failed: failed tasks are run again, and retried.
			in.Status = []reducer.RunStatus{reducer.RunSucceeded, reducer.RunFailed, reducer.RunFailed, reducer.RunFailed,
				reducer.RunCancelled}[c.rng.IntN(5)]
		}
	case opEvents:
		if c.rng.IntN(4) > 0 {
			in.After = v.lastSeq
		}
	}
	return in, true
}

// command is the daemon's command for an operation.
func (in linInput) command() api.Command {
	switch in.Kind {
	case opClaim:
		return api.CmdProjectRunStart{Project: in.Project, Task: in.Task, Agent: in.Agent}
	case opProgress:
		return api.CmdProjectRunProgress{Project: in.Project, Run: in.Run, Progress: in.Text}
	case opFinish:
		return api.CmdProjectRunFinish{Project: in.Project, Run: in.Run, Status: in.Status}
	case opRetry:
		return api.CmdProjectTaskRetry{Project: in.Project, Task: in.Task}
	case opTasks:
		return api.CmdProjectTasks{Project: in.Project}
	}
	after := in.After
	return api.CmdProjectEvents{Project: in.Project, After: &after}
}

// do sends one operation and records it.
func (c *linClient) do(in linInput) {
	sock := c.r.socks[c.worker%linDaemons]
	if c.conn == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := rpc.Dial(ctx, sock)
		cancel()
		if err != nil {
			time.Sleep(50 * time.Millisecond) // the daemon is restarting: nothing was sent
			return
		}
		c.conn = conn
	}
	call := c.r.now()
	ctx, cancel := context.WithTimeout(context.Background(), linOpTimeout)
	raw, err := c.conn.CallRaw(ctx, in.command())
	cancel()
	ret := c.r.now()
	out := c.outcome(in, raw, err)
	if out.Unknown {
		// It may take effect at any time from now on: it never returns.
		ret = math.MaxInt64
		c.conn.Close()
		c.conn = nil
	}
	c.ops = append(c.ops, porcupine.Operation{ClientId: c.proc, Input: in, Call: call, Output: out, Return: ret})
	if out.Unknown {
		c.proc = int(c.r.procs.Add(1) - 1)
		// A fleet in trouble: wait a little before the next, as a
		// client that backs off does.
		time.Sleep(time.Duration(20+c.rng.IntN(80)) * time.Millisecond)
	}
	c.learn(in, out)
}

// outcome is what the answer (or its absence) says of the operation.
func (c *linClient) outcome(in linInput, raw json.RawMessage, err error) linOutput {
	if err != nil {
		if !replied(err) || isUnavailable(err) {
			return linOutput{Unknown: true}
		}
		return linOutput{Reason: api.ErrorOf(err).Data.Reason}
	}
	var st api.DaemonStatus
	if err := json.Unmarshal(raw, &st); err != nil || st.Project == nil {
		c.r.p.addf("%s: an answer that is not a project reply: %.200s", in.Kind, raw)
		return linOutput{Unknown: true}
	}
	var out linOutput
	switch in.Kind {
	case opClaim:
		out.Run = st.Project.RunID
	case opTasks:
		out.Tasks = tasksView(st.Project.Tasks)
	case opEvents:
		if out.Events, err = eventsView(st.Project.Events); err != nil {
			c.r.p.addf("events: %v", err)
			return linOutput{Unknown: true}
		}
	}
	return out
}

// learn updates what the client knows from an outcome.
func (c *linClient) learn(in linInput, out linOutput) {
	v := c.know[in.Project]
	if in.Kind == opClaim || in.Kind == opRetry {
		v.forget(in.Task) // whatever happened, its status is not what it saw
	}
	if out.Unknown || out.Reason != "" {
		if in.Kind == opProgress || in.Kind == opFinish {
			delete(v.runs, in.Run) // refused: most likely no longer running
		}
		return
	}
	switch in.Kind {
	case opClaim:
		v.runs[out.Run] = in.Task
	case opFinish:
		delete(v.runs, in.Run)
		v.forget(in.Task)
	case opTasks:
		v.tasks = slices.Clone(out.Tasks) // its own: forget changes it
		for _, t := range out.Tasks {
			if t.Run != "" && t.Status == reducer.TaskRunning {
				v.runs[t.Run] = t.ID
			}
		}
	case opEvents:
		if n := len(out.Events); n > 0 {
			v.lastSeq = out.Events[n-1].Seq
		}
	}
}

// forget marks what the client saw of task as out of date.
func (v *clientView) forget(task string) {
	for i := range v.tasks {
		if v.tasks[i].ID == task {
			v.tasks[i].Status = ""
		}
	}
}
