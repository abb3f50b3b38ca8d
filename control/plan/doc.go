// Package plan reads and writes plan files: a project's tasks with a key
// of the author's, their descriptions, priorities, labels, epics and
// dependencies, in YAML or JSON (docs/plan.md, "Plan files"). It only
// reads and writes them: whether a plan can be applied (keys unique and
// known, no cycle, each text within its limit) is the reducer's to say
// when it decides reducer.ApplyPlan, which takes (*File).Items.
//
// # Use
//
//	f, err := plan.Parse(r)           // YAML or JSON; refuses what is not a plan
//	cmd := reducer.ApplyPlan{Project: p, Items: f.Items(), ...}
//
//	f := plan.FromTasks(listed)       // a project's tasks, keyed by key or ID
//	err = plan.Write(w, f, plan.YAML) // Parse reads back f
//
//	f, notes, err := plan.FromBeads(r) // beads' issues.jsonl; notes: what was not carried
//
// Schema is the file's JSON Schema, its limits the reducer's;
// docs/plan.schema.json is a copy that a test keeps equal.
package plan
