package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// rawHash stands in for the chain hash in the raw rows: the same bytes
// stored, without the SHA-256 (well under a microsecond) the ledger
// computes.
var rawHash = make([]byte, ledger.HashSize)

// openWriter opens path for raw appends (sqlitetest.Raw): one connection
// with the driver's DSN (WAL, synchronous=FULL, IMMEDIATE transactions),
// the driver's INSERT, prepared once, and the newest schema.
func openWriter(ctx context.Context, path string) (*sqlitetest.Raw, error) {
	return sqlitetest.OpenRaw(ctx, path, 0)
}

// progressData is the stored data of a run_progress event, byte for byte
// what reducer.EncodeBody writes for these (escape-free) strings.
func progressData(runID string, step int) string {
	return `{"run_id":"` + runID + `","progress":"step ` + strconv.Itoa(step) + `"}`
}

// FsyncResult is the disk's sync rate, pooled over the windows it was
// measured in.
type FsyncResult struct {
	Count   int           `json:"count"`
	Seconds float64       `json:"seconds"`
	PerSec  float64       `json:"per_sec"`
	P50us   float64       `json:"p50_us"`
	P99us   float64       `json:"p99_us"`
	Windows []FsyncWindow `json:"windows"`

	samples []time.Duration
}

// FsyncWindow is one fsync measurement.
type FsyncWindow struct {
	When    string  `json:"when"`
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"`
	P50us   float64 `json:"p50_us"`
}

// add pools one window's samples into r.
func (r *FsyncResult) add(when string, lat []time.Duration, secs float64) {
	r.samples = append(r.samples, lat...)
	r.Count += len(lat)
	r.Seconds += secs
	r.PerSec = float64(r.Count) / r.Seconds
	all := latencyOf(append([]time.Duration(nil), r.samples...))
	r.P50us, r.P99us = all.P50us, all.P99us
	r.Windows = append(r.Windows, FsyncWindow{When: when, Count: len(lat), Seconds: secs,
		PerSec: float64(len(lat)) / secs, P50us: latencyOf(lat).P50us})
}

// measureFsync overwrites 4 KiB blocks of a preallocated file and
// fdatasyncs after each, for d: what one WAL commit costs the disk at
// least. It returns each write+fdatasync's latency and the seconds taken.
func measureFsync(path string, d time.Duration) ([]time.Duration, float64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	const block, blocks = 4096, 256
	buf := make([]byte, block)
	// Allocate the blocks first, so the loop measures data syncs, not
	// file growth.
	for i := range blocks {
		if _, err := f.WriteAt(buf, int64(i*block)); err != nil {
			return nil, 0, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, 0, err
	}
	var lat []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < d; i++ {
		buf[0], buf[1] = byte(i), byte(i>>8)
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i%blocks*block)); err != nil {
			return nil, 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, 0, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, time.Since(start).Seconds(), nil
}

// RawGroupResult is the group-commit insert ceiling, pooled over the
// windows it was measured in.
type RawGroupResult struct {
	Producers     int              `json:"producers"`
	Rows          int64            `json:"rows"`
	Commits       int64            `json:"commits"`
	Seconds       float64          `json:"seconds"`
	RowsPerSec    float64          `json:"rows_per_sec"`
	CommitsPerSec float64          `json:"commits_per_sec"`
	RowsPerCommit float64          `json:"rows_per_commit"`
	Windows       []RawGroupWindow `json:"windows"`
	// CPUus is the windows' CPU time per row (RawGroupWindow.CPUus).
	CPUus float64 `json:"cpu_us_per_row"`

	cpu float64
}

// RawGroupWindow is one measurement of the ceiling.
type RawGroupWindow struct {
	When       string  `json:"when"`
	Rows       int64   `json:"rows"`
	Commits    int64   `json:"commits"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	// CPUus is the harness's CPU time over the window (its producers
	// and its writer: SQLite's work, and the queue's) per row.
	CPUus float64 `json:"cpu_us_per_row"`

	cpu float64 // the CPU seconds in the window
}

// add pools one window into r.
func (r *RawGroupResult) add(w RawGroupWindow) {
	r.Windows = append(r.Windows, w)
	r.Rows += w.Rows
	r.Commits += w.Commits
	r.Seconds += w.Seconds
	r.RowsPerSec = float64(r.Rows) / r.Seconds
	r.CommitsPerSec = float64(r.Commits) / r.Seconds
	if r.Commits > 0 {
		r.RowsPerCommit = float64(r.Rows) / float64(r.Commits)
	}
	r.cpu += w.cpu
	if r.Rows > 0 {
		r.CPUus = r.cpu * 1e6 / float64(r.Rows)
	}
}

type rawRow struct {
	data string
	done chan error
}

// rawGroup is the ceiling the daemon's write path is held against: the
// same rows, driver, pragmas and schema, and the same group commit (one
// writer draining up to ledger.MaxBatch queued rows per IMMEDIATE
// transaction, each producer waiting for its row's commit), but no
// protocol, no decoding, no reducer.
func rawGroup(ctx context.Context, path string, producers int, warm, d time.Duration) (RawGroupWindow, error) {
	db, err := openWriter(ctx, path)
	if err != nil {
		return RawGroupWindow{}, err
	}
	defer db.Close()
	project := ulid.Make().String()
	queue := make(chan *rawRow, ledger.MaxBatch)
	var rows, commits atomic.Int64
	var writerErr error
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		batch := make([]*rawRow, 0, ledger.MaxBatch)
		for r := range queue {
			batch = append(batch[:0], r)
		fill:
			for len(batch) < ledger.MaxBatch {
				select {
				case r, ok := <-queue:
					if !ok {
						break fill
					}
					batch = append(batch, r)
				default:
					break fill
				}
			}
			err := commitRows(ctx, db, project, batch)
			if err == nil {
				rows.Add(int64(len(batch)))
				commits.Add(1)
			} else if writerErr == nil {
				writerErr = err
			}
			for _, r := range batch {
				r.done <- err
			}
		}
	}()

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := ulid.Make().String()
			done := make(chan error, 1)
			for step := 1; !stop.Load(); step++ {
				queue <- &rawRow{data: progressData(run, step), done: done}
				if err := <-done; err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(warm)
	self := []int{os.Getpid()}
	cpu0, cpuErr := cpuSeconds(self)
	r0, c0, t0 := rows.Load(), commits.Load(), time.Now()
	time.Sleep(d)
	r1, c1, t1 := rows.Load(), commits.Load(), time.Now()
	cpu1, err := cpuSeconds(self)
	cpuErr = errors.Join(cpuErr, err)
	stop.Store(true)
	wg.Wait()
	close(queue)
	<-writerDone
	close(errs)
	if err := errors.Join(writerErr, <-errs, cpuErr); err != nil {
		return RawGroupWindow{}, err
	}
	secs := t1.Sub(t0).Seconds()
	w := RawGroupWindow{Rows: r1 - r0, Commits: c1 - c0, Seconds: secs, RowsPerSec: float64(r1-r0) / secs, cpu: cpu1 - cpu0}
	if w.Rows > 0 {
		w.CPUus = w.cpu * 1e6 / float64(w.Rows)
	}
	return w, nil
}

// commitRows inserts a batch in one transaction, as the ledger's writer
// does: the driver's BEGIN IMMEDIATE, the tail read inside the
// transaction, the driver's INSERT with the next sequences, one clock
// reading, COMMIT (sqlitetest.Raw.Append).
func commitRows(ctx context.Context, db *sqlitetest.Raw, project string, batch []*rawRow) error {
	evs := make([]driver.Event, len(batch))
	for i, r := range batch {
		evs[i] = driver.Event{ProjectID: project, Kind: reducer.KindRunProgress, Data: r.data, Hash: rawHash}
	}
	_, err := db.Append(ctx, evs)
	return err
}

// RawSingleResult is one producer committing one row per transaction.
type RawSingleResult struct {
	Rows       int     `json:"rows"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	Latency    Latency `json:"commit_latency"`
}

// rawSingle commits one row per transaction, back to back: its latency is
// the cost of one durable commit with this driver on this disk.
func rawSingle(ctx context.Context, path string, warm, d time.Duration) (RawSingleResult, error) {
	db, err := openWriter(ctx, path)
	if err != nil {
		return RawSingleResult{}, err
	}
	defer db.Close()
	project, run := ulid.Make().String(), ulid.Make().String()
	var lat []time.Duration
	start := time.Now()
	measureFrom, end := start.Add(warm), start.Add(warm+d)
	for step := 1; ; step++ {
		t := time.Now()
		if t.After(end) {
			break
		}
		if err := commitRows(ctx, db, project, []*rawRow{{data: progressData(run, step)}}); err != nil {
			return RawSingleResult{}, fmt.Errorf("commit: %w", err)
		}
		if !t.Before(measureFrom) {
			lat = append(lat, time.Since(t))
		}
	}
	secs := d.Seconds()
	return RawSingleResult{Rows: len(lat), Seconds: secs, RowsPerSec: float64(len(lat)) / secs, Latency: latencyOf(lat)}, nil
}

// rawBatched commits perCommit rows per transaction from one producer,
// back to back, for warm then d, and returns the window d: the rows per
// second and the process's CPU per row of a batch's commit shape, with no
// queue and no producers to wake.
func rawBatched(ctx context.Context, path string, perCommit int, warm, d time.Duration) (RawGroupWindow, error) {
	db, err := openWriter(ctx, path)
	if err != nil {
		return RawGroupWindow{}, err
	}
	defer db.Close()
	project, run := ulid.Make().String(), ulid.Make().String()
	batch := make([]*rawRow, perCommit)
	self := []int{os.Getpid()}
	var w RawGroupWindow
	var cpu0 float64
	start := time.Now()
	from, end := start.Add(warm), start.Add(warm+d)
	measuring := false
	for step := 1; ; step++ {
		t := time.Now()
		if !measuring && !t.Before(from) {
			if cpu0, err = cpuSeconds(self); err != nil {
				return w, err
			}
			measuring, start = true, t
		}
		// At least one commit is measured, however long a commit takes
		// against the window (-quick under -race).
		if !t.Before(end) && w.Commits > 0 {
			break
		}
		for i := range batch {
			batch[i] = &rawRow{data: progressData(run, step*perCommit+i)}
		}
		if err := commitRows(ctx, db, project, batch); err != nil {
			return w, fmt.Errorf("commit: %w", err)
		}
		if measuring {
			w.Rows += int64(perCommit)
			w.Commits++
		}
	}
	cpu1, err := cpuSeconds(self)
	if err != nil {
		return w, err
	}
	w.Seconds = time.Since(start).Seconds()
	w.RowsPerSec, w.cpu = float64(w.Rows)/w.Seconds, cpu1-cpu0
	if w.Rows > 0 {
		w.CPUus = w.cpu * 1e6 / float64(w.Rows)
	}
	return w, nil
}
