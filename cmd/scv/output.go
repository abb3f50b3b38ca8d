package main

import (
	"fmt"
	"io"
	"time"

	"scv/control/api"
	"scv/control/render"
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

type printer struct {
	w     io.Writer
	width int  // 0: no limit
	color bool // colour status words
	now   time.Time
}

// table writes t as wide as the terminal, coloured if it is one.
func (p *printer) table(t *render.Table) error {
	return t.Write(p.w, render.TextOptions{Width: p.width, Color: p.color})
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
	if err := printSummary(p, r.Project); err != nil || r.Spend == nil {
		return err
	}
	_, err = fmt.Fprintln(p.w, spendLine(r.Spend))
	return err
}

// printSummary writes a project's summary block.
func printSummary(p *printer, s *api.ProjectSummary) error {
	t := render.Block()
	t.Add("project", s.Name)
	t.Add("id", s.ID)
	t.Add("workspace", s.Workspace)
	t.Add("phase", string(s.Phase))
	t.Add("status", string(s.Status))
	t.Add("progress", doneLine(s.CompletedTasks, s.TaskCount))
	t.Add("created", p.stamp(s.CreatedUnixSeconds))
	t.Add("updated", p.stamp(s.UpdatedUnixSeconds))
	t.Add("heartbeat", p.stampPtr(s.LastHeartbeatUnixSeconds))
	return p.table(t)
}

// summaryLine is a project on one line.
func summaryLine(s *api.ProjectSummary) string {
	return fmt.Sprintf("%s: %s, phase %s, status %s", render.Clean(s.Name), doneLine(s.CompletedTasks, s.TaskCount), s.Phase, s.Status)
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
