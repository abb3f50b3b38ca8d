package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"scv/control"
	"scv/ledger"
	"scv/reducer"
)

// The human output of the client. Every printer takes the time to measure
// ages against, so that tests can fix it. Scripts should use --json, which
// prints the daemon's reply unchanged; this output may change.

// timeLayout is how times are shown, in the local time zone.
const timeLayout = "2006-01-02 15:04:05"

// cellWidth is where free text (titles, progress) is cut in tables.
const cellWidth = 48

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// row writes one table row; cells must already be clean of tabs.
func row(tw io.Writer, cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }

// printDaemonStatus is `scv status`.
func printDaemonStatus(w io.Writer, st *control.DaemonStatus) error {
	tw := newTable(w)
	row(tw, "version", st.Version)
	row(tw, "pid", fmt.Sprint(st.PID))
	row(tw, "components", fmt.Sprint(len(st.Components)))
	row(tw, "delegations", fmt.Sprintf("%d active, %d reaped", st.Delegations.Active, st.Delegations.Reaped))
	if r := st.Restart; r != nil {
		waiting := "nothing"
		if r.WaitingFor != nil {
			waiting = clean(*r.WaitingFor, 0)
		}
		row(tw, "restart", fmt.Sprintf("to %s, waiting for %s, at the latest %s",
			clean(r.ToVersion, 0), waiting, localTime(r.DeadlineUnixSeconds)))
	}
	return tw.Flush()
}

// printDelegations is `scv delegations` and `scv delegations kill`.
func printDelegations(w io.Writer, st *control.DaemonStatus, _ control.Command, now time.Time) error {
	d := st.Delegations
	for _, h := range d.Killed {
		fmt.Fprintf(w, "stopped %s\n", h)
	}
	if len(d.Entries) > 0 {
		tw := newTable(w)
		row(tw, "HANDLE", "AGENT", "PID", "OWNER", "PROCS", "DEPTH", "STARTED", "CWD")
		for _, e := range d.Entries {
			handle := e.Handle
			if e.Orphaned {
				handle += " (orphaned)"
			}
			row(tw, handle, clean(e.Agent, 24), fmt.Sprint(e.PID), fmt.Sprint(e.OwnerPID), fmt.Sprint(e.Processes),
				fmt.Sprint(e.Depth), age(now.Sub(time.Unix(int64(e.StartedUnixSeconds), 0))), clean(e.Cwd, 0))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%d active, %d reaped since the daemon started\n", d.Active, d.Reaped)
	return err
}

// projectOf returns the reply's project payload and checks it is of kind.
func projectOf(st *control.DaemonStatus, kinds ...control.ResponseKind) (*control.ProjectResponse, error) {
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
// answers `updated`: a line saying what happened, then the summary block.
func printProjectBlock(w io.Writer, st *control.DaemonStatus, cmd control.Command, now time.Time) error {
	r, err := projectOf(st, control.KindCreated, control.KindStatus, control.KindUpdated)
	if err != nil {
		return err
	}
	if r.Project == nil {
		return fmt.Errorf("the daemon's %s reply carries no project", r.Kind)
	}
	if h := headline(r, cmd); h != "" {
		fmt.Fprintln(w, h)
	}
	return printSummary(w, r.Project, now)
}

// headline says what a command did, in the words of the command.
func headline(r *control.ProjectResponse, cmd control.Command) string {
	switch c := cmd.(type) {
	case control.CmdProjectCreate:
		return fmt.Sprintf("project %s created", r.Project.ID)
	case control.CmdProjectTaskUpdate:
		return fmt.Sprintf("task %s updated (%s)", c.Task, c.Status)
	case control.CmdProjectRunProgress:
		return fmt.Sprintf("run %s progress recorded", c.Run)
	case control.CmdProjectRunFinish:
		return fmt.Sprintf("run %s finished (%s)", c.Run, c.Status)
	case control.CmdProjectHeartbeat:
		switch {
		case c.Run != nil:
			return fmt.Sprintf("heartbeat recorded for run %s", *c.Run)
		case c.Task != nil:
			return fmt.Sprintf("heartbeat recorded for task %s", *c.Task)
		}
		return "heartbeat recorded"
	}
	return ""
}

// printSummary writes a project's summary block.
func printSummary(w io.Writer, p *control.ProjectSummary, now time.Time) error {
	tw := newTable(w)
	row(tw, "project", clean(p.Name, 0))
	row(tw, "id", p.ID)
	row(tw, "workspace", clean(p.Workspace, 0))
	row(tw, "phase", string(p.Phase))
	row(tw, "status", string(p.Status))
	row(tw, "progress", doneLine(p.CompletedTasks, p.TaskCount))
	row(tw, "created", stamp(p.CreatedUnixSeconds, now))
	row(tw, "updated", stamp(p.UpdatedUnixSeconds, now))
	row(tw, "heartbeat", stampPtr(p.LastHeartbeatUnixSeconds, now))
	return tw.Flush()
}

// summaryLine is a project on one line.
func summaryLine(p *control.ProjectSummary) string {
	return fmt.Sprintf("%s: %s, phase %s, status %s", clean(p.Name, 0), doneLine(p.CompletedTasks, p.TaskCount), p.Phase, p.Status)
}

func doneLine(done, total uint64) string { return fmt.Sprintf("%d/%d tasks done", done, total) }

// printNewID is the reply to task add and run start. The first line is
// `<what> <ID> <verb>`, so the ID is its second word
// (`scv ... | awk 'NR==1{print $2}'`); the second is the project on one
// line.
func printNewID(w io.Writer, what, id, verb string, p *control.ProjectSummary) error {
	if _, err := fmt.Fprintf(w, "%s %s %s\n", what, id, verb); err != nil {
		return err
	}
	if p != nil {
		_, err := fmt.Fprintln(w, summaryLine(p))
		return err
	}
	return nil
}

// printTasksReply is `scv project tasks`.
func printTasksReply(w io.Writer, st *control.DaemonStatus, _ control.Command, now time.Time) error {
	r, err := projectOf(st, control.KindTasks)
	if err != nil {
		return err
	}
	if err := printTasks(w, r.Tasks, now); err != nil {
		return err
	}
	var done uint64
	for _, t := range r.Tasks {
		if t.Status == reducer.TaskDone {
			done++
		}
	}
	_, err = fmt.Fprintln(w, doneLine(done, uint64(len(r.Tasks))))
	return err
}

// printTasks writes the tasks table.
func printTasks(w io.Writer, tasks []control.ProjectTask, now time.Time) error {
	if len(tasks) == 0 {
		_, err := fmt.Fprintln(w, "no tasks")
		return err
	}
	tw := newTable(w)
	row(tw, "ID", "TITLE", "STATUS", "RETRIES", "DEPENDS ON", "RUN", "PROGRESS", "HEARTBEAT")
	for _, t := range tasks {
		deps := "-"
		if len(t.DependsOn) > 0 {
			deps = strings.Join(t.DependsOn, ",")
		}
		row(tw, t.ID, clean(t.Title, cellWidth), string(t.Status), fmt.Sprintf("%d/%d", t.Retries, t.MaxRetries),
			clean(deps, 0), orDash(t.RunID, 0), orDash(t.Progress, cellWidth), stampPtr(t.LastHeartbeatUnixSeconds, now))
	}
	return tw.Flush()
}

// printRuns writes the runs table.
func printRuns(w io.Writer, runs []control.ProjectRun, now time.Time) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs")
		return err
	}
	tw := newTable(w)
	row(tw, "ID", "TASK", "AGENT", "STATUS", "ATTEMPT", "STARTED", "UPDATED", "PROGRESS")
	for _, r := range runs {
		row(tw, r.ID, r.TaskID, clean(r.Agent, cellWidth), string(r.Status), fmt.Sprint(r.Attempt),
			localTime(r.StartedUnixSeconds), stamp(r.UpdatedUnixSeconds, now), orDash(r.Progress, cellWidth))
	}
	return tw.Flush()
}

// printReportReply is `scv project report`.
func printReportReply(w io.Writer, st *control.DaemonStatus, _ control.Command, now time.Time) error {
	r, err := projectOf(st, control.KindReport)
	if err != nil {
		return err
	}
	rep := r.Report
	if rep == nil {
		return fmt.Errorf("the daemon's report reply carries no report")
	}
	if err := printSummary(w, &rep.Project, now); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTasks:")
	if err := printTasks(w, rep.Tasks, now); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nRuns:")
	if err := printRuns(w, rep.Runs, now); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nEvidence:")
	for _, e := range rep.Evidence {
		fmt.Fprintf(w, "  %s\n", clean(e, 0))
	}
	_, err = fmt.Fprintf(w, "\nreport generated %s\n", localTime(rep.GeneratedUnixSeconds))
	return err
}

// printEventsReply is `scv project events`.
func printEventsReply(w io.Writer, st *control.DaemonStatus, cmd control.Command, _ time.Time) error {
	r, err := projectOf(st, control.KindEvents)
	if err != nil {
		return err
	}
	if r.CompactedBefore != nil {
		fmt.Fprintf(w, "compacted before %d\n", *r.CompactedBefore)
	}
	c, _ := cmd.(control.CmdProjectEvents)
	if len(r.Events) == 0 {
		if c.After != nil {
			_, err := fmt.Fprintf(w, "no events after %d\n", *c.After)
			return err
		}
		_, err := fmt.Fprintln(w, "no events")
		return err
	}
	tw := newTable(w)
	row(tw, "SEQ", "TIME", "KIND", "DATA")
	for _, e := range r.Events {
		row(tw, fmt.Sprint(e.Sequence), localTime(e.TimestampUnixSeconds), clean(e.Kind, 0), compactJSON(e.Data))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Events) >= ledger.MaxPage {
		last := r.Events[len(r.Events)-1].Sequence
		_, err := fmt.Fprintf(w, "more events may follow: scv project events %s --after %d\n", c.Project, last)
		return err
	}
	return nil
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

// localTime is a Unix time in the local zone.
func localTime(u uint64) string { return time.Unix(int64(u), 0).Format(timeLayout) }

// stamp is a Unix time in the local zone and how long ago it was.
func stamp(u uint64, now time.Time) string {
	t := time.Unix(int64(u), 0)
	return fmt.Sprintf("%s (%s)", t.Format(timeLayout), age(now.Sub(t)))
}

func stampPtr(u *uint64, now time.Time) string {
	if u == nil {
		return "-"
	}
	return stamp(*u, now)
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

func orDash(s *string, width int) string {
	if s == nil || *s == "" {
		return "-"
	}
	return clean(*s, width)
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
	if width > 0 && utf8.RuneCountInString(s) > width {
		s = string([]rune(s)[:width-1]) + "…"
	}
	return s
}
