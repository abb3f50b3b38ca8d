package view

import (
	"encoding/json"
	"strconv"
	"time"

	"scv/control/api"
	"scv/control/render"
	"scv/ledger"
	"scv/reducer"
)

// The event kinds of approvals asked and decided. The ledger has none of
// them yet: Model draws them once they are appended, and ignores every
// kind it does not know.
const (
	KindApprovalAsked   = "approval_asked"
	KindApprovalDecided = "approval_decided"
)

// Options say how a project is drawn.
type Options struct {
	// Now ends the bars of running runs and the time axis, and dates the
	// report. Its location is the one every time is shown in. Zero: a
	// running run ends at its last heartbeat, and times are shown in UTC.
	Now time.Time
	// StaleAfter is the daemon's stale window: a silence of a run longer
	// than half of it is drawn as a heartbeat gap. Zero draws no gaps.
	StaleAfter time.Duration
}

func (o Options) loc() *time.Location {
	if o.Now.IsZero() {
		return time.UTC
	}
	return o.Now.Location()
}

// approval is the data of an approval event.
type approval struct {
	QuestionID string `json:"question_id"`
	TaskID     string `json:"task_id"`
	Outcome    string `json:"outcome"`
}

// runRef is the data of the events that name a run (run_progress,
// heartbeat, run_stale).
type runRef struct {
	RunID string `json:"run_id"`
}

// foundRef is the data of the events that say where a task's work was
// found (task_added, task_edited).
type foundRef struct {
	TaskID         string `json:"task_id"`
	DiscoveredFrom string `json:"discovered_from"`
}

// Model is the drawing's input for p: its tasks in order (attempts are
// the task's runs), its runs in the order they started (from Started to
// Updated, or running), drawn to opts.Now or, for an archived project, to
// its last event, the heartbeats of each run (its run_progress and
// heartbeat events), and markers: run_stale events, the start of every
// attempt after the first (a retry), approval_asked and
// approval_decided events, and the work found during a run (a task
// whose discovered_from is the run, on the run's task's row, at the
// task_added or task_edited event that set it). Tasks carry the plan's
// fields (priority, epic and children's progress, the task of the run
// they were found in, description). events are p's stored events in sequence
// order (those of other projects, of unknown kinds or with data that
// does not parse are skipped); they are needed for beats and markers
// only, so nil draws bars without them.
func Model(p *reducer.Project, events []ledger.Row, opts Options) render.Project {
	loc := opts.loc()
	runs := p.Runs()
	out := render.Project{
		ID: p.ID, Name: p.Name, Now: opts.Now, GapAfter: opts.StaleAfter / 2,
		Runs: make([]render.Run, 0, len(runs)),
	}
	if p.Archived {
		// Finished, with no run running: drawn to its last event, the
		// same at every drawing.
		out.Now = time.UnixMilli(p.Updated).In(loc)
	}
	attempts := map[string]int{}
	runAt := make(map[string]int, len(runs))
	runTask := make(map[string]string, len(runs))
	for i, r := range runs {
		attempts[r.TaskID]++
		runAt[r.ID] = i
		runTask[r.ID] = r.TaskID
		rr := render.Run{
			ID: r.ID, TaskID: r.TaskID, Agent: r.Agent, Status: string(r.Status), Attempt: int(r.Attempt),
			Start: time.UnixMilli(r.Started).In(loc),
		}
		if r.Status != reducer.RunRunning {
			rr.End = time.UnixMilli(r.Updated).In(loc)
		}
		if r.Usage != (reducer.Usage{}) {
			rr.Spent = r.Usage.Spend().String()
		}
		out.Runs = append(out.Runs, rr)
		if r.Attempt > 1 {
			out.Markers = append(out.Markers, render.Marker{TaskID: r.TaskID, RunID: r.ID, At: rr.Start,
				Kind: render.MarkerRetry, Label: "attempt " + strconv.Itoa(int(r.Attempt))})
		}
	}
	out.Tasks = tasksOf(api.ProjectTasksOf(p), attempts, runTask)
	found := map[string]time.Time{} // task ID -> when its discovered_from was set
	for _, e := range events {
		if e.ProjectID != p.ID {
			continue
		}
		at := time.UnixMilli(e.TimestampMs).In(loc)
		switch e.Kind {
		case reducer.KindTaskAdded, reducer.KindTaskEdited:
			var d foundRef
			if json.Unmarshal([]byte(e.Data), &d) != nil || d.DiscoveredFrom == "" {
				continue
			}
			if t, ok := p.Task(d.TaskID); ok && t.DiscoveredFrom == d.DiscoveredFrom {
				found[t.ID] = at
			}
		case reducer.KindRunProgress, reducer.KindHeartbeat:
			var d runRef
			if json.Unmarshal([]byte(e.Data), &d) != nil {
				continue
			}
			if i, ok := runAt[d.RunID]; ok {
				out.Runs[i].Beats = append(out.Runs[i].Beats, at)
			}
		case reducer.KindRunStale:
			var d runRef
			if json.Unmarshal([]byte(e.Data), &d) != nil {
				continue
			}
			m := render.Marker{RunID: d.RunID, At: at, Kind: render.MarkerStale, Label: "marked stale"}
			if i, ok := runAt[d.RunID]; ok {
				m.TaskID = out.Runs[i].TaskID
			}
			if opts.StaleAfter > 0 {
				m.Label += ": silent for over " + opts.StaleAfter.String()
			}
			out.Markers = append(out.Markers, m)
		case KindApprovalAsked, KindApprovalDecided:
			var d approval
			if json.Unmarshal([]byte(e.Data), &d) != nil {
				continue
			}
			kind, label := approvalMarker(e.Kind, d.Outcome)
			if d.QuestionID != "" {
				label += " (question " + d.QuestionID + ")"
			}
			out.Markers = append(out.Markers, render.Marker{TaskID: d.TaskID, At: at, Kind: kind, Label: label})
		}
	}
	for _, t := range out.Tasks {
		if at, ok := found[t.ID]; ok && t.FoundIn != "" {
			out.Markers = append(out.Markers, render.Marker{TaskID: t.FoundIn, RunID: t.FoundRun, At: at,
				Kind: render.MarkerFound, Label: "found: " + t.Title})
		}
	}
	return out
}

// Graph is the drawing's input for a project's report as the wire
// carries it (the MCP resource draws its graph from it): the tasks as
// Model has them, each run of a task an attempt. It has no runs, beats or
// markers: a report has no beats, and the graph shows none.
func Graph(r *api.ProjectReport) render.Project {
	attempts := map[string]int{}
	runTask := make(map[string]string, len(r.Runs))
	for _, run := range r.Runs {
		attempts[run.TaskID]++
		runTask[run.ID] = run.TaskID
	}
	return render.Project{ID: r.Project.ID, Name: r.Project.Name, Tasks: tasksOf(r.Tasks, attempts, runTask)}
}

// tasksOf is the drawing's tasks, in order, each with attempts[its ID]
// and the plan's fields: an epic's children done, counted here, and the
// task of the run it was found in (runTask: run ID -> its task's).
func tasksOf(tasks []api.ProjectTask, attempts map[string]int, runTask map[string]string) []render.Task {
	done := ChildrenDone(tasks)
	out := make([]render.Task, 0, len(tasks))
	for _, t := range tasks {
		rt := render.Task{
			ID: t.ID, Title: t.Title, Status: string(t.Status), DependsOn: t.DependsOn,
			Attempts: attempts[t.ID], Retries: int(t.Retries), MaxRetries: int(t.MaxRetries),
			Priority: t.Priority, Children: t.Children, ChildrenDone: done[t.ID], Parent: t.Parent,
			Description: t.Description,
		}
		if task, ok := runTask[t.DiscoveredFrom]; ok {
			rt.FoundIn, rt.FoundRun = task, t.DiscoveredFrom
		}
		out = append(out, rt)
	}
	return out
}

// ChildrenDone is, for each epic of tasks, how many of its children are
// done.
func ChildrenDone(tasks []api.ProjectTask) map[string]int {
	done := map[string]int{}
	for _, t := range tasks {
		if t.Parent != "" && t.Status == reducer.TaskDone {
			done[t.Parent]++
		}
	}
	return done
}

// approvalMarker is the marker kind and label of an approval event.
func approvalMarker(kind, outcome string) (string, string) {
	if kind == KindApprovalAsked {
		return render.MarkerApprovalAsked, "approval asked"
	}
	switch outcome {
	case "yes":
		return render.MarkerApprovalYes, "approved"
	case "no":
		return render.MarkerApprovalNo, "refused"
	case "expired", "withdrawn", "failed":
		return render.MarkerApprovalExpired, "approval " + outcome
	}
	return KindApprovalDecided, "approval decided: " + outcome
}
