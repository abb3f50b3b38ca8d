package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/follow"
	"scv/control/render"
)

// The work of a project: the daemon keeps N live agents on its ready
// tasks (control/work, docs/work.md); `scv project work` starts it and
// follows it to its end.

// ProjectWorkOptions is `scv project work`.
type ProjectWorkOptions struct {
	c              *client
	Project        string
	Agents         uint32
	Labels         []string
	MaxTurns       uint64
	PromptTemplate string
	Ask            bool
	AllowTerminal  bool
	Stop, Now      bool
	Status         bool
	Command        []string
	set            func(string) bool
}

func newProjectWorkCmd(c *client) *cobra.Command {
	o := &ProjectWorkOptions{c: c}
	cmd := &cobra.Command{
		Use:   "work PROJECT --agents N [--label L]... [--max-turns M] [--prompt-template FILE] -- CMD [ARGS...]",
		Short: "Keep N live agents working on a project's ready tasks, until the plan is done",
		Long: `Start the work of PROJECT: the daemon starts CMD N times as scv agent start
does (agents PROJECT-1 … PROJECT-N, in the project's workspace) and gives
each idle agent the next ready task (the claim of scv project task next,
of the tasks with every --label) as one turn, whose run is the claimed run.
The prompt of a turn is built from its task by a template (docs/work.md;
--prompt-template FILE replaces it). A turn that ends with end_turn
finishes its run succeeded, unless the agent finished it itself; a
refusal, max_tokens or a crash fails it, and the task's retry budget
applies. A crashed agent is started again, at most 3 times in 10 minutes.

The command follows the work, a line for each turn's start and end (under
--json, each entry of the work's log as a JSON line, then the work), and
prints a summary when it ends: when nothing is ready and nothing runs. It
exits 0 when every task of the project is done, else 1. Ctrl-C stops
following (exit 130); the work goes on in the daemon. --stop makes the work take no
more tasks (--now cancels its running turns); --status shows it.`,
		Example: `  scv project work acme --agents 2 -- gemini --experimental-acp
  scv project work acme --status
  scv project work acme --stop --now`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.set = cmd.Flags().Changed
			if o.Stop || o.Status {
				if cmd.ArgsLenAtDash() >= 0 || len(args) != 1 {
					return usagef("%s --stop or --status: give PROJECT alone", cmd.CommandPath())
				}
				o.Project = args[0]
				if o.Stop && o.Status {
					return usagef("--stop and --status go alone")
				}
				if o.Stop {
					return o.stop()
				}
				return o.status()
			}
			if o.Now {
				return usagef("--now goes with --stop")
			}
			pos, command, err := commandArgs(cmd, args, "PROJECT")
			if err != nil {
				return err
			}
			o.Project, o.Command = pos[0], command
			if !o.set("agents") {
				return usagef("--agents: how many agents work at once (1 to %d)", api.MaxWorkAgents)
			}
			return o.run()
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&o.Agents, "agents", 0, fmt.Sprintf("how many agents work at once, `N` of 1 to %d", api.MaxWorkAgents))
	f.StringArrayVar(&o.Labels, "label", nil, "take only the ready tasks with this `LABEL` (repeat: every one)")
	f.Uint64Var(&o.MaxTurns, "max-turns", 0, "start at most `M` turns in all (default: no bound)")
	f.StringVar(&o.PromptTemplate, "prompt-template", "", "the turns' prompt: a Go text/template in `FILE` (docs/work.md)")
	f.BoolVar(&o.Ask, "ask", false, "send the agents' permission requests to the owner as questions (default: refuse them)")
	f.BoolVar(&o.AllowTerminal, "allow-terminal", false, "let the agents run commands in terminals of their own, in the workspace")
	f.BoolVar(&o.Stop, "stop", false, "make the project's work take no more tasks; it ends when its turns have")
	f.BoolVar(&o.Now, "now", false, "with --stop: cancel the running turns (their runs cancelled)")
	f.BoolVar(&o.Status, "status", false, "show the project's work: its agents, their tasks, its turns")
	cmd.ValidArgsFunction = c.completeProjects
	return cmd
}

func (o *ProjectWorkOptions) run() error {
	path, err := exec.LookPath(o.Command[0])
	if err != nil {
		return exitError{exitNotFound, err}
	}
	if path, err = filepath.Abs(path); err != nil {
		return exitError{exitNotFound, err}
	}
	req := api.CmdProjectWork{Project: o.Project, Agents: o.Agents, Command: append([]string{path}, o.Command[1:]...),
		Env: os.Environ(), Labels: o.Labels, Ask: o.Ask, AllowTerminal: o.AllowTerminal}
	if o.set("max-turns") {
		req.MaxTurns = &o.MaxTurns
	}
	if o.PromptTemplate != "" {
		b, err := os.ReadFile(o.PromptTemplate)
		if err != nil {
			return usagef("--prompt-template: %v", err)
		}
		req.PromptTemplate = string(b)
	}
	st, err := o.c.do(req)
	if err != nil {
		return err
	}
	w, err := workOf(st)
	if err != nil {
		return err
	}
	return o.follow(w)
}

// workOf is the work the reply carries.
func workOf(st *api.DaemonStatus) (api.WorkInfo, error) {
	if st.Work == nil {
		return api.WorkInfo{}, errors.New("the daemon's reply carries no work")
	}
	return *st.Work, nil
}

// follow prints the work's log from w on until the work ends, then its
// summary. Ctrl-C stops following (130); the work goes on.
func (o *ProjectWorkOptions) follow(w api.WorkInfo) error {
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			interrupt()
		case <-ctx.Done():
		}
	}()
	last := w
	print := func(w api.WorkInfo) error {
		for _, e := range w.Log {
			if err := o.entry(e); err != nil {
				return err
			}
		}
		last = w
		return nil
	}
	if err := print(w); err != nil {
		return err
	}
	if w.State != api.WorkEnded {
		pid := uint32(0) // the daemon that answered last
		err := o.c.follow(ctx, &follow.Follower{
			Answered: true,
			Request: func() api.Command {
				after, wait := last.Next, uint64(api.MaxListWait)
				return api.CmdProjectWorkStatus{Project: w.Project, After: &after, WaitSeconds: &wait}
			},
			Reply: func(st *api.DaemonStatus) (follow.Step, error) {
				w, err := workOf(st)
				if err != nil {
					return follow.Stop, err
				}
				restarted := pid != 0 && st.PID != pid
				pid = st.PID
				if restarted || w.Next < last.Next {
					// A restarted daemon resumed the work: its log starts
					// anew (and may be longer already than the last one).
					o.c.note("the daemon restarted; the work goes on, its log anew")
					last.Next = 0
					return follow.Now, nil
				}
				if err := print(w); err != nil {
					return follow.Stop, err
				}
				if w.State == api.WorkEnded {
					return follow.Stop, nil
				}
				return follow.Now, nil
			},
		}, o.c.note)
		if ctx.Err() != nil {
			o.c.note("stopped following; the work goes on in the daemon (scv project work %s --status, --stop)", w.ProjectName)
			return exitError{code: exitInterrupted}
		}
		if err != nil {
			return err
		}
	}
	if o.c.json {
		if err := o.c.printJSON(last); err != nil {
			return err
		}
	} else if err := printWorkSummary(o.c.printer(), last); err != nil {
		return err
	}
	if s := last.Summary; s.TasksFailed > 0 || s.TasksLeft > 0 {
		return exitError{exitRefused, fmt.Errorf("the work of project %s ended with tasks not done: %d failed, %d left", last.ProjectName, s.TasksFailed, s.TasksLeft)}
	}
	return nil
}

// entry prints one entry of the work's log: a JSON line under --json.
func (o *ProjectWorkOptions) entry(e api.WorkEntry) error {
	if o.c.json {
		return o.c.printJSON(e)
	}
	var line string
	who := render.Clean(e.Agent)
	switch e.Kind {
	case "turn_started":
		line = fmt.Sprintf("%s  started %s (run %s)", who, render.Clean(e.TaskTitle), e.Run)
	case "turn_ended":
		line = fmt.Sprintf("%s  ended %s: %s (run %s)", who, render.Clean(e.TaskTitle), dash(e.StopReason), dash(e.Status))
		if e.Status != "succeeded" && e.Text != "" {
			line += ": " + render.Clean(e.Text)
		}
	case "agent_started":
		line = fmt.Sprintf("%s  agent started (%s)", who, render.Clean(e.Text))
	case "agent_crashed":
		line = fmt.Sprintf("%s  agent ended: %s", who, render.Clean(e.Text))
	case "slot_stopped":
		line = fmt.Sprintf("%s  stops: %s", who, render.Clean(e.Text))
	default: // waiting, stopping, ended
		line = fmt.Sprintf("-- %s: %s", e.Kind, render.Clean(e.Text))
	}
	_, err := fmt.Fprintln(o.c.stdout, line)
	return err
}

// printWorkSummary writes the work's summary.
func printWorkSummary(p *printer, w api.WorkInfo) error {
	s := w.Summary
	t := render.Block()
	t.Add("work", fmt.Sprintf("project %s, %s", render.Clean(w.ProjectName), w.State))
	if w.Why != "" {
		t.Add("why", render.Clean(w.Why))
	}
	if w.Waiting != "" {
		t.Add("waiting", render.Clean(w.Waiting))
	}
	t.Add("tasks", fmt.Sprintf("%d done, %d failed, %d left", s.TasksDone, s.TasksFailed, s.TasksLeft))
	t.Add("runs", fmt.Sprintf("%d (turns: %d started, %d succeeded, %d failed, %d cancelled)",
		s.Runs, w.Turns.Started, w.Turns.Succeeded, w.Turns.Failed, w.Turns.Cancelled))
	t.Add("time", span(time.Duration(s.Seconds)*time.Second))
	t.Add("tokens", fmt.Sprint(s.Tokens))
	cost := "-"
	if len(s.Cost) > 0 {
		cost = strings.Join(s.Cost, ", ")
	}
	t.Add("cost", cost)
	return p.table(t)
}

// status prints the project's work: its summary and its agents.
func (o *ProjectWorkOptions) status() error {
	_, err := o.c.call(api.CmdProjectWorkStatus{Project: o.Project}, func(p *printer, st *api.DaemonStatus) error {
		w, err := workOf(st)
		if err != nil {
			return err
		}
		if err := printWorkSummary(p, w); err != nil {
			return err
		}
		fmt.Fprintln(p.w)
		t := render.NewTable("AGENT", "STATE", "TASK", "RUN", "TURNS", "STARTS", "~WHY")
		for _, s := range w.Slots {
			t.Add(s.Agent, s.State, orDash(s.Task), orDash(s.Run), fmt.Sprint(s.Turns), fmt.Sprint(s.Starts), dash(s.Why))
		}
		return p.table(t)
	})
	return err
}

// stop makes the work take no more tasks.
func (o *ProjectWorkOptions) stop() error {
	_, err := o.c.call(api.CmdProjectWorkStop{Project: o.Project, Now: o.Now}, func(p *printer, st *api.DaemonStatus) error {
		w, err := workOf(st)
		if err != nil {
			return err
		}
		how := "its running turns end"
		if o.Now {
			how = "its running turns are cancelled"
		}
		_, err = fmt.Fprintf(p.w, "the work of project %s takes no more tasks; it ends when %s\n", render.Clean(w.ProjectName), how)
		return err
	})
	return err
}
