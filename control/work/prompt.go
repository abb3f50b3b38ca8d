package work

import (
	"bytes"
	"fmt"
	"text/template"

	"scv/control/api"
	"scv/reducer"
)

// DefaultPromptTemplate is the prompt of a turn unless project_work names
// another (docs/work.md documents its data, Prompt).
const DefaultPromptTemplate = `Task: {{.Task.Title}} ({{.Task.ID}}) of project {{.Project}}, run {{.RunID}}, attempt {{.Task.Attempt}}.
{{with .Task.Description}}
{{.}}
{{end}}{{with .Task.Acceptance}}
Done when: {{.}}
{{end}}{{with .Dependencies}}
It depends on:
{{range .}}- {{.Title}}: {{.Status}}{{with .Outcome}} ({{.}}){{end}}
{{end}}{{end}}
Work in {{.Workspace}}. Your turn is run {{.RunID}} of the ledger: report your progress through the ledger's tools (scv mcp --project {{.Project}}); ending your turn finishes the run succeeded, unless you finished it yourself.
`

// Prompt is what a turn's prompt template is executed with.
type Prompt struct {
	Project   string // the project's name
	ProjectID string
	Workspace string
	Agent     string // the agent's name (PROJECT-N)
	RunID     string // the turn's run
	Task      PromptTask
	// Dependencies are the tasks the task depends on, in its order.
	Dependencies []PromptDependency
}

// PromptTask is the task a turn works on.
type PromptTask struct {
	ID, Key, Title, Description, Acceptance string
	Labels                                  []string
	// Attempt counts the task's runs, this one included (1 for the
	// first); MaxRetries is its retry budget, Retries what it spent.
	Attempt, Retries, MaxRetries uint32
}

// PromptDependency is a task the turn's task depends on, and how it
// ended: its status and its last progress (Outcome).
type PromptDependency struct {
	ID, Title, Status, Outcome string
}

// parseTemplate parses text (the default when "") and executes it once
// on a sample, so that a template that names what Prompt lacks is
// refused before anything starts.
func parseTemplate(text string) (*template.Template, error) {
	if text == "" {
		text = DefaultPromptTemplate
	}
	t, err := template.New("prompt").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, api.Errorf(api.ErrInvalidArgument, "prompt_template: %v", err)
	}
	sample := Prompt{Project: "p", ProjectID: "id", Workspace: "/", Agent: "p-1", RunID: "run",
		Task:         PromptTask{ID: "t", Title: "title", Description: "d", Acceptance: "a", Labels: []string{"l"}, Attempt: 1},
		Dependencies: []PromptDependency{{ID: "d", Title: "dep", Status: "done", Outcome: "o"}}}
	if err := t.Execute(&bytes.Buffer{}, sample); err != nil {
		return nil, api.Errorf(api.ErrInvalidArgument, "prompt_template: %v", err)
	}
	return t, nil
}

// promptOf is the data of a turn on task t of p, run run, by agent.
func promptOf(p *reducer.Project, t *reducer.Task, run, agent string) Prompt {
	out := Prompt{Project: p.Name, ProjectID: p.ID, Workspace: p.Workspace, Agent: agent, RunID: run,
		Task: PromptTask{ID: t.ID, Key: t.Key, Title: t.Title, Description: t.Description, Acceptance: t.Acceptance,
			Labels: t.Labels, Attempt: t.Attempts, Retries: t.Retries, MaxRetries: t.MaxRetries}}
	for _, id := range t.DependsOn {
		d, ok := p.Task(id)
		if !ok {
			continue
		}
		dep := PromptDependency{ID: d.ID, Title: d.Title, Status: string(d.Status)}
		if d.Progress != nil {
			dep.Outcome = *d.Progress
		}
		out.Dependencies = append(out.Dependencies, dep)
	}
	return out
}

// render is the prompt of data.
func render(t *template.Template, data Prompt) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("prompt template: %w", err)
	}
	return b.String(), nil
}
