// Package view is what the pages of a project show, built from the
// ledger's state: the HTML report and the web UI (control/web) both use
// it. It keeps control/render free of the rest of the module: render
// draws from its own input types, and Model fills them.
//
// # Use
//
//	rows, _, err := view.ReadEvents(ctx, l, p.ID, 0, 0) // p's live events
//	m := view.Model(p, rows, view.Options{Now: now, StaleAfter: 5 * time.Minute})
//	err = render.TimelineSVG(w, m)
//
//	err = view.Report(w, p, rows, view.ReportOptions{Options: opts, DB: path})
//
// # The drawing's input
//
// Model turns a *reducer.Project and its stored events into a
// render.Project: the tasks in order (attempts: the task's runs), the
// runs in the order they started (from Started to Updated, no end while
// running), each run's beats (its run_progress and heartbeat events), and
// markers: run_stale events, each attempt after the first (a retry), and
// approval_asked and approval_decided events (data {"question_id",
// "task_id", "outcome"}) once the ledger has them. Events of other
// projects, of kinds it does not know, or whose data does not parse are
// skipped. GapAfter is half the stale window. Graph fills the tasks
// alone, the same way, from a report as the wire carries it
// (api.ProjectReport), for the task graph of `scv mcp`'s resource.
//
// # The report
//
// Report writes one HTML file that needs nothing else (inline style and
// SVG, no script, no outside reference), with the summary, the graph, the
// timeline, the tasks, the runs, the evidence (reducer.Evidence) and the
// chain head with the `scv ledger verify --head` command that checks the
// ledger against it. All ledger text is escaped (html/template, and
// control/render in the drawings). docs/ui.md describes it.
package view
