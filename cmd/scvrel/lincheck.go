package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"scv/control/api"
	"scv/control/rpc"
	"scv/reducer"
)

// The linear check's verdict: the final reads, the unknown writes settled
// by the final events, the events' times, and porcupine's check of the
// history with its picture.

// finalState is what the final reads found of one project.
type finalState struct {
	events []api.ProjectEvent
}

// checkTimes checks that the events were stamped by the server's clock:
// within the run, whatever a daemon's own clock said (the skew fault).
func (r *linRun) checkTimes(final map[string]*finalState) {
	lo, hi := uint64(r.began.Add(-time.Minute).Unix()), uint64(time.Now().Add(time.Minute).Unix())
	for id, f := range final {
		for _, ev := range f.events {
			if ev.TimestampUnixSeconds < lo || ev.TimestampUnixSeconds > hi {
				r.p.addf("event %d of project %s is stamped %s, outside the run (%s to %s): a daemon's clock stamped it",
					ev.Sequence, id, time.Unix(int64(ev.TimestampUnixSeconds), 0).Format(time.TimeOnly),
					time.Unix(int64(lo), 0).Format(time.TimeOnly), time.Unix(int64(hi), 0).Format(time.TimeOnly))
				return
			}
		}
	}
}

// finalReads reads every project's tasks and events once the faults are
// over, through each daemon in turn: operations of the history after all
// others, so the checker sees that they show every acknowledged write.
func (r *linRun) finalReads(ctx context.Context) (map[string]*finalState, []porcupine.Operation) {
	final := map[string]*finalState{}
	var ops []porcupine.Operation
	i := 0
	for _, ps := range r.epochs {
		for _, p := range ps {
			sock := r.socks[i%linDaemons]
			i++
			proc := int(r.procs.Add(1) - 1)
			c, _ := rpc.Dial(ctx, sock)
			call := r.now()
			st, err := callRetry(ctx, c, sock, api.CmdProjectTasks{Project: p.ID})
			if err != nil {
				r.p.addf("final read of project %s: %v", p.Name, err)
				continue
			}
			ops = append(ops, porcupine.Operation{ClientId: proc, Input: linInput{ID: -1, Kind: opTasks, Project: p.ID}, Call: call,
				Output: linOutput{Tasks: tasksView(st.Project.Tasks)}, Return: r.now()})
			call = r.now()
			st, err = callRetry(ctx, nil, sock, api.CmdProjectEvents{Project: p.ID})
			if c != nil {
				c.Close()
			}
			if err != nil {
				r.p.addf("final read of project %s: %v", p.Name, err)
				continue
			}
			views, err := eventsView(st.Project.Events)
			if err != nil {
				r.p.addf("project %s: %v", p.Name, err)
				continue
			}
			ops = append(ops, porcupine.Operation{ClientId: proc, Input: linInput{ID: -1, Kind: opEvents, Project: p.ID}, Call: call,
				Output: linOutput{Events: views}, Return: r.now()})
			final[p.ID] = &finalState{events: st.Project.Events}
		}
	}
	return final, ops
}

// check checks the history with porcupine, writes its picture into out,
// and returns the number of projects whose history is not linearizable
// (a problem for each, naming the operation that could not be placed).
func (r *linRun) check(ops []porcupine.Operation, out string) (int, string) {
	init := map[string]*linState{}
	for id, p := range r.byID {
		init[id] = p.init
	}
	model := linModel(init, r.names)
	res, info := porcupine.CheckOperationsVerbose(model, ops, linCheckTimeout)
	picture := filepath.Join(out, "linear-"+r.kind+".html")
	if err := porcupine.VisualizePath(model, info, picture); err != nil {
		r.p.addf("picture: %v", err)
		picture = ""
	}
	if res == porcupine.Ok {
		return 0, picture
	}
	// The history itself, to look into.
	dump := filepath.Join(out, "linear-"+r.kind+"-history.jsonl")
	if err := writeHistory(dump, ops); err != nil {
		r.p.addf("history: %v", err)
	}
	if res == porcupine.Unknown {
		r.p.addf("the checker gave up after %s (history in %s)", linCheckTimeout, dump)
		r.slowest(model, ops)
		return 0, picture
	}
	// Which projects: each partition alone.
	violations := 0
	for _, part := range model.Partition(ops) {
		if porcupine.CheckOperations(model, part) {
			continue
		}
		violations++
		in := part[0].Input.(linInput)
		p := r.byID[in.Project]
		_, pinfo := porcupine.CheckOperationsVerbose(model, part, linCheckTimeout)
		r.p.addf("project %s is not linearizable: %s", p.Name, unplaced(model, part, pinfo))
	}
	return violations, picture
}

// slowest checks each project's history alone, all at once, for a
// while, and names those the checker could not decide, with their
// operations whose outcome stayed unknown: what a search that gave up
// most likely spent its time on.
func (r *linRun) slowest(model porcupine.Model, ops []porcupine.Operation) {
	parts := model.Partition(ops)
	results := make([]porcupine.CheckResult, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = porcupine.CheckOperationsTimeout(model, part, linCheckTimeout/10)
		}()
	}
	wg.Wait()
	for i, part := range parts {
		var unknown []string
		for _, op := range part {
			if op.Return == math.MaxInt64 {
				unknown = append(unknown, fmt.Sprintf("%s (client %d at %.3f s)", model.DescribeOperation(op.Input, op.Output),
					op.ClientId, float64(op.Call)/1e9))
			}
		}
		name := r.byID[part[0].Input.(linInput).Project].Name
		switch results[i] {
		case porcupine.Unknown:
			r.p.addf("project %s (%d operations): undecided after %s; never returned: %s", name, len(part), linCheckTimeout/10,
				strings.Join(unknown, "; "))
		case porcupine.Illegal:
			r.p.addf("project %s (%d operations): not linearizable", name, len(part))
		}
	}
}

// unplaced describes where the longest linearization of a partition
// stopped: the operations it placed last, and the first it could not.
func unplaced(model porcupine.Model, part []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var longest []int
	for _, lins := range info.PartialLinearizations() {
		for _, l := range lins {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	placed := make([]bool, len(part))
	for _, i := range longest {
		placed[i] = true
	}
	// The first operation, by call, that no linearization placed.
	order := make([]int, len(part))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return part[order[a]].Call < part[order[b]].Call })
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d operations placed", len(longest), len(part))
	if n := len(longest); n > 0 {
		op := part[longest[n-1]]
		fmt.Fprintf(&b, "; the last: %s", model.DescribeOperation(op.Input, op.Output))
	}
	for _, i := range order {
		if !placed[i] {
			op := part[i]
			fmt.Fprintf(&b, "; the first not placed: %s (client %d, at %.3f s)", model.DescribeOperation(op.Input, op.Output),
				op.ClientId, float64(op.Call)/1e9)
			break
		}
	}
	return b.String()
}

// settle rewrites the history with what the final state says of the
// operations whose outcome was unknown (as etcd's robustness tests patch
// theirs). Every write leaves its own event: a progress its unique text,
// a finish its run's run_finished, a claim a run_started of its task by
// its agent, a retry a task_retried. Once the final events are read
// (after every daemon took a write of its own, so that nothing sent
// before is still on its way), an unknown write whose event is not there
// never took effect, and leaves the history; one whose event is there,
// and is the only unknown write that could have made it, took effect,
// with that outcome (its return time stays unknown). The rest stay
// unknown: the checker tries both. Unknown reads constrain nothing and
// leave the history. It also counts the acknowledged writes, and those
// whose event is not there (lost: a problem each), and an event that no
// write explains is a problem too.
func (r *linRun) settle(ops []porcupine.Operation, final map[string]*finalState) (out []porcupine.Operation, acked, lost, settled int) {
	// What the final events hold, by what made them.
	type key struct{ project, a, b, c string }
	type made struct {
		run string // the run started, for a claim
		seq uint64
	}
	events := map[key][]made{}
	keyOf := func(in linInput) key {
		switch in.Kind {
		case opClaim:
			return key{in.Project, "claim", in.Task, in.Agent}
		case opProgress:
			return key{in.Project, "progress", in.Run, in.Text}
		case opFinish:
			return key{in.Project, "finish", in.Run, string(in.Status)}
		}
		return key{in.Project, "retry", in.Task, ""}
	}
	for id, f := range final {
		for _, ev := range f.events {
			b, err := reducer.DecodeBody(ev.Kind, ev.Data)
			if err != nil {
				continue
			}
			switch b := b.(type) {
			case reducer.RunStarted:
				k := key{id, "claim", b.TaskID, b.Agent}
				events[k] = append(events[k], made{b.RunID, ev.Sequence})
			case reducer.RunProgress:
				k := key{id, "progress", b.RunID, b.Progress}
				events[k] = append(events[k], made{"", ev.Sequence})
			case reducer.RunFinished:
				k := key{id, "finish", b.RunID, string(b.Status)}
				events[k] = append(events[k], made{"", ev.Sequence})
			case reducer.TaskRetried:
				k := key{id, "retry", b.TaskID, ""}
				events[k] = append(events[k], made{"", ev.Sequence})
			}
		}
	}
	// A write's event is its own, not another's that made the same, when
	// its key made one event, or it is a claim: an acknowledged claim's
	// event names its run, and what they leave is the unknown claims'.
	only := map[key]bool{}
	for k, ms := range events {
		only[k] = len(ms) == 1 || k.a == "claim"
	}
	// Take out what the acknowledged writes made.
	unknown := map[key][]int{}
	for i, op := range ops {
		in, o := op.Input.(linInput), op.Output.(linOutput)
		if !in.Kind.writes() || final[in.Project] == nil {
			if !o.Unknown {
				out = append(out, op)
			}
			continue
		}
		k := keyOf(in)
		switch {
		case o.Unknown:
			unknown[k] = append(unknown[k], i)
		case o.Reason == "":
			acked++
			ms := events[k]
			j := 0
			if in.Kind == opClaim {
				j = slices.IndexFunc(ms, func(m made) bool { return m.run == o.Run })
			}
			if j >= 0 && j < len(ms) {
				if only[k] {
					in.Seq = ms[j].seq
					op.Input = in
				}
				events[k] = slices.Delete(ms, j, j+1)
			} else {
				lost++
				r.p.addf("acknowledged %s of %s in project %s (%s %s) is not in the ledger", in.Kind, r.names[in.Task], in.Project, in.Run+o.Run, in.Text+string(in.Status))
			}
			out = append(out, op)
		default:
			out = append(out, op)
		}
	}
	for k, idx := range unknown {
		ms := events[k]
		delete(events, k)
		switch {
		case len(ms) == 0:
			settled += len(idx) // none took effect
			continue
		case len(ms) == len(idx) && (len(idx) == 1 || k.a == "retry"):
			for n, i := range idx {
				op, in := ops[i], ops[i].Input.(linInput)
				op.Output = linOutput{Run: ms[n].run} // took effect
				if len(idx) == 1 && only[k] {
					in.Seq = ms[n].seq
					op.Input = in
				}
				ops[i] = op
			}
			settled += len(idx)
		case len(ms) > len(idx):
			r.p.addf("project %s: %d %s events of %s %s, and only %d writes that could have made them", k.project, len(ms), k.a, k.b, k.c, len(idx))
		}
		for _, i := range idx {
			out = append(out, ops[i])
		}
	}
	for k, ms := range events {
		if len(ms) > 0 {
			r.p.addf("project %s: %d %s events of %s %s that no write of a client made", k.project, len(ms), k.a, k.b, k.c)
		}
	}
	return out, acked, lost, settled
}

// writeHistory writes the operations to path, one JSON object a line.
func writeHistory(path string, ops []porcupine.Operation) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, op := range ops {
		if err := enc.Encode(map[string]any{"client": op.ClientId, "call": op.Call, "return": op.Return,
			"input": op.Input, "output": op.Output}); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
