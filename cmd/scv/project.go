package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/daemon"
	"scv/ledger"
	"scv/reducer"
)

// newProjectCmd is `scv project`: projects, their tasks and their runs.
func newProjectCmd(c *client) *cobra.Command {
	cmd := group("project", "Projects, their tasks and their runs",
		newProjectCreateCmd(c),
		newProjectListCmd(c),
		newProjectViewCmd(c, "status", "A project's phase, status and progress",
			func(p string) api.Command { return api.CmdProjectStatus{Project: p} },
			func(pr *printer, st *api.DaemonStatus) error { return printProjectBlock(pr, st, "") }),
		newProjectViewCmd(c, "tasks", "A project's tasks: status, retries, dependencies, run, progress",
			func(p string) api.Command { return api.CmdProjectTasks{Project: p} }, printTasksReply),
		newProjectReportCmd(c),
		newProjectEventsCmd(c),
		newProjectGraphCmd(c),
		newProjectTimelineCmd(c),
		newProjectHeartbeatCmd(c),
		newTaskCmd(c),
		newRunCmd(c),
		newProjectReleaseCmd(c),
		newProjectArchiveCmd(c),
	)
	cmd.Example = `  scv project create acme
  scv project list
  scv project tasks acme
  scv project events acme --follow
  scv project graph acme`
	cmd.Long = `Projects, their tasks and their runs. PROJECT is a project's ID or its name;
TASK is a task's ID or its title when no other task of the project has it;
RUN is a run's ID (scv project tasks and scv project report list them).`
	return cmd
}

// ProjectCreateOptions is `scv project create`.
type ProjectCreateOptions struct {
	c         *client
	Name      string
	Workspace string
}

func newProjectCreateCmd(c *client) *cobra.Command {
	o := &ProjectCreateOptions{c: c}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a project",
		Long: `Create a project named NAME (1 to 200 characters, unique) whose workspace is
--workspace, by default the current directory. A relative --workspace is
taken from the current directory.`,
		Example: `  scv project create acme
  scv project create acme --workspace ~/src/acme`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Workspace, "workspace", "", "the project's workspace `DIR` (default: the current directory)")
	return cmd
}

func (o *ProjectCreateOptions) run() error {
	dir := o.Workspace
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("--workspace: %w", err)
		}
		dir = wd
	}
	// The daemon runs elsewhere: a relative path means the caller's
	// directory, so resolve it here.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--workspace: %w", err)
	}
	_, err = o.c.call(api.CmdProjectCreate{Name: o.Name, Workspace: abs}, func(p *printer, st *api.DaemonStatus) error {
		if st.Project == nil || st.Project.Project == nil {
			return errors.New("the daemon's reply carries no project")
		}
		return printProjectBlock(p, st, fmt.Sprintf("project %s created", st.Project.Project.ID))
	})
	return err
}

// ProjectViewOptions is `scv project status|tasks|report`: from the
// daemon, or with --at from the database file as of a sequence; and
// `report --html`, the HTML report, from the database file.
type ProjectViewOptions struct {
	c          *client
	Project    string
	At         uint64
	DB         string
	HTML       bool
	Output     string
	StaleAfter time.Duration
	cmd        func(string) api.Command
	print      func(*printer, *api.DaemonStatus) error
	atSet      bool
	dbSet      bool
	set        func(string) bool
}

func newProjectViewCmd(c *client, name, short string, cmdOf func(string) api.Command, print func(*printer, *api.DaemonStatus) error) *cobra.Command {
	cmd, _ := projectViewCmd(c, name, short, cmdOf, print)
	return cmd
}

func projectViewCmd(c *client, name, short string, cmdOf func(string) api.Command, print func(*printer, *api.DaemonStatus) error) (*cobra.Command, *ProjectViewOptions) {
	o := &ProjectViewOptions{c: c, cmd: cmdOf, print: print, StaleAfter: daemon.DefaultStaleAfter}
	cmd := &cobra.Command{
		Use:   name + " PROJECT",
		Short: short,
		Long: short + `.

With --at SEQ it answers as the ledger stood after sequence SEQ (the
sequences scv project events lists), from the database file itself
(--db), with or without a daemon running. A SEQ past the newest event is
refused, naming the newest.`,
		Example: fmt.Sprintf(`  scv project %[1]s acme
  scv project %[1]s acme --json
  scv project %[1]s acme --at 5 --db ~/.local/state/scv/ledger.db`, name),
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.set = args[0], cmd.Flags().Changed
			o.atSet, o.dbSet = o.set("at"), o.set("db")
			return o.run()
		},
	}
	cmd.Flags().Uint64Var(&o.At, "at", 0, "answer as the ledger stood after sequence `SEQ`, from the database file (no daemon needed)")
	cmd.Flags().StringVar(&o.DB, "db", daemon.DefaultDB(), "with --at: the ledger database `PATH` or URL (env SCV_DB)")
	return cmd, o
}

// newProjectReportCmd is `scv project report`: the daemon's report, or
// with --html the HTML report, drawn from the database file.
func newProjectReportCmd(c *client) *cobra.Command {
	cmd, o := projectViewCmd(c, "report", "A project's report: summary, tasks, runs with attempts, evidence",
		func(p string) api.Command { return api.CmdProjectReport{Project: p} }, printReportReply)
	cmd.Long += `

With --html -o FILE it writes the report as one HTML file that needs
nothing else (its style and drawings inline, no script, nothing from the
network): the summary, the task graph, the timeline, the tasks, the runs,
the evidence, and the chain head with the scv ledger verify command that
checks the ledger against it. It is drawn from the database file (--db),
read-only, with or without a daemon, now or --at SEQ. -o - writes it to
stdout; without -o it is refused, so that HTML never floods a terminal.
Under --json it prints {"project_id","name","sequence","format","bytes",
"file"} (with -o -: "content", the document, instead of "file").`
	cmd.Example += `
  scv project report acme --html -o acme.html
  scv project report acme --html --at 5 -o - | gzip > acme-5.html.gz`
	f := cmd.Flags()
	f.BoolVar(&o.HTML, "html", false, "write the HTML report, from the database file (with -o FILE)")
	f.StringVarP(&o.Output, "output", "o", "", "with --html: the `FILE` to write (-: stdout)")
	f.DurationVar(&o.StaleAfter, "stale-after", daemon.DefaultStaleAfter, "with --html: the daemon's --stale-after: a run silent for over half of it shows a gap")
	f.Lookup("db").Usage = "with --at or --html: the ledger database `PATH` or URL (env SCV_DB)"
	return cmd
}

func (o *ProjectViewOptions) run() error {
	if o.HTML {
		if o.Output == "" {
			return usagef("--html writes a file: give -o FILE (or -o - for stdout)")
		}
		if o.StaleAfter <= 0 {
			return usagef("--stale-after must be positive")
		}
		return o.html()
	}
	for f, name := range map[string]string{"output": "-o", "stale-after": "--stale-after"} {
		if o.set(f) {
			return usagef("%s goes with --html", name)
		}
	}
	if !o.atSet {
		if o.dbSet {
			if o.cmd(o.Project).Action() == "project_report" {
				return usagef("--db goes with --at SEQ or --html")
			}
			return usagef("--db goes with --at SEQ")
		}
		_, err := o.c.call(o.cmd(o.Project), o.print)
		return err
	}
	// As of a sequence, from the database file: the reply the daemon
	// would give for that state. A report's generated time is the
	// state's last update, so that it is reproducible.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	drv, err := daemon.OpenLedger(ctx, o.DB, false)
	if err != nil {
		return err
	}
	defer drv.Close()
	p, err := ledger.ProjectAt(ctx, drv, o.Project, o.At)
	if err != nil {
		return atError(o.At, err)
	}
	r := &api.ProjectResponse{}
	switch o.cmd(o.Project).(type) {
	case api.CmdProjectStatus:
		r.Kind, r.Project = api.KindStatus, api.ProjectSummaryOf(p)
	case api.CmdProjectTasks:
		r.Kind, r.ProjectID, r.Tasks = api.KindTasks, p.ID, api.ProjectTasksOf(p)
	case api.CmdProjectReport:
		r.Kind, r.Report = api.KindReport, api.ProjectReportOf(p, p.Updated)
	}
	st := &api.DaemonStatus{Version: version, Components: []api.ComponentHealth{}, Project: r}
	if o.c.json {
		return o.c.printJSON(st) // one line, like the daemon's reply
	}
	return o.print(o.c.printer(), st)
}

// ProjectHeartbeatOptions is `scv project heartbeat`.
type ProjectHeartbeatOptions struct {
	c       *client
	Project string
	Task    string
	Run     string
	set     func(string) bool
}

func newProjectHeartbeatCmd(c *client) *cobra.Command {
	o := &ProjectHeartbeatOptions{c: c}
	cmd := &cobra.Command{
		Use:   "heartbeat PROJECT",
		Short: "Say that a project, a task or a run is alive",
		Long: `Record a heartbeat: of a run (--run), of a task (--task), or of the project.
A running run silent for the daemon's --stale-after is marked stale.`,
		Example:           `  scv project heartbeat acme --run 01J…`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.set = args[0], cmd.Flags().Changed
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Task, "task", "", "the `TASK` that is alive")
	cmd.Flags().StringVar(&o.Run, "run", "", "the `RUN` that is alive")
	cmd.RegisterFlagCompletionFunc("task", c.completeTaskFlag)
	cmd.RegisterFlagCompletionFunc("run", c.completeRunFlag)
	return cmd
}

func (o *ProjectHeartbeatOptions) run() error {
	c := api.CmdProjectHeartbeat{Project: o.Project}
	headline := "heartbeat recorded"
	if o.set("task") {
		c.Task = &o.Task
		headline = "heartbeat recorded for task " + o.Task
	}
	if o.set("run") {
		c.Run = &o.Run
		headline = "heartbeat recorded for run " + o.Run
	}
	_, err := o.c.call(c, func(p *printer, st *api.DaemonStatus) error { return printProjectBlock(p, st, headline) })
	return err
}

// newTaskCmd is `scv project task`.
func newTaskCmd(c *client) *cobra.Command {
	return withExample(`  scv project task add acme build --max-retries 1
  scv project task update acme $T blocked --progress "waiting on CI"`, group("task", "Add tasks and record what was observed of them",
		newTaskAddCmd(c),
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

The first line printed is "task ID added": its second word is the ID.`,
		Example: `  scv project task add acme build --max-retries 1
  B=$(scv project task add acme build | awk 'NR==1{print $2}')
  scv project task add acme test --depends-on $B --max-retries 2
  scv project task add acme package --depends-on build,test   # by unique title
  scv project task add acme -- -odd-title    # a title that starts with a dash`,
		Args:              exactArgs("PROJECT", "TITLE"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Title = args[0], args[1]
			return o.run()
		},
	}
	cmd.Flags().Var(&o.DependsOn, "depends-on", "a task this task waits for, its `ID` or unique title; repeat it, or separate them with commas")
	cmd.Flags().Uint64Var(&o.MaxRetries, "max-retries", 0, "how many failed runs are retried, `N` (default 0: the first failure is final)")
	cmd.RegisterFlagCompletionFunc("depends-on", c.completeTaskFlag)
	return cmd
}

func (o *TaskAddOptions) run() error {
	if o.MaxRetries > math.MaxUint32 {
		return usagef("--max-retries %d is too large (at most %d)", o.MaxRetries, uint64(math.MaxUint32))
	}
	_, err := o.c.call(api.CmdProjectTaskAdd{
		Project: o.Project, Title: o.Title, DependsOn: o.DependsOn.list(), MaxRetries: uint32(o.MaxRetries),
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

// newRunCmd is `scv project run`.
func newRunCmd(c *client) *cobra.Command {
	return withExample(`  R=$(scv project run start acme $T --agent codex | awk 'NR==1{print $2}')
  scv project run finish acme $R succeeded
  scv project run exec acme $T -- make test`, group("run", "Record runs of tasks, or run a command as one (exec)",
		newRunStartCmd(c),
		newRunProgressCmd(c),
		newRunFinishCmd(c),
		newRunExecCmd(c),
	))
}

// RunStartOptions is `scv project run start`.
type RunStartOptions struct {
	c       *client
	Project string
	Task    string
	Agent   string
}

func newRunStartCmd(c *client) *cobra.Command {
	o := &RunStartOptions{c: c}
	cmd := &cobra.Command{
		Use:   "start PROJECT TASK --agent NAME",
		Short: "Start a run of a ready (or stale) task",
		Long: `Start a run of TASK by the agent NAME. The first line printed is
"run ID started": its second word is the run's ID.`,
		Example:           `  R=$(scv project run start acme $B --agent codex | awk 'NR==1{print $2}')`,
		Args:              exactArgs("PROJECT", "TASK"),
		ValidArgsFunction: c.completeProjectTask(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Task = args[0], args[1]
			if o.Agent == "" {
				return usagef("--agent NAME is required")
			}
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Agent, "agent", "", "the agent doing the run, `NAME` (required)")
	return cmd
}

func (o *RunStartOptions) run() error {
	_, err := o.c.call(api.CmdProjectRunStart{Project: o.Project, Task: o.Task, Agent: o.Agent}, func(p *printer, st *api.DaemonStatus) error {
		r, err := projectOf(st, api.KindRunStarted)
		if err != nil {
			return err
		}
		return printNewID(p, "run", r.RunID, "started", r.Project)
	})
	return err
}

// RunProgressOptions is `scv project run progress`.
type RunProgressOptions struct {
	c                  *client
	Project, Run, Text string
}

func newRunProgressCmd(c *client) *cobra.Command {
	o := &RunProgressOptions{c: c}
	return &cobra.Command{
		Use:   "progress PROJECT RUN TEXT",
		Short: "Record a running run's progress (it counts as a heartbeat)",
		Long: `Record TEXT as the progress of RUN, which must be running: a finished or
stale run is fenced, and what it says is refused.`,
		Example:           `  scv project run progress acme $R "compiling"`,
		Args:              exactArgs("PROJECT", "RUN", "TEXT"),
		ValidArgsFunction: c.completeProjectRun(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Run, o.Text = args[0], args[1], args[2]
			_, err := o.c.call(api.CmdProjectRunProgress{Project: o.Project, Run: o.Run, Progress: o.Text},
				func(p *printer, st *api.DaemonStatus) error {
					return printProjectBlock(p, st, fmt.Sprintf("run %s progress recorded", o.Run))
				})
			return err
		},
	}
}

// runFinals are the statuses a run finishes with.
var runFinals = []string{string(reducer.RunSucceeded), string(reducer.RunFailed), string(reducer.RunCancelled)}

// RunFinishOptions is `scv project run finish`.
type RunFinishOptions struct {
	c            *client
	Project, Run string
	Status       reducer.RunStatus
}

func newRunFinishCmd(c *client) *cobra.Command {
	o := &RunFinishOptions{c: c}
	return &cobra.Command{
		Use:   "finish PROJECT RUN STATUS",
		Short: "Finish a running run: succeeded, failed or cancelled",
		Long: `Finish RUN with STATUS, one of:

  succeeded  the task is done
  failed     a retry is spent: the task is ready again, or failed once its
             --max-retries are spent
  cancelled  the task is ready again; no retry is spent`,
		Example:           `  scv project run finish acme $R succeeded`,
		Args:              exactArgs("PROJECT", "RUN", "STATUS"),
		ValidArgsFunction: c.completeProjectRun(runFinals...),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.Run = args[0], args[1]
			status, err := finishStatus(args[2])
			if err != nil {
				return usageError{err.Error()}
			}
			o.Status = status
			_, err = o.c.call(api.CmdProjectRunFinish{Project: o.Project, Run: o.Run, Status: o.Status},
				func(p *printer, st *api.DaemonStatus) error {
					return printProjectBlock(p, st, fmt.Sprintf("run %s finished (%s)", o.Run, o.Status))
				})
			return err
		},
	}
}

// finishStatus reads the STATUS of `project run finish`: a RunStatus, and
// one a run can finish with (`running` and `stale` are the daemon's own
// observations, which it refuses from clients).
func finishStatus(s string) (reducer.RunStatus, error) {
	var status reducer.RunStatus
	if err := status.UnmarshalText([]byte(s)); err != nil {
		return "", fmt.Errorf("STATUS: unknown variant `%s`, expected one of `%s`", s, strings.Join(runFinals, "`, `"))
	}
	if !slices.Contains(runFinals, string(status)) {
		return "", fmt.Errorf("STATUS: a run finishes `%s`, `%s` or `%s`, not `%s`", runFinals[0], runFinals[1], runFinals[2], status)
	}
	return status, nil
}

// listFlag is a repeatable flag whose values may also be comma-separated:
// `--depends-on A --depends-on B` and `--depends-on A,B` are the same.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Type() string   { return "IDs" }

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
