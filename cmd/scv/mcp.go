package main

import (
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"scv/control/mcp"
	"scv/control/proc"
	"scv/control/rpc"
)

// MCPOptions is `scv mcp`: the MCP server of control/mcp (docs/mcp.md) on
// standard input and output, its tools reaching the daemon on its socket.
type MCPOptions struct {
	c        *client
	Project  string
	ReadOnly bool
	Run      string
}

// mcpGCPercent is scv mcp's GOGC when the environment sets none. The MCP
// SDK allocates a 32 KiB buffer for each JSON value it decodes, about
// four for a tool call, on a live heap of about 2 MiB: at Go's default
// of 100 the collector ran every few calls and cost more CPU than the
// call (docs/performance.md, MCP: a third more, measured again with
// scv mcp's own transport). At 400 it runs a quarter as often, for about
// 11 MiB more of peak memory.
const mcpGCPercent = 400

func newMCPCmd(c *client) *cobra.Command {
	o := &MCPOptions{c: c}
	cmd := &cobra.Command{
		Use:   "mcp [--project P] [--read-only] [--run RUN]",
		Short: "Serve the ledger as MCP tools on standard input and output, for an agent",
		Long: `Serve the project ledger to an agent as a Model Context Protocol server on
standard input and output, the way agents start their tools: tools that
read projects, claim a task's run and report on it, add tasks, and ask
the owner; and each project's report and task graph as resources. Every
tool is a request to the running daemon on its socket, so every rule of
the daemon holds for it. --project confines the session to one project,
--read-only offers only the reading tools, and --run binds it to one run
of that project, so that an agent reports on its own work only. When
standard input ends, every request read is answered, and scv mcp exits 0.

Configure an agent with {"command": "scv", "args": ["mcp", "--project", "P"]}
(docs/mcp.md has the snippet for each agent, and a worked session).`,
		Example: `  scv mcp --project acme
  scv mcp --project acme --run $SCV_RUN
  scv mcp --read-only`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Run != "" && o.Project == "" {
				return usagef("--run needs --project: the project of the run")
			}
			if _, set := os.LookupEnv("GOGC"); !set {
				debug.SetGCPercent(mcpGCPercent)
			}
			// One connection for the session's calls, dialled again
			// after one is lost.
			daemon := &rpc.Remote{Socket: o.c.socket, Keep: true}
			defer daemon.Close()
			opts := mcp.Options{Project: o.Project, ReadOnly: o.ReadOnly, Run: o.Run, Version: version}
			if os.Getenv(proc.TagEnv) != "" { // inside a delegation
				opts.Parent = os.Getenv(proc.ParentEnv)
			}
			return mcp.Run(cmd.Context(), daemon, opts, o.c.stdin, o.c.stdout, o.c.stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Project, "project", "", "confine every tool to this project `P` (ID or name)")
	f.BoolVar(&o.ReadOnly, "read-only", false, "offer only the tools that read")
	f.StringVar(&o.Run, "run", "", "bind the session to this `RUN` of --project: its tools report on it only")
	cmd.RegisterFlagCompletionFunc("project", c.completeProjects)
	return cmd
}
