package render

import (
	"io"
	"slices"
	"strings"
	"time"
)

// TimelineText draws p's runs for a terminal: a heading with the time
// range, a time axis, one row per task (its status mark and title, then
// one bar per run, in the run's outcome character; heartbeat gaps and
// markers in characters of their own), a '*' before the rows on the
// critical path, the critical path by task titles, and a legend. With
// Color, bars and marks are coloured and the critical path's bars
// underlined.
func TimelineText(w io.Writer, p Project, opts TextOptions) error {
	tl := buildTimeline(p)
	out := &textOut{opts: opts}
	ell := opts.ellipsis()
	width := opts.width()
	to := "→"
	if opts.ASCII {
		to = "->"
	}
	summary := plural(len(p.Runs), "run") + " of " + plural(len(p.Tasks), "task")
	if len(p.Runs) == 0 && len(p.Markers) == 0 {
		out.words(heading(p) + ": " + summary + ", nothing to draw yet")
		return out.flush(w)
	}
	out.words(heading(p) + ": " + summary)
	out.words(rangeText(tl, to))

	// Columns: the critical mark, the labels, the frame around the plot.
	labels := make([]line, len(tl.rows))
	labelMax := 0
	for i, r := range tl.rows {
		if r.project {
			labels[i] = line{{"  " + r.title, ""}}
		} else {
			k := taskLook(r.status)
			label := " " + clean(r.title)
			if r.plan != "" {
				label += " (" + r.plan + ")"
			}
			labels[i] = line{{k.char(opts), k.sgr}, {label, ""}}
		}
		labelMax = max(labelMax, lineCells(labels[i]))
	}
	labelW := min(labelMax, min(32, max(8, width/4)))
	plotW := width - 1 - labelW - 2
	if plotW < 10 {
		labelW = max(1, width-13)
		plotW = width - 1 - labelW - 2
	}
	plotW = max(plotW, 1)
	lead := 1 + labelW

	spanMs := max(1, tl.end.Sub(tl.start).Milliseconds())
	offset := func(t time.Time) int64 { return t.Sub(tl.start).Milliseconds() }
	clampCol := func(c int64) int { return int(min(max(c, 0), int64(plotW-1))) }
	colOf := func(t time.Time) int { return clampCol(offset(t) * int64(plotW) / spanMs) }
	lastCol := func(t time.Time) int { return clampCol((offset(t)*int64(plotW)+spanMs-1)/spanMs - 1) }

	// The axis: labels above a ruler with a tick at each label.
	tks := ticks(tl.start, tl.end, tl.loc, plotW/8)
	if lw := tickLabelWidth(tks); (lw+3)*len(tks) > plotW {
		tks = ticks(tl.start, tl.end, tl.loc, plotW/(lw+3))
	}
	axis := []byte(strings.Repeat(" ", lead+plotW+2))
	ruler := make([]string, plotW)
	for c := range ruler {
		ruler[c] = frame(opts, "─")
	}
	prevEnd := -1
	for _, tk := range tks {
		c := colOf(tk.at)
		pos := lead + 1 + c
		if pos <= prevEnd+1 || pos+len(tk.label) > len(axis) {
			continue
		}
		copy(axis[pos:], tk.label)
		prevEnd = pos + len(tk.label) - 1
		ruler[c] = frame(opts, "┬")
	}
	out.text(string(axis))
	out.text(strings.Repeat(" ", lead) + frame(opts, "┌") + strings.Join(ruler, "") + frame(opts, "┐"))

	for i, r := range tl.rows {
		plot := make([]cell, plotW)
		for c := range plot {
			plot[c] = cell{" ", ""}
		}
		for _, ri := range r.runs {
			run := p.Runs[ri]
			k := runLook(run.Status)
			sgr := k.sgr
			if tl.critical[ri] {
				sgr = withUnderline(sgr)
			}
			s := colOf(run.Start)
			e := max(s, lastCol(tl.ends[ri]))
			for c := s; c <= e; c++ {
				plot[c] = cell{k.char(opts), sgr}
			}
			gapSgr := gapLook.sgr
			if tl.critical[ri] {
				gapSgr = withUnderline(gapSgr)
			}
			for _, g := range tl.gaps[ri] {
				for _, c := range gapCells(offset(g.from), offset(g.to), spanMs, plotW, s, e, colOf(g.from.Add(g.to.Sub(g.from)/2))) {
					plot[c] = cell{gapLook.char(opts), gapSgr}
				}
			}
		}
		for _, mi := range r.markers {
			m := p.Markers[mi]
			k := markerLook(m.Kind)
			plot[colOf(m.At)] = cell{k.char(opts), k.sgr}
		}

		var ln line
		if r.critical {
			ln.add("*", "1")
		} else {
			ln.add(" ", "")
		}
		ln = append(ln, fitLine(labels[i], labelW, ell)...)
		ln.add(frame(opts, "│"), "")
		ln = append(ln, cellsLine(plot)...)
		ln.add(frame(opts, "│"), "")
		out.emit(ln)
	}
	out.text(strings.Repeat(" ", lead) + frame(opts, "└") + strings.Repeat(frame(opts, "─"), plotW) + frame(opts, "┘"))

	if len(tl.chain) > 0 {
		var items []line
		for k := 0; k < len(tl.chain); {
			taskID := p.Runs[tl.chain[k]].TaskID
			n := 0
			for k < len(tl.chain) && p.Runs[tl.chain[k]].TaskID == taskID {
				k++
				n++
			}
			item := cut(clean(tl.rows[tl.rowOf[taskID]].title), 24, ell)
			if n > 1 {
				item += " ×" + itoa(int64(n))
				if opts.ASCII {
					item = strings.Replace(item, "×", "x", 1)
				}
			}
			if len(items) > 0 {
				item = to + " " + item
			}
			items = append(items, line{{item, ""}})
		}
		first, last := tl.chain[0], tl.chain[len(tl.chain)-1]
		length := tl.ends[last].Sub(p.Runs[first].Start)
		out.wrapped("critical path ("+durText(length)+"): ", " ", items)
	}

	var legend []line
	for _, s := range runStatuses {
		k := runLooks[s]
		legend = append(legend, line{{k.char(opts), k.sgr}, {" " + s, ""}})
	}
	if p.GapAfter > 0 {
		legend = append(legend, line{{gapLook.char(opts), gapLook.sgr}, {" silent over " + durText(p.GapAfter), ""}})
	}
	for _, kind := range slices.Concat(markerKinds, []string{"other"}) {
		k := markerLooks[kind]
		legend = append(legend, line{{k.char(opts), k.sgr}, {" " + markerNames[kind], ""}})
	}
	legend = append(legend, line{{"*", "1"}, {" critical path", ""}})
	out.wrapped("legend: ", "  ", legend)
	return out.flush(w)
}

func lineCells(l line) int {
	n := 0
	for _, s := range l {
		n += cells(s.text)
	}
	return n
}

// cell is one column of a row's plot.
type cell struct{ ch, sgr string }

// cellsLine joins a plot's cells into spans of one style each.
func cellsLine(cs []cell) line {
	var l line
	for _, c := range cs {
		if n := len(l); n > 0 && l[n-1].sgr == c.sgr {
			l[n-1].text += c.ch
			continue
		}
		l.add(c.ch, c.sgr)
	}
	return l
}

// fitLine is l cut and padded to exactly w columns.
func fitLine(l line, w int, ell string) line {
	var out line
	used := 0
	for i, s := range l {
		rest := 0
		for _, t := range l[i+1:] {
			rest += cells(t.text)
		}
		t := s.text
		if used+cells(t)+rest > w {
			t = cut(t, max(0, w-used), ell)
		}
		out.add(t, s.sgr)
		used += cells(t)
		if used >= w {
			break
		}
	}
	if used < w {
		out.add(strings.Repeat(" ", w-used), "")
	}
	return out
}

// gapCells are the columns of [s, e] whose midpoints fall inside the gap
// (from, to), in milliseconds from the start of a span of spanMs drawn in
// width columns; or, if the gap is too short for any, the column mid.
func gapCells(from, to, spanMs int64, width, s, e, mid int) []int {
	var cs []int
	for c := s; c <= e; c++ {
		m := int64(2*c+1) * spanMs // twice the midpoint, scaled by width
		if m > 2*int64(width)*from && m < 2*int64(width)*to {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		cs = append(cs, min(max(mid, s), e))
	}
	return cs
}

func tickLabelWidth(tks []tick) int {
	w := 0
	for _, t := range tks {
		w = max(w, len(t.label))
	}
	return w
}

func withUnderline(sgr string) string {
	if sgr == "" {
		return "4"
	}
	return sgr + ";4"
}

// frame is a box-drawing character, or its ASCII stand-in.
func frame(o TextOptions, s string) string {
	if !o.ASCII {
		return s
	}
	switch s {
	case "─":
		return "-"
	case "│":
		return "|"
	}
	return "+"
}
