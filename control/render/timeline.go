package render

import (
	"slices"
	"strconv"
	"time"
)

// timeline is what both timeline outputs draw: the rows, the time range,
// and per run its drawn end, its gaps and whether it is critical.
type timeline struct {
	start, end time.Time
	loc        *time.Location
	rows       []tlRow
	rowOf      map[string]int // task ID → its row
	ends       []time.Time    // per run of p.Runs
	gaps       [][]interval   // per run
	critical   []bool         // per run
	chain      []int          // the critical runs, earliest first
}

// tlRow is one row: a task's (in task order), then one per task ID that
// runs or markers name but p.Tasks lacks, and first, when some marker
// names neither task nor run, the project's own.
type tlRow struct {
	taskID, title, status string
	plan, tip             string // planText and planTip of its task
	project               bool
	runs, markers         []int // indices into p.Runs and p.Markers
	critical              bool  // holds a run on the critical path
}

type interval struct{ from, to time.Time }

func buildTimeline(p Project) timeline {
	tl := timeline{ends: runEnds(p)}
	tl.chain = criticalRuns(p, tl.ends)
	tl.critical = make([]bool, len(p.Runs))
	for _, r := range tl.chain {
		tl.critical[r] = true
	}

	// Rows.
	projectRow := false
	runByID := map[string]int{}
	for i, r := range p.Runs {
		if _, ok := runByID[r.ID]; !ok {
			runByID[r.ID] = i
		}
	}
	for _, m := range p.Markers {
		_, runKnown := runByID[m.RunID]
		if m.TaskID == "" && !runKnown {
			projectRow = true
		}
	}
	if projectRow {
		tl.rows = append(tl.rows, tlRow{title: "(project)", project: true})
	}
	rowOf := map[string]int{}
	tl.rowOf = rowOf
	ix := indexTasks(p.Tasks)
	title := func(id string) string {
		if d, ok := ix.byID[id]; ok {
			return clean(p.Tasks[d].Title)
		}
		return clean(id)
	}
	for _, t := range p.Tasks {
		if _, ok := rowOf[t.ID]; ok {
			continue
		}
		rowOf[t.ID] = len(tl.rows)
		tl.rows = append(tl.rows, tlRow{taskID: t.ID, title: t.Title, status: t.Status, plan: planText(t), tip: planTip(t, title)})
	}
	row := func(taskID string) *tlRow {
		k, ok := rowOf[taskID]
		if !ok {
			k = len(tl.rows)
			rowOf[taskID] = k
			tl.rows = append(tl.rows, tlRow{taskID: taskID, title: taskID})
		}
		return &tl.rows[k]
	}
	for i, r := range p.Runs {
		rw := row(r.TaskID)
		rw.runs = append(rw.runs, i)
		rw.critical = rw.critical || tl.critical[i]
	}
	for i, m := range p.Markers {
		switch r, runKnown := runByID[m.RunID]; {
		case m.TaskID != "":
			rw := row(m.TaskID)
			rw.markers = append(rw.markers, i)
		case runKnown:
			rw := row(p.Runs[r].TaskID)
			rw.markers = append(rw.markers, i)
		default:
			tl.rows[0].markers = append(tl.rows[0].markers, i)
		}
	}

	// Range: from the first start or marker to the last end, marker or Now.
	first := true
	extend := func(t time.Time) {
		if first {
			tl.start, tl.end, first = t, t, false
			return
		}
		if t.Before(tl.start) {
			tl.start = t
		}
		tl.end = later(tl.end, t)
	}
	for i, r := range p.Runs {
		extend(r.Start)
		extend(tl.ends[i])
	}
	for _, m := range p.Markers {
		extend(m.At)
	}
	if !first && !p.Now.IsZero() {
		extend(p.Now)
	}
	tl.loc = time.UTC
	switch {
	case !p.Now.IsZero():
		tl.loc = p.Now.Location()
	case !first:
		tl.loc = tl.start.Location()
	}

	tl.gaps = make([][]interval, len(p.Runs))
	for i, r := range p.Runs {
		tl.gaps[i] = runGaps(r, tl.ends[i], p.GapAfter)
	}
	return tl
}

// runGaps is the silences of a run longer than after: between its start,
// its beats (those inside the run, in time order) and its drawn end.
func runGaps(r Run, end time.Time, after time.Duration) []interval {
	if after <= 0 {
		return nil
	}
	pts := []time.Time{r.Start}
	for _, b := range r.Beats {
		if b.After(r.Start) && b.Before(end) {
			pts = append(pts, b)
		}
	}
	slices.SortFunc(pts[1:], func(a, b time.Time) int { return a.Compare(b) })
	pts = append(pts, end)
	var gaps []interval
	for k := 1; k < len(pts); k++ {
		if pts[k].Sub(pts[k-1]) > after {
			gaps = append(gaps, interval{pts[k-1], pts[k]})
		}
	}
	return gaps
}

// tick is one mark of the time axis.
type tick struct {
	at    time.Time
	label string
}

var tickSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
	91 * 24 * time.Hour, 182 * 24 * time.Hour, 364 * 24 * time.Hour,
}

// ticks are at most most round instants between start and end, at the
// smallest step of tickSteps that keeps them within most, counted from
// midnight of start's day in loc.
func ticks(start, end time.Time, loc *time.Location, most int) []tick {
	most = max(most, 1)
	span := end.Sub(start)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if int64(span/s) < int64(most) {
			step = s
			break
		}
	}
	s := start.In(loc)
	base := time.Date(s.Year(), s.Month(), s.Day(), 0, 0, 0, 0, loc)
	k := (s.Sub(base) + step - 1) / step
	crossesDays := s.YearDay() != end.In(loc).YearDay() || s.Year() != end.In(loc).Year()
	var out []tick
	for t := base.Add(k * step); !t.After(end) && len(out) < most; t = t.Add(step) {
		lt := t.In(loc)
		var label string
		switch {
		case step >= 28*24*time.Hour:
			label = lt.Format("2006-01-02")
		case step >= 24*time.Hour:
			label = lt.Format("Jan 2")
		case crossesDays && lt.Hour() == 0 && lt.Minute() == 0 && lt.Second() == 0:
			label = lt.Format("Jan 2")
		case step < time.Minute:
			label = lt.Format("15:04:05")
		default:
			label = lt.Format("15:04")
		}
		out = append(out, tick{t, label})
	}
	return out
}

// rangeText is "2025-03-01 10:00:00 → 11:00:00 UTC (1h00m)".
func rangeText(tl timeline, arrow string) string {
	s, e := tl.start.In(tl.loc), tl.end.In(tl.loc)
	endFmt := "15:04:05 MST"
	if s.YearDay() != e.YearDay() || s.Year() != e.Year() {
		endFmt = "2006-01-02 15:04:05 MST"
	}
	return s.Format("2006-01-02 15:04:05") + " " + arrow + " " + e.Format(endFmt) + " (" + durText(e.Sub(s)) + ")"
}

// durText is a duration in two units: 42s, 7m05s, 2h05m, 3d04h; under a
// second, in milliseconds (340ms), so that a short run or critical path
// does not read 0s.
func durText(d time.Duration) string {
	if ms := d.Round(time.Millisecond); ms > 0 && ms < time.Second {
		return itoa(ms.Milliseconds()) + "ms"
	}
	d = d.Round(time.Second)
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return itoa(s) + "s"
	case s < 3600:
		return itoa(s/60) + "m" + two(s%60) + "s"
	case s < 86400:
		return itoa(s/3600) + "h" + two(s%3600/60) + "m"
	}
	return itoa(s/86400) + "d" + two(s%86400/3600) + "h"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func two(n int64) string {
	if n < 10 {
		return "0" + itoa(n)
	}
	return itoa(n)
}
