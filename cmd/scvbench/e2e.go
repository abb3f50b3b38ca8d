package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"scv/cmd/internal/daemonproc"
	"scv/control"
	"scv/reducer"
)

// vmHWM is process pid's peak resident set size in KiB.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// LevelResult is one load level: C clients, each with its own connection,
// each sending project_run_progress for its own running run, one request
// after another.
type LevelResult struct {
	Clients        int     `json:"clients"`
	Requests       int     `json:"requests"`
	Seconds        float64 `json:"seconds"`
	RequestsPerSec float64 `json:"requests_per_sec"`
	Latency        Latency `json:"latency"`
	Errors         int     `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
	// RatioToRaw is RequestsPerSec over the raw group-commit ceiling's
	// rows per second.
	RatioToRaw float64 `json:"ratio_to_raw"`
}

// DurabilityResult compares the writes the daemon acknowledged with the
// events the database holds after it stopped.
type DurabilityResult struct {
	Acked   int64 `json:"acked"`
	Stored  int64 `json:"stored"`
	Missing int64 `json:"missing"`
}

// RSSResult is the daemon's peak memory.
type RSSResult struct {
	VmHWMKiB int64 `json:"vmhwm_kib"`
}

// conn is one client connection speaking pre-encoded request lines
// through control.Client.Send, so that the harness, which shares the CPUs
// with the daemon, spends as little as it can per request.
type conn struct {
	c      *control.Client
	nextID int
}

// call sends one daemon.control request with the given params and checks
// that the reply is a result for the same id.
func (c *conn) call(ctx context.Context, params []byte) error {
	c.nextID++
	id := strconv.Itoa(c.nextID)
	line := make([]byte, 0, len(params)+80)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"method":"daemon.control","params":`...)
	line = append(line, params...)
	line = append(line, "}\n"...)
	resp, err := c.c.Send(ctx, line)
	if err != nil {
		return err
	}
	// The daemon writes jsonrpc, id, then result or error.
	want := `{"jsonrpc":"2.0","id":` + id + `,"result":`
	if !bytes.HasPrefix(resp, []byte(want)) {
		if len(resp) > 300 {
			resp = resp[:300]
		}
		return fmt.Errorf("reply is not a result: %s", resp)
	}
	return nil
}

func progressParams(project, run string, step int) []byte {
	return fmt.Appendf(nil, `{"action":"project_run_progress","project":%q,"run":%q,"progress":"step %d"}`, project, run, step)
}

func statusParams(project string) []byte {
	return fmt.Appendf(nil, `{"action":"project_status","project":%q}`, project)
}

// endToEnd runs the daemon as a process and drives it over its socket.
// around runs just "before" and just "after" each load level, with the
// daemon up and idle.
func endToEnd(ctx context.Context, cfg Config, bin, dir string, rep *Report, around func(stage string, clients int) error, logf func(string, ...any)) error {
	db := filepath.Join(dir, "e2e.db")
	d, err := daemonproc.Start(bin, db, filepath.Join(dir, "e2e.sock"), "--stale-after", "1h")
	if err != nil {
		return err
	}
	running := true
	defer func() {
		if running {
			d.Stop()
		}
	}()
	if _, err := d.Ready(ctx, time.Minute); err != nil {
		return err
	}
	admin, err := control.Dial(ctx, d.Sock)
	if err != nil {
		return err
	}
	defer admin.Close()
	st, err := admin.Call(ctx, control.CmdProjectCreate{Name: "bench", Workspace: dir})
	if err != nil {
		return fmt.Errorf("project_create: %w", err)
	}
	project := st.Project.Project.ID

	// project_status on an idle daemon.
	idle := &conn{c: admin}
	lat := make([]time.Duration, 0, cfg.StatusIdle)
	params := statusParams(project)
	for range cfg.StatusIdle {
		t := time.Now()
		if err := idle.call(ctx, params); err != nil {
			return fmt.Errorf("project_status: %w", err)
		}
		lat = append(lat, time.Since(t))
	}
	rep.Status.Idle = latencyOf(lat)

	var acked int64
	for i, c := range cfg.Levels {
		if err := around("before", c); err != nil {
			return err
		}
		logf("  %d client(s)", c)
		last := i == len(cfg.Levels)-1
		res, n, status, err := level(ctx, d.Sock, project, c, cfg.Warmup, cfg.Duration, last)
		if err != nil {
			return fmt.Errorf("%d clients: %w", c, err)
		}
		if err := around("after", c); err != nil {
			return err
		}
		acked += n
		rep.E2E = append(rep.E2E, res)
		if last {
			rep.Status.UnderLoad, rep.Status.Clients = status, c
		}
	}
	if rep.RSS.VmHWMKiB, err = vmHWM(d.Cmd.Process.Pid); err != nil {
		return err
	}
	running = false
	if err := d.Stop(); err != nil {
		return err
	}
	stored, err := countKind(ctx, db, reducer.KindRunProgress)
	if err != nil {
		return err
	}
	rep.Durability = DurabilityResult{Acked: acked, Stored: stored, Missing: max(0, acked-stored)}
	return nil
}

// level runs c writing clients for warm+d and returns what was measured in
// the window d, the number of writes acknowledged in all, and, if
// withStatus, the latency of project_status on one more connection while
// the clients write.
func level(ctx context.Context, sock, project string, c int, warm, d time.Duration, withStatus bool) (LevelResult, int64, Latency, error) {
	// Set up: each client adds its task and starts its run.
	clients := make([]*conn, c)
	runs := make([]string, c)
	var wg sync.WaitGroup
	setupErrs := make([]error, c)
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			setupErrs[i] = func() error {
				cl, err := control.Dial(ctx, sock)
				if err != nil {
					return err
				}
				clients[i] = &conn{c: cl}
				st, err := cl.Call(ctx, control.CmdProjectTaskAdd{Project: project, Title: fmt.Sprintf("c%d-%d", c, i), DependsOn: []string{}})
				if err != nil {
					return fmt.Errorf("project_task_add: %w", err)
				}
				st, err = cl.Call(ctx, control.CmdProjectRunStart{Project: project, Task: st.Project.TaskID, Agent: "scvbench"})
				if err != nil {
					return fmt.Errorf("project_run_start: %w", err)
				}
				runs[i] = st.Project.RunID
				return nil
			}()
		}()
	}
	wg.Wait()
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.c.Close()
			}
		}
	}()
	if err := errors.Join(setupErrs...); err != nil {
		return LevelResult{}, 0, Latency{}, err
	}

	start := time.Now()
	from, end := start.Add(warm), start.Add(warm+d)
	type outcome struct {
		lat      []time.Duration
		acked    int64
		errs     int
		firstErr error
	}
	outs := make([]outcome, c+1)
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			for step := 1; ; step++ {
				t := time.Now()
				if !t.Before(end) {
					return
				}
				err := clients[i].call(ctx, progressParams(project, runs[i], step))
				done := time.Now()
				if err != nil {
					o.errs++
					if o.firstErr == nil {
						o.firstErr = err
					}
					if ctx.Err() != nil {
						return
					}
					continue
				}
				o.acked++
				if !t.Before(from) && !done.After(end) {
					o.lat = append(o.lat, done.Sub(t))
				}
			}
		}()
	}
	var status Latency
	var statusErr error
	if withStatus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := control.Dial(ctx, sock)
			if err != nil {
				statusErr = err
				return
			}
			defer cl.Close()
			sc := &conn{c: cl}
			params := statusParams(project)
			var lat []time.Duration
			for {
				t := time.Now()
				if !t.Before(end) {
					break
				}
				if err := sc.call(ctx, params); err != nil {
					statusErr = err
					return
				}
				if done := time.Now(); !t.Before(from) && !done.After(end) {
					lat = append(lat, done.Sub(t))
				}
			}
			status = latencyOf(lat)
		}()
	}
	wg.Wait()
	if statusErr != nil {
		return LevelResult{}, 0, Latency{}, fmt.Errorf("project_status: %w", statusErr)
	}
	res := LevelResult{Clients: c, Seconds: d.Seconds()}
	var all []time.Duration
	var acked int64
	for _, o := range outs {
		all = append(all, o.lat...)
		acked += o.acked
		res.Errors += o.errs
		if o.firstErr != nil && res.FirstError == "" {
			res.FirstError = o.firstErr.Error()
		}
	}
	res.Requests = len(all)
	res.RequestsPerSec = float64(len(all)) / d.Seconds()
	res.Latency = latencyOf(all)
	return res, acked, status, nil
}

// countKind counts the events of one kind in the database at path.
func countKind(ctx context.Context, path, kind string) (int64, error) {
	db, err := sqlx.Open("sqlite", dsn(path, true))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.GetContext(ctx, &n, `SELECT count(*) FROM events WHERE kind = ?`, kind)
	return n, err
}
