package mcp

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/control/api"
	"scv/control/follow"
	"scv/control/render"
	"scv/control/view"
	"scv/reducer"
)

// The MCP resources: each project's report, as Markdown, and its task
// graph, as `scv project graph` draws it in text, under
// scv://project/NAME/report and scv://project/NAME/graph. A subscription
// to one is notified when the project changes: a follower (control/follow)
// looks at each subscribed project's events every pollEvery, and waits for
// a daemon that went away (watch).

const (
	reportURI = "scv://project/%s/report"
	graphURI  = "scv://project/%s/graph"
	// pollEvery is how often a session with subscriptions looks for
	// changes.
	pollEvery = 250 * time.Millisecond
)

func (m *server) addResources(ctx context.Context) {
	m.srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: fmt.Sprintf(reportURI, "{name}"), Name: "report",
		Title: "Project report", MIMEType: "text/markdown",
		Description: "The project's report: its summary, tasks, runs and evidence notes, in Markdown."}, m.read)
	m.srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: fmt.Sprintf(graphURI, "{name}"), Name: "graph",
		Title: "Task graph", MIMEType: "text/plain",
		Description: "The project's task graph: the tasks in layers below the tasks they depend on, as text."}, m.read)
	// The projects there are now, listed; a daemon not running lists none.
	if st, err := m.do(ctx, api.CmdProjectList{}); err == nil {
		for _, p := range *st.Projects {
			if m.inScope(p.ID, p.Name) {
				m.addProject(p.Name)
			}
		}
	}
}

// addProject lists the resources of project name.
func (m *server) addProject(name string) {
	m.srv.AddResource(&sdk.Resource{URI: fmt.Sprintf(reportURI, name), Name: name + " report", MIMEType: "text/markdown",
		Title: "Report of " + name}, m.read)
	m.srv.AddResource(&sdk.Resource{URI: fmt.Sprintf(graphURI, name), Name: name + " graph", MIMEType: "text/plain",
		Title: "Task graph of " + name}, m.read)
}

// parseURI splits a resource URI into its project and what of it.
func parseURI(uri string) (project, what string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "scv://project/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	project, what = rest[:i], rest[i+1:]
	return project, what, what == "report" || what == "graph"
}

// read reads a project's report or graph.
func (m *server) read(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	name, what, ok := parseURI(uri)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	p, err := m.project(ctx, name)
	if err != nil {
		return nil, toolError(err)
	}
	// Where the history stands, before the state is read: a change after
	// it is news to a subscription of this session.
	if err := m.catchUp(ctx, name); err != nil {
		return nil, toolError(err)
	}
	st, err := m.do(ctx, api.CmdProjectReport{Project: p})
	if err != nil {
		return nil, toolError(err)
	}
	r := st.Project.Report
	content := &sdk.ResourceContents{URI: uri}
	switch what {
	case "report":
		content.MIMEType, content.Text = "text/markdown", reportMarkdown(r)
	case "graph":
		var b bytes.Buffer
		if err := render.GraphText(&b, view.Graph(r), render.TextOptions{Width: 100}); err != nil {
			return nil, err
		}
		content.MIMEType, content.Text = "text/plain", b.String()
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{content}}, nil
}

// reportMarkdown is a project's report in Markdown.
func reportMarkdown(r *api.ProjectReport) string {
	var b strings.Builder
	s := r.Project
	fmt.Fprintf(&b, "# Project %s\n\n", md(s.Name))
	b.WriteString("| | |\n|---|---|\n")
	row := func(cells ...string) {
		for i, c := range cells {
			cells[i] = md(c)
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	row("id", s.ID)
	row("workspace", s.Workspace)
	row("phase", string(s.Phase))
	row("status", string(s.Status))
	row("progress", fmt.Sprintf("%d/%d tasks done", s.CompletedTasks, s.TaskCount))
	row("updated", stampOf(s.UpdatedUnixSeconds))
	if s.LastHeartbeatUnixSeconds != nil {
		row("heartbeat", stampOf(*s.LastHeartbeatUnixSeconds))
	}
	title := map[string]string{}
	for _, t := range r.Tasks {
		title[t.ID] = t.Title
	}
	b.WriteString("\n## Tasks\n\n")
	if len(r.Tasks) == 0 {
		b.WriteString("No tasks yet.\n")
	} else {
		b.WriteString("| ID | Title | Status | Retries | Depends on | Run | Progress | Priority | Epic | Found in |\n|---|---|---|---|---|---|---|---|---|---|\n")
		done := view.ChildrenDone(r.Tasks)
		runTask := map[string]string{}
		for _, run := range r.Runs {
			runTask[run.ID] = run.TaskID
		}
		for _, t := range r.Tasks {
			deps := make([]string, len(t.DependsOn))
			for i, d := range t.DependsOn {
				deps[i] = title[d]
			}
			prio, epic, found := "", title[t.Parent], ""
			if t.Priority != nil {
				prio = fmt.Sprintf("P%d", *t.Priority)
			}
			if t.Children > 0 {
				epic = fmt.Sprintf("epic: %d/%d done", done[t.ID], t.Children)
			}
			if t.DiscoveredFrom != "" {
				found = "run " + t.DiscoveredFrom
				if task, ok := runTask[t.DiscoveredFrom]; ok {
					found += " of " + title[task]
				}
			}
			row(t.ID, t.Title, string(t.Status), fmt.Sprintf("%d/%d", t.Retries, t.MaxRetries), strings.Join(deps, ", "),
				deref(t.RunID), deref(t.Progress), prio, epic, found)
		}
		for _, t := range r.Tasks {
			if t.Description == "" && t.Acceptance == "" {
				continue
			}
			fmt.Fprintf(&b, "\n### %s (%s)\n\n", md(t.Title), t.ID)
			if t.Description != "" {
				b.WriteString(strings.TrimSpace(t.Description) + "\n")
			}
			if t.Acceptance != "" {
				fmt.Fprintf(&b, "\nAcceptance: %s\n", strings.TrimSpace(t.Acceptance))
			}
		}
	}
	b.WriteString("\n## Runs\n\n")
	if len(r.Runs) == 0 {
		b.WriteString("No runs yet.\n")
	} else {
		b.WriteString("| ID | Task | Agent | Status | Attempt | Started | Progress |\n|---|---|---|---|---|---|---|\n")
		for _, run := range r.Runs {
			row(run.ID, title[run.TaskID], run.Agent, string(run.Status), fmt.Sprint(run.Attempt), stampOf(run.StartedUnixSeconds), deref(run.Progress))
		}
	}
	b.WriteString("\n## Evidence\n\n")
	for _, e := range r.Evidence {
		fmt.Fprintf(&b, "- %s\n", md(e))
	}
	fmt.Fprintf(&b, "\nReport generated %s.\n", stampOf(r.GeneratedUnixSeconds))
	return b.String()
}

// md makes s safe in a Markdown table cell: one line, pipes escaped.
func md(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return strings.NewReplacer(`\`, `\\`, "|", `\|`).Replace(s)
}

func stampOf(unix uint64) string {
	return time.Unix(int64(unix), 0).UTC().Format("2006-01-02 15:04:05 UTC")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// subscribe notes a subscription, and starts the poll that notifies it,
// for as long as the session lasts.
func (m *server) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	name, _, ok := parseURI(uri)
	if !ok {
		return sdk.ResourceNotFoundError(uri)
	}
	if _, err := m.project(ctx, name); err != nil {
		return toolError(err)
	}
	// What comes after the session last read the project (or after now,
	// if it never did) is news.
	m.mu.Lock()
	_, known := m.seen[name]
	m.mu.Unlock()
	if !known {
		if err := m.catchUp(ctx, name); err != nil {
			return toolError(err)
		}
	}
	m.mu.Lock()
	m.subs[uri] = true
	start := !m.following[name]
	m.following[name] = true
	m.mu.Unlock()
	if start {
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		go func() {
			req.Session.Wait()
			cancel()
		}()
		go m.watch(pctx, name)
	}
	return nil
}

func (m *server) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	m.mu.Lock()
	delete(m.subs, req.Params.URI)
	m.mu.Unlock()
	return nil
}

// catchUp notes the sequence of project's newest event.
func (m *server) catchUp(ctx context.Context, project string) error {
	m.mu.Lock()
	after := m.seen[project]
	m.mu.Unlock()
	head, err := m.head(ctx, project, after)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.seen[project] = max(m.seen[project], head)
	m.mu.Unlock()
	return nil
}

// head is the sequence of project's newest event, paging from after to
// the end.
func (m *server) head(ctx context.Context, project string, after uint64) (uint64, error) {
	for {
		st, err := m.do(ctx, api.CmdProjectEvents{Project: project, After: &after})
		if err != nil {
			return 0, err
		}
		evs := st.Project.Events
		if len(evs) > 0 {
			after = evs[len(evs)-1].Sequence
		}
		if len(evs) < reducer.MaxEventsPage { // the end of the history
			return after, nil
		}
	}
}

// watchGiveUp is how long a session's follower waits for a daemon that
// went away: as long as a session may last.
const watchGiveUp = 24 * time.Hour

// watch notifies the subscriptions of project when its history grows,
// until ctx ends or none is left: a follower reads the events after the
// newest the session has seen, every pollEvery (at once while pages come
// full), and waits for a daemon that went away.
func (m *server) watch(ctx context.Context, project string) {
	defer func() {
		m.mu.Lock()
		delete(m.following, project)
		m.mu.Unlock()
	}()
	news := false // the history grew since the subscriptions were told
	f := &follow.Follower{
		Handler: api.HandlerFunc(m.do), Answered: true, Pause: pollEvery, GiveUp: watchGiveUp,
		Request: func() api.Command {
			m.mu.Lock()
			after := m.seen[project]
			m.mu.Unlock()
			return api.CmdProjectEvents{Project: project, After: &after}
		},
		Reply: func(st *api.DaemonStatus) (follow.Step, error) {
			evs := st.Project.Events
			m.mu.Lock()
			var uris []string
			for uri := range m.subs {
				if name, _, _ := parseURI(uri); name == project {
					uris = append(uris, uri)
				}
			}
			if len(evs) > 0 && evs[len(evs)-1].Sequence > m.seen[project] {
				m.seen[project], news = evs[len(evs)-1].Sequence, true
			}
			m.mu.Unlock()
			if len(uris) == 0 {
				return follow.Stop, nil
			}
			if len(evs) == reducer.MaxEventsPage {
				return follow.Now, nil // more to read before the state is news
			}
			if news {
				news = false
				for _, uri := range uris {
					m.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri})
				}
			}
			return follow.Wait, nil
		},
	}
	f.Run(ctx)
}
