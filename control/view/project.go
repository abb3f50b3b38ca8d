package view

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"scv/control/render"
	"scv/ledger"
	"scv/reducer"
)

// Project is what a page shows of a project: its summary, its tasks and
// runs as table rows, the report's evidence, the chain head, and the task
// graph and run timeline as SVG documents of control/render (whose ledger
// text is escaped already). The HTML report and the web UI both show it.
type Project struct {
	ID, Name, Workspace string
	Status, Phase       string
	Created, Updated    time.Time
	LastHeartbeat       time.Time // zero: none
	Tasks               []Task
	Runs                []Run
	TaskCount, Done     int
	RunCount, Running   int
	Evidence            []string
	// Head is the sequence of the project's newest event, ChainHead its
	// hash in hex: `scv ledger verify --head ID=ChainHead` proves that
	// nothing before it was rewritten or cut off.
	Head      uint64
	ChainHead string
	// Graph and Timeline are SVG documents.
	Graph, Timeline []byte
	// Critical is the run IDs of the critical path, earliest first.
	Critical []string
	// Model is the drawing's input they were drawn from.
	Model render.Project
	// Spent is what the project's runs spent on one line, Budget its
	// budget ("" for none) and BudgetReached why the spend reached it;
	// Spent is "" when nothing was spent and there is no budget, and the
	// pages then show no cost at all (docs/usage.md).
	Spent, Budget, BudgetReached string
}

// Task is a row of the tasks table.
type Task struct {
	ID, Title, Status   string
	DependsOn           []TaskRef
	Attempts            int
	Retries, MaxRetries int
	RunID, Progress     string
	LastHeartbeat       time.Time
	Spent               string // its runs' spend on one line, "-" for none
	// The plan's fields (docs/plan.md): Priority is "P0" to "P4", ""
	// for the default; an epic has Children, ChildrenDone of them done;
	// Parent is the task's epic, FoundIn the task of the run FoundRun
	// during which it was found (zero for none).
	Priority                string
	Description, Acceptance string
	Labels                  []string
	Children, ChildrenDone  int
	Parent, FoundIn         TaskRef
	FoundRun                string
}

// TaskRef names a task.
type TaskRef struct{ ID, Title string }

// Run is a row of the runs table.
type Run struct {
	ID, TaskID, TaskTitle string
	Agent, Status         string
	Attempt               int
	Started               time.Time
	Ended                 time.Time // zero while it runs
	Duration              time.Duration
	Progress              string
	LastHeartbeat         time.Time
	Beats                 int
	Critical              bool
	Spent                 string // its usage on one line, "-" for none
}

// Build is the view of p with its events (see Model).
func Build(p *reducer.Project, events []ledger.Row, opts Options) (*Project, error) {
	loc := opts.loc()
	at := func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		return time.UnixMilli(ms).In(loc)
	}
	m := Model(p, events, opts)
	v := &Project{
		ID: p.ID, Name: p.Name, Workspace: p.Workspace,
		Status: string(p.Status()), Phase: string(p.Phase()),
		Created: at(p.Created), Updated: at(p.Updated), LastHeartbeat: at(p.LastHeartbeat),
		TaskCount: p.TaskCount(), Done: p.DoneCount(), RunCount: p.RunCount(), Running: p.RunningCount(),
		Evidence: reducer.Evidence(p), Head: p.LastSequence, ChainHead: hex.EncodeToString(p.ChainHead),
		Model: m, Critical: render.CriticalPath(m),
	}
	if b := p.Budget(); b.Set() || p.Spend().String() != "-" {
		v.Spent, v.BudgetReached = p.Spend().String(), p.BudgetReached()
		if b.Set() {
			v.Budget = b.String()
		}
	}
	titles := map[string]string{}
	for _, t := range p.Tasks() {
		titles[t.ID] = t.Title
	}
	for i, t := range p.Tasks() {
		row := Task{ID: t.ID, Title: t.Title, Status: string(t.Status), Attempts: m.Tasks[i].Attempts,
			Retries: int(t.Retries), MaxRetries: int(t.MaxRetries), RunID: t.RunID, LastHeartbeat: at(t.LastHeartbeat),
			Spent: t.Spend.String()}
		if t.Progress != nil {
			row.Progress = *t.Progress
		}
		for _, d := range t.DependsOn {
			row.DependsOn = append(row.DependsOn, TaskRef{ID: d, Title: titles[d]})
		}
		mt := m.Tasks[i]
		if mt.Priority != nil {
			row.Priority = "P" + strconv.Itoa(*mt.Priority)
		}
		row.Description, row.Acceptance, row.Labels = t.Description, t.Acceptance, t.Labels
		row.Children, row.ChildrenDone = mt.Children, mt.ChildrenDone
		if t.Parent != "" {
			row.Parent = TaskRef{ID: t.Parent, Title: titles[t.Parent]}
		}
		if mt.FoundIn != "" {
			row.FoundIn, row.FoundRun = TaskRef{ID: mt.FoundIn, Title: titles[mt.FoundIn]}, mt.FoundRun
		}
		v.Tasks = append(v.Tasks, row)
	}
	critical := map[string]bool{}
	for _, id := range v.Critical {
		critical[id] = true
	}
	for i, r := range p.Runs() {
		row := Run{ID: r.ID, TaskID: r.TaskID, TaskTitle: titles[r.TaskID], Agent: r.Agent, Status: string(r.Status),
			Attempt: int(r.Attempt), Started: at(r.Started), Ended: m.Runs[i].End, LastHeartbeat: at(r.LastHeartbeat),
			Beats: len(m.Runs[i].Beats), Critical: critical[r.ID], Spent: r.Usage.Spend().String()}
		end := row.Ended
		if end.IsZero() {
			end = opts.Now
		}
		if !end.IsZero() && end.After(row.Started) {
			row.Duration = end.Sub(row.Started)
		}
		if r.Progress != nil {
			row.Progress = *r.Progress
		}
		v.Runs = append(v.Runs, row)
	}
	var g, tl bytes.Buffer
	if err := render.GraphSVG(&g, m); err != nil {
		return nil, fmt.Errorf("draw the task graph: %w", err)
	}
	if err := render.TimelineSVG(&tl, m); err != nil {
		return nil, fmt.Errorf("draw the timeline: %w", err)
	}
	v.Graph, v.Timeline = g.Bytes(), tl.Bytes()
	return v, nil
}

// Pager reads a project's events a page at a time (*ledger.Ledger).
type Pager interface {
	EventsPage(ctx context.Context, projectID string, after uint64, limit int) (ledger.Page, error)
}

// ReadEvents reads a project's live events after sequence after, in
// order, a page at a time, up to max of them (0: all). more says it
// stopped at max, so there may be more.
func ReadEvents(ctx context.Context, src Pager, projectID string, after uint64, max int) (rows []ledger.Row, more bool, err error) {
	for {
		limit := reducer.MaxEventsPage
		if max > 0 && max-len(rows) < limit {
			limit = max - len(rows)
		}
		if limit == 0 {
			return rows, true, nil
		}
		page, err := src.EventsPage(ctx, projectID, after, limit)
		if err != nil {
			return rows, false, err
		}
		rows = append(rows, page.Rows...)
		if len(page.Rows) < limit {
			return rows, false, nil
		}
		after = page.Rows[len(page.Rows)-1].Sequence
	}
}
