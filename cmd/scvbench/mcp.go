package main

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/control/api"
)

// MCPResult is run_progress through `scv mcp` (an MCP client's tool call,
// on the server's standard input and output, which sends it to the daemon
// on its socket) against the same request sent on the socket by a client
// of the daemon's own, one after the other, into one run.
type MCPResult struct {
	Calls  int     `json:"calls"`
	Socket Latency `json:"socket"`
	MCP    Latency `json:"mcp"`
	// P50Ratio and P99Ratio are MCP's over the socket's.
	P50Ratio float64 `json:"p50_ratio"`
	P99Ratio float64 `json:"p99_ratio"`
}

// mcpLatency measures cfg.MCPCalls run_progress calls each way, the socket
// first and MCP after, then both again, pooled: into one run of a
// project, every one coalesced as the MCP tool's are (the daemon's
// default interval).
func mcpLatency(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (MCPResult, error) {
	res := MCPResult{Calls: cfg.MCPCalls}
	d, c, err := startDialled(ctx, bin, dir, "mcp")
	if err != nil {
		return res, err
	}
	defer d.Kill()
	defer c.Close()
	if _, err := c.Call(ctx, api.CmdProjectCreate{Name: "mcp", Workspace: dir}); err != nil {
		return res, err
	}
	st, err := c.Call(ctx, api.CmdProjectTaskAdd{Project: "mcp", Title: "work", DependsOn: []string{}})
	if err != nil {
		return res, err
	}
	st, err = c.Call(ctx, api.CmdProjectRunStart{Project: "mcp", Task: st.Project.TaskID, Agent: "bench"})
	if err != nil {
		return res, err
	}
	run := st.Project.RunID

	cmd := exec.CommandContext(ctx, bin, "--socket", d.Sock, "mcp", "--project", "mcp", "--run", run)
	s, err := mcp.NewClient(&mcp.Implementation{Name: "scvbench", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return res, fmt.Errorf("start scv mcp: %w", err)
	}
	defer s.Close()

	var socket, viaMCP []time.Duration
	bySocket := func(n int) error {
		for i := range n {
			t := time.Now()
			if _, err := c.Call(ctx, api.CmdProjectRunProgress{Project: "mcp", Run: run, Progress: fmt.Sprintf("socket %d", i), Coalesce: true}); err != nil {
				return err
			}
			socket = append(socket, time.Since(t))
		}
		return nil
	}
	byMCP := func(n int) error {
		for i := range n {
			t := time.Now()
			r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "run_progress", Arguments: map[string]any{"progress": fmt.Sprintf("mcp %d", i)}})
			if err != nil {
				return err
			}
			if r.IsError {
				return fmt.Errorf("run_progress refused: %v", r.Content)
			}
			viaMCP = append(viaMCP, time.Since(t))
		}
		return nil
	}
	half := cfg.MCPCalls / 2
	for _, f := range []func(int) error{bySocket, byMCP, byMCP, bySocket} {
		if err := f(half); err != nil {
			return res, err
		}
	}
	res.Socket, res.MCP = latencyOf(socket), latencyOf(viaMCP)
	if res.Socket.P50us > 0 && res.Socket.P99us > 0 {
		res.P50Ratio, res.P99Ratio = res.MCP.P50us/res.Socket.P50us, res.MCP.P99us/res.Socket.P99us
	}
	logf("  run_progress: socket p50 %.0f µs, p99 %.0f µs; MCP p50 %.0f µs, p99 %.0f µs (%d calls each)",
		res.Socket.P50us, res.Socket.P99us, res.MCP.P50us, res.MCP.P99us, len(socket))
	return res, nil
}
