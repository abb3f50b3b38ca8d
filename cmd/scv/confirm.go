package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/follow"
	"scv/control/proc"
	"scv/control/render"
)

// newConfirmCmd is `scv confirm`.
func newConfirmCmd(c *client) *cobra.Command {
	cmd := group("confirm", "Ask the owner yes/no questions, and follow or answer them",
		newConfirmAskCmd(c), newConfirmStatusCmd(c), newConfirmListCmd(c), newConfirmAnswerCmd(c))
	cmd.Example = `  Q=$(scv confirm ask "deploy acme to staging?" | awk '{print $2}')
  scv confirm answer $Q yes
  scv confirm ask "deploy acme to staging?" --wait && make deploy`
	cmd.Long = `Questions to the owner: an agent asks (confirm ask), the owner answers in
scv chat or with confirm answer, and the agent follows (confirm status, or
confirm ask --wait). No answer by the deadline counts as no (expired); a
question nobody follows for a minute is withdrawn (an approval, asked with
--project, is not).

confirm status, and confirm ask --wait, exit by the question's state:
0 yes, 1 no, 5 expired, 6 failed, 7 withdrawn, 8 still pending.`
	return cmd
}

// confirmExit is the exit code for a question's state.
func confirmExit(s api.ConfirmState) int {
	switch s {
	case api.ConfirmYes:
		return exitOK
	case api.ConfirmNo:
		return exitRefused
	case api.ConfirmExpired:
		return exitExpired
	case api.ConfirmFailed:
		return exitQFailed
	case api.ConfirmWithdrawn:
		return exitWithdrawn
	}
	return exitPending
}

// byState ends with the exit code of the reply's question (none for 0).
func byState(st *api.DaemonStatus) error {
	if st == nil || st.Confirm == nil {
		return follow.ErrNoQuestion
	}
	if code := confirmExit(st.Confirm.State); code != exitOK {
		return exitError{code: code}
	}
	return nil
}

// ConfirmAskOptions is `scv confirm ask`.
type ConfirmAskOptions struct {
	c        *client
	Question string
	Timeout  time.Duration
	Wait     bool
	Project  string
	Task     string
	set      func(string) bool
}

func newConfirmAskCmd(c *client) *cobra.Command {
	o := &ConfirmAskOptions{c: c}
	cmd := &cobra.Command{
		Use:   "ask QUESTION [--project P [--task T]]",
		Short: "Ask the owner a yes/no question, or for an approval of a project or task",
		Long: `Hand QUESTION to the owner's chat: the chat that started this delegation's
work ($SCV_PARENT), else the daemon's --notify chat, else the only
connected one. Without --wait it prints the question's ID and state and
exits 0 (6 when no chat could take it); with --wait it follows the
question until it is decided and exits by its outcome: 0 yes, 1 no,
5 expired, 6 failed, 7 withdrawn.

With --project the question is an approval, recorded in that project's
history with its outcome: while it is pending the project is
waiting_approval, and with --task (the task's ID or unique title) that
task cannot start a run. yes lets it run; any other outcome leaves it
blocked, the refusal as its progress. An approval is never withdrawn:
it waits for its answer or its deadline. A project that refuses it (an
unknown task, one done or running, one already waiting) makes the
command fail (exit 1).`,
		Example: `  scv confirm ask "deploy acme to staging?" --timeout 10m
  scv confirm ask "deploy acme to staging?" --wait && make deploy
  scv confirm ask "run the full test suite?" --project acme --task test --timeout 1h`,
		Args: exactArgs("QUESTION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Question, o.set = args[0], cmd.Flags().Changed
			if o.set("timeout") && o.Timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			if o.set("task") && !o.set("project") {
				return usagef("--task goes with --project P, the project whose task it is")
			}
			if o.set("project") && o.Project == "" {
				return usagef("--project needs a project")
			}
			if o.set("task") && o.Task == "" {
				return usagef("--task needs a task")
			}
			return o.run()
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "how long no answer waits before it counts as no (default: the daemon's, 30m)")
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "wait until the question is decided, and exit by its outcome")
	cmd.Flags().StringVar(&o.Project, "project", "", "make it an approval of the project `P` (ID or name)")
	cmd.Flags().StringVar(&o.Task, "task", "", "with --project: of the task `T`'s next run (ID or unique title)")
	cmd.RegisterFlagCompletionFunc("project", c.completeProjects)
	cmd.RegisterFlagCompletionFunc("task", func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if o.Project == "" {
			return nil, noFiles
		}
		return c.taskIDs(o.Project), noFiles
	})
	return cmd
}

func (o *ConfirmAskOptions) run() error {
	c := api.CmdConfirmAsk{Question: o.Question, Parent: delegationParent()}
	if o.set("project") {
		c.Project = &o.Project
	}
	if o.set("task") {
		c.Task = &o.Task
	}
	if o.set("timeout") {
		secs := uint64(o.Timeout.Round(time.Second) / time.Second)
		c.TimeoutSeconds = &secs
	}
	if !o.Wait {
		st, err := o.c.call(c, printConfirmReply)
		if err != nil {
			return err
		}
		if st.Confirm != nil && st.Confirm.State == api.ConfirmFailed {
			return exitError{code: exitQFailed}
		}
		return nil
	}
	ctx := context.Background()
	q, err := follow.Question(ctx, o.c, c)
	if err != nil {
		return err
	}
	if !o.c.json {
		printConfirmReply(o.c.printer(), &api.DaemonStatus{Confirm: q})
	}
	if q, err = follow.Answer(ctx, o.c, q, time.Time{}); err != nil {
		return err
	}
	st, err := o.c.call(api.CmdConfirmStatus{ID: q.ID}, printConfirmReply)
	if err != nil {
		return err
	}
	return byState(st)
}

// delegationParent is the delegation chain this process runs in
// ($SCV_PARENT), nil outside one: a question asked inside a delegation
// goes to the chat that started its work.
func delegationParent() *string {
	if parent := os.Getenv(proc.ParentEnv); parent != "" {
		return &parent
	}
	return nil
}

func newConfirmStatusCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "Where a question stands (asking keeps it alive)",
		Long: `Print where question ID stands, and exit by its state: 0 yes, 1 no,
5 expired, 6 failed, 7 withdrawn, 8 still pending. Asking keeps it alive:
a question nobody asks about for a minute is withdrawn.`,
		Example: `  scv confirm status 01M8KQ57GX764FR8FVDXEKYRTE
  until scv confirm status $Q >/dev/null; [ $? -ne 8 ]; do sleep 5; done`,
		Args:              exactArgs("ID"),
		ValidArgsFunction: c.completeQuestions,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := c.call(api.CmdConfirmStatus{ID: args[0]}, printConfirmReply)
			if err != nil {
				return err
			}
			return byState(st)
		},
	}
}

func newConfirmAnswerCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:               "answer ID yes|no",
		Short:             "Answer a pending question",
		Example:           `  scv confirm answer 01M8KQ57GX764FR8FVDXEKYRTE yes`,
		Args:              exactArgs("ID", "ANSWER"),
		ValidArgsFunction: c.completeQuestionAnswer,
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[1] != "yes" && args[1] != "no" {
				return usagef("ANSWER %q: want yes or no", args[1])
			}
			_, err := c.call(api.CmdConfirmAnswer{ID: args[0], Answer: args[1]}, printConfirmReply)
			return err
		},
	}
}

// ConfirmListOptions is `scv confirm list`.
type ConfirmListOptions struct {
	c       *client
	Chat    string
	Pending bool
}

func newConfirmListCmd(c *client) *cobra.Command {
	o := &ConfirmListOptions{c: c}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "The questions, and who decided them",
		Example: `  scv confirm list
  scv confirm list --chat local:owner --pending`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := api.CmdConfirmList{}
			if o.Chat != "" {
				c.Chat = &o.Chat
			}
			_, err := o.c.call(c, func(p *printer, st *api.DaemonStatus) error {
				qs := st.Questions
				if o.Pending {
					qs = pendingOf(qs)
				}
				return printQuestions(p, qs)
			})
			return err
		},
	}
	cmd.Flags().StringVar(&o.Chat, "chat", "", "only the questions of this chat, `CHANNEL:ACCOUNT`")
	cmd.Flags().BoolVar(&o.Pending, "pending", false, "only the questions still waiting for an answer (not with --json, which prints the daemon's reply)")
	cmd.RegisterFlagCompletionFunc("chat", c.completeChats)
	return cmd
}

func pendingOf(qs []api.Question) []api.Question {
	var out []api.Question
	for _, q := range qs {
		if q.State == api.ConfirmPending {
			out = append(out, q)
		}
	}
	return out
}

// printConfirmReply is the reply to confirm ask, status and answer.
func printConfirmReply(p *printer, st *api.DaemonStatus) error {
	q := st.Confirm
	if q == nil {
		return follow.ErrNoQuestion
	}
	chat := q.Chat
	if chat == "" {
		chat = "no chat"
	}
	_, err := fmt.Fprintf(p.w, "question %s %s in %s, deadline %s\n", q.ID, render.Paint(string(q.State), p.color), render.Clean(chat), p.stamp(q.DeadlineUnixSeconds))
	return err
}

// printQuestions is `scv confirm list`.
func printQuestions(p *printer, qs []api.Question) error {
	if len(qs) == 0 {
		_, err := fmt.Fprintln(p.w, "no questions")
		return err
	}
	t := render.NewTable("ID", "!STATE", "CHAT", "ASKED", "DEADLINE", "~DECIDED BY", "~QUESTION")
	for _, q := range qs {
		t.Add(q.ID, string(q.State), dash(q.Chat), p.ago(q.AskedUnixSeconds), p.ago(q.DeadlineUnixSeconds), orDash(q.DecidedBy), q.Question)
	}
	return p.table(t)
}
