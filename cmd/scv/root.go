package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"scv/control/daemon"
	"scv/control/rpc"
)

// Command groups of `scv --help`.
const (
	groupProjects = "projects"
	groupAgents   = "agents"
	groupOwner    = "owner"
	groupLedger   = "ledger"
	groupDaemon   = "daemon"
)

// newRootCmd builds the command tree, with runDaemon as what `scv daemon`
// runs once its flags are read. Each command is built by a newXxxCmd
// function next to its Options struct and its run function, one file per
// noun of the tree (project, task, run, agent, delegations, confirm,
// channel, ledger, daemon, mcp), the way gh lays out its commands.
func newRootCmd(c *client, runDaemon func(daemon.Config) error) *cobra.Command {
	root := &cobra.Command{
		Use:   "scv",
		Short: "scv: the event-sourced project ledger daemon and its client",
		Long: `scv runs the project ledger daemon (scv daemon) and talks to it: projects,
their tasks and runs, delegations, the owner's questions, and the ledger's
own tools. Client commands reach the daemon on its socket (--socket, or
$SCV_SOCKET); the ledger tools read the database file itself.

Every command answers --help, takes --json to print JSON for scripts
(errors then come as one JSON object on stderr), and exits with one of
the codes below. Completion: scv completion bash|zsh|fish --help.

Exit codes:
  0  done (a question: answered yes)
  1  refused by the daemon or the ledger file, or failed (a question: answered no)
  2  usage error: the command line was not understood, nothing was sent
  3  the daemon is unreachable or unavailable (not running, stopping, restarting)
  4  ledger verify found problems
  5  a question expired; 6 it failed; 7 it was withdrawn; 8 it is still pending`,
		Example: `  scv daemon                              # in one terminal
  scv project create acme                 # in another, in the project's folder
  scv project task add acme build --max-retries 1
  scv project tasks acme
  scv --json project status acme | jq .project.project.status`,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRun,
		Annotations:   map[string]string{groupAnnotation: "yes"},
	}
	root.SetUsageTemplate(usageTemplate)
	root.SetVersionTemplate("{{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&c.socket, "socket", rpc.DefaultSocketPath(), "the daemon's control socket `PATH` (env SCV_SOCKET)")
	pf.BoolVar(&c.json, "json", false, "print JSON for scripts (the daemon's reply as it came); errors as one JSON object on stderr")
	root.AddGroup(
		&cobra.Group{ID: groupProjects, Title: "Projects, tasks and runs:"},
		&cobra.Group{ID: groupAgents, Title: "Agents and delegations:"},
		&cobra.Group{ID: groupOwner, Title: "The owner's chat and questions:"},
		&cobra.Group{ID: groupLedger, Title: "The ledger file:"},
		&cobra.Group{ID: groupDaemon, Title: "The daemon:"},
	)
	root.SetHelpCommandGroupID(groupDaemon)
	root.SetCompletionCommandGroupID(groupDaemon)
	add := func(group string, cmds ...*cobra.Command) {
		for _, cmd := range cmds {
			cmd.GroupID = group
			root.AddCommand(cmd)
		}
	}
	add(groupProjects, newProjectCmd(c))
	add(groupAgents, newDelegateCmd(c), newDelegationsCmd(c), newAgentCmd(c), newMCPCmd(c))
	add(groupOwner, newChatCmd(c), newConfirmCmd(c), newChannelsCmd(c), newChannelCmd(c))
	add(groupLedger, newLedgerCmd(c))
	add(groupDaemon, newDaemonCmd(c, runDaemon), newStatusCmd(c), newUICmd(c), newReloadCmd(c), newRestartWhenIdleCmd(c), newVersionCmd(c))
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{flagMessage(err)}
	})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		// cobra's completion command prints its help for an unknown
		// shell; here that is a usage error, as for every group.
		comp.Args, comp.RunE = cobra.ArbitraryArgs, groupRun
		comp.Annotations = map[string]string{groupAnnotation: "yes"}
		comp.Example = `  source <(scv completion bash)
  scv completion zsh > "${fpath[1]}/_scv"
  scv completion fish > ~/.config/fish/completions/scv.fish`
	}
	return root
}

// groupRun is the RunE of a command that only groups others: with no
// command it is a usage error naming them, and so is an unknown one,
// with the names it was probably meant to be.
func groupRun(cmd *cobra.Command, args []string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if len(args) == 0 {
		if !cmd.HasParent() {
			return usagef("missing the command; one of: %s", strings.Join(names, ", "))
		}
		return usagef("%s: missing the command; one of: %s", cmd.CommandPath(), strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	} else {
		msg += "; one of: " + strings.Join(names, ", ")
	}
	return usageError{msg}
}

// flagMessage says what was wrong with a flag's value, in scv's words:
// `--after "x": want a whole number, 0 or more`. Other flag errors
// (unknown flags, a missing value) are pflag's.
func flagMessage(err error) string {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return err.Error()
	}
	name, v, cause := "--"+bad.GetFlag().Name, bad.GetValue(), bad.Unwrap()
	typ := bad.GetFlag().Value.Type()
	bits := map[string]int{"int": strconv.IntSize, "int8": 8, "int16": 16, "int32": 32, "int64": 64,
		"uint": strconv.IntSize, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}[typ]
	unsigned := strings.HasPrefix(typ, "uint")
	tooLarge := errors.Is(cause, strconv.ErrRange)
	why := cause.Error()
	switch _, durErr := time.ParseDuration(v); {
	case bits > 0 && unsigned && tooLarge:
		why = fmt.Sprintf("want a whole number from 0 to %d", uint64(math.MaxUint64)>>(64-bits))
	case bits > 0 && unsigned:
		why = "want a whole number, 0 or more"
	case bits > 0 && tooLarge:
		why = fmt.Sprintf("want a whole number from %d to %d", int64(-1)<<(bits-1), int64(math.MaxInt64)>>(64-bits))
	case bits > 0:
		why = "want a whole number"
	case typ == "duration" && durErr != nil:
		why = "want a duration such as 90s, 10m or 1h30m"
	case typ == "bool":
		why = "want true or false"
	}
	return fmt.Sprintf("%s %q: %s", name, v, why)
}

// withExample sets cmd's examples.
func withExample(example string, cmd *cobra.Command) *cobra.Command {
	cmd.Example = example
	return cmd
}

// groupAnnotation marks a command that only groups others.
const groupAnnotation = "group"

// group is a command that only groups others.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs, RunE: groupRun,
		Annotations: map[string]string{groupAnnotation: "yes"}}
	g.AddCommand(subs...)
	return g
}

// execute runs the command line and returns the exit code: help on
// stdout and 0; a usage error on stderr and 2; any other error on stderr
// (one JSON object under --json) and its code.
func (c *client) execute(args []string) int {
	root := newRootCmd(c, c.runDaemon)
	root.SetArgs(args)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetIn(c.stdin)
	entered := false
	walk(root, func(cmd *cobra.Command) {
		if run := cmd.RunE; run != nil && cmd.Name() != "__complete" {
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				entered = true
				return run(cmd, args)
			}
		}
	})
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	if !entered {
		// cobra's own checks (arguments, flags, flag groups) come
		// before a command runs: the command line was not understood.
		if _, ok := err.(usageError); !ok {
			err = usageError{err.Error()}
		}
	}
	if u, ok := err.(usageError); ok {
		// `scv project create: missing NAME` would be printed after
		// `scv: `: the path names its command without scv.
		err = usageError{strings.TrimPrefix(u.msg, root.Name()+" ")}
	}
	asJSON := c.json || slices.Contains(args, "--json")
	hint := ""
	if cmd != nil {
		hint = fmt.Sprintf("Run '%s --help' for usage.", cmd.CommandPath())
	}
	return report(c.stderr, err, asJSON, hint)
}

// walk calls f on cmd and every command under it.
func walk(cmd *cobra.Command, f func(*cobra.Command)) {
	f(cmd)
	for _, sub := range cmd.Commands() {
		walk(sub, f)
	}
}

// exactArgs accepts exactly the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return rangeArgs(len(names), names...)
}

// rangeArgs accepts the first min named arguments and up to the rest.
func rangeArgs(min int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min {
			return usagef("%s: missing %s", cmd.CommandPath(), strings.Join(names[len(args):min], " "))
		}
		if len(args) > len(names) {
			return usagef("%s: unexpected argument %q", cmd.CommandPath(), args[len(names)])
		}
		return nil
	}
}

// usageTemplate is cobra's, except that a command that only groups others
// shows `COMMAND` as what it takes, not a run of its own.
const usageTemplate = `Usage:{{if not (index .Annotations "group")}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} COMMAND ...{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if not .AllChildCommandsHaveGroup}}

Additional Commands:{{range $cmds}}{{if (and (eq .GroupID "") (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} COMMAND --help" for more about a command.{{end}}
`
