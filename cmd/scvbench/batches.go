package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"scv/control"
	"scv/control/api"
	"scv/control/rpc"
	"scv/reducer"
)

// BatchesResult is one connection sending JSON-RPC batches of
// run_progress requests over Runs running runs of one project, each batch
// size in windows of its own, against the raw group-commit ceiling
// measured on both sides of them (Raw: its own windows, not the 256-client
// level's).
type BatchesResult struct {
	Runs   int            `json:"runs"`
	Levels []BatchLevel   `json:"levels"`
	Raw    RawGroupResult `json:"raw"`
	// Batched is SQLite alone in the largest batch's shape: one producer
	// committing that many rows per transaction (rawBatched).
	Batched RawGroupWindow `json:"raw_batched"`
	// Durability: the run_progress events in the daemon's file after it
	// stopped against the requests acknowledged (warm-ups included).
	Durability DurabilityResult `json:"durability"`
}

// BatchLevel is one batch size: Level counts batches (its requests are
// batches, its latency a batch's round trip, its CPU per request), and
// EventsPerSec the run_progress events they appended.
type BatchLevel struct {
	Size         int         `json:"size"`
	Level        LevelResult `json:"level"`
	EventsPerSec float64     `json:"events_per_sec"`
	// RatioToRaw is EventsPerSec over Raw's rows per second.
	RatioToRaw float64 `json:"ratio_to_raw"`
}

// largest is the level of the largest batch, which the targets speak of.
func (r BatchesResult) largest() BatchLevel {
	var b BatchLevel
	for _, l := range r.Levels {
		if l.Size > b.Size {
			b = l
		}
	}
	return b
}

// batchRequest appends the request of a run_progress for run, with id, to
// line.
func batchRequest(line []byte, id int, project, run string, step int) []byte {
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = strconv.AppendInt(line, int64(id), 10)
	line = append(line, `,"method":"daemon.control","params":`...)
	line = append(line, progressParams(project, run, step)...)
	return append(line, '}')
}

// startManyRuns adds n tasks to project and starts a run of each, in
// batches of control.MaxBatch (Client.CallBatch), and returns the runs.
func startManyRuns(ctx context.Context, c *rpc.Client, project string, n int) ([]string, error) {
	ids := func(cmds []api.Command, id func(*api.ProjectResponse) string) ([]string, error) {
		var out []string
		for from := 0; from < len(cmds); from += control.MaxBatch {
			res, err := c.CallBatch(ctx, cmds[from:min(from+control.MaxBatch, len(cmds))])
			if err != nil {
				return nil, err
			}
			for _, r := range res {
				st, err := r.Status()
				if err != nil {
					return nil, err
				}
				out = append(out, id(st.Project))
			}
		}
		return out, nil
	}
	adds := make([]api.Command, n)
	for i := range adds {
		adds[i] = api.CmdProjectTaskAdd{Project: project, Title: fmt.Sprint("batch-", i), DependsOn: []string{}}
	}
	tasks, err := ids(adds, func(p *api.ProjectResponse) string { return p.TaskID })
	if err != nil {
		return nil, fmt.Errorf("project_task_add: %w", err)
	}
	starts := make([]api.Command, n)
	for i, t := range tasks {
		starts[i] = api.CmdProjectRunStart{Project: project, Task: t, Agent: "scvbench"}
	}
	runs, err := ids(starts, func(p *api.ProjectResponse) string { return p.RunID })
	if err != nil {
		return nil, fmt.Errorf("project_run_start: %w", err)
	}
	return runs, nil
}

// batches measures cfg.BatchSizes on one connection of a daemon of its
// own, whose project holds cfg.BatchRuns running runs: each batch sends a
// run_progress for each of the next Size runs, round the runs, so every
// request appends one event. The raw group-commit ceiling is measured
// before and after, as for the 256-client level.
func batches(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (BatchesResult, error) {
	res := BatchesResult{Runs: cfg.BatchRuns}
	raw := func(when string) error {
		logf("  raw ceiling, %d producers, %s", cfg.Producers, when)
		w, err := rawGroup(ctx, filepath.Join(dir, "raw-batches.db"), cfg.Producers, cfg.Warmup, cfg.Duration/2)
		if err == nil {
			w.When = when
			res.Raw.Producers = cfg.Producers
			res.Raw.add(w)
		}
		return err
	}
	if err := raw("before the batches"); err != nil {
		return res, err
	}
	d, c, err := startDialled(ctx, bin, dir, "batches")
	if err != nil {
		return res, err
	}
	defer d.Kill()
	defer c.Close()
	st, err := c.Call(ctx, api.CmdProjectCreate{Name: "batches", Workspace: dir})
	if err != nil {
		return res, fmt.Errorf("project_create: %w", err)
	}
	project := st.Project.Project.ID
	logf("  starting %d runs", cfg.BatchRuns)
	runs, err := startManyRuns(ctx, c, project, cfg.BatchRuns)
	if err != nil {
		return res, err
	}
	cl := &conn{c: c}
	next := 0 // the next run to report on, round the runs
	for _, size := range cfg.BatchSizes {
		logf("  one connection, batches of %d", size)
		l := load{conns: []*conn{cl}, warm: cfg.Warmup, d: cfg.Duration, pids: []int{d.Cmd.Process.Pid}, perUnit: size,
			prof: fmt.Sprintf("batch-%d", size), profSock: d.Sock,
			unit: func(ctx context.Context, _ int, c *conn, step int) error {
				line := append(c.line[:0], '[')
				for k := range size {
					if k > 0 {
						line = append(line, ',')
					}
					c.nextID++
					line = batchRequest(line, c.nextID, project, runs[next], step)
					next = (next + 1) % len(runs)
				}
				line = append(line, ']', '\n')
				c.line = line
				resp, err := c.c.Send(ctx, line)
				if err != nil {
					return err
				}
				if n := bytes.Count(resp, []byte(`,"result":`)); n != size || resp[0] != '[' {
					return fmt.Errorf("%d results of %d in the reply: %.300s", n, size, resp)
				}
				return nil
			}}
		lv, acked, _, err := l.run(ctx)
		if err != nil {
			return res, fmt.Errorf("batches of %d: %w", size, err)
		}
		res.Durability.Acked += acked * int64(size)
		res.Levels = append(res.Levels, BatchLevel{Size: size, Level: lv, EventsPerSec: lv.RequestsPerSec * float64(size)})
	}
	if err := d.Stop(); err != nil {
		return res, err
	}
	stored, err := countKind(ctx, filepath.Join(dir, "batches.db"), reducer.KindRunProgress)
	if err != nil {
		return res, err
	}
	res.Durability.Stored, res.Durability.Missing = stored, max(0, res.Durability.Acked-stored)
	if err := raw("after the batches"); err != nil {
		return res, err
	}
	if b := res.largest(); b.Size > 0 {
		logf("  raw SQLite, one producer, %d rows a commit", b.Size)
		if res.Batched, err = rawBatched(ctx, filepath.Join(dir, "raw-batched.db"), b.Size, cfg.Warmup, cfg.Duration/2); err != nil {
			return res, err
		}
	}
	for i := range res.Levels {
		res.Levels[i].RatioToRaw = res.Levels[i].EventsPerSec / res.Raw.RowsPerSec
	}
	return res, nil
}
