package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"scv/ledger"
	"slices"
	"strings"
	"syscall"
	"time"

	"scv/control"
	"scv/control/proc"
	"scv/reducer"
)

// callTimeout bounds one client command: dialling, sending and reading the
// reply. The daemon answers in milliseconds; a daemon that does not answer
// within this is stuck, and saying so beats hanging a script forever.
const callTimeout = 30 * time.Second

// client is one client invocation: the global flags and where output goes.
type client struct {
	socket string
	json   bool
	stdout io.Writer
	now    func() time.Time
}

// leaf is one client command, such as `project task add`.
type leaf struct {
	name string   // the words after `scv`
	args []string // positional argument names, in order
	opt  int      // how many more positional arguments may follow args
	use  string   // the usage line after the name, when it says more than args
	// setup declares the command's flags on fs and returns what builds the
	// command from the positional arguments once all flags are parsed. A
	// returned error is a usage error.
	setup func(fs *flag.FlagSet) func(pos []string) (control.Command, error)
	// print writes the human form of the reply.
	print func(w io.Writer, st *control.DaemonStatus, cmd control.Command, now time.Time) error
}

func (l *leaf) usage() string {
	use := l.use
	if use == "" {
		use = strings.Join(l.args, " ")
	}
	return strings.TrimSpace("scv " + l.name + " " + use)
}

// leaves lists every client command, in the order of main.go's usage text.
var leaves = []*leaf{
	{
		name: "status",
		setup: func(*flag.FlagSet) func([]string) (control.Command, error) {
			return func([]string) (control.Command, error) { return control.CmdStatus{}, nil }
		},
		print: func(w io.Writer, st *control.DaemonStatus, _ control.Command, _ time.Time) error {
			return printDaemonStatus(w, st)
		},
	},
	{
		name: "project create", args: []string{"NAME"}, use: "NAME [--workspace DIR]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			ws := fs.String("workspace", "", "the project's workspace `DIR` (default: the current directory)")
			return func(pos []string) (control.Command, error) {
				dir := *ws
				if dir == "" {
					wd, err := os.Getwd()
					if err != nil {
						return nil, fmt.Errorf("--workspace: %w", err)
					}
					dir = wd
				}
				// The daemon runs elsewhere: a relative path means the
				// caller's directory, so resolve it here.
				abs, err := filepath.Abs(dir)
				if err != nil {
					return nil, fmt.Errorf("--workspace: %w", err)
				}
				return control.CmdProjectCreate{Name: pos[0], Workspace: abs}, nil
			}
		},
		print: printProjectBlock,
	},
	{
		name: "project status", args: []string{"PROJECT"}, use: "PROJECT [--at SEQ [--db PATH]]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			return atFlags(fs, func(p string) control.Command { return control.CmdProjectStatus{Project: p} })
		},
		print: printProjectBlock,
	},
	{
		name: "project tasks", args: []string{"PROJECT"}, use: "PROJECT [--at SEQ [--db PATH]]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			return atFlags(fs, func(p string) control.Command { return control.CmdProjectTasks{Project: p} })
		},
		print: printTasksReply,
	},
	{
		name: "project report", args: []string{"PROJECT"}, use: "PROJECT [--at SEQ [--db PATH]]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			return atFlags(fs, func(p string) control.Command { return control.CmdProjectReport{Project: p} })
		},
		print: printReportReply,
	},
	{
		name: "project events", args: []string{"PROJECT"}, use: "PROJECT [--after N] [--follow]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			after := fs.Uint64("after", 0, "list only events after sequence `N`")
			follow := fs.Bool("follow", false, "keep printing new events as they are appended, until interrupted")
			return func(pos []string) (control.Command, error) {
				c := control.CmdProjectEvents{Project: pos[0]}
				if isSet(fs, "after") {
					c.After = after
				}
				if *follow {
					return followEvents{c}, nil
				}
				return c, nil
			}
		},
		print: printEventsReply,
	},
	{
		name: "project task add", args: []string{"PROJECT", "TITLE"},
		use: "PROJECT TITLE [--depends-on ID ...] [--max-retries N]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			var deps listFlag
			fs.Var(&deps, "depends-on", "a task `ID` this task waits for; repeat or separate with commas")
			retries := fs.Uint64("max-retries", 0, "how many failed runs are retried (`N`)")
			return func(pos []string) (control.Command, error) {
				if *retries > math.MaxUint32 {
					return nil, fmt.Errorf("--max-retries %d is too large (at most %d)", *retries, uint64(math.MaxUint32))
				}
				return control.CmdProjectTaskAdd{
					Project: pos[0], Title: pos[1], DependsOn: deps.list(), MaxRetries: uint32(*retries),
				}, nil
			}
		},
		print: func(w io.Writer, st *control.DaemonStatus, _ control.Command, _ time.Time) error {
			r, err := projectOf(st, control.KindTaskAdded)
			if err != nil {
				return err
			}
			return printNewID(w, "task", r.TaskID, "added", r.Project)
		},
	},
	{
		name: "project task update", args: []string{"PROJECT", "TASK", "STATUS"},
		use: "PROJECT TASK STATUS [--progress TEXT]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			progress := fs.String("progress", "", "what was observed (`TEXT`)")
			return func(pos []string) (control.Command, error) {
				var status reducer.TaskStatus
				if err := status.UnmarshalText([]byte(pos[2])); err != nil {
					return nil, fmt.Errorf("STATUS: %w", err)
				}
				c := control.CmdProjectTaskUpdate{Project: pos[0], Task: pos[1], Status: status}
				if isSet(fs, "progress") {
					c.Progress = progress
				}
				return c, nil
			}
		},
		print: printProjectBlock,
	},
	{
		name: "project run start", args: []string{"PROJECT", "TASK"}, use: "PROJECT TASK --agent NAME",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			agent := fs.String("agent", "", "the agent doing the run (`NAME`, required)")
			return func(pos []string) (control.Command, error) {
				if *agent == "" {
					return nil, errors.New("--agent NAME is required")
				}
				return control.CmdProjectRunStart{Project: pos[0], Task: pos[1], Agent: *agent}, nil
			}
		},
		print: func(w io.Writer, st *control.DaemonStatus, _ control.Command, _ time.Time) error {
			r, err := projectOf(st, control.KindRunStarted)
			if err != nil {
				return err
			}
			return printNewID(w, "run", r.RunID, "started", r.Project)
		},
	},
	{
		name: "project run progress", args: []string{"PROJECT", "RUN", "TEXT"},
		setup: func(*flag.FlagSet) func([]string) (control.Command, error) {
			return func(pos []string) (control.Command, error) {
				return control.CmdProjectRunProgress{Project: pos[0], Run: pos[1], Progress: pos[2]}, nil
			}
		},
		print: printProjectBlock,
	},
	{
		name: "project run finish", args: []string{"PROJECT", "RUN", "STATUS"},
		use: "PROJECT RUN succeeded|failed|cancelled",
		setup: func(*flag.FlagSet) func([]string) (control.Command, error) {
			return func(pos []string) (control.Command, error) {
				status, err := finishStatus(pos[2])
				if err != nil {
					return nil, err
				}
				return control.CmdProjectRunFinish{Project: pos[0], Run: pos[1], Status: status}, nil
			}
		},
		print: printProjectBlock,
	},
	{
		name: "project heartbeat", args: []string{"PROJECT"}, use: "PROJECT [--task T] [--run R]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			task := fs.String("task", "", "the `TASK` that is alive")
			run := fs.String("run", "", "the `RUN` that is alive")
			return func(pos []string) (control.Command, error) {
				c := control.CmdProjectHeartbeat{Project: pos[0]}
				if isSet(fs, "task") {
					c.Task = task
				}
				if isSet(fs, "run") {
					c.Run = run
				}
				return c, nil
			}
		},
		print: printProjectBlock,
	},
	{
		name: "restart-when-idle", use: "[--version V] [--commit C] [--max-wait 10m]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			v := fs.String("version", "", "the release installed at the daemon's path (`V`); the daemon checks it")
			commit := fs.String("commit", "", "the commit it was built from (`C`), for the daemon's log")
			wait := fs.Duration("max-wait", 0, "restart after this long even if work still runs (default: the daemon's, 10m)")
			return func([]string) (control.Command, error) {
				c := control.CmdRestartWhenIdle{}
				if *v != "" {
					c.Version = v
				}
				if *commit != "" {
					c.Commit = commit
				}
				// Inside a delegation, the daemon waits for it to end.
				if parent := os.Getenv(proc.ParentEnv); parent != "" {
					c.Parent = &parent
				}
				if isSet(fs, "max-wait") {
					if *wait < 0 {
						return nil, errors.New("--max-wait must not be negative")
					}
					secs := uint64(wait.Round(time.Second) / time.Second)
					c.MaxWaitSeconds = &secs
				}
				return c, nil
			}
		},
		print: func(w io.Writer, st *control.DaemonStatus, _ control.Command, _ time.Time) error {
			return printDaemonStatus(w, st)
		},
	},
	{
		name: "delegations kill", use: "HANDLE | --orphans", opt: 1,
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			orphans := fs.Bool("orphans", false, "stop every orphaned delegation")
			return func(pos []string) (control.Command, error) {
				switch {
				case *orphans && len(pos) == 0:
					return control.CmdDelegationKill{Orphans: true}, nil
				case !*orphans && len(pos) == 1:
					return control.CmdDelegationKill{Handle: &pos[0]}, nil
				}
				return nil, errors.New("give one HANDLE, or --orphans")
			}
		},
		print: printDelegations,
	},
	{
		name: "delegations", use: "[--all]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			all := fs.Bool("all", false, "include orphans awaiting cleanup")
			return func([]string) (control.Command, error) { return control.CmdDelegations{All: *all}, nil }
		},
		print: printDelegations,
	},
}

// finishStatus reads the STATUS of `project run finish`: a RunStatus, and
// one a run can finish with (`running` and `stale` are the daemon's own
// observations, which it refuses from clients).
func finishStatus(s string) (reducer.RunStatus, error) {
	finals := []reducer.RunStatus{reducer.RunSucceeded, reducer.RunFailed, reducer.RunCancelled}
	var status reducer.RunStatus
	if err := status.UnmarshalText([]byte(s)); err != nil {
		return "", fmt.Errorf("STATUS: unknown variant `%s`, expected one of `%s`, `%s`, `%s`", s, finals[0], finals[1], finals[2])
	}
	if !slices.Contains(finals, status) {
		return "", fmt.Errorf("STATUS: a run finishes `%s`, `%s` or `%s`, not `%s`", finals[0], finals[1], finals[2], status)
	}
	return status, nil
}

// runClient runs a client command against the daemon.
func runClient(args []string, stdout, stderr io.Writer) error {
	c := &client{stdout: stdout, now: time.Now}
	global := flag.NewFlagSet("scv", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	c.globalFlags(global)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return err
		}
		return usageError{fmt.Sprintf("%v\nrun `scv help` for usage", err)}
	}
	args = global.Args()
	if len(args) == 0 {
		return usageError{"missing command\nrun `scv help` for usage"}
	}
	switch args[0] {
	case "help":
		usage(stdout)
		return nil
	case "version":
		fmt.Fprintln(stdout, version)
		return nil
	case "daemon":
		return usageError{"the daemon takes its own flags: scv daemon [--db PATH] [--socket PATH]"}
	case "ledger":
		return runLedger(c, args[1:], stdout, stderr)
	case "delegate":
		return c.runDelegate(args[1:], stderr)
	case "chat":
		return c.runChat(args[1:], stdout, stderr)
	}
	if len(args) >= 3 && args[0] == "project" && args[1] == "run" && args[2] == "exec" {
		return c.runExec(args[3:], stdout, stderr)
	}
	l, rest, err := findLeaf(args, stdout)
	if err != nil {
		return err
	}
	cmd, err := c.parse(l, rest)
	if err != nil {
		return err
	}
	return c.call(l, cmd)
}

// globalFlags declares --socket and --json on fs. Every subcommand's flag
// set carries them too, so `scv project tasks P --json` works as well as
// `scv --json project tasks P`.
func (c *client) globalFlags(fs *flag.FlagSet) {
	if fs.Lookup("socket") != nil {
		return
	}
	def := c.socket
	if def == "" {
		def = control.DefaultSocketPath()
	}
	fs.StringVar(&c.socket, "socket", def, "the daemon's control socket `path` (env SCV_SOCKET)")
	fs.BoolVar(&c.json, "json", c.json, "print the daemon's reply as JSON, one line")
}

// findLeaf finds the command whose words begin args. A prefix
// that names a group (`project`, `project task`) but no command is a usage
// error listing the group's commands; `-h` after a group prints them.
func findLeaf(args []string, stdout io.Writer) (*leaf, []string, error) {
	for _, l := range leaves {
		words := strings.Fields(l.name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return l, args[len(words):], nil
		}
	}
	// The longest group prefix the arguments name.
	group := ""
	for n := len(args); n > 0; n-- {
		prefix := strings.Join(args[:n], " ")
		for _, l := range leaves {
			if strings.HasPrefix(l.name, prefix+" ") {
				group = prefix
				break
			}
		}
		if group != "" {
			break
		}
	}
	if group == "" {
		return nil, nil, usageError{fmt.Sprintf("unknown command %q\nrun `scv help` for usage", args[0])}
	}
	var lines []string
	for _, l := range leaves {
		if strings.HasPrefix(l.name, group+" ") {
			lines = append(lines, "  "+l.usage())
		}
	}
	list := strings.Join(lines, "\n")
	n := len(strings.Fields(group))
	if len(args) > n && (args[n] == "-h" || args[n] == "-help" || args[n] == "--help") {
		fmt.Fprintf(stdout, "usage:\n%s\n", list)
		return nil, nil, flag.ErrHelp
	}
	if len(args) == n {
		return nil, nil, usageError{fmt.Sprintf("%s: missing subcommand\nusage:\n%s", group, list)}
	}
	return nil, nil, usageError{fmt.Sprintf("%s: unknown subcommand %q\nusage:\n%s", group, args[n], list)}
}

// parse reads the command line of l and builds its command. Nothing is
// sent: every error here is a usage error.
func (c *client) parse(l *leaf, args []string) (control.Command, error) {
	fs := flag.NewFlagSet("scv "+l.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	build := l.setup(fs)
	c.globalFlags(fs)
	bad := func(format string, a ...any) error {
		return usageError{fmt.Sprintf("%s: %s\nusage: %s", l.name, fmt.Sprintf(format, a...), l.usage())}
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(c.stdout, "usage: %s\n", l.usage())
		fs.SetOutput(c.stdout)
		fs.PrintDefaults()
		return nil, err
	}
	if err != nil {
		return nil, bad("%v", err)
	}
	if len(pos) < len(l.args) {
		return nil, bad("missing %s", strings.Join(l.args[len(pos):], " "))
	}
	if len(pos) > len(l.args)+l.opt {
		return nil, bad("unexpected argument %q", pos[len(l.args)+l.opt])
	}
	cmd, err := build(pos)
	if err != nil {
		return nil, bad("%v", err)
	}
	return cmd, nil
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, which the flag package alone stops at. After `--`
// everything is positional, so a TITLE or TEXT may start with a dash.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// listFlag is a repeatable flag whose values may also be comma-separated:
// `--depends-on A --depends-on B` and `--depends-on A,B` are the same.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

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

// call sends cmd and prints the reply.
func (c *client) call(l *leaf, cmd control.Command) error {
	if f, ok := cmd.(followEvents); ok {
		return c.follow(f.CmdProjectEvents)
	}
	if a, ok := cmd.(atView); ok {
		return c.at(l, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cl, err := control.Dial(ctx, c.socket)
	if err != nil {
		return c.dialError(err)
	}
	defer cl.Close()
	if c.json {
		raw, err := cl.CallRaw(ctx, cmd)
		if err != nil {
			return callError(err)
		}
		_, err = fmt.Fprintf(c.stdout, "%s\n", raw)
		return err
	}
	st, err := cl.Call(ctx, cmd)
	if err != nil {
		return callError(err)
	}
	return l.print(c.stdout, st, cmd, c.now())
}

// dialError says why the daemon could not be reached, with the hint that
// fits the usual cause: no daemon, or a socket file a dead daemon left.
func (c *client) dialError(err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot reach the daemon at %s: is `scv daemon` running?", c.socket)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fmt.Errorf("cannot reach the daemon at %s: %v", c.socket, errno)
	}
	return fmt.Errorf("cannot reach the daemon at %s: %w", c.socket, err)
}

// daemonError is an error the daemon answered with, shown as
// `message [reason]`.
type daemonError struct{ e *control.Error }

func (d daemonError) Error() string { return fmt.Sprintf("%s [%s]", d.e.Message, d.e.Data.Reason) }
func (d daemonError) Unwrap() error { return d.e }

func callError(err error) error {
	var e *control.Error
	if errors.As(err, &e) {
		return daemonError{e}
	}
	return err
}

// followEvents marks `project events --follow`; only its
// CmdProjectEvents goes on the wire.
type followEvents struct{ control.CmdProjectEvents }

// atView marks `project status|tasks|report P --at SEQ`: answered from
// the database file as of sequence SEQ, without the daemon. Command is
// the command it stands for.
type atView struct {
	control.Command
	project string
	seq     uint64
	db      string
}

// atFlags declares --at and --db on fs for a project view whose command
// cmd builds; with --at the view is an atView.
func atFlags(fs *flag.FlagSet, cmd func(project string) control.Command) func([]string) (control.Command, error) {
	at := fs.Uint64("at", 0, "answer as the ledger stood after sequence `SEQ`, from the database file (no daemon needed)")
	db := fs.String("db", defaultDBPath(), "with --at: the ledger database `path` (env SCV_DB)")
	return func(pos []string) (control.Command, error) {
		c := cmd(pos[0])
		if !isSet(fs, "at") {
			if isSet(fs, "db") {
				return nil, errors.New("--db goes with --at SEQ")
			}
			return c, nil
		}
		return atView{Command: c, project: pos[0], seq: *at, db: *db}, nil
	}
}

// at derives the project's state at a.seq from the database file and
// prints the reply the daemon would give for that state. A report's
// generated time is the state's last update, so that it is reproducible.
func (c *client) at(l *leaf, a atView) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	drv, err := openReadOnly(ctx, a.db)
	if err != nil {
		return err
	}
	defer drv.Close()
	p, err := ledger.ProjectAt(ctx, drv, a.project, a.seq)
	if err != nil {
		return err
	}
	r := &control.ProjectResponse{}
	switch a.Command.(type) {
	case control.CmdProjectStatus:
		r.Kind, r.Project = control.KindStatus, control.ProjectSummaryOf(p)
	case control.CmdProjectTasks:
		r.Kind, r.ProjectID, r.Tasks = control.KindTasks, p.ID, control.ProjectTasksOf(p)
	case control.CmdProjectReport:
		r.Kind, r.Report = control.KindReport, control.ProjectReportOf(p, p.Updated)
	default:
		return fmt.Errorf("--at: %s has no view at a sequence", a.Action())
	}
	st := &control.DaemonStatus{Version: version, Components: []control.ComponentHealth{}, Project: r}
	if c.json {
		enc := json.NewEncoder(c.stdout) // one line, like the daemon's reply
		enc.SetEscapeHTML(false)
		return enc.Encode(st)
	}
	return l.print(c.stdout, st, a.Command, c.now())
}

// followEvery is how often --follow asks for new events.
const followEvery = 200 * time.Millisecond

// follow prints a project's events from cmd.After on, one line each, and
// then every event appended after them, until SIGINT or SIGTERM. With
// --json each line is one event as the daemon wrote it.
func (c *client) follow(cmd control.CmdProjectEvents) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cl, err := control.Dial(ctx, c.socket)
	if err != nil {
		return c.dialError(err)
	}
	defer cl.Close()
	after := uint64(0)
	if cmd.After != nil {
		after = *cmd.After
	}
	for {
		cmd.After = &after
		st, err := cl.Call(ctx, cmd)
		if ctx.Err() != nil {
			return nil // interrupted: the normal end of --follow
		}
		if err != nil {
			return callError(err)
		}
		r, err := projectOf(st, control.KindEvents)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetEscapeHTML(false)
		for _, e := range r.Events {
			if c.json {
				if err := enc.Encode(e); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(c.stdout, "%d\t%s\t%s\t%s\n", e.Sequence, localTime(e.TimestampUnixSeconds), clean(e.Kind, 0), compactJSON(e.Data))
			}
			after = e.Sequence
		}
		if len(r.Events) >= ledger.MaxPage {
			continue // a full page: there is more right away
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followEvery):
		}
	}
}
