package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/reducer"
)

// The owner's decisions (SPEC section 5): list the projects, retry a
// failed task, release a finished project, archive one.

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

--status keeps only the projects of that status, one of: ` + strings.Join(projectStatuses, ", ") + `.
Under --json it prints the daemon's reply with its "projects" filtered the
same way, every other field as it came.`,
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
	req := api.CmdProjectList{All: o.All || o.status == reducer.ProjectArchived}
	if o.status == "" || !o.c.json {
		_, err := o.c.call(req, func(p *printer, st *api.DaemonStatus) error {
			if st.Projects == nil {
				return fmt.Errorf("the daemon's reply carries no projects")
			}
			return printProjects(p, o.filter(*st.Projects), o.status, req.All)
		})
		return err
	}
	raw, err := o.c.raw(req)
	if err != nil {
		return err
	}
	out, err := o.filterJSON(raw)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.c.stdout, "%s\n", out)
	return err
}

// filter keeps the projects of --status (all of them without it).
func (o *ProjectListOptions) filter(ps []api.ProjectListItem) []api.ProjectListItem {
	if o.status == "" {
		return ps
	}
	var out []api.ProjectListItem
	for _, p := range ps {
		if p.Status == o.status {
			out = append(out, p)
		}
	}
	return out
}

// filterJSON is the daemon's reply with its "projects" filtered by
// --status: every other member, and every kept entry, byte for byte as
// the daemon wrote it, in its order.
func (o *ProjectListOptions) filterJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	bad := func(err error) ([]byte, error) { return nil, fmt.Errorf("decode reply: %w", err) }
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return bad(fmt.Errorf("not an object"))
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return bad(err)
		}
		if key == "projects" {
			var items []json.RawMessage
			if err := json.Unmarshal(v, &items); err != nil {
				return bad(err)
			}
			kept := []json.RawMessage{}
			for _, it := range items {
				var p struct {
					Status reducer.ProjectStatus `json:"status"`
				}
				if err := json.Unmarshal(it, &p); err != nil {
					return bad(err)
				}
				if p.Status == o.status {
					kept = append(kept, it)
				}
			}
			v, _ = json.Marshal(kept)
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
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
	t := newTable("~NAME", "!STATUS", "PHASE", "TASKS", "RUNNING", "LAST ACTIVITY")
	for _, x := range ps {
		last := x.UpdatedUnixSeconds
		if hb := x.LastHeartbeatUnixSeconds; hb != nil && *hb > last {
			last = *hb
		}
		t.add(x.Name, string(x.Status), string(x.Phase), fmt.Sprintf("%d/%d", x.CompletedTasks, x.TaskCount),
			fmt.Sprint(x.RunningRuns), p.ago(last))
	}
	return p.table(t)
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
