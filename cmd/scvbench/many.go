package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
)

// ManyResult is a ledger of many small projects: how fast a daemon
// starts on it, and its memory once every project was loaded once.
type ManyResult struct {
	Projects        int     `json:"projects"`
	TasksPer        int     `json:"tasks_per_project"`
	Events          int     `json:"events"`
	GenerateSeconds float64 `json:"generate_seconds"`
	// FirstOpenSeconds is the first start on the generated file (schema
	// 5) to its first project_status: the migration deriving the
	// projects rows and the ledger's one-time summary of each.
	FirstOpenSeconds float64 `json:"first_open_seconds"`
	// StartRuns are later starts to the first answered project_status
	// (a different project each time), alternating with starts to the
	// first answered `status` (no project loaded: the baseline).
	StartRuns         []float64 `json:"first_project_status_seconds_each"`
	BaselineRuns      []float64 `json:"first_status_seconds_each"`
	StartSeconds      float64   `json:"first_project_status_seconds"` // median
	BaselineSeconds   float64   `json:"first_status_seconds"`         // median
	TouchConnections  int       `json:"touch_connections"`
	TouchSeconds      float64   `json:"touch_seconds"`
	TouchPerSec       float64   `json:"touch_per_sec"`
	TouchLatency      Latency   `json:"touch_latency"`
	VmHWMKiB          int64     `json:"vmhwm_kib"`
	VmHWMBeforeKiB    int64     `json:"vmhwm_before_touch_kib"`
	CacheProjectsFlag string    `json:"cache_projects"`
}

func manyProjects(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (ManyResult, error) {
	res := ManyResult{Projects: cfg.ManyProjects, TasksPer: cfg.ManyTasks, TouchConnections: 8, CacheProjectsFlag: "default (1000)"}
	path := filepath.Join(dir, "many.db")
	var ids []string
	w, took, err := generateWith(ctx, path, time.Now().UnixMilli()-int64(cfg.ManyProjects*(cfg.ManyTasks+1))-1000, 3, func(w *histWriter) {
		for i := range cfg.ManyProjects {
			p := w.project(fmt.Sprintf("many-%05d", i), dir)
			for j := range cfg.ManyTasks {
				w.task(p, fmt.Sprintf("task %d", j), 0)
			}
			ids = append(ids, p)
		}
	})
	if err != nil {
		return res, fmt.Errorf("generate: %w", err)
	}
	res.Events, res.GenerateSeconds = int(w.seq), took.Seconds()
	logf("  generated %d projects, %d events in %.1f s", cfg.ManyProjects, w.seq, took.Seconds())

	sock := filepath.Join(dir, "many.sock")
	start := func(cmd api.Command, keep bool) (*daemonproc.Daemon, time.Duration, error) {
		runtime.GC()
		d, err := daemonproc.Start(bin, path, sock, "--stale-after", "1h")
		if err != nil {
			return nil, 0, err
		}
		took, err := d.ReadyWith(ctx, 5*time.Minute, cmd)
		if err == nil && !keep {
			err = d.Stop()
		}
		if err != nil {
			d.Kill()
			return nil, 0, err
		}
		return d, took, nil
	}
	_, first, err := start(api.CmdProjectStatus{Project: ids[0]}, false)
	if err != nil {
		return res, fmt.Errorf("first open: %w", err)
	}
	res.FirstOpenSeconds = first.Seconds()
	logf("  first open (migration, %d summaries) %.2f s", cfg.ManyProjects, first.Seconds())
	for k := range cfg.ReplayRounds {
		_, b, err := start(api.CmdStatus{}, false)
		if err != nil {
			return res, err
		}
		_, s, err := start(api.CmdProjectStatus{Project: ids[(k+1)*len(ids)/(cfg.ReplayRounds+1)]}, false)
		if err != nil {
			return res, err
		}
		res.BaselineRuns = append(res.BaselineRuns, b.Seconds())
		res.StartRuns = append(res.StartRuns, s.Seconds())
	}
	res.StartSeconds, res.BaselineSeconds = median(res.StartRuns), median(res.BaselineRuns)
	logf("  start to first project_status %.3f s (to first status %.3f s)", res.StartSeconds, res.BaselineSeconds)

	// Touch every project once, then read the peak RSS.
	d, _, err := start(api.CmdProjectStatus{Project: ids[len(ids)-1]}, true)
	if err != nil {
		return res, err
	}
	defer d.Kill()
	if res.VmHWMBeforeKiB, err = vmHWM(d.Pid()); err != nil {
		return res, err
	}
	conns, err := dialAll(ctx, []string{d.Sock}, res.TouchConnections)
	if err != nil {
		return res, err
	}
	defer closeAll(conns)
	t := time.Now()
	lats := make([][]time.Duration, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			for j := i; j < len(ids); j += len(conns) {
				s := time.Now()
				if _, err := c.call(ctx, statusParams(ids[j])); err != nil {
					errs[i] = fmt.Errorf("project_status %s: %w", ids[j], err)
					return
				}
				lats[i] = append(lats[i], time.Since(s))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	res.TouchSeconds = time.Since(t).Seconds()
	res.TouchPerSec = float64(len(ids)) / res.TouchSeconds
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	res.TouchLatency = latencyOf(all)
	if res.VmHWMKiB, err = vmHWM(d.Pid()); err != nil {
		return res, err
	}
	logf("  touched %d projects in %.2f s; peak RSS %.1f MiB", len(ids), res.TouchSeconds, float64(res.VmHWMKiB)/1024)
	return res, d.Stop()
}
