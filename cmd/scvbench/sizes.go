package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/reducer"
)

// SizeWindow is one window of lifecycle units into one project.
type SizeWindow struct {
	Label   string      `json:"label"`
	Project string      `json:"project"`
	Tasks   int         `json:"tasks_before"`
	Level   LevelResult `json:"level"`
}

// SizePoint is the pooled windows of one size.
type SizePoint struct {
	Tasks        int         `json:"tasks_before"`
	Level        LevelResult `json:"level"`
	RatioToFresh float64     `json:"ratio_to_fresh"`
}

// ReportCase is project_report on one prepared project.
type ReportCase struct {
	Name  string `json:"name"`
	Tasks int    `json:"tasks"`
	// Report and Status are the latencies of project_report and of
	// project_status on the same project (the round trip it is compared
	// with), sequential requests on one idle connection.
	Report Latency `json:"report"`
	Status Latency `json:"status"`
	// Ratio is Report's median over Status's.
	Ratio        float64 `json:"ratio_to_status"`
	ReplyBytes   int     `json:"reply_bytes"`
	BytesPerTask float64 `json:"bytes_per_task"`
	// Evidence is the report's evidence notes and their bytes.
	EvidenceNotes        int     `json:"evidence_notes"`
	EvidenceBytes        int     `json:"evidence_bytes"`
	EvidenceBytesPerTask float64 `json:"evidence_bytes_per_task"`
}

// SizesResult is the size-independence measure and the report evidence.
type SizesResult struct {
	Clients          int     `json:"clients"`
	GenerateSeconds  float64 `json:"generate_seconds"`
	Events           int     `json:"events"`
	FirstOpenSeconds float64 `json:"first_open_seconds"`
	// Windows in the order they ran; Fresh and Big are the pooled
	// windows of fresh projects and of the largest prepared size; Points
	// are every size, pooled, smallest first.
	Windows []SizeWindow `json:"windows"`
	Fresh   LevelResult  `json:"fresh"`
	Big     LevelResult  `json:"big"`
	BigSize int          `json:"big_tasks"`
	// Ratio is Big's units per second over Fresh's.
	Ratio   float64      `json:"ratio"`
	Points  []SizePoint  `json:"points"`
	Reports []ReportCase `json:"reports"`
}

// The prepared projects of the sizes database.
type sizesPrep struct {
	bySize   map[int][]string // tasks -> projects of that size (two of the largest)
	chain    string
	diamonds string
}

// prepareSizes lays down the projects the sizes measure writes into, and
// the two of the report measure.
func prepareSizes(ctx context.Context, path, workspace string, sizes []int, chainLen, layers int) (*sizesPrep, *histWriter, time.Duration, error) {
	prep := &sizesPrep{bySize: map[int][]string{}}
	total := 0
	for _, n := range sizes {
		total += n
	}
	w, took, err := generateWith(ctx, path, time.Now().UnixMilli()-int64(total+chainLen+4*layers+1000), 2, func(w *histWriter) {
		big := sizes[len(sizes)-1]
		for _, n := range sizes {
			copies := 1
			if n == big {
				copies = 2
			}
			for c := range copies {
				p := w.project(fmt.Sprintf("size-%d-%c", n, 'a'+c), workspace)
				for i := range n {
					w.task(p, fmt.Sprintf("prepared %d", i), 0)
				}
				prep.bySize[n] = append(prep.bySize[n], p)
			}
		}
		// A chain of tasks behind a failed first one.
		p := w.project("chain", workspace)
		prev := w.task(p, "first", 0)
		w.do(reducer.UpdateTask{Project: p, TaskID: prev, Status: reducer.TaskFailed})
		for i := 1; i < chainLen; i++ {
			prev = w.task(p, fmt.Sprintf("step %d", i), 0, prev)
		}
		prep.chain = p
		// Layers of diamonds over a bottom task, which runs.
		p = w.project("diamonds", workspace)
		base := w.task(p, "bottom", 0)
		bottom := base
		for i := range layers {
			left := w.task(p, fmt.Sprintf("left %d", i), 0, base)
			right := w.task(p, fmt.Sprintf("right %d", i), 0, base)
			base = w.task(p, fmt.Sprintf("top %d", i), 0, left, right)
		}
		w.do(reducer.StartRun{Project: p, TaskID: bottom, RunID: w.id(), Agent: "scvbench"})
		prep.diamonds = p
	})
	return prep, w, took, err
}

// lifecycleParams are the three requests of a lifecycle unit.
func addParams(project, title string) []byte {
	return fmt.Appendf(nil, `{"action":"project_task_add","project":%q,"title":%q,"depends_on":[],"max_retries":0}`, project, title)
}

func startParams(project, task string) []byte {
	return fmt.Appendf(nil, `{"action":"project_run_start","project":%q,"task":%q,"agent":"scvbench"}`, project, task)
}

func finishParams(project, run string) []byte {
	return fmt.Appendf(nil, `{"action":"project_run_finish","project":%q,"run":%q,"status":"succeeded"}`, project, run)
}

// lifecycleUnit is one unit: a task added, a run of it started, and
// finished.
func lifecycleUnit(project, tag string) func(ctx context.Context, i int, c *conn, step int) error {
	return func(ctx context.Context, i int, c *conn, step int) error {
		r, err := c.call(ctx, addParams(project, fmt.Sprintf("%s c%d u%d", tag, i, step)))
		if err != nil {
			return err
		}
		task, err := member(r, "task_id")
		if err != nil {
			return err
		}
		if r, err = c.call(ctx, startParams(project, task)); err != nil {
			return err
		}
		run, err := member(r, "run_id")
		if err != nil {
			return err
		}
		_, err = c.call(ctx, finishParams(project, run))
		return err
	}
}

// sizes measures lifecycle units into projects that already hold many
// tasks against the same into fresh ones, and then project_report on the
// chain and the diamonds.
func sizes(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (SizesResult, error) {
	res := SizesResult{Clients: cfg.SizeClients}
	path := filepath.Join(dir, "sizes.db")
	prep, w, took, err := prepareSizes(ctx, path, dir, cfg.Sizes, cfg.ChainTasks, cfg.DiamondLayers)
	if err != nil {
		return res, fmt.Errorf("prepare: %w", err)
	}
	res.GenerateSeconds, res.Events = took.Seconds(), int(w.seq)
	big := cfg.Sizes[len(cfg.Sizes)-1]
	res.BigSize = big
	logf("  prepared %d events (projects of %v tasks, a %d-task chain, %d layers of diamonds) in %.1f s",
		w.seq, cfg.Sizes, cfg.ChainTasks, cfg.DiamondLayers, took.Seconds())

	d, err := daemonproc.Start(bin, path, filepath.Join(dir, "sizes.sock"), "--stale-after", "1h")
	if err != nil {
		return res, err
	}
	defer d.Kill()
	first, err := d.ReadyWith(ctx, 5*time.Minute, api.CmdProjectStatus{Project: prep.bySize[big][0]})
	if err != nil {
		return res, err
	}
	res.FirstOpenSeconds = first.Seconds()
	logf("  first open (migration, summaries, load) %.2f s", res.FirstOpenSeconds)

	conns, err := dialAll(ctx, []string{d.Sock}, cfg.SizeClients)
	if err != nil {
		return res, err
	}
	defer closeAll(conns)
	admin := conns[0]

	type win struct {
		label   string
		tasks   int
		project string
	}
	// The fresh baseline on both sides of the largest size; the smaller
	// sizes first.
	var order []win
	for _, n := range cfg.Sizes[:len(cfg.Sizes)-1] {
		order = append(order, win{fmt.Sprintf("%d tasks", n), n, prep.bySize[n][0]})
	}
	for k := range 2 {
		order = append(order, win{fmt.Sprintf("fresh %d", k+1), 0, ""}, win{fmt.Sprintf("%d tasks (%c)", big, 'a'+k), big, prep.bySize[big][k]})
	}
	order = append(order, win{"fresh 3", 0, ""})
	for k, wn := range order {
		if wn.project == "" {
			st, err := admin.c.Call(ctx, api.CmdProjectCreate{Name: fmt.Sprintf("fresh-%d", k), Workspace: dir})
			if err != nil {
				return res, fmt.Errorf("project_create: %w", err)
			}
			wn.project = st.Project.Project.ID
		} else if _, err := admin.c.Call(ctx, api.CmdProjectStatus{Project: wn.project}); err != nil {
			// Loaded before the window, not in it.
			return res, fmt.Errorf("project_status: %w", err)
		}
		logf("  lifecycle units, %d clients, %s", cfg.SizeClients, wn.label)
		l := load{conns: conns, warm: cfg.Warmup / 2, d: cfg.Duration / 2, pids: []int{d.Pid()}, perUnit: 3,
			prof: "lifecycle-" + wn.label, profSock: d.Sock,
			unit: lifecycleUnit(wn.project, fmt.Sprintf("w%d", k))}
		lr, _, _, err := l.run(ctx)
		if err != nil {
			return res, err
		}
		res.Windows = append(res.Windows, SizeWindow{Label: wn.label, Project: wn.project, Tasks: wn.tasks, Level: lr})
	}
	pool := func(tasks int) LevelResult {
		var ls []LevelResult
		for _, wn := range res.Windows {
			if wn.Tasks == tasks {
				ls = append(ls, wn.Level)
			}
		}
		return poolLevels(ls)
	}
	res.Fresh, res.Big = pool(0), pool(big)
	if res.Fresh.RequestsPerSec > 0 {
		res.Ratio = res.Big.RequestsPerSec / res.Fresh.RequestsPerSec
	}
	for _, n := range append([]int{0}, cfg.Sizes...) {
		pt := SizePoint{Tasks: n, Level: pool(n)}
		if res.Fresh.RequestsPerSec > 0 {
			pt.RatioToFresh = pt.Level.RequestsPerSec / res.Fresh.RequestsPerSec
		}
		res.Points = append(res.Points, pt)
	}

	// project_report, on an idle daemon.
	for _, c := range []struct {
		name, project string
		tasks         int
	}{
		{fmt.Sprintf("chain of %d tasks, failed root", cfg.ChainTasks), prep.chain, cfg.ChainTasks},
		{fmt.Sprintf("%d layers of diamonds, bottom task running", cfg.DiamondLayers), prep.diamonds, 1 + 3*cfg.DiamondLayers},
	} {
		rc, err := reportCase(ctx, admin, c.project, c.tasks, cfg.ReportRounds)
		if err != nil {
			return res, fmt.Errorf("project_report, %s: %w", c.name, err)
		}
		rc.Name = c.name
		res.Reports = append(res.Reports, rc)
		logf("  project_report, %s: p50 %.0f µs, %d bytes", c.name, rc.Report.P50us, rc.ReplyBytes)
	}
	return res, d.Stop()
}

// reportCase times project_report and project_status on project,
// alternately, rounds times each.
func reportCase(ctx context.Context, c *conn, project string, tasks, rounds int) (ReportCase, error) {
	rc := ReportCase{Tasks: tasks}
	report := fmt.Appendf(nil, `{"action":"project_report","project":%q}`, project)
	status := statusParams(project)
	var rl, sl []time.Duration
	var last []byte
	for range rounds {
		t := time.Now()
		r, err := c.call(ctx, report)
		if err != nil {
			return rc, err
		}
		rl = append(rl, time.Since(t))
		last = append(last[:0], r...)
		t = time.Now()
		if _, err := c.call(ctx, status); err != nil {
			return rc, err
		}
		sl = append(sl, time.Since(t))
	}
	rc.Report, rc.Status = latencyOf(rl), latencyOf(sl)
	if rc.Status.P50us > 0 {
		rc.Ratio = rc.Report.P50us / rc.Status.P50us
	}
	rc.ReplyBytes = len(last)
	rc.BytesPerTask = float64(len(last)) / float64(tasks)
	var reply struct {
		Result api.DaemonStatus `json:"result"`
	}
	if err := json.Unmarshal(last, &reply); err != nil {
		return rc, fmt.Errorf("decode the report: %w", err)
	}
	if reply.Result.Project == nil || reply.Result.Project.Report == nil {
		return rc, fmt.Errorf("not a report: %.300s", last)
	}
	for _, n := range reply.Result.Project.Report.Evidence {
		rc.EvidenceNotes++
		rc.EvidenceBytes += len(n)
	}
	rc.EvidenceBytesPerTask = float64(rc.EvidenceBytes) / float64(tasks)
	return rc, nil
}
