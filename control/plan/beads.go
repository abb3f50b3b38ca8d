package plan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"scv/reducer"
)

// beadsIssue is what FromBeads reads of a line of beads' issues.jsonl
// (its types.Issue, as bd export writes it); other fields are ignored.
type beadsIssue struct {
	Type               string   `json:"_type"` // "issue", "memory"; absent before bd 1.0
	ID                 string   `json:"id"`
	Title              string   `json:"title"`
	Description        string   `json:"description"`
	Design             string   `json:"design"`
	AcceptanceCriteria string   `json:"acceptance_criteria"`
	Notes              string   `json:"notes"`
	Status             string   `json:"status"`
	Priority           *int     `json:"priority"`
	IssueType          string   `json:"issue_type"`
	Labels             []string `json:"labels"`
	Dependencies       []struct {
		IssueID     string `json:"issue_id"`
		DependsOnID string `json:"depends_on_id"`
		Type        string `json:"type"`
	} `json:"dependencies"`
	// Set fields of these are named in the notes as not carried.
	Assignee         string            `json:"assignee"`
	EstimatedMinutes *int              `json:"estimated_minutes"`
	DueAt            *string           `json:"due_at"`
	DeferUntil       *string           `json:"defer_until"`
	ExternalRef      *string           `json:"external_ref"`
	SpecID           string            `json:"spec_id"`
	Metadata         json.RawMessage   `json:"metadata"`
	Comments         []json.RawMessage `json:"comments"`
}

// FromBeads reads beads' issues.jsonl (what bd export writes: one issue
// a line) as a plan file of its open work, in the file's order; notes
// says, issue by issue, what was not carried. The mapping is in
// docs/plan.md ("Importing from beads"). A line that is not an issue of
// beads' is refused, naming the line.
func FromBeads(r io.Reader) (*File, []string, error) {
	var issues []beadsIssue
	var notes []string
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var is beadsIssue
			dec := json.NewDecoder(bytes.NewReader(line))
			if err := dec.Decode(&is); err != nil {
				return nil, nil, invalid("beads line %d: %v", n, err)
			}
			if is.Type == "" || is.Type == "issue" {
				if is.ID == "" {
					return nil, nil, invalid("beads line %d: an issue without an id", n)
				}
				issues = append(issues, is)
			} else {
				notes = append(notes, fmt.Sprintf("line %d: a %s, not imported", n, is.Type))
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("plan: read: %w", err)
		}
	}

	closed := map[string]bool{}
	for _, is := range issues {
		if isClosed(is.Status) {
			closed[is.ID] = true
		}
	}
	f := &File{Version: Version}
	for _, is := range issues {
		if closed[is.ID] {
			notes = append(notes, fmt.Sprintf("%s: %s, not imported", is.ID, is.Status))
			continue
		}
		if len(f.Tasks) == reducer.MaxPlanTasks {
			return nil, nil, invalid("beads: more than %d open issues", reducer.MaxPlanTasks)
		}
		t, left := beadsTask(is, closed)
		f.Tasks = append(f.Tasks, t)
		if len(left) > 0 {
			notes = append(notes, fmt.Sprintf("%s: not carried: %s", is.ID, strings.Join(left, "; ")))
		}
	}
	return f, notes, nil
}

// isClosed says whether a beads status is finished work: closed, or
// tombstone (deleted, in older exports).
func isClosed(status string) bool { return status == "closed" || status == "tombstone" }

// beadsTask is the task of an open issue; left names what of it the task
// does not carry.
func beadsTask(is beadsIssue, closed map[string]bool) (t Task, left []string) {
	t = Task{
		Key:         is.ID,
		Title:       is.Title,
		Description: is.Description,
		Acceptance:  is.AcceptanceCriteria,
		Priority:    is.Priority,
	}
	for _, s := range []struct{ heading, text string }{{"Design", is.Design}, {"Notes", is.Notes}} {
		if s.text == "" {
			continue
		}
		if t.Description != "" {
			t.Description += "\n\n"
		}
		t.Description += "## " + s.heading + "\n\n" + s.text
	}
	t.Labels = append(t.Labels, is.Labels...)
	if ty := is.IssueType; ty != "" && ty != "task" && ty != "epic" && !slices.Contains(t.Labels, ty) {
		t.Labels = append(t.Labels, ty)
	}
	if is.Status != "" && is.Status != "open" {
		left = append(left, "status "+is.Status)
	}
	for _, d := range is.Dependencies {
		if d.IssueID != "" && d.IssueID != is.ID {
			continue // another issue's, not this one's
		}
		to := d.DependsOnID
		switch {
		case (d.Type == "blocks" || d.Type == "parent-child") && closed[to]:
			left = append(left, fmt.Sprintf("%s %s (closed)", d.Type, to))
		case d.Type == "blocks":
			t.DependsOn = append(t.DependsOn, to)
		case d.Type == "parent-child" && t.Parent == "":
			t.Parent = to
		default:
			left = append(left, d.Type+" "+to)
		}
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"assignee", is.Assignee != ""},
		{"estimated_minutes", is.EstimatedMinutes != nil},
		{"due_at", is.DueAt != nil},
		{"defer_until", is.DeferUntil != nil},
		{"external_ref", is.ExternalRef != nil},
		{"spec_id", is.SpecID != ""},
		{"metadata", len(is.Metadata) > 0 && string(is.Metadata) != "null"},
	} {
		if f.set {
			left = append(left, f.name)
		}
	}
	if n := len(is.Comments); n > 0 {
		left = append(left, fmt.Sprintf("comments (%d)", n))
	}
	return t, left
}
