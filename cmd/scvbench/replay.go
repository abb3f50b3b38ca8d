package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// ReplayResult compares the daemon's start on a long history, up to its
// first answered project_status (which loads the project: it folds every
// event of it), with only reading and decoding the same rows.
type ReplayResult struct {
	Events          int            `json:"events"`
	Kinds           map[string]int `json:"kinds"`
	Projects        int            `json:"projects"`
	Tasks           int            `json:"tasks"`
	Runs            int            `json:"runs"`
	GenerateSeconds float64        `json:"generate_seconds"`
	// FirstOpenSeconds is the first daemon start on the file as it was
	// generated (schema 5) to its first project_status: the migration
	// that derives the projects rows, the summary the ledger derives of
	// them once (a fold of the whole history), and the load.
	FirstOpenSeconds float64   `json:"first_open_seconds"`
	ScanRuns         []float64 `json:"scan_seconds_each"`
	StartRuns        []float64 `json:"first_status_seconds_each"`
	ScanSeconds      float64   `json:"scan_seconds"` // median
	// FirstStatusSeconds is the median time from starting the daemon
	// process on this history to its first project_status reply.
	FirstStatusSeconds float64 `json:"first_status_seconds"`
	ScanEventsPerSec   float64 `json:"scan_events_per_sec"`
	StartEventsPerSec  float64 `json:"start_events_per_sec"`
	// Ratio is ScanSeconds over FirstStatusSeconds.
	Ratio          float64 `json:"ratio"`
	DaemonVmHWMKiB int64   `json:"daemon_vmhwm_kib"`
	// Then the project is compacted, keeping its 100 newest events live,
	// and the daemon started again: start-up from a snapshot plus the
	// tail.
	CompactSeconds      float64 `json:"compact_seconds"`
	LiveAfterCompaction int     `json:"live_after_compaction"`
	// A writer appends back to back (a task into a project of its own)
	// while the compaction runs: how many it appended, and the longest
	// an append waited, which is the longest the compaction held the
	// writer in one step (ledger.CompactStep events).
	CompactWrites              int     `json:"compact_writes"`
	CompactLongestWriteMs      float64 `json:"compact_longest_write_ms"`
	SnapshotFirstStatusSeconds float64 `json:"snapshot_first_status_seconds"`
}

func replay(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (ReplayResult, error) {
	path := filepath.Join(dir, "replay.db")
	sock := filepath.Join(dir, "replay.sock")
	res := ReplayResult{Events: cfg.Events}
	g, err := generate(ctx, path, cfg.Events)
	if err != nil {
		return res, fmt.Errorf("generate: %w", err)
	}
	res.Events = int(g.w.seq) // a last command may have caused more than one
	res.GenerateSeconds = g.took.Seconds()
	res.Kinds, res.Projects, res.Tasks, res.Runs = g.w.kinds, 1, g.tasks, g.runs
	logf("  generated %d events in %.1f s", res.Events, res.GenerateSeconds)

	status := api.CmdProjectStatus{Project: g.project}
	start := func() (time.Duration, int64, error) {
		runtime.GC()
		d, err := daemonproc.Start(bin, path, sock, "--stale-after", "1h")
		if err != nil {
			return 0, 0, err
		}
		took, err := d.ReadyWith(ctx, 5*time.Minute, status)
		if err != nil {
			d.Kill()
			return 0, 0, err
		}
		hwm, err := vmHWM(d.Pid())
		if stopErr := d.Stop(); err == nil {
			err = stopErr
		}
		return took, hwm, err
	}
	first, _, err := start()
	if err != nil {
		return res, fmt.Errorf("first open: %w", err)
	}
	res.FirstOpenSeconds = first.Seconds()
	logf("  first open (migration, summary, load) %.2f s", res.FirstOpenSeconds)

	// Warm the page cache for both equally: one unmeasured baseline
	// first, then the two alternate.
	if _, err := scanDecode(ctx, path, res.Events); err != nil {
		return res, err
	}
	for range cfg.ReplayRounds {
		runtime.GC()
		s, err := scanDecode(ctx, path, res.Events)
		if err != nil {
			return res, err
		}
		o, hwm, err := start()
		if err != nil {
			return res, err
		}
		res.DaemonVmHWMKiB = max(res.DaemonVmHWMKiB, hwm)
		res.ScanRuns = append(res.ScanRuns, s.Seconds())
		res.StartRuns = append(res.StartRuns, o.Seconds())
		logf("  scan+decode %.2f s, daemon start to first project_status %.2f s", s.Seconds(), o.Seconds())
	}
	res.ScanSeconds, res.FirstStatusSeconds = median(res.ScanRuns), median(res.StartRuns)
	res.ScanEventsPerSec = float64(res.Events) / res.ScanSeconds
	res.StartEventsPerSec = float64(res.Events) / res.FirstStatusSeconds
	res.Ratio = res.ScanSeconds / res.FirstStatusSeconds

	if profileDir != "" {
		if err := profileStart(ctx, bin, path, sock, status, res.FirstStatusSeconds); err != nil {
			return res, err
		}
	}

	// Compact the project (retain 100), then start again.
	t := time.Now()
	c, err := compactAll(ctx, path, []string{g.project}, 100)
	if err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	res.CompactSeconds, res.LiveAfterCompaction = time.Since(t).Seconds(), c.live
	res.CompactWrites, res.CompactLongestWriteMs = c.writes, float64(c.longest.Microseconds())/1000
	logf("  compacted in %.1f s, %d events left live; %d appends meanwhile, the longest %.1f ms",
		res.CompactSeconds, res.LiveAfterCompaction, res.CompactWrites, res.CompactLongestWriteMs)
	snap, _, err := start()
	if err != nil {
		return res, err
	}
	res.SnapshotFirstStatusSeconds = snap.Seconds()
	return res, nil
}

// profileStart takes a CPU profile of one more daemon start on the
// history, from as soon as its pprof socket answers until a little after
// the time a start took: where the load of the project goes.
func profileStart(ctx context.Context, bin, path, sock string, status api.Command, secs float64) error {
	os.Remove(sock + ".pprof") // an earlier daemon's
	d, err := daemonproc.Start(bin, path, sock, "--stale-after", "1h")
	if err != nil {
		return err
	}
	defer d.Kill()
	for i := 0; ; i++ {
		if _, err := os.Stat(sock + ".pprof"); err == nil {
			break
		}
		if i > 5000 {
			return errors.New("the profiling daemon opened no pprof socket")
		}
		time.Sleep(time.Millisecond)
	}
	profiled := make(chan error, 1)
	go func() {
		profiled <- profileWindow(ctx, sock, "replay-start", time.Duration((secs+1)*float64(time.Second)))
	}()
	if _, err := d.ReadyWith(ctx, 5*time.Minute, status); err != nil {
		return err
	}
	if err := <-profiled; err != nil {
		return err
	}
	return d.Stop()
}

// compacted is what compactAll did: the events left live, and the
// appends made meanwhile.
type compacted struct {
	live    int
	writes  int
	longest time.Duration
}

// compactAll compacts each of projects in the ledger file at path,
// in-process, keeping retain events of each live, while a writer appends
// tasks to a project of its own back to back.
func compactAll(ctx context.Context, path string, projects []string, retain int) (compacted, error) {
	var res compacted
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return res, err
	}
	l, err := ledger.Open(ctx, db, ledger.Options{})
	if err != nil {
		db.Close()
		return res, err
	}
	side := ulid.Make().String()
	if _, err := l.Execute(ctx, reducer.CreateProject{ProjectID: side, Name: "compaction-writer-" + side, Workspace: "/tmp"}); err != nil {
		l.Close()
		return res, err
	}
	stop, wrote, first := make(chan struct{}), make(chan error, 1), make(chan struct{})
	go func() {
		for {
			if res.writes == 1 {
				close(first) // the writer is under way: compact
			}
			select {
			case <-stop:
				wrote <- nil
				return
			default:
			}
			t := time.Now()
			if _, err := l.Execute(ctx, reducer.AddTask{Project: side, TaskID: ulid.Make().String(), Title: "meanwhile"}); err != nil {
				wrote <- err
				return
			}
			res.longest = max(res.longest, time.Since(t))
			res.writes++
		}
	}()
	select {
	case <-first:
	case err := <-wrote:
		l.Close()
		return res, fmt.Errorf("append before the compaction: %w", err)
	}
	for _, p := range projects {
		c, err := l.Compact(ctx, p, ledger.CompactOptions{Retain: retain})
		if err != nil {
			close(stop)
			<-wrote
			l.Close()
			return res, err
		}
		res.live += c.Live
	}
	close(stop)
	if err := <-wrote; err != nil {
		l.Close()
		return res, fmt.Errorf("append during the compaction: %w", err)
	}
	return res, l.Close()
}

// scanDecode is the baseline: read every event of the file in order
// through the driver's read-only History, as the ledger's load does
// (sqlitetest.Each), and decode each (reducer.DecodeBody), without
// folding anything into state.
func scanDecode(ctx context.Context, path string, want int) (time.Duration, error) {
	start := time.Now()
	n := 0
	var last uint64
	err := sqlitetest.Each(ctx, path, func(e driver.Event) error {
		if _, err := reducer.DecodeBody(e.Kind, []byte(e.Data)); err != nil {
			return fmt.Errorf("event %d: %w", e.Sequence, err)
		}
		last = e.Sequence
		n++
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n != want || last != uint64(want) {
		return 0, fmt.Errorf("scanned %d events up to %d, want %d", n, last, want)
	}
	return time.Since(start), nil
}

// history generates a realistic, valid history of one project: a few
// hundred tasks (some depending on earlier ones) and runs, most events
// run_progress and heartbeat of running runs, some runs started and
// finished.
type history struct {
	w       *histWriter
	took    time.Duration
	rng     *rand.Rand
	project string
	running []string // the running runs
	tasks   int
	runs    int
	// pFinish is the chance that an event of a running run finishes it.
	pFinish float64
}

const (
	histTasks       = 400 // at 1M events; fewer for small histories
	histMaxRunning  = 24  // concurrent runs
	histRunsPerTask = 1.25
)

func (h *history) addTask(deps []string) string {
	h.tasks++
	return h.w.task(h.project, fmt.Sprintf("task %d", h.tasks), uint32(h.rng.IntN(3)), deps...)
}

// step appends one event.
func (h *history) step() {
	p := h.w.projects[h.project]
	if len(h.running) < histMaxRunning && h.rng.IntN(4) == 0 {
		var ready []string
		for _, t := range p.Tasks() {
			if t.Status == reducer.TaskReady || t.Status == reducer.TaskStale {
				ready = append(ready, t.ID)
			}
		}
		if len(ready) > 0 {
			run := h.w.id()
			h.w.do(reducer.StartRun{Project: h.project, TaskID: ready[h.rng.IntN(len(ready))], RunID: run, Agent: "codex"})
			h.running = append(h.running, run)
			h.runs++
			return
		}
	}
	if len(h.running) == 0 {
		// Nothing to run (tasks done, failed or waiting on failed ones):
		// the orchestrator plans more work.
		h.addTask(nil)
		return
	}
	i := h.rng.IntN(len(h.running))
	run := h.running[i]
	switch x := h.rng.Float64(); {
	case x < h.pFinish:
		st := reducer.RunSucceeded
		switch y := h.rng.IntN(20); {
		case y < 3:
			st = reducer.RunFailed
		case y < 4:
			st = reducer.RunCancelled
		}
		h.w.do(reducer.FinishRun{Project: h.project, RunID: run, Status: st})
		h.running = slices.Delete(h.running, i, i+1)
	case x < 0.6:
		h.w.do(reducer.ProgressRun{Project: h.project, RunID: run, Progress: fmt.Sprintf("step %d", h.w.seq)})
	default:
		h.w.do(reducer.RecordHeartbeat{Project: h.project, RunID: run})
	}
}

// generate writes a history of n events of one project to a new ledger
// file at path (histWriter). The history ends about now, so no run in it
// is stale to a daemon started with a long stale window.
func generate(ctx context.Context, path string, n int) (*history, error) {
	h := &history{rng: rand.New(rand.NewPCG(1, 2))}
	w, took, err := generateWith(ctx, path, time.Now().UnixMilli()-int64(n)-1000, 1, func(w *histWriter) {
		h.w = w
		h.project = w.project("replay", "/srv/work")
		var added []string
		for range max(5, min(histTasks, n/2500)) {
			var deps []string
			if len(added) > 0 && h.rng.IntN(4) == 0 {
				deps = []string{added[h.rng.IntN(len(added))]}
			}
			added = append(added, h.addTask(deps))
		}
		// Runs finish at a rate that gives each task about
		// histRunsPerTask runs over the history.
		h.pFinish = histRunsPerTask * float64(h.tasks) / float64(n)
		for int(w.seq) < n {
			h.step()
		}
	})
	h.w, h.took = w, took
	return h, err
}
