package render

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// GraphText draws p's task graph for a terminal: a heading, then each
// layer from the top, one line per task in layout order, numbered from #1:
// its status mark, its title, its plan (priority "P1", an epic's "epic
// 2/5 done") and its attempts and retries, "← #k title" for each of its
// dependencies (so every edge points up to a number already printed),
// and "in epic #k title", "found in #k title" for its epic and the task
// during whose run it was found; then a legend.
func GraphText(w io.Writer, p Project, opts TextOptions) error {
	g := Layout(p)
	out := &textOut{opts: opts}
	ell := opts.ellipsis()
	width := opts.width()
	ix := indexTasks(p.Tasks)

	out.words(heading(p) + ": " + graphSummary(p, g))
	if len(p.Tasks) == 0 {
		return out.flush(w)
	}

	// Number the tasks in the order they are printed.
	number := make([]int, len(p.Tasks))
	k := 0
	for _, layer := range g.Layers {
		for _, v := range layer {
			k++
			number[v] = k
		}
	}
	numW := len(strconv.Itoa(k)) + 1
	prefixW := 1 + numW + 2 + 1 + 2 // " #k [m] "
	metaW, titleMax, depsMax := 0, 0, 0
	refs := make([][]string, len(p.Tasks))
	links := make([]string, len(p.Tasks))
	ref := func(d int) string { return "#" + strconv.Itoa(number[d]) + " " + cut(clean(p.Tasks[d].Title), 16, ell) }
	named := func(id string) string {
		if d, ok := ix.byID[id]; ok {
			return ref(d)
		}
		return clean(id)
	}
	for i, t := range p.Tasks {
		metaW = max(metaW, cells(metaText(t)))
		titleMax = max(titleMax, cells(clean(t.Title)))
		for _, d := range ix.deps[i] {
			refs[i] = append(refs[i], ref(d))
		}
		links[i] = strings.Join(planLinks(t, named), "; ")
		depsMax = max(depsMax, cells(refsText(refs[i], links[i], opts)))
	}
	// The title column takes what is left after the attempts column and
	// up to half of the rest for the dependencies.
	flexible := width - prefixW - 2 - metaW - 2
	titleW := max(1, min(titleMax, max(10, flexible-min(depsMax, flexible/2))))

	rule := "─"
	if opts.ASCII {
		rule = "-"
	}
	for l, layer := range g.Layers {
		head := rule + rule + " layer " + strconv.Itoa(l+1) + " "
		out.text(head + strings.Repeat(rule, max(0, width-cells(head))))
		for _, v := range layer {
			t := p.Tasks[v]
			tl := taskLook(t.Status)
			var ln line
			ln.add(" "+padLeft("#"+strconv.Itoa(number[v]), numW)+" ", "")
			ln.add("["+tl.char(opts)+"]", tl.sgr)
			ln.add(" "+pad(clean(t.Title), titleW, ell)+"  "+pad(metaText(t), metaW, ell), "")
			if all := refsText(refs[v], links[v], opts); all != "" {
				// On the same line if the whole list fits, else on a line
				// of its own.
				room := width - (prefixW + titleW + 2 + metaW + 2)
				switch {
				case cells(all) <= room:
					ln.add("  "+all, "")
				case links[v] == "":
					out.emit(ln)
					ln = line{{strings.Repeat(" ", prefixW) + arrow(opts) + fitList(refs[v], width-prefixW-cells(arrow(opts)), ell), ""}}
				default:
					out.emit(ln)
					ln = line{{strings.Repeat(" ", prefixW) + cut(all, width-prefixW, ell), ""}}
				}
			}
			out.emit(ln)
		}
	}
	var legend []line
	for _, s := range taskStatuses {
		tl := taskLooks[s]
		legend = append(legend, line{{tl.char(opts), tl.sgr}, {" " + s, ""}})
	}
	out.wrapped("legend: ", "  ", legend)
	return out.flush(w)
}

// refsText is a task's dependencies after the arrow, then its plan's
// links; "" for none.
func refsText(refs []string, links string, o TextOptions) string {
	var parts []string
	if len(refs) > 0 {
		parts = append(parts, arrow(o)+strings.Join(refs, ", "))
	}
	if links != "" {
		parts = append(parts, links)
	}
	return strings.Join(parts, "; ")
}

func arrow(o TextOptions) string {
	if o.ASCII {
		return "<- "
	}
	return "← "
}

// heading names the project: its name, and its ID when it differs.
func heading(p Project) string {
	name, id := clean(p.Name), clean(p.ID)
	switch {
	case name == "" && id == "":
		return "project"
	case name == "":
		return id
	case id == "" || id == name:
		return name
	}
	return name + " (" + id + ")"
}

func graphSummary(p Project, g Graph) string {
	if len(p.Tasks) == 0 {
		return "no tasks"
	}
	s := fmt.Sprintf("%s in %s, %s", plural(len(p.Tasks), "task"), plural(len(g.Layers), "layer"), plural(len(g.Edges), "dependency"))
	counts := map[string]int{}
	for _, t := range p.Tasks {
		counts[statusWord(t.Status, taskStatuses)]++
	}
	var parts []string
	for _, st := range slices.Concat(taskStatuses, []string{"unknown"}) {
		if counts[st] > 0 {
			parts = append(parts, strconv.Itoa(counts[st])+" "+st)
		}
	}
	return s + "; " + strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "y") {
		return strconv.Itoa(n) + " " + strings.TrimSuffix(word, "y") + "ies"
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// attemptsText is "2 att", with ", 1/2 retries" once the task has a retry
// budget or spent one.
func attemptsText(t Task) string {
	s := strconv.Itoa(t.Attempts) + " att"
	if t.Retries > 0 || t.MaxRetries > 0 {
		s += ", " + strconv.Itoa(t.Retries) + "/" + strconv.Itoa(t.MaxRetries) + " retries"
	}
	return s
}

// fitList joins items with ", " in at most w columns: as many items as
// fit, then "+N more" for the rest.
func fitList(items []string, w int, ell string) string {
	all := strings.Join(items, ", ")
	if cells(all) <= w {
		return all
	}
	for k := len(items) - 1; k > 0; k-- {
		s := strings.Join(items[:k], ", ") + ", +" + strconv.Itoa(len(items)-k) + " more"
		if cells(s) <= w {
			return s
		}
	}
	s := "+" + strconv.Itoa(len(items)) + " more"
	if len(items) == 1 || cells(s) > w {
		return cut(all, w, ell)
	}
	return s
}
