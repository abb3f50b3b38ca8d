package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"scv/control/api"
	"scv/reducer"
)

// The human output of the client. Scripts should use --json, which prints
// the daemon's reply unchanged; this output may change. Every printer
// writes through a printer, which knows the time to measure ages against
// (tests fix it), how wide the output may be and whether it is coloured.
//
// Times: in blocks (a project's summary, a question) a time is shown with
// its zone and how long ago it was; in tables, a time column shows how
// long ago (or how soon), except the events' TIME, which is the time with
// its zone. The same everywhere.

// timeLayout is how a time is shown, in the local zone: Go writes the
// zone's abbreviation, or its offset where the zone has none.
const timeLayout = "2006-01-02 15:04:05 MST"

// minFlex is the narrowest a free-text column is cut to.
const minFlex = 12

type printer struct {
	w     io.Writer
	width int  // 0: no limit
	color bool // colour status words
	now   time.Time
}

// column is one column of a table.
type column struct {
	name   string
	flex   bool // free text: cut first (with …) when the table is too wide
	status bool // status words: coloured on a terminal
}

// table is rows of cells under columns; a table without column names is
// a block of `key  value` lines.
type table struct {
	cols []column
	rows [][]string
}

func newTable(names ...string) *table {
	t := &table{}
	for _, n := range names {
		c := column{name: n}
		if rest, ok := strings.CutPrefix(n, "~"); ok {
			c = column{name: rest, flex: true}
		}
		if rest, ok := strings.CutPrefix(c.name, "!"); ok {
			c.name, c.status = rest, true
		}
		t.cols = append(t.cols, c)
	}
	return t
}

// block is a table of `key  value` lines with free-text values.
func block() *table {
	return &table{cols: []column{{}, {flex: true, status: true}}}
}

func (t *table) add(cells ...string) {
	for i, c := range cells {
		cells[i] = clean(c, 0)
	}
	t.rows = append(t.rows, cells)
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// print writes t: columns two spaces apart, as wide as their widest cell;
// when that is wider than p.width, the free-text columns are cut first,
// widest first, down to minFlex, then each line is cut at the width. A
// row is never wrapped.
func (p *printer) table(t *table) error {
	n := len(t.cols)
	header := false
	widths := make([]int, n)
	for i, c := range t.cols {
		if c.name != "" {
			header = true
		}
		widths[i] = runeLen(c.name)
	}
	for _, r := range t.rows {
		for i := range n {
			if i < len(r) {
				widths[i] = max(widths[i], runeLen(r[i]))
			}
		}
	}
	total := func() int {
		s := 2 * (n - 1)
		for _, w := range widths {
			s += w
		}
		return s
	}
	if p.width > 0 {
		for total() > p.width {
			widest := -1
			for i, c := range t.cols {
				floor := max(minFlex, runeLen(c.name))
				if c.flex && widths[i] > floor && (widest < 0 || widths[i] > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				break
			}
			widths[widest]--
		}
	}
	// A line is segments of text, padded to the column widths; one still
	// wider than the width is cut there, ending in …. Only status
	// segments are coloured, after the cut, so that the colour codes
	// never count.
	type segment struct {
		text   string
		status bool
	}
	line := func(cells []string) {
		var segs []segment
		for i := range n {
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			cell = cut(cell, widths[i])
			segs = append(segs, segment{cell, t.cols[i].status})
			if i < n-1 {
				segs = append(segs, segment{strings.Repeat(" ", widths[i]-runeLen(cell)+2), false})
			}
		}
		plain := 0
		for _, sg := range segs {
			plain += runeLen(sg.text)
		}
		if p.width > 0 && plain > p.width {
			room := p.width - 1
			for i, sg := range segs {
				l := runeLen(sg.text)
				if l > room {
					segs[i].text = string([]rune(sg.text)[:room])
					segs = append(segs[:i+1], segment{"…", false})
					break
				}
				room -= l
			}
		}
		var b strings.Builder
		for _, sg := range segs {
			if sg.status {
				b.WriteString(paint(sg.text, p.color))
			} else {
				b.WriteString(sg.text)
			}
		}
		out := b.String()
		if !strings.HasSuffix(out, "…") {
			out = strings.TrimRight(out, " ")
		}
		fmt.Fprintln(p.w, out)
	}
	if header {
		names := make([]string, n)
		for i, c := range t.cols {
			names[i] = c.name
		}
		line(names)
	}
	for _, r := range t.rows {
		line(r)
	}
	return nil
}

// cut shortens s to w characters, ending in … when cut.
func cut(s string, w int) string {
	if w <= 0 || runeLen(s) <= w {
		return s
	}
	if w == 1 {
		return "…"
	}
	return string([]rune(s)[:w-1]) + "…"
}

// printDaemonStatus is `scv status`.
func printDaemonStatus(p *printer, st *api.DaemonStatus) error {
	t := block()
	t.add("version", st.Version)
	t.add("pid", fmt.Sprint(st.PID))
	t.add("components", fmt.Sprint(len(st.Components)))
	t.add("delegations", delegationCounts(st.Delegations))
	for _, e := range st.Delegations.Entries {
		if e.Conversation == nil || e.Turn == nil {
			continue // not a live agent
		}
		state := fmt.Sprintf("turn %d under way", *e.Turn)
		if e.IdleSinceUnixSeconds != nil {
			state = fmt.Sprintf("turn %d, idle since %s", *e.Turn, p.ago(*e.IdleSinceUnixSeconds))
		}
		if e.BackgroundJobs != nil {
			state += fmt.Sprintf(", %d background jobs", *e.BackgroundJobs)
		}
		t.add("agent "+e.Agent, state)
	}
	if r := st.Restart; r != nil {
		waiting := "nothing"
		if r.WaitingFor != nil {
			waiting = *r.WaitingFor
		}
		t.add("restart", fmt.Sprintf("to %s, waiting for %s, at the latest %s", r.ToVersion, waiting, p.stamp(r.DeadlineUnixSeconds)))
	}
	return p.table(t)
}

// printDelegations is `scv delegations` and `scv delegations kill`.
func printDelegations(p *printer, st *api.DaemonStatus) error {
	d := st.Delegations
	for _, h := range d.Killed {
		fmt.Fprintf(p.w, "stopped %s\n", h)
	}
	if len(d.Entries) > 0 {
		t := newTable("HANDLE", "~AGENT", "TURN", "IDLE", "JOBS", "PID", "OWNER", "PROCS", "DEPTH", "STARTED", "~CWD")
		for _, e := range d.Entries {
			handle := e.Handle
			if e.Orphaned {
				handle += " (orphaned)"
			}
			t.add(handle, e.Agent, uintDash(e.Turn), p.agoPtr(e.IdleSinceUnixSeconds), uintDash(e.BackgroundJobs),
				fmt.Sprint(e.PID), fmt.Sprint(e.OwnerPID), fmt.Sprint(e.Processes),
				fmt.Sprint(e.Depth), p.ago(e.StartedUnixSeconds), e.Cwd)
		}
		p.table(t)
	}
	_, err := fmt.Fprintf(p.w, "%s since the daemon started\n", delegationCounts(d))
	return err
}

// delegationCounts is "N active (I idle), R reaped", without the idle
// count from a daemon that does not tell it.
func delegationCounts(d api.DelegationSummary) string {
	if d.Idle != nil {
		return fmt.Sprintf("%d active (%d idle), %d reaped", d.Active, *d.Idle, d.Reaped)
	}
	return fmt.Sprintf("%d active, %d reaped", d.Active, d.Reaped)
}

// projectOf returns the reply's project payload and checks it is of kind.
func projectOf(st *api.DaemonStatus, kinds ...api.ResponseKind) (*api.ProjectResponse, error) {
	if st.Project == nil {
		return nil, fmt.Errorf("the daemon's reply carries no project (want %s)", kinds[0])
	}
	for _, k := range kinds {
		if st.Project.Kind == k {
			return st.Project, nil
		}
	}
	return nil, fmt.Errorf("the daemon replied with %q, want %s", st.Project.Kind, kinds[0])
}

// printProjectBlock is the reply to create, status and every command that
// answers `updated`: headline (what happened, if anything) and the
// summary block.
func printProjectBlock(p *printer, st *api.DaemonStatus, headline string) error {
	r, err := projectOf(st, api.KindCreated, api.KindStatus, api.KindUpdated)
	if err != nil {
		return err
	}
	if r.Project == nil {
		return fmt.Errorf("the daemon's %s reply carries no project", r.Kind)
	}
	if headline != "" {
		fmt.Fprintln(p.w, headline)
	}
	return printSummary(p, r.Project)
}

// printSummary writes a project's summary block.
func printSummary(p *printer, s *api.ProjectSummary) error {
	t := block()
	t.add("project", s.Name)
	t.add("id", s.ID)
	t.add("workspace", s.Workspace)
	t.add("phase", string(s.Phase))
	t.add("status", string(s.Status))
	t.add("progress", doneLine(s.CompletedTasks, s.TaskCount))
	t.add("created", p.stamp(s.CreatedUnixSeconds))
	t.add("updated", p.stamp(s.UpdatedUnixSeconds))
	t.add("heartbeat", p.stampPtr(s.LastHeartbeatUnixSeconds))
	return p.table(t)
}

// summaryLine is a project on one line.
func summaryLine(s *api.ProjectSummary) string {
	return fmt.Sprintf("%s: %s, phase %s, status %s", clean(s.Name, 0), doneLine(s.CompletedTasks, s.TaskCount), s.Phase, s.Status)
}

func doneLine(done, total uint64) string { return fmt.Sprintf("%d/%d tasks done", done, total) }

// printNewID is the reply to task add and run start. The first line is
// `<what> <ID> <verb>`, so the ID is its second word
// (`scv ... | awk 'NR==1{print $2}'`); the second is the project on one
// line.
func printNewID(p *printer, what, id, verb string, s *api.ProjectSummary) error {
	if _, err := fmt.Fprintf(p.w, "%s %s %s\n", what, id, verb); err != nil {
		return err
	}
	if s != nil {
		_, err := fmt.Fprintln(p.w, summaryLine(s))
		return err
	}
	return nil
}

// printTasksReply is `scv project tasks`.
func printTasksReply(p *printer, st *api.DaemonStatus) error {
	r, err := projectOf(st, api.KindTasks)
	if err != nil {
		return err
	}
	if err := printTasks(p, r.Tasks); err != nil {
		return err
	}
	var done uint64
	for _, t := range r.Tasks {
		if t.Status == reducer.TaskDone {
			done++
		}
	}
	_, err = fmt.Fprintln(p.w, doneLine(done, uint64(len(r.Tasks))))
	return err
}

// printTasks writes the tasks table.
func printTasks(p *printer, tasks []api.ProjectTask) error {
	if len(tasks) == 0 {
		_, err := fmt.Fprintln(p.w, "no tasks")
		return err
	}
	names := taskNames(tasks)
	t := newTable("ID", "~TITLE", "!STATUS", "RETRIES", "~DEPENDS ON", "~RUN", "~PROGRESS", "HEARTBEAT")
	for _, x := range tasks {
		deps := "-"
		if len(x.DependsOn) > 0 {
			named := make([]string, len(x.DependsOn))
			for i, d := range x.DependsOn {
				named[i] = names.of(d)
			}
			deps = strings.Join(named, ", ")
		}
		t.add(x.ID, x.Title, string(x.Status), fmt.Sprintf("%d/%d", x.Retries, x.MaxRetries),
			deps, orDash(x.RunID), orDash(x.Progress), p.agoPtr(x.LastHeartbeatUnixSeconds))
	}
	return p.table(t)
}

// taskName is how the tables name a project's tasks: by title, where
// the title names the task on a command line too (no other task has it,
// and it is no task's ID), else by ID.
type taskName map[string]string

func taskNames(tasks []api.ProjectTask) taskName {
	uses := map[string]int{}
	for _, t := range tasks {
		uses[t.Title]++
		uses[t.ID] += 2 // an ID is never a usable title
	}
	names := taskName{}
	for _, t := range tasks {
		if uses[t.Title] == 1 && strings.TrimSpace(t.Title) != "" {
			names[t.ID] = t.Title
		}
	}
	return names
}

// of is the task id's name: its title, or the ID itself.
func (n taskName) of(id string) string {
	if title, ok := n[id]; ok {
		return title
	}
	return id
}

// printRuns writes the runs table; tasks name the runs' tasks.
func printRuns(p *printer, runs []api.ProjectRun, tasks []api.ProjectTask) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(p.w, "no runs")
		return err
	}
	names := taskNames(tasks)
	t := newTable("ID", "~TASK", "~AGENT", "!STATUS", "ATTEMPT", "STARTED", "UPDATED", "~PROGRESS")
	for _, r := range runs {
		t.add(r.ID, names.of(r.TaskID), r.Agent, string(r.Status), fmt.Sprint(r.Attempt),
			p.ago(r.StartedUnixSeconds), p.ago(r.UpdatedUnixSeconds), orDash(r.Progress))
	}
	return p.table(t)
}

// printReportReply is `scv project report`.
func printReportReply(p *printer, st *api.DaemonStatus) error {
	r, err := projectOf(st, api.KindReport)
	if err != nil {
		return err
	}
	rep := r.Report
	if rep == nil {
		return fmt.Errorf("the daemon's report reply carries no report")
	}
	if err := printSummary(p, &rep.Project); err != nil {
		return err
	}
	fmt.Fprintln(p.w, "\nTasks:")
	if err := printTasks(p, rep.Tasks); err != nil {
		return err
	}
	fmt.Fprintln(p.w, "\nRuns:")
	if err := printRuns(p, rep.Runs, rep.Tasks); err != nil {
		return err
	}
	fmt.Fprintln(p.w, "\nEvidence:")
	for _, e := range rep.Evidence {
		fmt.Fprintf(p.w, "  %s\n", clean(e, 0))
	}
	_, err = fmt.Fprintf(p.w, "\nreport generated %s\n", p.time(rep.GeneratedUnixSeconds))
	return err
}

// eventLines writes events one line each, the same for `project events`
// and `project events --follow`: a header, then per event its sequence,
// its time with the zone, its kind and its data as compact JSON, the
// data cut at the width.
type eventLines struct {
	p       *printer
	started bool
	seqW    int
	kindW   int
}

// write prints events, the header first if it was not yet printed. The
// widths of the sequence and kind columns are those of the first events
// written (at least 3 and 12), so that later lines line up with them.
func (l *eventLines) write(events []api.ProjectEvent) {
	if len(events) == 0 {
		return
	}
	if !l.started {
		l.started = true
		l.seqW, l.kindW = 3, 12
		for _, e := range events {
			l.seqW = max(l.seqW, len(fmt.Sprint(e.Sequence)))
			l.kindW = max(l.kindW, runeLen(clean(e.Kind, 0)))
		}
		l.line("SEQ", "TIME", "KIND", "DATA")
	}
	for _, e := range events {
		l.line(fmt.Sprint(e.Sequence), l.p.time(e.TimestampUnixSeconds), clean(e.Kind, 0), compactJSON(e.Data))
	}
}

func (l *eventLines) line(seq, at, kind, data string) {
	timeW := max(runeLen(at), runeLen(l.p.time(0)))
	s := fmt.Sprintf("%-*s  %-*s  %-*s  %s", l.seqW, seq, timeW, at, l.kindW, kind, data)
	if l.p.width > 0 {
		s = cut(s, l.p.width)
	}
	fmt.Fprintln(l.p.w, strings.TrimRight(s, " "))
}

// compactJSON is data on one line; JSON escapes every control character
// inside strings, so the result is safe in a table cell.
func compactJSON(data json.RawMessage) string {
	if len(data) == 0 {
		return "-"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return clean(string(data), 0)
	}
	return b.String()
}

// time is a Unix time in the local zone, with the zone.
func (p *printer) time(u uint64) string { return time.Unix(int64(u), 0).Format(timeLayout) }

// stamp is a Unix time in the local zone and how long ago it was.
func (p *printer) stamp(u uint64) string {
	t := time.Unix(int64(u), 0)
	return fmt.Sprintf("%s (%s)", t.Format(timeLayout), age(p.now.Sub(t)))
}

func (p *printer) stampPtr(u *uint64) string {
	if u == nil {
		return "-"
	}
	return p.stamp(*u)
}

// ago is how long ago a Unix time was (or how soon it is).
func (p *printer) ago(u uint64) string { return age(p.now.Sub(time.Unix(int64(u), 0))) }

func (p *printer) agoPtr(u *uint64) string {
	if u == nil {
		return "-"
	}
	return p.ago(*u)
}

// age is a duration as people say it: `just now`, `42s ago`, `3m ago`,
// `2h5m ago`, `4d ago`, or `in 10s` for a time ahead of this clock.
func age(d time.Duration) string {
	if d < 0 {
		return "in " + span(-d)
	}
	if d < time.Second {
		return "just now"
	}
	return span(d) + " ago"
}

func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// uintDash is *n, or - when absent.
func uintDash(n *uint32) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clean makes free text safe for one table cell: control characters (tabs,
// newlines) become spaces, and with width > 0 the text is cut to width
// characters, ending in `…`.
func clean(s string, width int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return cut(s, width)
}
