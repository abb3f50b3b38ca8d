package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/render"
	"scv/ledger"
	"scv/reducer"
)

// The owner's decisions (SPEC section 5): list the projects, retry a
// failed task, release a finished project, archive one.

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
		newProjectReadyCmd(c),
		newProjectReportCmd(c),
		newProjectEventsCmd(c),
		newProjectGraphCmd(c),
		newProjectTimelineCmd(c),
		newProjectHeartbeatCmd(c),
		newTaskCmd(c),
		newPlanCmd(c),
		newRunCmd(c),
		newProjectReleaseCmd(c),
		newProjectArchiveCmd(c),
		newProjectBudgetCmd(c),
		newProjectWorkCmd(c),
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

// projectStatuses are the words --status of `project list` takes.
var projectStatuses = []string{
	string(reducer.ProjectActive), string(reducer.ProjectBlocked), string(reducer.ProjectWaitingApproval),
	string(reducer.ProjectCompleted), string(reducer.ProjectFailed), string(reducer.ProjectArchived),
}

// ProjectListOptions is `scv project list`.
type ProjectListOptions struct {
	c      *client
	All    bool
	Status string
	status reducer.ProjectStatus
}

func newProjectListCmd(c *client) *cobra.Command {
	o := &ProjectListOptions{c: c}
	cmd := &cobra.Command{
		Use:   "list [--all] [--status S]",
		Short: "List the projects: status, phase, tasks done, running runs, last activity",
		Long: `List the projects, oldest first: name, status, phase, tasks done of all,
running runs, and how long ago the project last changed or beat. Archived
projects are left out unless --all (or --status archived).

--status keeps only the projects of that status, one of: ` + strings.Join(projectStatuses, ", ") + `;
the daemon filters them (project_list's "status").`,
		Example: `  scv project list
  scv project list --all
  scv project list --status failed
  scv project list --status waiting_approval --json | jq -r '.projects[].name'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("status") {
				if err := o.status.UnmarshalText([]byte(o.Status)); err != nil {
					return usagef("--status: %v", err)
				}
			}
			return o.run()
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", false, "list the archived projects too")
	cmd.Flags().StringVar(&o.Status, "status", "", "only the projects of this status, `S` ("+strings.Join(projectStatuses, "|")+")")
	cmd.RegisterFlagCompletionFunc("status", words(projectStatuses...))
	return cmd
}

func (o *ProjectListOptions) run() error {
	req := api.CmdProjectList{All: o.All}
	if o.status != "" {
		req.Status = &o.status
	}
	_, err := o.c.call(req, func(p *printer, st *api.DaemonStatus) error {
		if st.Projects == nil {
			return fmt.Errorf("the daemon's reply carries no projects")
		}
		return printProjects(p, *st.Projects, o.status, req.All)
	})
	return err
}

// printProjects is `scv project list`.
func printProjects(p *printer, ps []api.ProjectListItem, status reducer.ProjectStatus, all bool) error {
	if len(ps) == 0 {
		msg := "no projects"
		if status != "" {
			msg += " with status " + string(status)
		} else if !all {
			msg += " (scv project list --all adds the archived ones)"
		}
		_, err := fmt.Fprintln(p.w, msg)
		return err
	}
	t := render.NewTable("~NAME", "!STATUS", "PHASE", "TASKS", "RUNNING", "LAST ACTIVITY")
	for _, x := range ps {
		last := x.UpdatedUnixSeconds
		if hb := x.LastHeartbeatUnixSeconds; hb != nil && *hb > last {
			last = *hb
		}
		t.Add(x.Name, string(x.Status), string(x.Phase), fmt.Sprintf("%d/%d", x.CompletedTasks, x.TaskCount),
			fmt.Sprint(x.RunningRuns), p.ago(last))
	}
	return p.table(t)
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
	st := &api.DaemonStatus{Version: version, Components: []api.ComponentHealth{}, Project: api.ProjectReplyOf(o.cmd(o.Project), p, p.Updated)}
	if o.c.json {
		return o.c.printJSON(st) // one line, like the daemon's reply
	}
	return o.print(o.c.printer(), st)
}

// printTasksReply is `scv project tasks`.
func printTasksReply(p *printer, st *api.DaemonStatus) error {
	r, err := projectOf(st, api.KindTasks)
	if err != nil {
		return err
	}
	if err := printTasks(p, r.Tasks); err != nil {
		return err
	}
	var done uint64
	for _, t := range r.Tasks {
		if t.Status == reducer.TaskDone {
			done++
		}
	}
	_, err = fmt.Fprintln(p.w, doneLine(done, uint64(len(r.Tasks))))
	if line := spendLine(r.Spend); line != "" && err == nil {
		_, err = fmt.Fprintln(p.w, line)
	}
	return err
}

// printTasks writes the tasks table.
func printTasks(p *printer, tasks []api.ProjectTask) error {
	if len(tasks) == 0 {
		_, err := fmt.Fprintln(p.w, "no tasks")
		return err
	}
	names := taskNames(tasks)
	spent := slices.ContainsFunc(tasks, func(t api.ProjectTask) bool { return t.Spend != nil })
	// PRIORITY and EPIC, when a task's priority is not the default, and
	// when the project has epics.
	prioritized := slices.ContainsFunc(tasks, func(t api.ProjectTask) bool { return t.Priority != nil })
	epics := slices.ContainsFunc(tasks, func(t api.ProjectTask) bool { return t.Parent != "" })
	cols := []string{"ID", "~TITLE", "!STATUS"}
	if prioritized {
		cols = append(cols, "PRIORITY")
	}
	if epics {
		cols = append(cols, "~EPIC")
	}
	cols = append(cols, "RETRIES", "~DEPENDS ON", "~RUN", "~PROGRESS", "HEARTBEAT")
	if spent {
		cols = append(cols, "~SPENT")
	}
	var done map[string]int // an epic's children done
	if epics {
		done = map[string]int{}
		for _, x := range tasks {
			if x.Parent != "" && x.Status == reducer.TaskDone {
				done[x.Parent]++
			}
		}
	}
	t := render.NewTable(cols...)
	for _, x := range tasks {
		deps := "-"
		if len(x.DependsOn) > 0 {
			named := make([]string, len(x.DependsOn))
			for i, d := range x.DependsOn {
				named[i] = names.of(d)
			}
			deps = strings.Join(named, ", ")
		}
		row := []string{x.ID, x.Title, string(x.Status)}
		if prioritized {
			row = append(row, fmt.Sprint(priorityOf(x.Priority)))
		}
		if epics {
			row = append(row, epicText(x, names, done))
		}
		row = append(row, fmt.Sprintf("%d/%d", x.Retries, x.MaxRetries),
			deps, orDash(x.RunID), orDash(x.Progress), p.agoPtr(x.LastHeartbeatUnixSeconds))
		if spent {
			row = append(row, spendText(x.Spend))
		}
		t.Add(row...)
	}
	return p.table(t)
}

// epicText is a task's EPIC cell: an epic's children done of all
// ("epic 2/5"), a child's epic, or -.
func epicText(x api.ProjectTask, names taskName, done map[string]int) string {
	switch {
	case x.Children > 0 && x.Parent != "":
		return fmt.Sprintf("epic %d/%d, in %s", done[x.ID], x.Children, names.of(x.Parent))
	case x.Children > 0:
		return fmt.Sprintf("epic %d/%d", done[x.ID], x.Children)
	case x.Parent != "":
		return names.of(x.Parent)
	}
	return "-"
}

// taskName is how the tables name a project's tasks: by title, where
// the title names the task on a command line too (no other task has it,
// and it is no task's ID or plan key), else by ID.
type taskName map[string]string

func taskNames(tasks []api.ProjectTask) taskName {
	uses := map[string]int{}
	for _, t := range tasks {
		uses[t.Title]++
		uses[t.ID] += 2 // an ID is never a usable title
		if t.Key != "" {
			uses[t.Key] += 2 // nor a key
		}
	}
	names := taskName{}
	for _, t := range tasks {
		if uses[t.Title] == 1 && strings.TrimSpace(t.Title) != "" {
			names[t.ID] = t.Title
		}
	}
	return names
}

// of is the task id's name: its title, or the ID itself.
func (n taskName) of(id string) string {
	if title, ok := n[id]; ok {
		return title
	}
	return id
}

// printRuns writes the runs table; tasks name the runs' tasks.
func printRuns(p *printer, runs []api.ProjectRun, tasks []api.ProjectTask) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(p.w, "no runs")
		return err
	}
	names := taskNames(tasks)
	spent := slices.ContainsFunc(runs, func(r api.ProjectRun) bool { return r.Usage != nil })
	cols := []string{"ID", "~TASK", "~AGENT", "!STATUS", "ATTEMPT", "STARTED", "UPDATED", "~PROGRESS"}
	if spent {
		cols = append(cols, "~SPENT")
	}
	t := render.NewTable(cols...)
	for _, r := range runs {
		row := []string{r.ID, names.of(r.TaskID), r.Agent, string(r.Status), fmt.Sprint(r.Attempt),
			p.ago(r.StartedUnixSeconds), p.ago(r.UpdatedUnixSeconds), orDash(r.Progress)}
		if spent {
			row = append(row, usageText(r.Usage))
		}
		t.Add(row...)
	}
	return p.table(t)
}

// printReportReply is `scv project report`.
func printReportReply(p *printer, st *api.DaemonStatus) error {
	r, err := projectOf(st, api.KindReport)
	if err != nil {
		return err
	}
	rep := r.Report
	if rep == nil {
		return fmt.Errorf("the daemon's report reply carries no report")
	}
	if err := printSummary(p, &rep.Project); err != nil {
		return err
	}
	fmt.Fprintln(p.w, "\nTasks:")
	if err := printTasks(p, rep.Tasks); err != nil {
		return err
	}
	if line := spendLine(rep.Spend); line != "" {
		fmt.Fprintln(p.w, line)
	}
	printReportPlan(p, rep)
	fmt.Fprintln(p.w, "\nRuns:")
	if err := printRuns(p, rep.Runs, rep.Tasks); err != nil {
		return err
	}
	fmt.Fprintln(p.w, "\nEvidence:")
	for _, e := range rep.Evidence {
		fmt.Fprintf(p.w, "  %s\n", render.Clean(e))
	}
	_, err = fmt.Fprintf(p.w, "\nreport generated %s\n", p.time(rep.GeneratedUnixSeconds))
	return err
}

// ProjectHeartbeatOptions is `scv project heartbeat`.
type ProjectHeartbeatOptions struct {
	c       *client
	Project string
	Task    string
	Runs    []string
	set     func(string) bool
}

func newProjectHeartbeatCmd(c *client) *cobra.Command {
	o := &ProjectHeartbeatOptions{c: c}
	cmd := &cobra.Command{
		Use:   "heartbeat PROJECT",
		Short: "Say that a project, a task or runs are alive",
		Long: `Record a heartbeat: of a run (--run), of a task (--task), or of the project.
A running run silent for the daemon's --stale-after is marked stale.
Several --run send one batch: one line, one reply, one commit.`,
		Example: `  scv project heartbeat acme --run 01J…
  scv project heartbeat acme --run 01J…A --run 01J…B`,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Project, o.set = args[0], cmd.Flags().Changed
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Task, "task", "", "the `TASK` that is alive")
	cmd.Flags().StringArrayVar(&o.Runs, "run", nil, "a `RUN` that is alive; repeat it for several (one batch)")
	cmd.RegisterFlagCompletionFunc("task", c.completeTaskFlag)
	cmd.RegisterFlagCompletionFunc("run", c.completeRunFlag)
	return cmd
}

func (o *ProjectHeartbeatOptions) run() error {
	if len(o.Runs) > 1 {
		return o.runs()
	}
	c := api.CmdProjectHeartbeat{Project: o.Project}
	headline := "heartbeat recorded"
	if o.set("task") {
		c.Task = &o.Task
		headline = "heartbeat recorded for task " + o.Task
	}
	if len(o.Runs) == 1 {
		c.Run = &o.Runs[0]
		headline = "heartbeat recorded for run " + o.Runs[0]
	}
	_, err := o.c.call(c, func(p *printer, st *api.DaemonStatus) error { return printProjectBlock(p, st, headline) })
	return err
}

// runs records the heartbeats of several runs, in batches of at most
// control.MaxBatch: the daemon's replies under --json, one line each in
// the order of the runs, else a headline and the project's block. The
// runs refused are named in the error, the others recorded.
func (o *ProjectHeartbeatOptions) runs() error {
	if o.set("task") {
		return usagef("--task names the task of one run: give several --run without it")
	}
	cmds := make([]api.Command, len(o.Runs))
	for i := range o.Runs {
		cmds[i] = api.CmdProjectHeartbeat{Project: o.Project, Run: &o.Runs[i]}
	}
	out, err := o.c.batch(cmds)
	if err != nil {
		return err
	}
	var (
		last    json.RawMessage
		refused []string
		first   *api.Error
	)
	for i, r := range out {
		if r.Err != nil {
			if first == nil {
				first = api.ErrorOf(r.Err)
			}
			refused = append(refused, fmt.Sprintf("run %s: %v", o.Runs[i], callError(r.Err)))
			continue
		}
		last = r.Raw
		if o.c.json {
			if _, err := fmt.Fprintf(o.c.stdout, "%s\n", r.Raw); err != nil {
				return err
			}
		}
	}
	if last != nil && !o.c.json {
		var st api.DaemonStatus
		if err := json.Unmarshal(last, &st); err != nil {
			return fmt.Errorf("decode reply: %w", err)
		}
		headline := fmt.Sprintf("heartbeat recorded for %d runs", len(out)-len(refused))
		if err := printProjectBlock(o.c.printer(), &st, headline); err != nil {
			return err
		}
	}
	if first == nil {
		return nil
	}
	// Each refusal says its reason: the whole is of the first's kind.
	msg := fmt.Sprintf("%d of %d heartbeats refused: %s", len(refused), len(out), strings.Join(refused, "; "))
	return saidError{msg, daemonError{&api.Error{Code: first.Code, Message: msg, Data: first.Data}}}
}

// newProjectDecisionCmd is `scv project release` or `scv project archive`:
// one project, one action, the project's block after it.
func newProjectDecisionCmd(c *client, use, short, long, example, done string, cmdOf func(string) api.Command) *cobra.Command {
	return &cobra.Command{
		Use:               use + " PROJECT",
		Short:             short,
		Long:              long,
		Example:           example,
		Args:              exactArgs("PROJECT"),
		ValidArgsFunction: c.completeProjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(cmdOf(args[0]), func(p *printer, st *api.DaemonStatus) error {
				name := args[0]
				if st.Project != nil && st.Project.Project != nil {
					name = st.Project.Project.Name
				}
				return printProjectBlock(p, st, fmt.Sprintf("project %s %s", name, done))
			})
			return err
		},
	}
}

func newProjectReleaseCmd(c *client) *cobra.Command {
	return newProjectDecisionCmd(c, "release", "Release a project whose tasks are all done (phase production)",
		`Release PROJECT: every one of its tasks must be done. Its phase becomes
production (its status stays completed), and the project records who
released it. A task added afterwards is new work: the phase is derived
again, and the project can be released again once that is done too.`,
		`  scv project release acme`, "released",
		func(p string) api.Command { return api.CmdProjectRelease{Project: p} })
}

func newProjectArchiveCmd(c *client) *cobra.Command {
	return newProjectDecisionCmd(c, "archive", "Archive a project: it takes no more writes",
		`Archive PROJECT, finished or not: its status becomes archived and its phase
reporting, and the project records who archived it. It is refused while a
run of it is running or an approval of it is pending. From then on every
write to it is refused; reads, --at, ledger verify and export work as
before, and scv project list shows it only with --all.`,
		`  scv project archive acme
  scv project list --all`, "archived",
		func(p string) api.Command { return api.CmdProjectArchive{Project: p} })
}
