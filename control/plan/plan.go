package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"scv/reducer"
)

// Version is the version of the format this package reads and writes.
const Version = 1

// File is a plan file: its tasks in the author's order.
type File struct {
	Version int    `json:"version"`
	Tasks   []Task `json:"tasks"`
}

// Task is one task of a plan file. Key is the author's name for it;
// Parent and DependsOn name other tasks by key. Empty lists are nil.
type Task struct {
	Key         string   `json:"key"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Acceptance  string   `json:"acceptance,omitempty"`
	Priority    *int     `json:"priority,omitempty"`
	Labels      []string `json:"labels,omitempty"`
	Parent      string   `json:"parent,omitempty"`
	DependsOn   []string `json:"depends_on,omitempty"`
}

// Items is f's tasks as the reducer's ApplyPlan takes them.
func (f *File) Items() []reducer.PlanItem {
	items := make([]reducer.PlanItem, len(f.Tasks))
	for i, t := range f.Tasks {
		items[i] = reducer.PlanItem{
			Key:         t.Key,
			Title:       t.Title,
			Description: t.Description,
			Acceptance:  t.Acceptance,
			Priority:    t.Priority,
			Labels:      t.Labels,
			Parent:      t.Parent,
			DependsOn:   t.DependsOn,
		}
	}
	return items
}

// Format is the syntax Write writes: YAML (also the zero value) or JSON.
type Format string

const (
	YAML Format = "yaml"
	JSON Format = "json"
)

// Parse reads a plan file, YAML or JSON (a file whose first character
// other than white space is '{' is read as JSON, and its syntax errors
// name a line and column of it). It refuses what is not a plan: a
// syntax error, a field of the wrong type, a field it does not know, a
// version other than Version, more than reducer.MaxPlanTasks tasks. Its
// errors are reducer.ErrInvalidArgument and name the task (by index and
// key) and the field. Whether the plan can be applied (keys unique and
// known, no cycle, every text within its limit) is the reducer's to say.
func Parse(r io.Reader) (*File, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("plan: read: %w", err)
	}
	tree, err := parseTree(data)
	if err != nil {
		return nil, invalid("%v", err)
	}
	return decode(tree)
}

// parseTree reads data, JSON or YAML, as a tree of the values JSON
// holds: map[string]any, []any, string, json.Number, bool and nil.
func parseTree(data []byte) (any, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte order mark
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return jsonTree(data)
	}
	return yamlTree(data)
}

// Write writes f in format, YAML when format is "": in the order of its
// fields and tasks, each text as it is, so that Parse reads back f.
func Write(w io.Writer, f *File, format Format) error {
	out := *f
	if out.Tasks == nil {
		out.Tasks = []Task{} // "tasks: []", not null
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	switch format {
	case JSON:
		_, err := w.Write(buf.Bytes())
		return err
	case YAML, "":
	default:
		return fmt.Errorf("plan: unknown format %q (want %q or %q)", format, YAML, JSON)
	}
	// The YAML is the JSON (JSON is YAML) restyled: block mappings, lists
	// of names in flow style, texts of several lines as literal blocks.
	var doc yaml.Node
	if err := yaml.Unmarshal(buf.Bytes(), &doc); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	restyle(&doc)
	enc2 := yaml.NewEncoder(w)
	enc2.SetIndent(2)
	if err := enc2.Encode(&doc); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return enc2.Close()
}

// restyle sets the YAML style of n and what it holds (see Write).
func restyle(n *yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		n.Style = 0
		if n.Tag == "!!str" && strings.Contains(n.Value, "\n") {
			n.Style = yaml.LiteralStyle
		}
	case yaml.SequenceNode:
		n.Style = 0
		flow := true
		for _, c := range n.Content {
			restyle(c)
			flow = flow && c.Kind == yaml.ScalarNode && c.Style == 0
		}
		if flow && len(n.Content) > 0 {
			n.Style = yaml.FlowStyle
		}
	default:
		n.Style = 0
		for _, c := range n.Content {
			restyle(c)
		}
	}
}

// invalid is a refusal of a file that is not a plan.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: plan: "+format, append([]any{reducer.ErrInvalidArgument}, args...)...)
}
