package render

import (
	"io"
	"slices"
	"strconv"
	"strings"
)

// GraphSVG writes p's task graph as a standalone SVG document: the layout
// of Layout, one <g class="node status-S" data-task-id="ID"> per task
// (a <rect> and a <text> with the title and the attempts and retries,
// the full title in a <title> tooltip), one <path class="edge"
// data-from="ID" data-to="ID"> per dependency. Colours come from the
// inline style sheet, by status class; nothing is loaded from outside and
// there is no script. All ledger text is XML-escaped.
func GraphSVG(w io.Writer, p Project) error {
	g := Layout(p)
	s := &svgOut{}
	s.open("scv-graph", g.Width, g.Height, "task graph of "+heading(p), graphCSS())
	s.f(`<defs><marker id="scv-graph-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>` + "\n")
	if len(g.Nodes) == 0 {
		s.f(`<text class="empty" x="%d" y="%d">no tasks</text>`+"\n", margin, margin)
	}
	s.f(`<g class="edges">` + "\n")
	for _, e := range g.Edges {
		s.f(`<path class="edge" data-from="%s" data-to="%s" d="%s" marker-end="url(#scv-graph-arrow)"/>`+"\n",
			esc(p.Tasks[e.From].ID), esc(p.Tasks[e.To].ID), edgePath(e.Points))
	}
	s.f("</g>\n")
	// Work found during a run: a dotted line from the task of the run to
	// the task found, under the nodes.
	ix := indexTasks(p.Tasks)
	at := make(map[string]Node, len(g.Nodes))
	for _, n := range g.Nodes {
		if _, ok := at[n.Task.ID]; !ok {
			at[n.Task.ID] = n
		}
	}
	for _, n := range g.Nodes {
		if from, ok := at[n.Task.FoundIn]; ok && n.Task.FoundIn != n.Task.ID {
			s.f(`<path class="found" data-from="%s" data-to="%s" d="M%d,%d L%d,%d"><title>%s</title></path>`+"\n",
				esc(from.Task.ID), esc(n.Task.ID), from.X+from.W/2, from.Y+from.H/2, n.X+n.W/2, n.Y+n.H/2,
				esc("found during a run of "+clean(from.Task.Title)))
		}
	}
	title := func(id string) string {
		if d, ok := ix.byID[id]; ok {
			return clean(p.Tasks[d].Title)
		}
		return clean(id)
	}
	s.f(`<g class="nodes">` + "\n")
	for _, n := range g.Nodes {
		t := n.Task
		st := statusWord(t.Status, taskStatuses)
		class := "node status-" + st
		if t.Children > 0 {
			class += " epic"
		}
		s.f(`<g class="%s" data-task-id="%s" transform="translate(%d,%d)">`+"\n", class, esc(t.ID), n.X, n.Y)
		tip := clean(t.Title) + "\n" + t.Status + ", " + metaText(t) + "\n" + t.ID
		if plan := planTip(t, title); plan != "" {
			tip += "\n" + plan
		}
		s.f("<title>%s</title>\n", esc(tip))
		s.f(`<rect width="%d" height="%d" rx="6"/>`+"\n", n.W, n.H)
		s.f(`<text x="10" y="20"><tspan class="title">%s</tspan><tspan class="meta" x="10" y="38">%s</tspan></text>`+"\n",
			svgText(t.Title, 25), esc(clean(t.Status)+" · "+metaText(t)))
		s.f("</g>\n")
	}
	s.f("</g>\n")
	return s.close(w)
}

// edgePath is the SVG path through an edge's points: a curve leaving and
// entering vertically between layers, a straight line through each slot.
func edgePath(pts []Point) string {
	var b strings.Builder
	b.WriteString("M" + xy(pts[0]))
	for i := 0; i+1 < len(pts); i++ {
		a, z := pts[i], pts[i+1]
		if i%2 == 1 {
			b.WriteString(" L" + xy(z))
			continue
		}
		mid := (z.Y - a.Y) / 2
		b.WriteString(" C" + xy(Point{a.X, a.Y + mid}) + " " + xy(Point{z.X, z.Y - mid}) + " " + xy(z))
	}
	return b.String()
}

func xy(p Point) string { return strconv.Itoa(p.X) + "," + strconv.Itoa(p.Y) }

func graphCSS() string {
	var b strings.Builder
	b.WriteString(`.scv-graph{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.scv-graph .edge{fill:none;stroke:#9ca3af;stroke-width:1.5}
.scv-graph marker path{fill:#9ca3af}
.scv-graph .node rect{stroke-width:1.5}
.scv-graph .node .title{font-size:13px;font-weight:600;fill:#111827}
.scv-graph .node .meta{font-size:11px;fill:#374151}
.scv-graph .empty{font-size:13px;fill:#6b7280}
.scv-graph .found{fill:none;stroke:#0891b2;stroke-width:1.5;stroke-dasharray:2 4}
.scv-graph .epic rect{stroke-width:3}
`)
	for _, st := range slices.Concat(taskStatuses, []string{"unknown"}) {
		k := taskLooks[st]
		b.WriteString(".scv-graph .status-" + st + " rect{fill:" + k.fill + ";stroke:" + k.stroke + "}\n")
	}
	b.WriteString(".scv-graph .status-stale rect,.scv-graph .status-blocked rect{stroke-dasharray:5 3}\n")
	return b.String()
}
