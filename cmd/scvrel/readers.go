package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/control/rpc"
)

// walBoundFrames bounds the frames of the write-ahead log in use once the
// readers stopped and the writers went on alone: SQLite checkpoints when a
// commit leaves the log at its autocheckpoint threshold (1000 pages by
// default, which the ledger keeps), and with no reader holding an older
// snapshot the checkpoint copies every frame back and the next commit
// starts the log over from its first frame. Twice the threshold leaves
// room for the commits that land while a checkpoint runs.
const walBoundFrames = 2 * 1000

// warmup is how long the writers write before the readers start, so that
// the readers have a history to read.
const warmup = time.Second

// readerCmd is one kind of reader: the arguments of one scv invocation and
// a check of its output.
type readerCmd struct {
	name string
	args []string
	ok   func(stdout []byte) error
}

// readerStats is what the invocations of one kind of reader did.
type readerStats struct {
	runs     int
	failures int
	busy     int
	lat      []time.Duration
}

// readersCheck is the readers check: see the package documentation and
// docs/reliability.md.
func readersCheck(ctx context.Context, e env) Result {
	r := Result{Name: "readers"}
	var p problems
	fig, sum, err := e.readers(ctx, &p)
	if err != nil {
		p.addf("%v", err)
		fig = "could not run: " + err.Error()
	}
	r.Figure, r.Problems = fig, p.all()
	r.Summary = sum
	if err != nil {
		r.Summary = "could not run"
	}
	return r
}

// readers runs the check and returns its figure and summary.
func (e env) readers(ctx context.Context, p *problems) (fig, sum string, err error) {
	db, sock := filepath.Join(e.dir, "ledger.db"), filepath.Join(e.dir, "d.sock")
	wal := db + "-wal"
	d, err := daemonproc.Start(e.bin, db, sock, daemonArgs...)
	if err != nil {
		return "", "", err
	}
	defer func() { d.Kill() }()
	if _, err := d.Ready(ctx, time.Minute); err != nil {
		return "", "", err
	}
	project, tasks, err := setup(ctx, sock, "readers", e.dir, e.cfg.Writers)
	if err != nil {
		return "", "", err
	}

	// The writers: the crash check's clients, with no daemon to lose.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writers []*crashClient
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	for i, t := range tasks {
		c := &crashClient{i: i, project: project, log: clientLog{Task: t}}
		writers = append(writers, c)
		wg.Go(func() { c.loop(sock, stop) })
	}
	acked := func() int64 {
		var n int64
		for _, c := range writers {
			n += c.acks.Load()
		}
		return n
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
		return "", "", ctx.Err()
	}

	// A sequence in the middle of the history, for --at.
	cl, err := rpc.Dial(ctx, sock)
	if err != nil {
		return "", "", err
	}
	st, err := cl.Call(ctx, api.CmdProjectEvents{Project: project})
	cl.Close()
	if err != nil {
		return "", "", fmt.Errorf("project_events: %w", err)
	}
	evs := st.Project.Events
	if len(evs) == 0 {
		return "", "", fmt.Errorf("no events after %s of writes", warmup)
	}
	at := evs[len(evs)/2].Sequence

	cmds := []readerCmd{
		{"verify", []string{"ledger", "verify", "--db", db}, func(out []byte) error {
			if !bytes.Contains(out, []byte("integrity_check: ok")) {
				return fmt.Errorf("no integrity_check: ok in %.300s", out)
			}
			return nil
		}},
		{"events", []string{"project", "events", project, "--socket", sock, "--json"}, projectKind(api.KindEvents)},
		{"tasks --at", []string{"project", "tasks", project, "--at", fmt.Sprint(at), "--db", db, "--json"}, projectKind(api.KindTasks)},
	}

	walBefore, err := readWAL(wal)
	if err != nil {
		return "", "", err
	}
	ackedBefore := acked()
	e.logf("%d reader processes for %s beside %d writers", e.cfg.Readers, e.cfg.ReadFor, e.cfg.Writers)
	stats := make([][]readerStats, e.cfg.Readers)
	failures := make([][]string, e.cfg.Readers)
	end := time.Now().Add(e.cfg.ReadFor)
	var rwg sync.WaitGroup
	for ri := range e.cfg.Readers {
		stats[ri] = make([]readerStats, len(cmds))
		rwg.Go(func() {
			for k := ri; time.Now().Before(end) && ctx.Err() == nil; k++ {
				ci := k % len(cmds)
				fail, busy, took := runReader(ctx, e.bin, cmds[ci])
				s := &stats[ri][ci]
				s.runs++
				s.lat = append(s.lat, took)
				if busy {
					s.busy++
				}
				if fail != "" {
					s.failures++
					failures[ri] = append(failures[ri], fmt.Sprintf("reader %d, %s: %s", ri, cmds[ci].name, fail))
				}
			}
		})
	}
	// The WAL file's size while the readers run, sampled.
	var peak atomic.Int64
	peak.Store(walBefore.Size)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for time.Now().Before(end) {
			<-t.C
			if n := fileSize(wal); n > peak.Load() {
				peak.Store(n)
			}
		}
	}()
	rwg.Wait()
	<-sampled
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	walStop, err := readWAL(wal)
	if err != nil {
		return "", "", err
	}
	peak.Store(max(peak.Load(), walStop.Size))
	ackedDuring := acked() - ackedBefore

	// The writers go on alone; then the log in use is measured.
	e.logf("readers stopped; the writers go on alone for %s", e.cfg.After)
	select {
	case <-time.After(e.cfg.After):
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
	walAfter, err := readWAL(wal)
	if err != nil {
		return "", "", err
	}
	close(stop)
	wg.Wait()
	clientFailures(writers, p)
	for i, c := range writers {
		if c.drops > 0 {
			p.addf("writer %d: %d requests got no reply from a daemon that was never killed", i, c.drops)
		}
	}
	if err := d.Stop(); err != nil {
		p.addf("clean stop: %v", err)
	}
	if _, err := os.Stat(wal); err == nil {
		p.addf("the clean stop left %s behind", filepath.Base(wal))
	}
	if out, err := scv(ctx, e.bin, "ledger", "verify", "--db", db); err != nil {
		p.addf("scv ledger verify after the run: %v", err)
	} else if !bytes.Contains(out, []byte("integrity_check: ok")) {
		p.addf("scv ledger verify after the run: no integrity_check: ok in %.300s", out)
	}

	// The findings.
	var runs, failed, busy int
	var per []string
	for ci, c := range cmds {
		var all readerStats
		for ri := range stats {
			s := stats[ri][ci]
			all.runs += s.runs
			all.failures += s.failures
			all.busy += s.busy
			all.lat = append(all.lat, s.lat...)
		}
		runs, failed, busy = runs+all.runs, failed+all.failures, busy+all.busy
		slices.Sort(all.lat)
		if len(all.lat) > 0 {
			per = append(per, fmt.Sprintf("%s %s (p50 %d ms, max %d ms)", commas(all.runs), c.name,
				all.lat[len(all.lat)/2].Milliseconds(), all.lat[len(all.lat)-1].Milliseconds()))
		}
		if all.runs == 0 {
			p.addf("no %s reader ran", c.name)
		}
	}
	for _, fs := range failures {
		for _, f := range fs {
			p.addf("%s", f)
		}
	}
	bound := int64(walHeaderSize) + walBoundFrames*int64(walFrameHeaderSize+max(walAfter.PageSize, 4096))
	if walAfter.Live() > bound {
		p.addf("the write-ahead log in use is %s (%d frames) %s after the readers stopped, above the bound of %s (%d frames)",
			mib(walAfter.Live()), walAfter.Frames, e.cfg.After, mib(bound), walBoundFrames)
	}
	// SQLite does not shrink the file (the ledger sets no
	// journal_size_limit): it reuses it from the start. Once the log is
	// restarted it stops growing.
	if grown := walAfter.Size - max(walStop.Size, bound); grown > 0 {
		p.addf("the WAL file grew by %s after the readers stopped (%s to %s): the log is not being restarted",
			mib(grown), mib(walStop.Size), mib(walAfter.Size))
	}
	fig = fmt.Sprintf("%d reader processes for %s beside %d writers (%s writes acknowledged meanwhile): %s invocations, "+
		"%d failed, %d saw SQLITE_BUSY or \"database is locked\" [%s]; WAL file %s before, peak %s with readers; "+
		"%s after they stopped the log in use is %s (%s frames of %d B pages; bound %s = %d frames) in a file of %s; verify ok after a clean stop",
		e.cfg.Readers, e.cfg.ReadFor, e.cfg.Writers, commas(ackedDuring), commas(runs), failed, busy, strings.Join(per, ", "),
		mib(walBefore.Size), mib(peak.Load()), e.cfg.After, mib(walAfter.Live()), commas(walAfter.Frames), walAfter.PageSize,
		mib(bound), walBoundFrames, mib(walAfter.Size))
	if len(p.list) > 0 {
		fig = strings.Replace(fig, "verify ok after a clean stop", "see problems", 1)
	}
	sum = fmt.Sprintf("%d readers × %s: %s runs, %d failed, %d busy; WAL in use %s (bound %s)", e.cfg.Readers, e.cfg.ReadFor,
		commas(runs), failed, busy, mib(walAfter.Live()), mib(bound))
	return fig, sum, nil
}

// projectKind checks that stdout is a DaemonStatus whose project reply is
// of kind k.
func projectKind(k api.ResponseKind) func([]byte) error {
	return func(out []byte) error {
		var st api.DaemonStatus
		if err := json.Unmarshal(out, &st); err != nil {
			return fmt.Errorf("not a reply: %v: %.300s", err, out)
		}
		if st.Project == nil || st.Project.Kind != k {
			return fmt.Errorf("not a %s reply: %.300s", k, out)
		}
		return nil
	}
}

// busyWords are what SQLite says when a lock is not granted in time.
var busyWords = []string{"sqlite_busy", "database is locked", "busy"}

// runReader runs one reader process to its end and reports what was wrong
// ("" if nothing), whether its output spoke of a busy database, and how
// long it took.
func runReader(ctx context.Context, bin string, c readerCmd) (string, bool, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a hang guard only
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, c.args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	t := time.Now()
	err := cmd.Run()
	took := time.Since(t)
	all := strings.ToLower(stderr.String() + stdout.String())
	busy := false
	for _, w := range busyWords {
		busy = busy || strings.Contains(all, w)
	}
	switch {
	case err != nil:
		return fmt.Sprintf("%v: %.300s", err, bytes.TrimSpace(stderr.Bytes())), busy, took
	case busy:
		return fmt.Sprintf("busy: %.300s", bytes.TrimSpace(stderr.Bytes())), busy, took
	}
	if err := c.ok(stdout.Bytes()); err != nil {
		return err.Error(), busy, took
	}
	return "", busy, took
}
