package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/plan"
	"scv/control/render"
	"scv/reducer"
)

// The plan on the command line (docs/plan.md): a task's fields edited and
// shown, the ready work, the next task, and plan files applied, exported
// and imported from beads.

// TaskEditOptions is `scv project task edit`.
type TaskEditOptions struct {
	c         *client
	Project   string
	Task      string
	Title     string
	DependsOn listFlag
	Fields    taskFields
	set       func(string) bool
}

func newTaskEditCmd(c *client) *cobra.Command {
	o := &TaskEditOptions{c: c}
	cmd := &cobra.Command{
		Use:   "edit PROJECT TASK [--title T] [--description TEXT|-] [--acceptance TEXT] [--priority N] [--label L]... [--parent T] [--discovered-from RUN] [--depends-on T]...",
		Short: "Change a task's title, description, acceptance, priority, labels, epic or dependencies",
		Long: `Change the fields of TASK given by a flag; a field whose flag is not given
is kept. --label and --depends-on replace the task's labels and
dependencies with those given. The project records the edit as one
task_edited event naming who made it; an edit that changes nothing writes
nothing.
` + taskFieldsHelp,
		Example: `  scv project task edit acme schema --priority 0 --label db,sql
  scv project task edit acme schema --acceptance "the migration tests pass"
  scv project task edit acme queries --parent storage --depends-on schema
  scv project task edit acme queries --parent ""     # no longer in an epic
  scv project task edit acme schema --description - < schema.md`,
		Args:              exactArgs("PROJECT", "TASK"),
		ValidArgsFunction: c.completeProjectTask(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Task, o.set = args[0], args[1], cmd.Flags().Changed
			if err := o.Fields.read(cmd, o.c); err != nil {
				return err
			}
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Title, "title", "", "the task's new title, `T`")
	cmd.Flags().Var(&o.DependsOn, "depends-on", "a task this task waits for, its `ID` or unique title; repeat it, or separate them with commas (they replace the task's; \"\" removes them all)")
	cmd.RegisterFlagCompletionFunc("depends-on", c.completeTaskFlag)
	o.Fields.add(c, cmd, true)
	return cmd
}

func (o *TaskEditOptions) run() error {
	f := &o.Fields
	c := api.CmdProjectTaskEdit{Project: o.Project, Task: o.Task, Description: f.Description, Acceptance: f.Acceptance,
		Priority: f.Priority, Labels: f.Labels, Parent: f.Parent, DiscoveredFrom: f.DiscoveredFrom}
	if o.set("title") {
		c.Title = &o.Title
	}
	if o.set("depends-on") {
		deps := o.DependsOn.list()
		c.DependsOn = &deps
	}
	_, err := o.c.call(c, func(p *printer, st *api.DaemonStatus) error {
		return printProjectBlock(p, st, fmt.Sprintf("task %s edited", o.Task))
	})
	return err
}

func newTaskShowCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "show PROJECT TASK",
		Short: "A task: every field, its runs with their attempts, the events that shaped it",
		Long: `Show TASK: its fields (title, key, status, priority, labels, epic, children,
dependencies, the run it was discovered from, retries, attempts, its run
and progress), its description and acceptance, its runs in the order they
started, and the events that shaped it (those that name the task, or one
of its runs, or that added or edited a task under it).`,
		Example: `  scv project task show acme schema
  scv project task show acme $T --json | jq -r .task.description`,
		Args:              exactArgs("PROJECT", "TASK"),
		ValidArgsFunction: c.completeProjectTask(),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(api.CmdProjectTaskShow{Project: args[0], Task: args[1]}, func(p *printer, st *api.DaemonStatus) error {
				if st.Task == nil {
					return errors.New("the daemon's reply carries no task")
				}
				if err := printTaskDetail(p, st.Task, c.taskNames(args[0], st.Task)); err != nil {
					return err
				}
				fmt.Fprintln(p.w, "\nRuns:")
				if err := printRuns(p, st.Task.Runs, nil); err != nil {
					return err
				}
				fmt.Fprintln(p.w, "\nEvents:")
				if len(st.Task.Events) == 0 {
					_, err := fmt.Fprintln(p.w, "no events")
					return err
				}
				(&eventLines{p: p}).write(st.Task.Events)
				return nil
			})
			return err
		},
	}
}

// taskNames names the tasks of project as the tables do, for the epic
// and the dependencies of t (nothing to ask when it has none); when the
// daemon cannot say, tasks are named by ID.
func (c *client) taskNames(project string, t *api.TaskDetail) taskName {
	if t.Parent == "" && len(t.DependsOn) == 0 {
		return taskName{}
	}
	return c.projectTaskNames(project)
}

// projectTaskNames is taskNames of the tasks of project, or none when
// the daemon cannot say.
func (c *client) projectTaskNames(project string) taskName {
	st, err := c.do(api.CmdProjectTasks{Project: project})
	if err != nil || st.Project == nil {
		return taskName{}
	}
	return taskNames(st.Project.Tasks)
}

// printTaskDetail writes a task's block, then its description and
// acceptance, each under its heading; names names its epic and
// dependencies.
func printTaskDetail(p *printer, t *api.TaskDetail, names taskName) error {
	b := render.Block()
	b.Add("task", t.ID)
	b.Add("title", t.Title)
	if t.Key != "" {
		b.Add("key", t.Key)
	}
	b.Add("status", string(t.Status))
	b.Add("priority", fmt.Sprint(priorityOf(t.Priority)))
	b.Add("labels", joinDash(t.Labels))
	b.Add("epic", dash(names.of(t.Parent)))
	if t.Children > 0 {
		b.Add("children", fmt.Sprint(t.Children))
	}
	deps := make([]string, len(t.DependsOn))
	for i, d := range t.DependsOn {
		deps[i] = names.of(d)
	}
	b.Add("depends on", joinDash(deps))
	b.Add("discovered from", dash(t.DiscoveredFrom))
	b.Add("retries", fmt.Sprintf("%d/%d", t.Retries, t.MaxRetries))
	b.Add("attempts", fmt.Sprint(t.Attempts))
	b.Add("run", orDash(t.RunID))
	b.Add("progress", orDash(t.Progress))
	if err := p.table(b); err != nil {
		return err
	}
	printText(p, "Description", t.Description)
	printText(p, "Acceptance", t.Acceptance)
	return nil
}

// printText writes text under its heading, each line indented and made
// safe for a terminal; nothing when text is empty.
func printText(p *printer, heading, text string) {
	text = strings.TrimRight(text, "\n")
	if strings.TrimSpace(text) == "" {
		return
	}
	fmt.Fprintf(p.w, "\n%s:\n", heading)
	for line := range strings.SplitSeq(text, "\n") {
		fmt.Fprintln(p.w, strings.TrimRight("  "+render.Clean(line), " "))
	}
}

// priorityOf is the wire's priority: absent is the default.
func priorityOf(p *int) int {
	if p == nil {
		return reducer.DefaultPriority
	}
	return *p
}

func joinDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}

// TaskNextOptions is `scv project task next`.
type TaskNextOptions struct {
	c       *client
	Project string
	Agent   string
	Labels  listFlag
}

func newTaskNextCmd(c *client) *cobra.Command {
	o := &TaskNextOptions{c: c}
	cmd := &cobra.Command{
		Use:   "next PROJECT --agent NAME [--label L]...",
		Short: "Claim the next ready task and start its run",
		Long: fmt.Sprintf(`Claim the first task that scv project ready lists (with --label, the first
that has every label given) and start its run by the agent NAME, in one
write: under many claimers at once, each gets a different task. It prints
"run ID started" (its second word is the run's ID), then the task: its
fields, its description and its acceptance.

When no task is ready it says why (the project has no tasks, all are done,
all running, some wait for an approval, work is blocked by a failed task,
or no ready task has the labels) and exits %d.`, exitNothingReady),
		Example: `  scv project task next acme --agent codex
  R=$(scv project task next acme --agent codex --label db | awk 'NR==1{print $2}')
  scv project task next acme --agent codex --json | jq -r .task.description`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project = args[0]
			if o.Agent == "" {
				return usagef("--agent NAME is required")
			}
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Agent, "agent", "", "the agent doing the run, `NAME` (required)")
	cmd.Flags().Var(&o.Labels, "label", "only a task with the label `L`; repeat it, or separate them with commas")
	return cmd
}

func (o *TaskNextOptions) run() error {
	_, err := o.c.call(api.CmdProjectTaskNext{Project: o.Project, Agent: o.Agent, Labels: o.Labels},
		func(p *printer, st *api.DaemonStatus) error {
			r, err := projectOf(st, api.KindRunStarted)
			if err != nil {
				return err
			}
			if st.Task == nil {
				return errors.New("the daemon's reply carries no task")
			}
			if err := printNewID(p, "run", r.RunID, "started", nil); err != nil {
				return err
			}
			return printTaskDetail(p, st.Task, o.c.taskNames(o.Project, st.Task))
		})
	var d daemonError
	if errors.As(err, &d) && d.e.Data.Reason == api.ReasonNothingReady {
		return exitError{code: exitNothingReady, err: err}
	}
	return err
}

// ProjectReadyOptions is `scv project ready`.
type ProjectReadyOptions struct {
	c       *client
	Project string
	Labels  listFlag
}

func newProjectReadyCmd(c *client) *cobra.Command {
	o := &ProjectReadyOptions{c: c}
	cmd := &cobra.Command{
		Use:   "ready PROJECT [--label L]...",
		Short: "The tasks ready to run, the most urgent first, then the oldest",
		Long: `List the tasks of PROJECT that are ready to run, in the order scv project
task next claims them: the most urgent first (priority 0 before 4), then
the oldest. Epics, and tasks waiting for an approval, are left out; with
--label only the tasks that have every label given.`,
		Example: `  scv project ready acme
  scv project ready acme --label db
  scv project ready acme --json | jq -r '.project.tasks[].title'`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project = args[0]
			_, err := o.c.call(api.CmdProjectReady{Project: o.Project, Labels: o.Labels}, func(p *printer, st *api.DaemonStatus) error {
				return printReadyReply(p, st, o.c.projectTaskNames)
			})
			return err
		},
	}
	cmd.Flags().Var(&o.Labels, "label", "only the tasks with the label `L`; repeat it, or separate them with commas")
	return cmd
}

// printReadyReply is `scv project ready`; namesOf names the epics, asked
// only when a task has one.
func printReadyReply(p *printer, st *api.DaemonStatus, namesOf func(project string) taskName) error {
	r, err := projectOf(st, api.KindTasks)
	if err != nil {
		return err
	}
	if len(r.Tasks) == 0 {
		_, err := fmt.Fprintln(p.w, "no task is ready")
		return err
	}
	names := taskName{}
	if slices.ContainsFunc(r.Tasks, func(t api.ProjectTask) bool { return t.Parent != "" }) {
		names = namesOf(r.ProjectID)
	}
	t := render.NewTable("ID", "~TITLE", "PRIORITY", "~LABELS", "~EPIC")
	for _, x := range r.Tasks {
		t.Add(x.ID, x.Title, fmt.Sprint(priorityOf(x.Priority)), joinDash(x.Labels), dash(names.of(x.Parent)))
	}
	return p.table(t)
}

// newPlanCmd is `scv project plan`.
func newPlanCmd(c *client) *cobra.Command {
	return withExample(`  scv project plan apply acme plan.yaml
  scv project plan export acme > plan.yaml
  scv project plan import-beads acme .beads/issues.jsonl`, group("plan", "Apply, export and import plan files",
		newPlanApplyCmd(c),
		newPlanExportCmd(c),
		newPlanImportBeadsCmd(c),
	))
}

// PlanApplyOptions is `scv project plan apply` and `import-beads`.
type PlanApplyOptions struct {
	c       *client
	Project string
	File    string
}

func newPlanApplyCmd(c *client) *cobra.Command {
	o := &PlanApplyOptions{c: c}
	return &cobra.Command{
		Use:   "apply PROJECT FILE|-",
		Short: "Apply a plan file: add and edit the tasks it names, all or nothing",
		Long: `Apply the plan FILE (YAML or JSON, docs/plan.md; - reads it from standard
input) to PROJECT, all or nothing, in one batch of events. Its tasks are
matched by key (or by ID): a key no task has adds a task, a task whose
fields differ is edited (the fields that changed), a task that matches is
left as it is, so that applying the same file again writes nothing. A file
that is not a plan, or a plan that cannot be applied (a duplicate or
unknown key, a cycle, a field over its limit), is refused naming the key
and the problem, and nothing is written.

It prints how many tasks it added, edited and left unchanged, and the
task of each key.`,
		Example: `  scv project plan apply acme plan.yaml
  scv project plan export acme | scv project plan apply other -
  scv project plan apply acme plan.json --json | jq .plan`,
		Args:              exactArgs("PROJECT", "FILE"),
		ValidArgsFunction: c.completeProjects,
		RunE: o.runE("the plan", func(r io.Reader) (*plan.File, []string, error) {
			f, err := plan.Parse(r)
			return f, nil, err
		}),
	}
}

// runE reads PROJECT FILE's plan with read, then applies it.
func (o *PlanApplyOptions) runE(what string, read func(io.Reader) (*plan.File, []string, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		o.Project, o.File = args[0], args[1]
		r, err := o.c.openInput(o.File, what)
		if err != nil {
			return err
		}
		defer r.Close()
		f, notes, err := read(r)
		if err != nil {
			return err
		}
		return o.apply(f, notes)
	}
}

// apply applies f, then prints notes (what an import did not carry).
func (o *PlanApplyOptions) apply(f *plan.File, notes []string) error {
	tasks, err := wireTasks(f)
	if err != nil {
		return err
	}
	_, err = o.c.call(api.CmdProjectPlanApply{Project: o.Project, Tasks: tasks}, func(p *printer, st *api.DaemonStatus) error {
		if st.Plan == nil {
			return errors.New("the daemon's reply carries no plan")
		}
		if err := printPlanApplied(p, st.Plan, f); err != nil {
			return err
		}
		if len(notes) > 0 {
			fmt.Fprintln(p.w, "\nNotes:")
			for _, n := range notes {
				fmt.Fprintf(p.w, "  %s\n", render.Clean(n))
			}
		}
		return nil
	})
	return err
}

// printPlanApplied writes what a plan did, and the task of each key in
// the file's order.
func printPlanApplied(p *printer, a *api.PlanApplied, f *plan.File) error {
	fmt.Fprintf(p.w, "plan applied: %d added, %d edited, %d unchanged\n", a.Added, a.Edited, a.Unchanged)
	if len(f.Tasks) == 0 {
		return nil
	}
	t := render.NewTable("~KEY", "TASK", "~TITLE")
	for _, x := range f.Tasks {
		t.Add(x.Key, dash(a.Tasks[x.Key]), x.Title)
	}
	return p.table(t)
}

// wireTasks is f's tasks as project_plan_apply takes them. A negative
// priority, which the wire cannot carry, is refused as the reducer refuses
// one out of range, naming the key.
func wireTasks(f *plan.File) ([]api.PlanTask, error) {
	tasks := make([]api.PlanTask, len(f.Tasks))
	for i, t := range f.Tasks {
		var prio *uint32
		if t.Priority != nil {
			if err := reducer.ValidPriority(t.Priority); err != nil && *t.Priority < 0 {
				return nil, fmt.Errorf("plan task %q: %w", t.Key, err)
			}
			n := uint32(*t.Priority)
			prio = &n
		}
		tasks[i] = api.PlanTask{Key: t.Key, Title: t.Title, Description: t.Description, Acceptance: t.Acceptance,
			Priority: prio, Labels: t.Labels, Parent: t.Parent, DependsOn: t.DependsOn}
	}
	return tasks, nil
}

func newPlanImportBeadsCmd(c *client) *cobra.Command {
	o := &PlanApplyOptions{c: c}
	return &cobra.Command{
		Use:   "import-beads PROJECT FILE|-",
		Short: "Import a beads issues.jsonl as a plan: its open issues become tasks",
		Long: `Read the issues.jsonl of beads (what bd export writes; - reads standard
input), make a plan of its open issues (docs/plan.md, "Importing from
beads", maps each field and dependency type) and apply it to PROJECT as
scv project plan apply does: all or nothing, matched by the issues' IDs,
so that importing the same file again writes nothing. It prints what it
applied, then what it did not carry, issue by issue (under --json, only
the daemon's reply).`,
		Example: `  scv project plan import-beads acme .beads/issues.jsonl
  bd export | scv project plan import-beads acme -`,
		Args:              exactArgs("PROJECT", "FILE"),
		ValidArgsFunction: c.completeProjects,
		RunE:              o.runE("the issues", plan.FromBeads),
	}
}

func newPlanExportCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "export PROJECT",
		Short: "Write a project's tasks as a plan file, to standard output",
		Long: `Write the tasks of PROJECT as a plan file (docs/plan.md) to standard output:
YAML, or with --json JSON on one line, in the project's order. A task
without a key is written with its ID as its key, so that applying the
file to the same project writes nothing, and applying it to an empty
project gives the same tasks.`,
		Example: `  scv project plan export acme > plan.yaml
  scv project plan export acme --json | jq '.tasks | length'
  scv project plan export acme | scv project plan apply acme-copy -`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := c.do(api.CmdProjectTasks{Project: args[0]})
			if err != nil {
				return err
			}
			r, err := projectOf(st, api.KindTasks)
			if err != nil {
				return err
			}
			f := plan.FromTasks(listedTasks(r.Tasks))
			if !c.json {
				return plan.Write(c.stdout, f, plan.YAML)
			}
			var b bytes.Buffer
			if err := plan.Write(&b, f, plan.JSON); err != nil {
				return err
			}
			var line bytes.Buffer
			if err := json.Compact(&line, b.Bytes()); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.stdout, "%s\n", line.Bytes())
			return err
		},
	}
}

// listedTasks is a project's tasks as plan.FromTasks takes them.
func listedTasks(tasks []api.ProjectTask) []plan.Listed {
	out := make([]plan.Listed, len(tasks))
	for i, t := range tasks {
		var deps []string
		if len(t.DependsOn) > 0 {
			deps = t.DependsOn
		}
		out[i] = plan.Listed{ID: t.ID, Task: plan.Task{Key: t.Key, Title: t.Title, Description: t.Description,
			Acceptance: t.Acceptance, Priority: t.Priority, Labels: t.Labels, Parent: t.Parent, DependsOn: deps}}
	}
	return out
}
