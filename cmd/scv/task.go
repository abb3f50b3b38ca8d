package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/reducer"
)

// newTaskCmd is `scv project task`.
func newTaskCmd(c *client) *cobra.Command {
	return withExample(`  scv project task add acme build --max-retries 1
  scv project task update acme $T blocked --progress "waiting on CI"`, group("task", "Add tasks and record what was observed of them",
		newTaskAddCmd(c),
		newTaskEditCmd(c),
		newTaskShowCmd(c),
		newTaskNextCmd(c),
		newTaskUpdateCmd(c),
		newTaskRetryCmd(c),
	))
}

// TaskAddOptions is `scv project task add`.
type TaskAddOptions struct {
	c          *client
	Project    string
	Title      string
	DependsOn  listFlag
	MaxRetries uint64
	Fields     taskFields
}

func newTaskAddCmd(c *client) *cobra.Command {
	o := &TaskAddOptions{c: c}
	cmd := &cobra.Command{
		Use:   "add PROJECT TITLE",
		Short: "Add a task",
		Long: `Add a task titled TITLE to PROJECT. It is ready at once, or pending until every
task it depends on (--depends-on: IDs, or unique titles, of tasks of the
same project) is done.
--max-retries is how many failed runs are retried: 0 means the first
failure is final, 2 allows three attempts in all.
` + taskFieldsHelp + `

The first line printed is "task ID added": its second word is the ID.`,
		Example: `  scv project task add acme build --max-retries 1
  B=$(scv project task add acme build | awk 'NR==1{print $2}')
  scv project task add acme test --depends-on $B --max-retries 2
  scv project task add acme package --depends-on build,test   # by unique title
  scv project task add acme -- -odd-title    # a title that starts with a dash
  scv project task add acme schema --priority 0 --label db --parent storage \
      --description "The tables of events." --acceptance "the migration tests pass"
  git log -1 --format=%B | scv project task add acme "follow up" --description -`,
		Args:              exactArgs("PROJECT", "TITLE"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Title = args[0], args[1]
			if err := o.Fields.read(cmd, o.c); err != nil {
				return err
			}
			return o.run()
		},
	}
	o.Fields.add(c, cmd, false)
	cmd.Flags().Var(&o.DependsOn, "depends-on", "a task this task waits for, its `ID` or unique title; repeat it, or separate them with commas")
	cmd.Flags().Uint64Var(&o.MaxRetries, "max-retries", 0, "how many failed runs are retried, `N` (default 0: the first failure is final)")
	cmd.RegisterFlagCompletionFunc("depends-on", c.completeTaskFlag)
	return cmd
}

func (o *TaskAddOptions) run() error {
	if o.MaxRetries > math.MaxUint32 {
		return usagef("--max-retries %d is too large (at most %d)", o.MaxRetries, uint64(math.MaxUint32))
	}
	f := &o.Fields
	_, err := o.c.call(api.CmdProjectTaskAdd{
		Project: o.Project, Title: o.Title, DependsOn: o.DependsOn.list(), MaxRetries: uint32(o.MaxRetries),
		Description: f.Description, Acceptance: f.Acceptance, Priority: f.Priority, Labels: f.labels(),
		Parent: f.Parent, DiscoveredFrom: f.DiscoveredFrom,
	}, func(p *printer, st *api.DaemonStatus) error {
		r, err := projectOf(st, api.KindTaskAdded)
		if err != nil {
			return err
		}
		return printNewID(p, "task", r.TaskID, "added", r.Project)
	})
	return err
}

// taskStatuses are the words STATUS of `task update` takes.
var taskStatuses = []string{"blocked", "ready", "done", "failed"}

// TaskUpdateOptions is `scv project task update`.
type TaskUpdateOptions struct {
	c        *client
	Project  string
	Task     string
	Status   reducer.TaskStatus
	Progress string
	set      func(string) bool
}

func newTaskUpdateCmd(c *client) *cobra.Command {
	o := &TaskUpdateOptions{c: c}
	cmd := &cobra.Command{
		Use:   "update PROJECT TASK STATUS",
		Short: "Record a task's status as observed outside a run",
		Long: `Record what an orchestrator or the owner observed of a task. STATUS is one of:

  blocked  waiting on an external condition (from pending, ready or stale)
  ready    no longer blocked (pending instead while a dependency is not done)
  done     finished outside a run; unblocks the tasks that depend on it
  failed   the owner gives up; final

The task's current status again changes only its --progress. running and
stale come from runs only: a running task changes only through its run.`,
		Example: `  scv project task update acme $T blocked --progress "waiting on CI"
  scv project task update acme $T ready`,
		Args:              exactArgs("PROJECT", "TASK", "STATUS"),
		ValidArgsFunction: c.completeProjectTask(taskStatuses...),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Task, o.set = args[0], args[1], cmd.Flags().Changed
			if err := o.Status.UnmarshalText([]byte(args[2])); err != nil {
				return usagef("STATUS: %v", err)
			}
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Progress, "progress", "", "what was observed, `TEXT` (default: the progress stays as it was)")
	return cmd
}

func (o *TaskUpdateOptions) run() error {
	c := api.CmdProjectTaskUpdate{Project: o.Project, Task: o.Task, Status: o.Status}
	if o.set("progress") {
		c.Progress = &o.Progress
	}
	_, err := o.c.call(c, func(p *printer, st *api.DaemonStatus) error {
		return printProjectBlock(p, st, fmt.Sprintf("task %s updated (%s)", o.Task, o.Status))
	})
	return err
}

// TaskRetryOptions is `scv project task retry`.
type TaskRetryOptions struct {
	c          *client
	Project    string
	Task       string
	MaxRetries uint64
	set        func(string) bool
}

func newTaskRetryCmd(c *client) *cobra.Command {
	o := &TaskRetryOptions{c: c}
	cmd := &cobra.Command{
		Use:   "retry PROJECT TASK [--max-retries N]",
		Short: "Put a failed task back to work, its retries started again",
		Long: `Put the failed task TASK (an ID or a unique title) back to work: it is ready
again (pending while a task it depends on is not done), its retries start
again from 0, and its attempts go on counting. --max-retries gives it a new
budget (default: it keeps its own). Only a failed task is retried; the
project records who retried it.`,
		Example: `  scv project task retry acme build
  scv project task retry acme build --max-retries 2`,
		Args:              exactArgs("PROJECT", "TASK"),
		ValidArgsFunction: c.completeProjectTask(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Task, o.set = args[0], args[1], cmd.Flags().Changed
			if o.MaxRetries > math.MaxUint32 {
				return usagef("--max-retries %d is too large (at most %d)", o.MaxRetries, uint64(math.MaxUint32))
			}
			return o.run()
		},
	}
	cmd.Flags().Uint64Var(&o.MaxRetries, "max-retries", 0, "the task's new retry budget, `N` (default: it keeps its own)")
	return cmd
}

func (o *TaskRetryOptions) run() error {
	c := api.CmdProjectTaskRetry{Project: o.Project, Task: o.Task}
	headline := fmt.Sprintf("task %s retried", o.Task)
	if o.set("max-retries") {
		n := uint32(o.MaxRetries)
		c.MaxRetries = &n
		headline += fmt.Sprintf(" (max retries %d)", n)
	}
	_, err := o.c.call(c, func(p *printer, st *api.DaemonStatus) error { return printProjectBlock(p, st, headline) })
	return err
}

// listFlag is a repeatable flag whose values may also be comma-separated:
// `--depends-on A --depends-on B` and `--depends-on A,B` are the same.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Type() string { return "IDs" }

func (l *listFlag) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// list is the values, never nil, so that an empty list is sent as [].
func (l listFlag) list() []string {
	if l == nil {
		return []string{}
	}
	return l
}
