package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/follow"
	"scv/control/proc"
	"scv/control/render"
)

// Live agents: agent programs speaking the Agent Client Protocol that the
// daemon starts, owns and prompts turn by turn (control/api/agents.go).
// `scv agent start` starts one, `scv agent prompt` sends it a turn and
// follows the turn's updates to its end.

// exitInterrupted is the exit code of `agent prompt` interrupted twice
// (128 + SIGINT, as the shells say it).
const exitInterrupted = 130

// newAgentCmd is `scv agent`.
func newAgentCmd(c *client) *cobra.Command {
	cmd := group("agent", "Live agents: ACP agent programs the daemon runs and prompts turn by turn",
		newAgentStartCmd(c), newAgentListCmd(c), newAgentPromptCmd(c), newAgentCancelCmd(c), newAgentStopCmd(c))
	cmd.Example = `  scv agent start --name gem -- gemini --experimental-acp
  scv agent prompt gem "fix the failing test in ./ledger"
  scv agent list
  scv agent stop gem`
	cmd.Long = `Live agents are agent programs that speak the Agent Client Protocol (ACP) on
their standard input and output, such as Gemini CLI, Claude Code through its
ACP adapter, or Codex. The daemon starts one (agent start), owns its process
as a delegation, keeps its conversation between turns, and sends it one
prompt at a time (agent prompt, which follows the turn to its end). A live
agent started with --project and --task records every turn as a run of the
task. NAME is the agent's name, or its delegation handle.`
	return cmd
}

// AgentStartOptions is `scv agent start`.
type AgentStartOptions struct {
	c             *client
	Name          string
	Project       string
	Task          string
	Workspace     string
	Ask           bool
	AllowTerminal bool
	InitTimeout   time.Duration
	Session       string
	Command       []string
	set           func(string) bool
}

func newAgentStartCmd(c *client) *cobra.Command {
	o := &AgentStartOptions{c: c}
	cmd := &cobra.Command{
		Use:   "start [--name N] [--project P --task T] [--workspace DIR] -- CMD [ARGS...]",
		Short: "Start an ACP agent program as a live agent of the daemon",
		Long: `Start CMD, an agent program that speaks the Agent Client Protocol, as a live
agent: the daemon runs it (in a process group of its own, as a delegation),
initializes it and opens a conversation, and prints the agent. The agent
then waits for prompts (scv agent prompt) until it is stopped (scv agent
stop), and survives a restart of the daemon when it offers session/load.

CMD is looked up on this PATH (127 when it is not found; nothing is sent)
and runs with this environment. The workspace, its working directory and
the only folder its file requests may reach, is --workspace, else the
current directory, else with --project the project's workspace. With
--project and --task every turn is a run of the task. The agent's
permission requests go to the owner as questions with --ask (refused
without); --allow-terminal lets it run commands in its workspace.`,
		Example: `  scv agent start -- gemini --experimental-acp
  scv agent start --name claude --ask -- claude-code-acp
  scv agent start --project acme --task build -- codex-acp`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, command, err := commandArgs(cmd, args)
			if err != nil {
				return err
			}
			o.Command, o.set = command, cmd.Flags().Changed
			if err := o.check(); err != nil {
				return err
			}
			return o.run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", "", "the agent's `NAME` (default: the command's file name, made unique)")
	f.StringVar(&o.Project, "project", "", "with --task: every turn is a run of this project's task; `P` is an ID or name")
	f.StringVar(&o.Task, "task", "", "with --project: the task `T` (ID or unique title) whose runs the turns are")
	f.StringVar(&o.Workspace, "workspace", "", "the agent's working `DIR` (default: the current directory; with --project, the project's)")
	f.BoolVar(&o.Ask, "ask", false, "send the agent's permission requests to the owner as questions (default: refuse them)")
	f.BoolVar(&o.AllowTerminal, "allow-terminal", false, "let the agent run commands in terminals of its own, in its workspace")
	f.DurationVar(&o.InitTimeout, "init-timeout", api.DefaultAgentInitTimeout*time.Second, "how long the agent has to answer initialize and session/new")
	f.StringVar(&o.Session, "session", os.Getenv("SCV_SESSION"), "the SCV `SESSION` that starts it (env SCV_SESSION)")
	cmd.RegisterFlagCompletionFunc("project", c.completeProjects)
	cmd.RegisterFlagCompletionFunc("task", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if o.Project == "" {
			return nil, noFiles
		}
		return c.taskIDs(o.Project), noFiles
	})
	cmd.RegisterFlagCompletionFunc("workspace", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	})
	return cmd
}

// check refuses what the command line got wrong, before anything is
// looked up or sent.
func (o *AgentStartOptions) check() error {
	if (o.Project == "") != (o.Task == "") {
		return usagef("--project and --task go together: the agent's turns are runs of that project's task")
	}
	if _, err := initTimeoutSeconds(o.InitTimeout); err != nil {
		return err
	}
	return nil
}

// initTimeoutSeconds is --init-timeout in whole seconds, rounded up.
func initTimeoutSeconds(d time.Duration) (uint64, error) {
	if d <= 0 {
		return 0, usagef("--init-timeout must be positive")
	}
	return uint64((d + time.Second - 1) / time.Second), nil
}

func (o *AgentStartOptions) run() error {
	path, err := exec.LookPath(o.Command[0])
	if err != nil {
		return exitError{exitNotFound, err}
	}
	// The daemon starts it elsewhere: a path relative to here is made
	// absolute.
	if path, err = filepath.Abs(path); err != nil {
		return exitError{exitNotFound, err}
	}
	req := api.CmdAgentStart{
		Name: o.Name, Command: append([]string{path}, o.Command[1:]...), Env: os.Environ(),
		Ask: o.Ask, AllowTerminal: o.AllowTerminal,
		Session: o.Session, Parent: os.Getenv(proc.ParentEnv), Chat: os.Getenv("SCV_CHAT"),
	}
	ws := o.Workspace
	if ws == "" && o.Project == "" {
		if ws, err = os.Getwd(); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	if ws != "" {
		if req.Workspace, err = filepath.Abs(ws); err != nil {
			return fmt.Errorf("--workspace: %w", err)
		}
	}
	if o.Project != "" {
		req.Project, req.Task = &o.Project, &o.Task
	}
	if o.set("init-timeout") {
		secs, err := initTimeoutSeconds(o.InitTimeout)
		if err != nil {
			return err
		}
		req.InitTimeoutSeconds = &secs
	}
	_, err = o.c.call(req, func(p *printer, st *api.DaemonStatus) error {
		a, err := agentOf(st)
		if err != nil {
			return err
		}
		fmt.Fprintf(p.w, "agent %s started (conversation %s)\n", render.Clean(a.Name), render.Clean(orDash(a.Conversation)))
		return printAgent(p, a)
	})
	return err
}

// agentOf is the agent the reply is about.
func agentOf(st *api.DaemonStatus) (api.AgentInfo, error) {
	if st.Agents == nil || len(*st.Agents) == 0 {
		return api.AgentInfo{}, errors.New("the daemon's reply carries no agent")
	}
	return (*st.Agents)[0], nil
}

// printAgent writes a live agent's block.
func printAgent(p *printer, a api.AgentInfo) error {
	t := render.Block()
	t.Add("name", a.Name)
	t.Add("handle", a.Handle)
	t.Add("state", string(a.State))
	t.Add("conversation", orDash(a.Conversation))
	t.Add("turn", fmt.Sprint(a.Turn))
	t.Add("idle since", p.stampPtr(a.IdleSinceUnixSeconds))
	t.Add("background jobs", fmt.Sprint(jobsOf(a.BackgroundJobs)))
	t.Add("workspace", a.Workspace)
	task := orDash(a.Task)
	if a.Task != nil && a.Project != nil {
		task += " (project " + *a.Project + ")"
	}
	t.Add("task", task)
	t.Add("run", orDash(a.Run))
	t.Add("last stop reason", orDash(a.StopReason))
	t.Add("pid", fmt.Sprint(a.PID))
	t.Add("started", p.stamp(a.StartedUnixSeconds))
	return p.table(t)
}

func jobsOf(n *uint32) uint32 {
	if n == nil {
		return 0
	}
	return *n
}

// shortID is an ID cut to its last eight characters (a ULID's random
// tail), for a table.
func shortID(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	if r := []rune(*s); len(r) > 12 {
		return "…" + string(r[len(r)-8:])
	}
	return *s
}

func newAgentListCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the live agents: state, turn, idle time, conversation",
		Long: `List the live agents, oldest first: name, state (starting, idle, working,
stopping), the turns sent, how long it has been idle (- while a turn runs),
its background jobs, its conversation (the ACP session), the task whose
runs its turns are, and its pid.`,
		Example: `  scv agent list
  scv agent list --json | jq -r '.agents[] | select(.state == "idle") | .name'`,
		Args:              exactArgs(),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(api.CmdAgentList{}, printAgents)
			return err
		},
	}
}

// printAgents is `scv agent list`.
func printAgents(p *printer, st *api.DaemonStatus) error {
	if st.Agents == nil {
		return errors.New("the daemon's reply carries no agents")
	}
	if len(*st.Agents) == 0 {
		_, err := fmt.Fprintln(p.w, "no live agents")
		return err
	}
	t := render.NewTable("NAME", "!STATE", "TURN", "IDLE", "JOBS", "~CONVERSATION", "TASK", "PID")
	for _, a := range *st.Agents {
		idle := "-"
		if a.State != api.AgentWorking {
			idle = p.agoPtr(a.IdleSinceUnixSeconds)
		}
		t.Add(a.Name, string(a.State), fmt.Sprint(a.Turn), idle, fmt.Sprint(jobsOf(a.BackgroundJobs)),
			orDash(a.Conversation), shortID(a.Task), fmt.Sprint(a.PID))
	}
	return p.table(t)
}

func newAgentStopCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "stop NAME|HANDLE",
		Short: "Stop a live agent: cancel its turn and stop its process tree",
		Long: `Stop the live agent NAME (its name or handle): its running turn, if any, is
cancelled (its run finished cancelled), and its whole process tree is
stopped as a delegation's is (SIGTERM, the daemon's --kill-grace, SIGKILL).
Its conversation is not kept.`,
		Example: `  scv agent stop gem
  scv agent stop 01M8KP3V7Q2Z4N6X8B0C1D2E3F`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: c.completeAgents,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(api.CmdAgentStop{Agent: args[0]}, func(p *printer, st *api.DaemonStatus) error {
				name := args[0]
				if a, err := agentOf(st); err == nil {
					name = a.Name
				}
				_, err := fmt.Fprintf(p.w, "agent %s stopped\n", render.Clean(name))
				return err
			})
			return err
		},
	}
}

func newAgentCancelCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel NAME|HANDLE",
		Short: "Ask a live agent to end its running turn",
		Long: `Ask the live agent NAME (its name or handle) to end its running turn
(ACP session/cancel). It answers at once; the turn ends when the agent
stops, with the stop reason cancelled (scv agent prompt, following the
turn, then exits 1). An agent with no turn running is refused.`,
		Example:           `  scv agent cancel gem`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: c.completeAgents,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(api.CmdAgentCancel{Agent: args[0]}, func(p *printer, st *api.DaemonStatus) error {
				a, err := agentOf(st)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(p.w, "agent %s: turn %d cancelling\n", render.Clean(a.Name), a.Turn)
				return err
			})
			return err
		},
	}
}

// AgentPromptOptions is `scv agent prompt`.
type AgentPromptOptions struct {
	c        *client
	Agent    string
	Text     string
	Task     string
	Thoughts bool
	set      func(string) bool
}

func newAgentPromptCmd(c *client) *cobra.Command {
	o := &AgentPromptOptions{c: c}
	cmd := &cobra.Command{
		Use:   "prompt NAME [TEXT|-] [--task T]",
		Short: "Send a live agent its next turn and follow the turn to its end",
		Long: `Send TEXT (without it, or with -, all of standard input) to the live agent
NAME as its next turn, and print what the agent does as it comes: its
message as it is written, its tool calls, plans, permission, file and
terminal requests, and the turn's end with its stop reason (and the run's
status, for an agent of a task). --thoughts shows its thinking too.

It exits 0 when the turn ends with end_turn, 1 with any other stop reason
(cancelled, refusal, max_tokens, …) or when the agent ends first. Ctrl-C
asks the agent to cancel the turn and goes on following it to its end; a
second Ctrl-C exits at once (130), leaving the turn to the daemon. A
restart of the daemon is waited for (up to a minute). With --json it
prints the daemon's reply to the prompt, then each update as one JSON
object a line.

With --task (an agent of a project) this turn, and the later ones, are
runs of that task of the project instead.`,
		Example: `  scv agent prompt gem "fix the failing test in ./ledger"
  git diff | scv agent prompt gem
  scv agent prompt claude - --thoughts < task.md
  scv agent prompt codex "now the docs" --task docs --json | jq -r 'select(.kind=="turn_ended") | .stop_reason'`,
		Args:              rangeArgs(1, "NAME", "TEXT"),
		ValidArgsFunction: c.completeAgents,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || args[1] == "-" {
				c.readingNote("the prompt")
			}
			text, err := promptText(args[1:], c.stdin)
			if err != nil {
				return err
			}
			o.Agent, o.Text, o.set = args[0], text, cmd.Flags().Changed
			if o.set("task") && o.Task == "" {
				return usagef("--task needs a task")
			}
			return o.run()
		},
	}
	cmd.Flags().StringVar(&o.Task, "task", "", "make this turn (and the later ones) a run of the task `T` of the agent's project")
	cmd.Flags().BoolVar(&o.Thoughts, "thoughts", false, "show the agent's thinking too")
	cmd.RegisterFlagCompletionFunc("task", func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, noFiles
		}
		st := c.ask(api.CmdAgentList{})
		if st == nil || st.Agents == nil {
			return nil, noFiles
		}
		for _, a := range *st.Agents {
			if (a.Name == args[0] || a.Handle == args[0]) && a.Project != nil {
				return c.taskIDs(*a.Project), noFiles
			}
		}
		return nil, noFiles
	})
	return cmd
}

// promptText is the prompt: TEXT, or all of standard input when TEXT is
// not given or is -. An empty prompt (only white space) is a usage error.
func promptText(args []string, stdin io.Reader) (string, error) {
	var text string
	if len(args) > 0 && args[0] != "-" {
		text = args[0]
	} else {
		if stdin == nil {
			return "", usagef("the prompt is empty: give TEXT, or the prompt on standard input")
		}
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", fmt.Errorf("read the prompt from standard input: %w", err)
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return "", usagef("the prompt is empty: give TEXT, or the prompt on standard input")
	}
	return text, nil
}

func (o *AgentPromptOptions) run() error {
	req := api.CmdAgentPrompt{Agent: o.Agent, Text: o.Text}
	if o.set("task") {
		req.Task = &o.Task
	}
	raw, err := o.c.raw(req)
	if err != nil {
		return err
	}
	var st api.DaemonStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("decode reply: %w", err)
	}
	if o.c.json {
		if _, err := fmt.Fprintf(o.c.stdout, "%s\n", raw); err != nil {
			return err
		}
	}
	a, err := agentOf(&st)
	if err != nil {
		return err
	}
	if st.AgentUpdates == nil {
		return errors.New("the daemon's reply carries no agent_updates")
	}
	f := &turnFollower{
		c: o.c, name: a.Name, handle: a.Handle, turn: a.Turn, after: st.AgentUpdates.Next,
		out: &turnPrinter{w: o.c.stdout, thoughts: o.Thoughts},
	}
	if f.handle == "" {
		f.handle = o.Agent
	}
	return f.follow()
}

// turnFollower follows one turn of a live agent with agent_updates until
// the turn ends, printing its updates.
type turnFollower struct {
	c      *client
	name   string
	handle string
	turn   uint32
	after  uint64
	out    *turnPrinter

	mu    sync.Mutex
	quiet bool // the follower returned: no more notes
}

// note writes a note on stderr (never under --json), unless the follower
// has returned (a late answer to agent_cancel says nothing).
func (f *turnFollower) note(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.quiet {
		f.c.note(format, a...)
	}
}

// follow polls agent_updates until the turn's turn_ended, and returns
// nil for end_turn, else an error with exit code 1. The first SIGINT
// asks the agent to cancel the turn; the second ends at once (130). A
// daemon that goes away is waited for as control/follow does.
func (f *turnFollower) follow() error {
	defer func() {
		f.mu.Lock()
		f.quiet = true
		f.mu.Unlock()
	}()
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-sigs:
			}
			if n > 1 {
				interrupt()
				return
			}
			go f.cancel()
		}
	}()

	var (
		away    bool // the daemon went away
		suspect bool // the last page said the turn is over, without its end
	)
	err := f.c.follow(ctx, &follow.Follower{
		Answered: true, // agent_prompt
		Request: func() api.Command {
			wait := uint64(api.MaxListWait)
			if suspect || away {
				// A look, without waiting: the end was appended right
				// after the last page was read, or it is lost (a daemon
				// that restarted numbers its updates anew).
				wait = 0
			}
			after := f.after
			return api.CmdAgentUpdates{Agent: f.handle, After: &after, WaitSeconds: &wait}
		},
		Reply: func(st *api.DaemonStatus) (follow.Step, error) {
			page := st.AgentUpdates
			if page == nil {
				return follow.Stop, errors.New("the daemon's reply carries no agent_updates")
			}
			if page.Dropped > 0 {
				f.note("%d updates of agent %s were dropped before they were read (the daemon keeps the newest %d)",
					page.Dropped, f.name, api.MaxAgentUpdates)
			}
			over := page.Turn > f.turn || !page.Working
			for _, u := range page.Updates {
				if u.Turn > f.turn {
					over = true // a later turn: this one's end is not in the log
					break
				}
				if err := f.print(u); err != nil {
					return follow.Stop, err
				}
				if u.Kind == "turn_ended" && u.Turn == f.turn {
					return follow.Stop, turnResult(u)
				}
			}
			f.after = max(f.after, page.Next)
			if over && suspect {
				return follow.Stop, exitError{exitRefused, fmt.Errorf("agent %s: the end of turn %d was not seen (the daemon restarted while it ran)", f.name, f.turn)}
			}
			suspect = over
			return follow.Now, nil
		},
		Away: func(error) { away = true },
		Back: func() {
			away = false
			f.note("the daemon answers again; following turn %d of agent %s", f.turn, f.name)
		},
	}, f.note)
	var ae *api.Error
	switch {
	case ctx.Err() != nil:
		f.endOutput()
		return exitError{code: exitInterrupted}
	case errors.As(err, &ae) && ae.Data.Reason == api.ReasonNotFound:
		f.endOutput()
		return exitError{exitRefused, fmt.Errorf("agent %s ended before turn %d did", f.name, f.turn)}
	case err != nil:
		f.endOutput()
	}
	return err
}

// turnResult is how `agent prompt` ends for the turn's turn_ended.
func turnResult(u api.AgentUpdate) error {
	if u.StopReason == "end_turn" {
		return nil
	}
	return exitError{exitRefused, fmt.Errorf("turn %d ended: %s", u.Turn, dash(u.StopReason))}
}

// print writes one update: a JSON line under --json, else its human form.
func (f *turnFollower) print(u api.AgentUpdate) error {
	if f.c.json {
		b, err := json.Marshal(u)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f.c.stdout, "%s\n", b)
		return err
	}
	return f.out.update(u)
}

// endOutput ends the human output with a newline.
func (f *turnFollower) endOutput() {
	if !f.c.json {
		f.out.finish()
	}
}

// cancel asks the agent to cancel the turn (the first Ctrl-C).
func (f *turnFollower) cancel() {
	if _, err := f.c.do(api.CmdAgentCancel{Agent: f.handle}); err != nil {
		f.note("cancel turn %d of agent %s: %v", f.turn, f.name, err)
		return
	}
	f.note("cancelling turn %d of agent %s (Ctrl-C again to stop following it)", f.turn, f.name)
}

// turnPrinter writes a turn's updates for people, as they arrive: the
// agent's message as it streams, every other step on a line of its own.
type turnPrinter struct {
	w        io.Writer
	thoughts bool // show agent_thought_chunk
	midLine  bool // the last byte written was not '\n'
	thinking bool // the last thing written was a thought
}

// write writes s as it is.
func (t *turnPrinter) write(s string) error {
	if s == "" {
		return nil
	}
	t.midLine = s[len(s)-1] != '\n'
	_, err := io.WriteString(t.w, s)
	return err
}

// finish ends the output with a newline, if it does not end with one.
func (t *turnPrinter) finish() error {
	if t.midLine {
		return t.write("\n")
	}
	return nil
}

// line writes s on a line of its own, after a newline if the output is
// in the middle of one.
func (t *turnPrinter) line(format string, a ...any) error {
	t.thinking = false
	if err := t.finish(); err != nil {
		return err
	}
	return t.write(fmt.Sprintf(format, a...) + "\n")
}

// update writes u.
func (t *turnPrinter) update(u api.AgentUpdate) error {
	one := func(s string) string { return render.Clean(s) }
	switch u.Kind {
	case "agent_message_chunk":
		if t.thinking {
			t.thinking = false
			if err := t.finish(); err != nil {
				return err
			}
		}
		return t.write(u.Text)
	case "agent_thought_chunk":
		if !t.thoughts {
			return nil
		}
		if !t.thinking {
			if err := t.finish(); err != nil {
				return err
			}
			if err := t.write("[thought] "); err != nil {
				return err
			}
			t.thinking = true
		}
		return t.write(u.Text)
	case "turn_started":
		return nil
	case "tool_call":
		if u.Status == "" {
			return t.line("[tool] %s", one(u.Title))
		}
		return t.line("[tool] %s (%s)", one(u.Title), one(u.Status))
	case "tool_call_update":
		if u.Status == "" {
			return nil
		}
		return t.line("[tool] %s %s", one(u.ToolCallID), one(u.Status))
	case "plan":
		if err := t.line("[plan]"); err != nil {
			return err
		}
		if u.Text == "" {
			return nil
		}
		for _, l := range strings.Split(u.Text, "\n") {
			if err := t.line("  %s", one(l)); err != nil {
				return err
			}
		}
		return nil
	case "permission":
		if u.Text == "" {
			return t.line("[permission] %s: %s", one(u.Title), one(u.Status))
		}
		return t.line("[permission] %s: %s (%s)", one(u.Title), one(u.Status), one(u.Text))
	case "file":
		return t.line("[file] %s %s: %s", one(u.Title), one(u.Text), one(u.Status))
	case "terminal":
		return t.line("[terminal] %s: %s", one(u.Text), one(u.Status))
	case "turn_ended":
		run := ""
		if u.Status != "" {
			run = " (run " + one(u.Status) + ")"
		}
		if err := t.line("-- turn %d ended: %s%s", u.Turn, one(dash(u.StopReason)), run); err != nil {
			return err
		}
		if u.Text != "" {
			return t.line("%s", one(u.Text))
		}
		return nil
	case "agent_exited":
		return t.line("[agent exited] %s", one(u.Text))
	}
	if u.Text == "" {
		return t.line("[%s]", one(u.Kind))
	}
	return t.line("[%s] %s", one(u.Kind), one(u.Text))
}
