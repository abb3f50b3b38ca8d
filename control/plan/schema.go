package plan

import (
	"bytes"
	"text/template"

	"scv/reducer"
)

// Schema is the JSON Schema (draft 2020-12) of a plan file, its limits
// the reducer's. docs/plan.schema.json is a copy of it, which a test
// keeps equal.
func Schema() []byte {
	var b bytes.Buffer
	if err := schemaTmpl.Execute(&b, map[string]int{
		"Version":           Version,
		"MaxPlanTasks":      reducer.MaxPlanTasks,
		"MaxPlanKeyLen":     reducer.MaxPlanKeyLen,
		"MaxNameLen":        reducer.MaxNameLen,
		"MaxDescriptionLen": reducer.MaxDescriptionLen,
		"MaxAcceptanceLen":  reducer.MaxAcceptanceLen,
		"MinPriority":       reducer.MinPriority,
		"MaxPriority":       reducer.MaxPriority,
		"DefaultPriority":   reducer.DefaultPriority,
		"MaxLabels":         reducer.MaxLabels,
		"MaxLabelLen":       reducer.MaxLabelLen,
		"MaxDependsOn":      reducer.MaxDependsOn,
	}); err != nil {
		panic(err) // the template and its data are the package's own
	}
	return b.Bytes()
}

var schemaTmpl = template.Must(template.New("schema").Option("missingkey=error").Parse(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "scv plan file",
  "description": "A plan for scv project plan apply: tasks with a key of the author's, matched by key when the plan is applied again (docs/plan.md). Written in YAML or JSON.",
  "type": "object",
  "required": ["version", "tasks"],
  "additionalProperties": false,
  "properties": {
    "version": {
      "description": "The version of the format.",
      "const": {{.Version}}
    },
    "tasks": {
      "description": "The tasks, in the author's order.",
      "type": "array",
      "maxItems": {{.MaxPlanTasks}},
      "items": { "$ref": "#/$defs/task" }
    }
  },
  "$defs": {
    "task": {
      "type": "object",
      "required": ["key", "title"],
      "additionalProperties": false,
      "properties": {
        "key": {
          "description": "The author's name for the task, unique in the project: parent and depends_on name tasks by it.",
          "type": "string",
          "minLength": 1,
          "maxLength": {{.MaxPlanKeyLen}}
        },
        "title": {
          "type": "string",
          "minLength": 1,
          "maxLength": {{.MaxNameLen}}
        },
        "description": {
          "description": "Markdown: the statement of the work.",
          "type": "string",
          "maxLength": {{.MaxDescriptionLen}}
        },
        "acceptance": {
          "description": "How to tell the task is done.",
          "type": "string",
          "maxLength": {{.MaxAcceptanceLen}}
        },
        "priority": {
          "description": "{{.MinPriority}} the most urgent, {{.MaxPriority}} the least.",
          "type": "integer",
          "minimum": {{.MinPriority}},
          "maximum": {{.MaxPriority}},
          "default": {{.DefaultPriority}}
        },
        "labels": {
          "type": "array",
          "maxItems": {{.MaxLabels}},
          "items": { "type": "string", "minLength": 1, "maxLength": {{.MaxLabelLen}} }
        },
        "parent": {
          "description": "The key of the task's epic.",
          "type": "string",
          "maxLength": {{.MaxPlanKeyLen}}
        },
        "depends_on": {
          "description": "The keys of the tasks this one waits for.",
          "type": "array",
          "maxItems": {{.MaxDependsOn}},
          "items": { "type": "string", "minLength": 1, "maxLength": {{.MaxPlanKeyLen}} }
        }
      }
    }
  }
}
`))
