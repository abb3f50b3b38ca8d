package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"

	"scv/cmd/internal/daemonproc"
	"scv/ledger"
	"scv/reducer"
)

// ReplayResult compares folding a long history into state (ledger.Open)
// with only reading and decoding the same rows.
type ReplayResult struct {
	Events           int            `json:"events"`
	Kinds            map[string]int `json:"kinds"`
	Projects         int            `json:"projects"`
	Tasks            int            `json:"tasks"`
	Runs             int            `json:"runs"`
	GenerateSeconds  float64        `json:"generate_seconds"`
	ScanRuns         []float64      `json:"scan_seconds_each"`
	OpenRuns         []float64      `json:"open_seconds_each"`
	ScanSeconds      float64        `json:"scan_seconds"` // median
	OpenSeconds      float64        `json:"open_seconds"` // median
	ScanEventsPerSec float64        `json:"scan_events_per_sec"`
	OpenEventsPerSec float64        `json:"open_events_per_sec"`
	Ratio            float64        `json:"ratio"`
	// FirstStatusSeconds is the time from starting the daemon process on
	// this history to its first `status` reply.
	FirstStatusSeconds float64 `json:"first_status_seconds"`
	DaemonVmHWMKiB     int64   `json:"daemon_vmhwm_kib"`
	// Then every project is compacted, keeping its 100 newest events live,
	// and the daemon started again: start-up from snapshots plus the tail.
	CompactSeconds             float64 `json:"compact_seconds"`
	LiveAfterCompaction        int     `json:"live_after_compaction"`
	SnapshotFirstStatusSeconds float64 `json:"snapshot_first_status_seconds"`
}

func replay(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (ReplayResult, error) {
	path := filepath.Join(dir, "replay.db")
	res := ReplayResult{Events: cfg.Events}
	t := time.Now()
	g, err := generate(ctx, path, cfg.Events)
	if err != nil {
		return res, fmt.Errorf("generate: %w", err)
	}
	res.GenerateSeconds = time.Since(t).Seconds()
	res.Kinds, res.Projects, res.Tasks, res.Runs = g.kinds, len(g.projects), g.tasks, g.runs
	logf("  generated %d events in %.1f s", cfg.Events, res.GenerateSeconds)

	// Warm the page cache and the allocator for both equally: one
	// unmeasured baseline first, then the two alternate.
	if _, err := scanDecode(ctx, path, cfg.Events); err != nil {
		return res, err
	}
	for range cfg.ReplayRounds {
		runtime.GC()
		s, err := scanDecode(ctx, path, cfg.Events)
		if err != nil {
			return res, err
		}
		runtime.GC()
		o, err := openLedger(ctx, path)
		if err != nil {
			return res, err
		}
		res.ScanRuns = append(res.ScanRuns, s.Seconds())
		res.OpenRuns = append(res.OpenRuns, o.Seconds())
		logf("  scan+decode %.2f s, ledger.Open %.2f s", s.Seconds(), o.Seconds())
	}
	res.ScanSeconds, res.OpenSeconds = median(res.ScanRuns), median(res.OpenRuns)
	res.ScanEventsPerSec = float64(cfg.Events) / res.ScanSeconds
	res.OpenEventsPerSec = float64(cfg.Events) / res.OpenSeconds
	res.Ratio = res.OpenEventsPerSec / res.ScanEventsPerSec

	runtime.GC()
	d, err := daemonproc.Start(bin, path, filepath.Join(dir, "replay.sock"), "--stale-after", "1h")
	if err != nil {
		return res, err
	}
	first, err := d.Ready(ctx, 2*time.Minute)
	if err != nil {
		d.Stop()
		return res, err
	}
	res.FirstStatusSeconds = first.Seconds()
	res.DaemonVmHWMKiB, err = vmHWM(d.Cmd.Process.Pid)
	if stopErr := d.Stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return res, err
	}

	// Compact every project (retain 100), then start again.
	t = time.Now()
	l, err := ledger.Open(ctx, path, ledger.Options{})
	if err != nil {
		return res, err
	}
	for _, p := range g.projects {
		c, err := l.Compact(ctx, p, 100)
		if err != nil {
			l.Close()
			return res, fmt.Errorf("compact: %w", err)
		}
		res.LiveAfterCompaction += c.Live
	}
	if err := l.Close(); err != nil {
		return res, err
	}
	res.CompactSeconds = time.Since(t).Seconds()
	logf("  compacted %d projects in %.1f s, %d events left live", len(g.projects), res.CompactSeconds, res.LiveAfterCompaction)
	runtime.GC()
	d, err = daemonproc.Start(bin, path, filepath.Join(dir, "replay.sock"), "--stale-after", "1h")
	if err != nil {
		return res, err
	}
	first, err = d.Ready(ctx, 2*time.Minute)
	if err != nil {
		d.Stop()
		return res, err
	}
	res.SnapshotFirstStatusSeconds = first.Seconds()
	return res, d.Stop()
}

// scanDecode is the baseline: read every event in order as ledger.Open
// does (reader pool DSN, read-only transaction, the same SELECT, sqlx
// StructScan into ledger.Row) and decode each (Row.Event, which calls
// reducer.DecodeBody), without folding anything into state.
func scanDecode(ctx context.Context, path string, want int) (time.Duration, error) {
	start := time.Now()
	db, err := sqlx.Open("sqlite", dsn(path, true))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryxContext(ctx, `SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM events ORDER BY sequence`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	var last uint64
	for rows.Next() {
		var r ledger.Row
		if err := rows.StructScan(&r); err != nil {
			return 0, err
		}
		e, err := r.Event()
		if err != nil {
			return 0, err
		}
		last = e.Sequence
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if n != want || last != uint64(want) {
		return 0, fmt.Errorf("scanned %d events up to %d, want %d", n, last, want)
	}
	return time.Since(start), nil
}

// openLedger times ledger.Open, which migrates (a no-op here), replays
// every event into state, publishes it and starts the writer.
func openLedger(ctx context.Context, path string) (time.Duration, error) {
	start := time.Now()
	l, err := ledger.Open(ctx, path, ledger.Options{})
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, l.Close()
}

// history generates a realistic, valid history by deciding commands with
// the reducer itself, so every event is one the daemon could have
// appended: a few projects, a few hundred tasks (some depending on
// earlier ones) and runs, most events run_progress and heartbeat of
// running runs, some runs started and finished.
type history struct {
	rng      *rand.Rand
	ids      *rand.ChaCha8
	s        *reducer.State
	now      int64 // Unix ms of the next event
	emitted  int
	emit     func(reducer.Event) error
	projects []string
	running  map[string][]string // project -> its running runs
	kinds    map[string]int
	tasks    int
	runs     int
	// pFinish is the chance that an event of a running run finishes it.
	pFinish float64
}

const (
	histProjects     = 4
	histTasksPerProj = 100 // at 1M events; fewer for small histories
	histMaxRunning   = 6   // concurrent runs per project
	histRunsPerTask  = 1.25
)

func (h *history) id() string {
	return ulid.MustNew(uint64(h.now), h.ids).String()
}

// do decides cmd at the history's clock and appends what it causes.
func (h *history) do(cmd reducer.Command) []reducer.Event {
	evs, err := reducer.Decide(h.s, reducer.Stamp(cmd, h.now))
	if err != nil {
		panic(fmt.Sprintf("scvbench: generated command %T refused: %v", cmd, err))
	}
	for i := range evs {
		h.emitted++
		evs[i].Sequence = uint64(h.emitted)
		reducer.Evolve(h.s, evs[i])
		h.kinds[evs[i].Body.Kind()]++
		if err := h.emit(evs[i]); err != nil {
			panic(err) // recovered by generate
		}
	}
	h.now++
	return evs
}

func (h *history) addTask(p string, deps []string) string {
	id := h.id()
	h.do(reducer.AddTask{Project: p, TaskID: id, Title: fmt.Sprintf("task %d", h.tasks+1),
		DependsOn: deps, MaxRetries: uint32(h.rng.IntN(3))})
	h.tasks++
	return id
}

// step appends one event.
func (h *history) step() {
	pid := h.projects[h.rng.IntN(len(h.projects))]
	p, _ := h.s.Project(pid)
	running := h.running[pid]
	if len(running) < histMaxRunning && h.rng.IntN(4) == 0 {
		var ready []string
		for _, t := range p.Tasks() {
			if t.Status == reducer.TaskReady || t.Status == reducer.TaskStale {
				ready = append(ready, t.ID)
			}
		}
		if len(ready) > 0 {
			run := h.id()
			h.do(reducer.StartRun{Project: pid, TaskID: ready[h.rng.IntN(len(ready))], RunID: run, Agent: "codex"})
			h.running[pid] = append(running, run)
			h.runs++
			return
		}
	}
	if len(running) == 0 {
		// Nothing to run here (tasks done, failed or waiting on failed
		// ones): the orchestrator plans more work.
		h.addTask(pid, nil)
		return
	}
	i := h.rng.IntN(len(running))
	run := running[i]
	switch x := h.rng.Float64(); {
	case x < h.pFinish:
		st := reducer.RunSucceeded
		switch y := h.rng.IntN(20); {
		case y < 3:
			st = reducer.RunFailed
		case y < 4:
			st = reducer.RunCancelled
		}
		h.do(reducer.FinishRun{Project: pid, RunID: run, Status: st})
		h.running[pid] = slices.Delete(running, i, i+1)
	case x < 0.6:
		h.do(reducer.ProgressRun{Project: pid, RunID: run, Progress: fmt.Sprintf("step %d", h.emitted)})
	default:
		h.do(reducer.RecordHeartbeat{Project: pid, RunID: run})
	}
}

// generate writes a history of n events to a new database at path, with
// the ledger's schema (ledger.Migrate) and rows exactly as the ledger
// writes them. The history ends about now, so no run in it is stale to a
// daemon started with a long stale window.
func generate(ctx context.Context, path string, n int) (h *history, err error) {
	db, err := openWriter(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()

	type row struct {
		project, kind string
		ms            int64
		data          string
	}
	batches := make(chan []row, 4)
	inserted := make(chan error, 1)
	go func() {
		var err error
		var seq uint64
		heads := map[string][]byte{} // each project's chain head
		for b := range batches {
			if err == nil {
				err = insertRows(ctx, db, func(ins *sqlx.Stmt) error {
					for _, r := range b {
						seq++
						hash := ledger.ChainHash(heads[r.project], seq, r.project, r.kind, r.ms/1000, r.ms, r.data)
						heads[r.project] = hash
						if _, err := ins.ExecContext(ctx, seq, r.project, r.kind, r.ms/1000, r.ms, r.data, hash); err != nil {
							return err
						}
					}
					return nil
				})
			}
		}
		inserted <- err
	}()

	const batchSize = 50_000
	batch := make([]row, 0, batchSize)
	h = &history{
		rng:     rand.New(rand.NewPCG(1, 2)),
		ids:     rand.NewChaCha8([32]byte{'s', 'c', 'v'}),
		s:       reducer.NewState(),
		now:     time.Now().UnixMilli() - int64(n) - 1000,
		running: map[string][]string{},
		kinds:   map[string]int{},
	}
	h.emit = func(e reducer.Event) error {
		data, err := reducer.EncodeBody(e.Body)
		if err != nil {
			return err
		}
		batch = append(batch, row{e.ProjectID, e.Body.Kind(), e.Time, string(data)})
		if len(batch) == batchSize {
			batches <- batch
			batch = make([]row, 0, batchSize)
		}
		return nil
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		tasksPer := max(5, min(histTasksPerProj, n/10_000))
		for i := range histProjects {
			evs := h.do(reducer.CreateProject{ProjectID: h.id(), Name: fmt.Sprintf("project-%d", i+1), Workspace: "/srv/work"})
			pid := evs[0].ProjectID
			h.projects = append(h.projects, pid)
			var added []string
			for range tasksPer {
				var deps []string
				if len(added) > 0 && h.rng.IntN(4) == 0 {
					deps = []string{added[h.rng.IntN(len(added))]}
				}
				added = append(added, h.addTask(pid, deps))
			}
		}
		// Runs finish at a rate that gives each task about
		// histRunsPerTask runs over the history.
		h.pFinish = histRunsPerTask * float64(h.tasks) / float64(n)
		for h.emitted < n {
			h.step()
		}
	}()
	if len(batch) > 0 {
		batches <- batch
	}
	close(batches)
	if ierr := <-inserted; err == nil {
		err = ierr
	}
	return h, err
}

// insertRows runs one transaction with the ledger's prepared INSERT.
func insertRows(ctx context.Context, db *sqlx.DB, f func(*sqlx.Stmt) error) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ins, err := tx.PreparexContext(ctx, insertSQL)
	if err != nil {
		return err
	}
	defer ins.Close()
	if err := f(ins); err != nil {
		return err
	}
	return tx.Commit()
}
