package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/render"
)

// Shell completion (scv completion bash|zsh|fish) completes commands and
// flags, and asks the daemon for the names it knows: projects, tasks
// (their IDs, with the titles as descriptions), runs, chats, questions
// and delegations. A daemon that does not answer within completeTimeout
// gives no completions, silently.

// completeTimeout bounds what completion waits for the daemon.
const completeTimeout = time.Second

type completion = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective)

const noFiles = cobra.ShellCompDirectiveNoFileComp

// words completes a flag's fixed values.
func words(ws ...string) completion {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return ws, noFiles
	}
}

// ask sends cmd to the daemon for completion; nil when it does not answer.
func (c *client) ask(cmd api.Command) *api.DaemonStatus {
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	st, err := c.remote().Handle(ctx, cmd)
	if err != nil {
		return nil
	}
	return st
}

// projectNames are the projects' names, from the daemon's project_list.
func (c *client) projectNames() []cobra.Completion {
	st := c.ask(api.CmdProjectList{})
	if st == nil || st.Projects == nil {
		return nil
	}
	var out []cobra.Completion
	for _, p := range *st.Projects {
		out = append(out, cobra.CompletionWithDesc(p.Name, string(p.Status)))
	}
	return out
}

// completeProjects completes a command's first argument, PROJECT.
func (c *client) completeProjects(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}
	return c.projectNames(), noFiles
}

// taskIDs are the tasks of project, their titles as descriptions.
func (c *client) taskIDs(project string) []cobra.Completion {
	st := c.ask(api.CmdProjectTasks{Project: project})
	if st == nil || st.Project == nil {
		return nil
	}
	var out []cobra.Completion
	for _, t := range st.Project.Tasks {
		out = append(out, cobra.CompletionWithDesc(t.ID, fmt.Sprintf("%s (%s)", render.Cut(render.Clean(t.Title), 60), t.Status)))
	}
	return out
}

// runIDs are the runs of project, running ones first.
func (c *client) runIDs(project string) []cobra.Completion {
	st := c.ask(api.CmdProjectReport{Project: project})
	if st == nil || st.Project == nil || st.Project.Report == nil {
		return nil
	}
	titles := map[string]string{}
	for _, t := range st.Project.Report.Tasks {
		titles[t.ID] = t.Title
	}
	var running, rest []cobra.Completion
	for _, r := range st.Project.Report.Runs {
		c := cobra.CompletionWithDesc(r.ID, fmt.Sprintf("%s, %s (%s)", render.Cut(render.Clean(titles[r.TaskID]), 60), r.Agent, r.Status))
		if r.Status == "running" {
			running = append(running, c)
		} else {
			rest = append(rest, c)
		}
	}
	return append(running, rest...)
}

// completeProjectTask completes PROJECT TASK, then the words.
func (c *client) completeProjectTask(ws ...string) completion {
	return c.completeProjectThen(c.taskIDs, ws)
}

// completeProjectRun completes PROJECT RUN, then the words.
func (c *client) completeProjectRun(ws ...string) completion {
	return c.completeProjectThen(c.runIDs, ws)
}

// completeProjectThen completes PROJECT, then what second lists in that
// project, then the words.
func (c *client) completeProjectThen(second func(project string) []cobra.Completion, ws []string) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return c.projectNames(), noFiles
		case 1:
			return second(args[0]), noFiles
		case 2:
			return ws, noFiles
		}
		return nil, noFiles
	}
}

// completeTaskFlag completes a flag naming a task of the PROJECT given.
func (c *client) completeTaskFlag(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, noFiles
	}
	ids := c.taskIDs(args[0])
	if prefix, _, ok := cutLast(toComplete, ","); ok {
		// --depends-on A,B,<tab>
		for i := range ids {
			ids[i] = prefix + "," + ids[i]
		}
	}
	return ids, noFiles
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", s, false
	}
	return s[:i], s[i+len(sep):], true
}

// completeRunFlag completes a flag naming a run of the PROJECT given.
func (c *client) completeRunFlag(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, noFiles
	}
	return c.runIDs(args[0]), noFiles
}

// completeChats completes CHANNEL:ACCOUNT with the daemon's accounts.
func (c *client) completeChats(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}
	out := []cobra.Completion{DefaultChat}
	if st := c.ask(api.CmdStatus{}); st != nil {
		for _, comp := range st.Components {
			if comp.ID != DefaultChat {
				out = append(out, cobra.CompletionWithDesc(comp.ID, string(comp.State)))
			}
		}
	}
	return out, noFiles
}

// questionIDs are the pending questions, their text as descriptions.
func (c *client) questionIDs() []cobra.Completion {
	st := c.ask(api.CmdConfirmList{})
	if st == nil {
		return nil
	}
	var out []cobra.Completion
	for _, q := range pendingOf(st.Questions) {
		out = append(out, cobra.CompletionWithDesc(q.ID, render.Cut(render.Clean(q.Question), 60)))
	}
	return out
}

func (c *client) completeQuestions(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}
	return c.questionIDs(), noFiles
}

func (c *client) completeQuestionAnswer(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return c.questionIDs(), noFiles
	case 1:
		return []cobra.Completion{"yes", "no"}, noFiles
	}
	return nil, noFiles
}

// completeHandles completes a delegation's HANDLE.
func (c *client) completeHandles(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}
	st := c.ask(api.CmdDelegations{All: true})
	if st == nil {
		return nil, noFiles
	}
	var out []cobra.Completion
	for _, e := range st.Delegations.Entries {
		out = append(out, cobra.CompletionWithDesc(e.Handle, fmt.Sprintf("%s, pid %d", render.Cut(render.Clean(e.Agent), 40), e.PID)))
	}
	return out, noFiles
}

// completeAgents completes a live agent's NAME, its state and turn as
// the description.
func (c *client) completeAgents(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}
	st := c.ask(api.CmdAgentList{})
	if st == nil || st.Agents == nil {
		return nil, noFiles
	}
	var out []cobra.Completion
	for _, a := range *st.Agents {
		out = append(out, cobra.CompletionWithDesc(a.Name, fmt.Sprintf("%s, turn %d", a.State, a.Turn)))
	}
	return out, noFiles
}
