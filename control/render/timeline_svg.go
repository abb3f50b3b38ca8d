package render

import (
	"io"
	"slices"
	"strings"
	"time"
)

// Sizes of the timeline drawing, in pixels.
const (
	tlLabelW = 220 // the column of task titles
	tlPlotW  = 880 // the time axis
	tlRowH   = 28
	tlBarH   = 16
	tlTop    = margin + 52 // the first row
)

// TimelineSVG writes p's timeline as a standalone SVG document: a time
// axis with ticks (<line class="tick">, <text class="tick-label">), one row
// per task, one <rect class="bar run-S" data-run-id="ID" data-task-id="ID">
// per run (class critical added on the critical path), one
// <rect class="gap"> per heartbeat gap over its bar, one element of class
// "marker marker-K" per marker, a line at Now, a legend and the critical
// path spelt out. Inline style only, no script, all ledger text escaped.
func TimelineSVG(w io.Writer, p Project) error {
	tl := buildTimeline(p)
	plotX := margin + tlLabelW + 10
	width := plotX + tlPlotW + margin
	bottom := tlTop + len(tl.rows)*tlRowH
	legend := timelineLegend(p, bottom+28, width)
	height := legend[len(legend)-1].y + 22 + margin
	s := &svgOut{}
	s.open("scv-timeline", width, height, "timeline of "+heading(p), timelineCSS())
	s.f(`<defs><pattern id="scv-timeline-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect class="hatch-bg" width="6" height="6"/><line class="hatch" x1="0" y1="0" x2="0" y2="6"/></pattern></defs>` + "\n")

	head := heading(p) + " · " + plural(len(p.Runs), "run") + " of " + plural(len(p.Tasks), "task")
	if len(p.Runs) == 0 && len(p.Markers) == 0 {
		s.f(`<text class="heading" x="%d" y="%d">%s</text>`+"\n", margin, margin+14, esc(head+" · nothing to draw yet"))
		return s.close(w)
	}
	s.f(`<text class="heading" x="%d" y="%d">%s</text>`+"\n", margin, margin+14, esc(head+" · "+rangeText(tl, "→")))

	spanMs := max(1, tl.end.Sub(tl.start).Milliseconds())
	x := func(t time.Time) int {
		off := min(max(t.Sub(tl.start).Milliseconds(), 0), spanMs)
		return plotX + int(off*tlPlotW/spanMs)
	}
	rowTop := func(i int) int { return tlTop + i*tlRowH }
	barY := func(i int) int { return rowTop(i) + (tlRowH-tlBarH)/2 }

	// Axis and grid.
	s.f(`<g class="axis">` + "\n")
	s.f(`<line class="axis-line" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", plotX, tlTop-4, plotX+tlPlotW, tlTop-4)
	for _, tk := range ticks(tl.start, tl.end, tl.loc, tlPlotW/90) {
		tx := x(tk.at)
		s.f(`<line class="tick" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", tx, tlTop-8, tx, bottom)
		s.f(`<text class="tick-label" x="%d" y="%d">%s</text>`+"\n", tx, tlTop-12, esc(tk.label))
	}
	s.f("</g>\n")

	// Rows: stripe, status dot and title.
	s.f(`<g class="rows">` + "\n")
	for i, r := range tl.rows {
		class := "row"
		if r.critical {
			class += " critical"
		}
		s.f(`<g class="%s" data-task-id="%s">`, class, esc(r.taskID))
		s.f(`<rect class="row-bg" x="%d" y="%d" width="%d" height="%d"/>`, margin, rowTop(i), width-2*margin, tlRowH)
		if !r.project {
			s.f(`<circle class="dot status-%s" cx="%d" cy="%d" r="5"/>`, statusWord(r.status, taskStatuses), margin+8, rowTop(i)+tlRowH/2)
		}
		label, tip := r.title, clean(r.title)
		if r.plan != "" {
			label += " (" + r.plan + ")"
			tip += " (" + r.plan + ")"
		}
		if r.tip != "" {
			tip += "\n" + r.tip
		}
		s.f(`<text class="label" x="%d" y="%d">%s<title>%s</title></text>`, margin+20, rowTop(i)+tlRowH/2+4, svgText(label, 30), esc(tip))
		s.f("</g>\n")
	}
	s.f("</g>\n")

	// Bars, with their gaps.
	s.f(`<g class="bars">` + "\n")
	for i, r := range tl.rows {
		for _, ri := range r.runs {
			run := p.Runs[ri]
			class := "bar run-" + statusWord(run.Status, runStatuses)
			if tl.critical[ri] {
				class += " critical"
			}
			bx := x(run.Start)
			bw := max(2, x(tl.ends[ri])-bx)
			tip := run.ID + " · " + run.Status + " · attempt " + itoa(int64(run.Attempt))
			if run.Agent != "" {
				tip += " · " + run.Agent
			}
			tip += "\n" + clock(run.Start, tl.loc) + " → " + clock(tl.ends[ri], tl.loc) + " (" + durText(tl.ends[ri].Sub(run.Start)) + ")"
			if run.End.IsZero() {
				tip += ", running"
			}
			if run.Spent != "" {
				tip += "\nspent " + run.Spent
			}
			if tl.critical[ri] {
				tip += "\non the critical path"
			}
			s.f(`<rect class="%s" data-run-id="%s" data-task-id="%s" x="%d" y="%d" width="%d" height="%d" rx="3"><title>%s</title></rect>`+"\n",
				class, esc(run.ID), esc(run.TaskID), bx, barY(i), bw, tlBarH, esc(clean(tip)))
			for _, g := range tl.gaps[ri] {
				gx := x(g.from)
				s.f(`<rect class="gap" data-run-id="%s" x="%d" y="%d" width="%d" height="%d"><title>%s</title></rect>`+"\n",
					esc(run.ID), gx, barY(i), max(1, x(g.to)-gx), tlBarH, esc("no heartbeat for "+durText(g.to.Sub(g.from))+", "+clock(g.from, tl.loc)+" → "+clock(g.to, tl.loc)))
			}
		}
	}
	s.f("</g>\n")

	// The critical path: a line from each of its runs to the next.
	rowOfRun := make([]int, len(p.Runs))
	for i, r := range tl.rows {
		for _, ri := range r.runs {
			rowOfRun[ri] = i
		}
	}
	if len(tl.chain) > 1 {
		var d strings.Builder
		for k := 1; k < len(tl.chain); k++ {
			a, b := tl.chain[k-1], tl.chain[k]
			d.WriteString("M" + xy(Point{x(tl.ends[a]), barY(rowOfRun[a]) + tlBarH/2}) +
				" L" + xy(Point{x(p.Runs[b].Start), barY(rowOfRun[b]) + tlBarH/2}) + " ")
		}
		s.f(`<path class="critical-link" d="%s"/>`+"\n", strings.TrimSpace(d.String()))
	}

	// Markers.
	s.f(`<g class="markers">` + "\n")
	for i, r := range tl.rows {
		for _, mi := range r.markers {
			m := p.Markers[mi]
			mx, my := x(m.At), rowTop(i)+tlRowH/2
			tip := m.Kind
			if m.Label != "" {
				tip += ": " + m.Label
			}
			tip += "\n" + clock(m.At, tl.loc)
			s.f(`<path class="marker marker-%s" data-task-id="%s" data-run-id="%s" d="M%d,%d l6,7 l-6,7 l-6,-7 z"><title>%s</title></path>`+"\n",
				kindWord(m.Kind), esc(m.TaskID), esc(m.RunID), mx, my-7, esc(clean(tip)))
		}
	}
	s.f("</g>\n")

	if !p.Now.IsZero() {
		nx := x(p.Now)
		s.f(`<line class="now" x1="%d" y1="%d" x2="%d" y2="%d"/><text class="now-label" x="%d" y="%d">now</text>`+"\n", nx, tlTop-8, nx, bottom, nx-3, bottom+12)
	}

	// Legend and the critical path in words.
	s.f(`<g class="legend">` + "\n")
	for _, it := range legend {
		s.f(it.swatch, it.x, it.y-10)
		s.f(`<text x="%d" y="%d">%s</text>`+"\n", it.x+16, it.y, esc(it.label))
	}
	ly := legend[len(legend)-1].y
	if len(tl.chain) > 0 {
		first, last := tl.chain[0], tl.chain[len(tl.chain)-1]
		var names []string
		for k := 0; k < len(tl.chain); {
			taskID := p.Runs[tl.chain[k]].TaskID
			n := 0
			for k < len(tl.chain) && p.Runs[tl.chain[k]].TaskID == taskID {
				k++
				n++
			}
			name := clean(tl.rows[tl.rowOf[taskID]].title)
			if n > 1 {
				name += " ×" + itoa(int64(n))
			}
			names = append(names, name)
		}
		caption := "critical path (" + durText(tl.ends[last].Sub(p.Runs[first].Start)) + "): " + strings.Join(names, " → ")
		s.f(`<text class="critical-caption" x="%d" y="%d">%s<title>%s</title></text>`+"\n", margin, ly+22,
			esc(cut(caption, (width-2*margin)/7, "…")), esc(caption))
	}
	s.f("</g>\n")
	return s.close(w)
}

// legendItem is one entry of the legend: a swatch (an element with %d
// for its x and y) and a label, at x, y (the label's baseline).
type legendItem struct {
	swatch, label string
	x, y          int
}

// timelineLegend lays the legend out in lines from y down, wrapping
// before the right margin of a drawing width wide.
func timelineLegend(p Project, y, width int) []legendItem {
	var items []legendItem
	for _, st := range runStatuses {
		items = append(items, legendItem{swatch: `<rect class="swatch run-` + st + `" x="%d" y="%d" width="12" height="12" rx="2"/>`, label: st})
	}
	if p.GapAfter > 0 {
		items = append(items, legendItem{swatch: `<rect class="swatch gap" x="%d" y="%d" width="12" height="12"/>`, label: "silent over " + durText(p.GapAfter)})
	}
	for _, kind := range slices.Concat(markerKinds, []string{"other"}) {
		items = append(items, legendItem{swatch: `<path class="swatch marker-` + kind + `" transform="translate(%d,%d)" d="M6,0 l6,6 l-6,6 l-6,-6 z"/>`, label: markerNames[kind]})
	}
	x := margin
	for i := range items {
		w := 16 + 7*cells(items[i].label)
		if x > margin && x+w > width-margin {
			x, y = margin, y+20
		}
		items[i].x, items[i].y = x, y
		x += w + 16
	}
	return items
}

// clock is t's wall-clock time in loc.
func clock(t time.Time, loc *time.Location) string { return t.In(loc).Format("15:04:05") }

func timelineCSS() string {
	var b strings.Builder
	b.WriteString(`.scv-timeline{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:12px}
.scv-timeline .heading{font-size:14px;font-weight:600;fill:#111827}
.scv-timeline .row-bg{fill:#ffffff}
.scv-timeline .row:nth-child(even) .row-bg{fill:#f9fafb}
.scv-timeline .row.critical .label{font-weight:600}
.scv-timeline .label{fill:#111827}
.scv-timeline .axis-line{stroke:#6b7280}
.scv-timeline .tick{stroke:#e5e7eb}
.scv-timeline .tick-label{fill:#4b5563;font-size:11px;text-anchor:middle}
.scv-timeline .bar{stroke-width:1}
.scv-timeline .bar.critical{stroke:#111827;stroke-width:2}
.scv-timeline .critical-link{fill:none;stroke:#111827;stroke-width:1.5;stroke-dasharray:3 2}
.scv-timeline .critical-caption{font-weight:600;fill:#111827}
.scv-timeline .gap{fill:url(#scv-timeline-hatch);stroke:none}
.scv-timeline .swatch.gap{stroke:#6b7280}
.scv-timeline .hatch-bg{fill:#ffffff;fill-opacity:0.75}
.scv-timeline .hatch{stroke:#6b7280;stroke-width:2}
.scv-timeline .marker{stroke:#ffffff;stroke-width:1}
.scv-timeline .now{stroke:#2563eb;stroke-dasharray:4 3}
.scv-timeline .now-label{fill:#2563eb;font-size:11px;text-anchor:end}
.scv-timeline .legend text{fill:#374151}
`)
	for _, st := range slices.Concat(taskStatuses, []string{"unknown"}) {
		k := taskLooks[st]
		b.WriteString(".scv-timeline .dot.status-" + st + "{fill:" + k.stroke + "}\n")
	}
	for _, st := range slices.Concat(runStatuses, []string{"unknown"}) {
		k := runLooks[st]
		b.WriteString(".scv-timeline .run-" + st + "{fill:" + k.fill + ";stroke:" + k.stroke + "}\n")
	}
	// A marker of a kind without a rule of its own keeps this one.
	b.WriteString(".scv-timeline .marker{fill:" + markerLooks["other"].fill + "}\n")
	for _, kind := range slices.Concat(markerKinds, []string{"other"}) {
		b.WriteString(".scv-timeline .marker-" + kind + "{fill:" + markerLooks[kind].fill + "}\n")
	}
	return b.String()
}
