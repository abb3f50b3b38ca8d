package view

import (
	"bytes"
	_ "embed"
	"html/template"
	"io"
	"time"

	"scv/ledger"
	"scv/reducer"
)

// ReportOptions configure Report.
type ReportOptions struct {
	Options
	// DB is the ledger database the verify command names ("": PATH).
	DB string
	// Version is the scv release that wrote the report ("": not said).
	Version string
}

//go:embed report.tmpl
var reportText string

//go:embed base.css
var baseCSS string

// TaskTemplate defines the template "taskplan", the plan of a task row
// (a Task) in the tasks table: its priority, an epic's progress, labels,
// epic, the run it was found in, and its description and acceptance
// under a <details>. The report and the web UI's project page both use
// it.
//
//go:embed task.tmpl
var TaskTemplate string

//go:embed report.css
var reportCSS string

// StyleSheet is the style the HTML report and the web UI share: text,
// tables, summaries, drawings and the status badges. The report inlines
// it before its own rules; the UI serves it before its own in
// /static/app.css.
func StyleSheet() string { return baseCSS }

var reportTmpl = template.Must(template.Must(template.New("report").Funcs(Funcs).Parse(reportText)).Parse(TaskTemplate))

// reportData is the report template's input.
type reportData struct {
	P         *Project
	Generated time.Time
	DB        string
	Version   string
	CSS       template.CSS
	Verify    string
}

// Report writes p's report as one HTML document that needs nothing else:
// its style sheet inline, the task graph and run timeline as inline SVG,
// no script, no link or reference to anything outside it, so it opens
// offline in any browser. It has a section of each: summary, graph,
// timeline, tasks, runs, evidence, and the chain head with the command
// that verifies the ledger against it. All ledger text is escaped
// (html/template, and control/render for the drawings). events are p's
// stored events in order (see Model). The whole document is written in
// one Write.
func Report(w io.Writer, p *reducer.Project, events []ledger.Row, opts ReportOptions) error {
	v, err := Build(p, events, opts.Options)
	if err != nil {
		return err
	}
	db := opts.DB
	if db == "" {
		db = "PATH"
	} else {
		db = ShellQuote(db)
	}
	d := reportData{
		P: v, Generated: opts.Now, DB: opts.DB, Version: opts.Version,
		CSS:    template.CSS(baseCSS + reportCSS),
		Verify: "scv ledger verify --db " + db + " --head " + ShellQuote(v.ID+"="+v.ChainHead),
	}
	var b bytes.Buffer
	if err := reportTmpl.Execute(&b, d); err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}
