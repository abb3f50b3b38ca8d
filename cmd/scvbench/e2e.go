package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"scv/control"
	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/ledger/driver"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// LevelResult is one load level: C clients, each with its own connection,
// each doing one unit of work after another (a unit is one
// project_run_progress for its own running run, or, for the lifecycle
// levels, a task add, a run start and a run finish).
type LevelResult struct {
	Clients int `json:"clients"`
	// Requests counts the units that started and finished inside the
	// window; RequestsPerUnit is how many requests one unit sends.
	Requests        int     `json:"requests"`
	RequestsPerUnit int     `json:"requests_per_unit"`
	Seconds         float64 `json:"seconds"`
	RequestsPerSec  float64 `json:"requests_per_sec"`
	Latency         Latency `json:"latency"`
	Errors          int     `json:"errors"`
	FirstError      string  `json:"first_error,omitempty"`
	// RatioToRaw is RequestsPerSec over the raw group-commit ceiling's
	// rows per second.
	RatioToRaw float64 `json:"ratio_to_raw"`
	// CPUus is the daemons' CPU time (utime + stime from /proc/PID/stat,
	// every daemon serving the level) over the window, per request.
	CPUus float64 `json:"daemon_cpu_us_per_request"`

	samples []time.Duration // the latencies, for pooling
	cpu     float64         // the daemons' CPU seconds in the window
}

// poolLevels pools windows of the same load into one result.
func poolLevels(ls []LevelResult) LevelResult {
	if len(ls) == 0 {
		return LevelResult{}
	}
	p := LevelResult{Clients: ls[0].Clients, RequestsPerUnit: ls[0].RequestsPerUnit}
	for _, l := range ls {
		p.Requests += l.Requests
		p.Seconds += l.Seconds
		p.Errors += l.Errors
		if p.FirstError == "" {
			p.FirstError = l.FirstError
		}
		p.samples = append(p.samples, l.samples...)
		p.cpu += l.cpu
	}
	p.RequestsPerSec = float64(p.Requests) / p.Seconds
	p.Latency = latencyOf(slices.Clone(p.samples))
	if p.Requests > 0 {
		p.CPUus = p.cpu * 1e6 / float64(p.Requests*p.RequestsPerUnit)
	}
	return p
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
	line   []byte
}

// call sends one daemon.control request with the given params, checks
// that the reply is a result for the same id, and returns the reply.
func (c *conn) call(ctx context.Context, params []byte) ([]byte, error) {
	c.nextID++
	id := strconv.Itoa(c.nextID)
	line := c.line[:0]
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"method":"daemon.control","params":`...)
	line = append(line, params...)
	line = append(line, "}\n"...)
	c.line = line
	resp, err := c.c.Send(ctx, line)
	if err != nil {
		return nil, err
	}
	// The daemon writes jsonrpc, id, then result or error.
	want := `{"jsonrpc":"2.0","id":` + id + `,"result":`
	if !bytes.HasPrefix(resp, []byte(want)) {
		if len(resp) > 300 {
			resp = resp[:300]
		}
		return nil, fmt.Errorf("reply is not a result: %s", resp)
	}
	return resp, nil
}

// member returns the string value of the last `"key":"…"` in a reply.
func member(reply []byte, key string) (string, error) {
	k := []byte(`"` + key + `":"`)
	i := bytes.LastIndex(reply, k)
	if i < 0 {
		return "", fmt.Errorf("no %s in the reply: %.300s", key, reply)
	}
	v := reply[i+len(k):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return "", fmt.Errorf("unterminated %s in the reply", key)
	}
	return string(v[:j]), nil
}

func progressParams(project, run string, step int) []byte {
	return fmt.Appendf(nil, `{"action":"project_run_progress","project":%q,"run":%q,"progress":"step %d"}`, project, run, step)
}

func statusParams(project string) []byte {
	return fmt.Appendf(nil, `{"action":"project_status","project":%q}`, project)
}

// dialAll opens n connections, the i-th to socks[i % len(socks)].
func dialAll(ctx context.Context, socks []string, n int) ([]*conn, error) {
	conns := make([]*conn, n)
	for i := range n {
		c, err := control.Dial(ctx, socks[i%len(socks)])
		if err != nil {
			closeAll(conns)
			return nil, err
		}
		conns[i] = &conn{c: c}
	}
	return conns, nil
}

func closeAll(conns []*conn) {
	for _, c := range conns {
		if c != nil {
			c.c.Close()
		}
	}
}

// startRuns has each client add a task of its own to its project
// (client i: projects[i % len(projects)]) and start a run of it, all at
// once; it returns the runs.
func startRuns(ctx context.Context, conns []*conn, projects []string, prefix string) ([]string, error) {
	runs := make([]string, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		project := projects[i%len(projects)]
		wg.Go(func() {
			errs[i] = func() error {
				st, err := c.c.Call(ctx, api.CmdProjectTaskAdd{Project: project, Title: fmt.Sprintf("%s-%d", prefix, i), DependsOn: []string{}})
				if err != nil {
					return fmt.Errorf("project_task_add: %w", err)
				}
				st, err = c.c.Call(ctx, api.CmdProjectRunStart{Project: project, Task: st.Project.TaskID, Agent: "scvbench"})
				if err != nil {
					return fmt.Errorf("project_run_start: %w", err)
				}
				runs[i] = st.Project.RunID
				return nil
			}()
		})
	}
	wg.Wait()
	return runs, errors.Join(errs...)
}

// load is one measured window over connections that are set up.
type load struct {
	conns []*conn
	warm  time.Duration
	d     time.Duration
	// unit does client i's step-th unit of work on c.
	unit func(ctx context.Context, i int, c *conn, step int) error
	// perUnit is how many requests a unit sends.
	perUnit int
	// statusSock, if set, is where a reader process (reader.go) sends
	// project_status of statusProject back to back while the clients work.
	statusSock, statusProject string
	// pids are the daemons whose CPU time the window is charged.
	pids []int
	// prof names the window's CPU profile of the daemon at profSock
	// (with -profile).
	prof, profSock string
}

// run runs l's clients for warm+d and returns what was measured in the
// window d, the number of units acknowledged in all (warm-up included),
// and the status reader's latency.
func (l load) run(ctx context.Context) (LevelResult, int64, Latency, error) {
	var rd *reader
	if l.statusSock != "" {
		var err error
		if rd, err = startReader(ctx, l.statusSock, l.statusProject); err != nil {
			return LevelResult{}, 0, Latency{}, err
		}
	}
	start := time.Now()
	from, end := start.Add(l.warm), start.Add(l.warm+l.d)
	type outcome struct {
		lat      []time.Duration
		acked    int64
		errs     int
		firstErr error
	}
	outs := make([]outcome, len(l.conns))
	var wg sync.WaitGroup
	for i, c := range l.conns {
		wg.Go(func() {
			o := &outs[i]
			for step := 1; ; step++ {
				t := time.Now()
				if !t.Before(end) {
					return
				}
				err := l.unit(ctx, i, c, step)
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
		})
	}
	var status Latency
	var statusErr error
	if rd != nil {
		wait := rd.begin(from, end)
		wg.Go(func() {
			var lat []time.Duration
			lat, statusErr = wait()
			status = latencyOf(lat)
		})
	}
	var profErr, harnessErr error
	if l.prof != "" {
		wg.Go(func() {
			time.Sleep(time.Until(from))
			profErr = profileWindow(ctx, l.profSock, l.prof, l.d)
		})
		wg.Go(func() {
			time.Sleep(time.Until(from))
			harnessErr = profileHarness(l.prof, l.d)
		})
	}
	// The daemons' CPU time over the window.
	var cpu0, cpu1 float64
	var cpuErr error
	wg.Go(func() {
		time.Sleep(time.Until(from))
		cpu0, cpuErr = cpuSeconds(l.pids)
		time.Sleep(time.Until(end))
		if cpuErr == nil {
			cpu1, cpuErr = cpuSeconds(l.pids)
		}
	})
	wg.Wait()
	if statusErr != nil {
		return LevelResult{}, 0, Latency{}, fmt.Errorf("project_status: %w", statusErr)
	}
	if err := errors.Join(cpuErr, profErr, harnessErr); err != nil {
		return LevelResult{}, 0, Latency{}, err
	}
	res := LevelResult{Clients: len(l.conns), Seconds: l.d.Seconds(), RequestsPerUnit: max(1, l.perUnit)}
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
	res.RequestsPerSec = float64(len(all)) / l.d.Seconds()
	res.samples, res.cpu = slices.Clone(all), cpu1-cpu0
	res.Latency = latencyOf(all)
	if len(all) > 0 {
		res.CPUus = (cpu1 - cpu0) * 1e6 / float64(len(all)*res.RequestsPerUnit)
	}
	return res, acked, status, nil
}

// progressLevel is the run-progress load: c clients, client i on
// socks[i % len(socks)] writing into projects[i % len(projects)], each
// adding a task, starting a run of it, then sending project_run_progress
// for it one request after the other.
func progressLevel(ctx context.Context, socks []string, pids []int, projects []string, c int, warm, d time.Duration, statusSock string, prof string) (LevelResult, int64, Latency, error) {
	conns, err := dialAll(ctx, socks, c)
	if err != nil {
		return LevelResult{}, 0, Latency{}, err
	}
	defer closeAll(conns)
	runs, err := startRuns(ctx, conns, projects, fmt.Sprintf("c%d-%d", c, time.Now().UnixNano()))
	if err != nil {
		return LevelResult{}, 0, Latency{}, err
	}
	l := load{conns: conns, warm: warm, d: d, pids: pids, perUnit: 1, prof: prof, profSock: socks[0],
		unit: func(ctx context.Context, i int, cl *conn, step int) error {
			_, err := cl.call(ctx, progressParams(projects[i%len(projects)], runs[i], step))
			return err
		}}
	if statusSock != "" {
		l.statusSock, l.statusProject = statusSock, projects[0]
	}
	return l.run(ctx)
}

// endToEnd runs the daemon as a process and drives it over its socket:
// idle project_status, then each load level if levels (around runs just
// "before" and just "after" each, with the daemon up and idle), then
// project_status under the heaviest, and the do-nothing responder's.
func endToEnd(ctx context.Context, cfg Config, bin, dir string, rep *Report, levels bool, around func(stage string, clients int) error, logf func(string, ...any)) error {
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
	st, err := admin.Call(ctx, api.CmdProjectCreate{Name: "bench", Workspace: dir})
	if err != nil {
		return fmt.Errorf("project_create: %w", err)
	}
	project := st.Project.Project.ID

	// project_status on an idle daemon.
	idle := &conn{c: admin}
	lat := make([]time.Duration, 0, cfg.StatusIdle)
	params := statusParams(project)
	var reply []byte
	for range cfg.StatusIdle {
		t := time.Now()
		if reply, err = idle.call(ctx, params); err != nil {
			return fmt.Errorf("project_status: %w", err)
		}
		lat = append(lat, time.Since(t))
	}
	statusResult, err := resultOf(reply)
	if err != nil {
		return fmt.Errorf("project_status: %w", err)
	}
	rep.Status.Idle = latencyOf(lat)

	var acked int64
	pid := d.Cmd.Process.Pid
	for _, c := range cfg.Levels {
		if !levels {
			break
		}
		if err := around("before", c); err != nil {
			return err
		}
		logf("  %d client(s)", c)
		res, n, _, err := progressLevel(ctx, []string{d.Sock}, []int{pid}, []string{project}, c, cfg.Warmup, cfg.Duration, "", fmt.Sprintf("progress-%d", c))
		if err != nil {
			return fmt.Errorf("%d clients: %w", c, err)
		}
		if err := around("after", c); err != nil {
			return err
		}
		acked += n
		rep.E2E = append(rep.E2E, res)
	}
	// project_status under the heaviest level, in a window of its own: a
	// reader that asks back to back is a second load (about 16,000
	// requests a second), which the writers' figures above, set against
	// a ceiling measured without it, do not carry. The writers' figures
	// of this window are reported beside it.
	c := cfg.Levels[len(cfg.Levels)-1]
	logf("  %d clients and a project_status reader", c)
	res, n, status, err := progressLevel(ctx, []string{d.Sock}, []int{pid}, []string{project}, c, cfg.Warmup, cfg.Duration, d.Sock, fmt.Sprintf("progress-%d-reader", c))
	if err != nil {
		return fmt.Errorf("%d clients and a reader: %w", c, err)
	}
	acked += n
	rep.Status.UnderLoad, rep.Status.Clients, rep.Status.Writers = status, c, res

	// The same load, the reader asking the do-nothing responder
	// (responder.go): the floor under the figure above.
	logf("  %d clients and a reader of a do-nothing responder", c)
	esock, estop, err := startResponder(ctx, dir, statusResult)
	if err != nil {
		return err
	}
	res, n, floor, err := progressLevel(ctx, []string{d.Sock}, []int{pid}, []string{project}, c, cfg.Warmup, cfg.Duration, esock, "")
	if serr := estop(); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("%d clients and a reader of the responder: %w", c, err)
	}
	acked += n
	rep.Status.Floor, rep.Status.FloorWriters = floor, res
	if rep.RSS.VmHWMKiB, err = vmHWM(pid); err != nil {
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

// countKind counts the events of one kind in the ledger file at path,
// archive and live tail.
func countKind(ctx context.Context, path, kind string) (int64, error) {
	var n int64
	err := sqlitetest.Each(ctx, path, func(e driver.Event) error {
		if e.Kind == kind {
			n++
		}
		return nil
	})
	return n, err
}
