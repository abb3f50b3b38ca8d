package web

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"net/http"
	"strconv"
	"time"

	"scv/control/api"
	"scv/reducer"
)

// Agents is the daemon's live agents (*agents.Manager).
type Agents interface {
	// ListAgents lists the live agents, oldest first.
	ListAgents() []api.AgentInfo
}

// agentRow is one live agent as the pages show it: what the manager
// lists, with its task's project and title as the ledger has them.
type agentRow struct {
	api.AgentInfo
	// ProjectID and TaskID are the agent's task ("": none); RunID its
	// running turn's run.
	ProjectID, TaskID, RunID string
	// ProjectName and TaskTitle are the ledger's; "" when the project
	// (or the task in it) is not there, and then the page shows the IDs
	// without a link.
	ProjectName, TaskTitle string
	// Known: the project is in the ledger, so the page links to it.
	Known bool
	// Working: a turn runs.
	Working bool
	// IdleSince is when it became idle (zero: not idle) and IdleFor how
	// long ago that was, coarsely ("4m ago").
	IdleSince time.Time
	IdleFor   string
	// Jobs is its background jobs, or "—" when it reported none.
	Jobs string
}

type agentsPage struct {
	Rows []agentRow
}

// agentsPage lists the live agents, oldest first.
func (s *Server) agentsPage(w http.ResponseWriter, r *http.Request) {
	if s.Agents == nil {
		http.Error(w, "404 not found: this daemon runs no live agents", http.StatusNotFound)
		return
	}
	ctx := r.Context()
	list := s.Agents.ListAgents()
	now := s.now()
	rows, err := s.agentRows(ctx, list, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := s.questionsVersion(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.show(w, r, http.StatusOK, "agents", layout{Title: "Live agents", Poll: "/api/version?page=agents",
		Version: agentsVersion(list, now) + "." + q, Body: agentsPage{Rows: rows}})
}

// agentRows resolves each agent's project and task through the ledger,
// reading each project once. A project the ledger does not have (any
// more) leaves the IDs unresolved; another error is the page's.
func (s *Server) agentRows(ctx context.Context, list []api.AgentInfo, now time.Time) ([]agentRow, error) {
	projects := map[string]*reducer.Project{}
	rows := make([]agentRow, 0, len(list))
	for _, a := range list {
		row := agentRow{AgentInfo: a, ProjectID: deref(a.Project), TaskID: deref(a.Task), RunID: deref(a.Run),
			Working: a.State == api.AgentWorking, Jobs: "—"}
		if a.BackgroundJobs != nil {
			row.Jobs = strconv.FormatUint(uint64(*a.BackgroundJobs), 10)
		}
		if a.IdleSinceUnixSeconds != nil && !row.Working {
			row.IdleSince = time.Unix(int64(*a.IdleSinceUnixSeconds), 0).In(now.Location())
			row.IdleFor = ago(now.Sub(row.IdleSince))
		}
		if row.ProjectID != "" {
			p, ok := projects[row.ProjectID]
			if !ok {
				var err error
				p, err = s.Ledger.Project(ctx, row.ProjectID)
				if err != nil && !errors.Is(err, reducer.ErrNotFound) {
					return nil, err
				}
				projects[row.ProjectID] = p
			}
			if p != nil {
				row.Known, row.ProjectName = true, p.Name
				if t, ok := p.Task(row.TaskID); ok {
					row.TaskTitle = t.Title
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// projectAgents is the live agents whose turns are runs of project id's
// tasks, with their task titles from p.
func projectAgents(list []api.AgentInfo, p *reducer.Project) []agentRow {
	var rows []agentRow
	for _, a := range list {
		if deref(a.Project) != p.ID {
			continue
		}
		row := agentRow{AgentInfo: a, ProjectID: p.ID, TaskID: deref(a.Task), RunID: deref(a.Run),
			ProjectName: p.Name, Known: true, Working: a.State == api.AgentWorking}
		if t, ok := p.Task(row.TaskID); ok {
			row.TaskTitle = t.Title
		}
		rows = append(rows, row)
	}
	return rows
}

// agentsVersion is the agents page's version: a hash of the listing
// (state, conversation, turn, idle since, jobs, task, run, stop reason:
// all that the page shows) and of how long ago each idle agent became
// idle as the page words it, so that "4m ago" does not go stale. A
// decimal number, like the other pages' versions.
func agentsVersion(list []api.AgentInfo, now time.Time) string {
	h := fnv.New64a()
	b, _ := json.Marshal(list) // plain data: never fails
	h.Write(b)
	for _, a := range list {
		if a.IdleSinceUnixSeconds != nil && a.State != api.AgentWorking {
			h.Write([]byte("\x00" + ago(now.Sub(time.Unix(int64(*a.IdleSinceUnixSeconds), 0)))))
		}
	}
	return strconv.FormatUint(h.Sum64(), 10)
}

// listAgents is the live agents (none without Agents).
func (s *Server) listAgents() []api.AgentInfo {
	if s.Agents == nil {
		return nil
	}
	return s.Agents.ListAgents()
}

// projectAgentsVersion is the part of a project page's version that its
// live agents make ("" without Agents): a hash of those in list of
// project id.
func (s *Server) projectAgentsVersion(list []api.AgentInfo, id string) string {
	if s.Agents == nil {
		return ""
	}
	var mine []api.AgentInfo
	for _, a := range list {
		if deref(a.Project) == id {
			mine = append(mine, a)
		}
	}
	h := fnv.New64a()
	b, _ := json.Marshal(mine)
	h.Write(b)
	return "." + strconv.FormatUint(h.Sum64(), 10)
}

// ago is how long ago something was, to the minute: "<1m ago", "4m ago",
// "2h 5m ago", "3d 2h ago".
func ago(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return "<1m ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m ago"
	case d < 24*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h " + strconv.Itoa(int(d%time.Hour/time.Minute)) + "m ago"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d " + strconv.Itoa(int(d%(24*time.Hour)/time.Hour)) + "h ago"
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
