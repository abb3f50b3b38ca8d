// Package render draws a project's task graph and run timeline: as text
// for a terminal, as standalone SVG, and the graph also as Graphviz DOT.
// It is the drawing behind `scv project graph` and `scv project timeline`,
// the HTML report and the web UI.
//
// The package imports the standard library only, no other package of the
// module: it takes its own small input types, which the caller fills from
// whatever state it holds. It reads no clock ("now" is an input) and
// writes only to the io.Writer it is given, each output in one Write.
// The same input always gives the same bytes.
//
// # Input
//
// A Project holds its Tasks in the order they were added (a task's
// dependencies come earlier), its Runs in the order they started, its
// Markers (stale marks, approvals asked and answered, retries, work found), Now, and
// GapAfter, the longest silence of a run drawn as plain bar. Statuses are
// the ledger's words (docs/semantics.md): tasks pending, ready, running,
// blocked, done, failed, stale; runs running, succeeded, failed,
// cancelled, stale. Any other word is drawn as "unknown". A task may
// carry the plan's fields (docs/plan.md): a priority, an epic's progress
// (Children, ChildrenDone), its epic (Parent), the task during whose run
// it was found (FoundIn, FoundRun) and a description; each is drawn only
// when set.
//
// Input that breaks the ledger's rules is drawn, not refused: a
// dependency naming an unknown task, the task itself, a later task or one
// already named is ignored (so the graph is acyclic); a task ID used
// twice resolves to its first task; a run or marker naming a task the
// project lacks gets a row of its own, titled by the ID.
//
// # Outputs
//
//   - Layout(p) is the layered layout: every task's layer, order and box,
//     every dependency's points. The SVG uses it; a web UI can too.
//   - GraphText(w, p, opts): the layers from the top, one line per task,
//     numbered in print order: status mark, title (cut with an ellipsis),
//     the plan ("P1" for a priority, "epic 2/5 done" for an epic, which
//     has no attempts), attempts and retries ("2 att, 1/2 retries"),
//     "← #k title" for each dependency, then "in epic #k title" and
//     "found in #k title", on the task's line when it all fits, else on
//     the next. A legend closes it.
//   - GraphSVG(w, p): one <g class="node status-S" data-task-id="ID"> per
//     task ("epic" in the class of an epic; a <rect>, a <text> with title,
//     plan and attempts, the full title, the epic, where it was found and
//     the description, cut to 280 characters on one line, in a <title>
//     tooltip), one <path class="edge" data-from data-to> per dependency,
//     with an arrowhead, and one dotted <path class="found" data-from
//     data-to> from the task of a run to each task found during it.
//   - GraphDOT(w, p): a digraph, one node statement per task, labelled
//     and coloured by status, then one edge statement per dependency.
//   - TimelineText(w, p, opts): a time axis, one row per task with one
//     bar per run from its start to its end (to Now while it runs; a
//     row's label is the title and the plan, "ship (P1, epic 1/2 done)"), a
//     character per outcome, heartbeat gaps and markers in characters of
//     their own, '*' before the rows on the critical path, the critical
//     path by title with its length, and a legend. Lengths are in two
//     units (42s, 7m05s, 2h05m, 3d04h), under a second in milliseconds
//     (340ms).
//   - TimelineSVG(w, p): the same rows; one <rect class="bar run-S"
//     data-run-id data-task-id> per run, with "critical" in the class of
//     the critical path's runs and a dashed line joining them; a hatched
//     <rect class="gap"> over each heartbeat gap; one element of class
//     "marker marker-K" per marker; ticks (<line class="tick">,
//     <text class="tick-label">) and a line at Now.
//   - CriticalPath(p): the run IDs of the critical path, earliest first.
//
// TextOptions set the width (default 80 columns: no line is ever wider,
// counting East Asian wide characters as two columns and combining marks
// as none), ANSI colours by status (Color), and ASCII-only drawing
// (ASCII). Ledger text is made safe for a terminal first: control
// characters (so any escape sequence in a title) and bidirectional
// overrides become U+FFFD.
//
// The SVG documents are standalone: xmlns and viewBox set, an inline
// <style> only, no script, no external reference, no XML declaration (so
// they can be inlined in HTML as they are). Every style rule is scoped to
// the root's class (scv-graph, scv-timeline) and every id is prefixed the
// same way, so a graph and a timeline inlined in one page do not restyle
// each other. All ledger text, in elements and attributes, is
// XML-escaped: a title "<img src=x onerror=alert(1)>" is text, never
// markup. Class words never carry ledger text: statuses outside the known
// words become "unknown", marker kinds keep only [a-z0-9_-]. In DOT every
// ID and label is a quoted string with backslashes and quotes escaped, so
// a title can neither end a statement nor start an escape sequence.
//
// # Layout
//
// A Sugiyama-style layered layout, in integer arithmetic only (so the
// result does not depend on how a machine rounds):
//
//  1. Layers by longest path: a task without dependencies is in layer 0,
//     any other one layer below its deepest dependency. Every edge goes
//     down at least one layer.
//  2. An edge that spans several layers goes through a slot (a narrow
//     virtual node) in each layer it crosses, so it can bend around boxes.
//     Shortest edges get their slots first, within a budget of 8n+1024
//     slots for n tasks; an edge past the budget is drawn as one straight
//     curve. Without the budget a chain of n tasks that all also depend
//     on the first would need n²/2 slots.
//  3. Order within layers: starting from the order tasks were added, four
//     rounds of barycenter sweeps (down: each layer sorted by the mean
//     position of its neighbours in the layer above; then up, by the
//     layer below). A vertex without neighbours on that side keeps its
//     place; ties keep the current order, so siblings stay in the order
//     they were added. After each sweep the crossings between adjacent
//     layers are counted (by inversions, with a Fenwick tree) and the
//     order with the fewest, initial order included, is kept
//     (Graph.Crossings).
//  4. Coordinates: each layer is packed, then four rounds of passes down
//     and up move every layer's vertices as close as order and spacing
//     allow to the mean x of their neighbours in the layer just placed:
//     the least-squares placement under the order constraints, solved
//     exactly by the pool-adjacent-violators algorithm, with slots
//     weighing twice a task so long edges run straight.
//
// # Timeline
//
// The time range runs from the earliest run start or marker to the
// latest run end, marker or Now. A running run (End zero) ends at Now, or
// without Now at its last beat. The axis ticks fall on round instants
// (1 s to 364 days) in the location of Now (else of the first start),
// counted from midnight; a tick at midnight is labelled with the day when
// the range spans days.
//
// A heartbeat gap is a silence longer than GapAfter (strictly) between
// consecutive points of a run: its start, its beats, its end (or Now).
// In text a column belongs to a bar when the run covers part of it; a gap
// takes the columns whose middles it covers, or the one holding its
// middle when it is narrower than a column, so every gap shows.
//
// A marker is drawn on the row of its TaskID, else of its RunID's task,
// else on a row of the project's own, drawn first.
//
// # Critical path
//
// The chain of runs that decided the project's length, from its first
// run's start to its last run's end. Runs end as drawn (above).
//
//  1. Start from the run that ended last (of equals, the later in Runs).
//  2. That run and its task's runs before it in Runs (its earlier
//     attempts, whatever their outcome) belong to the chain.
//  3. Let s be the start of the task's first run in the chain. Of the
//     task's dependencies, take the run that ended latest at or before s
//     (of equal ends, the dependency listed first); a dependency with no
//     such run (done by an update, not by a run) is looked through: its
//     own dependencies stand in for it.
//  4. Repeat from 2 with that run, until a task has no such dependency.
//
// So a retried task contributes all its attempts, and of two branches
// that meet, the one that finished later is on the path.
//
// # Cost
//
// Measured with BenchmarkLayout and BenchmarkOutputs on random graphs
// (each task depending on up to 3 of the 40 before it, one dependency in
// twenty on any earlier task; so long edges and about 9 slots per task),
// go1.26, one core of a 2-core Intel Xeon virtual machine:
//
//	tasks  Layout   GraphText  GraphSVG  GraphDOT  TimelineText  TimelineSVG
//	  200   1.1 ms
//	1,000    13 ms      15 ms     26 ms    0.9 ms          9 ms        11 ms
//	5,000    57 ms      68 ms    111 ms    4.8 ms         37 ms        60 ms
//
// Figures of one run each; repeated runs differ by up to a fifth.
// CriticalPath takes 0.3 ms at 1,000 tasks. Memory grows linearly: the
// layout of 1,000 tasks allocates 13 MB in all.
//
// # Tests
//
// The text outputs of a small diamond project are golden files in
// testdata/; rewrite them after an intended change with
//
//	go test ./control/render -update
package render
