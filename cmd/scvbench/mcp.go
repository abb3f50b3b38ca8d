package main

import (
	"context"
	"fmt"
	"os"
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
	// SocketCPU and MCPCPU are the CPU time of one call each way, by
	// process.
	SocketCPU CallCPU `json:"socket_cpu_us_per_call"`
	MCPCPU    CallCPU `json:"mcp_cpu_us_per_call"`
	// ServerVmHWMKiB is `scv mcp`'s peak memory after the calls.
	ServerVmHWMKiB int64 `json:"scv_mcp_vmhwm_kib"`
}

// CallCPU is the CPU time (µs) one call costs each process it crosses:
// the harness's (the client), `scv mcp`'s (none on the socket) and the
// daemon's.
type CallCPU struct {
	Client float64 `json:"client"`
	Server float64 `json:"scv_mcp"`
	Daemon float64 `json:"daemon"`
}

// callCPU adds up the CPU seconds of the processes a call crosses.
type callCPU struct {
	pids  []int // client, scv mcp, daemon
	secs  [3]float64
	calls int
}

// measure runs f, which makes n calls, and adds the CPU it took.
func (c *callCPU) measure(n int, f func(int) error) error {
	var before [3]float64
	for i, pid := range c.pids {
		var err error
		if before[i], err = cpuSeconds([]int{pid}); err != nil {
			return err
		}
	}
	if err := f(n); err != nil {
		return err
	}
	for i, pid := range c.pids {
		after, err := cpuSeconds([]int{pid})
		if err != nil {
			return err
		}
		c.secs[i] += after - before[i]
	}
	c.calls += n
	return nil
}

// perCall is the CPU of one call, in µs.
func (c *callCPU) perCall() CallCPU {
	if c.calls == 0 {
		return CallCPU{}
	}
	us := func(s float64) float64 { return s * 1e6 / float64(c.calls) }
	return CallCPU{Client: us(c.secs[0]), Server: us(c.secs[1]), Daemon: us(c.secs[2])}
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
	pids := []int{os.Getpid(), cmd.Process.Pid, d.Cmd.Process.Pid}
	sockCPU, mcpCPU := &callCPU{pids: pids}, &callCPU{pids: pids}
	half := cfg.MCPCalls / 2
	for _, step := range []struct {
		cpu *callCPU
		f   func(int) error
	}{{sockCPU, bySocket}, {mcpCPU, byMCP}, {mcpCPU, byMCP}, {sockCPU, bySocket}} {
		if err := step.cpu.measure(half, step.f); err != nil {
			return res, err
		}
	}
	res.Socket, res.MCP = latencyOf(socket), latencyOf(viaMCP)
	res.SocketCPU, res.MCPCPU = sockCPU.perCall(), mcpCPU.perCall()
	if res.ServerVmHWMKiB, err = vmHWM(cmd.Process.Pid); err != nil {
		return res, err
	}
	if res.Socket.P50us > 0 && res.Socket.P99us > 0 {
		res.P50Ratio, res.P99Ratio = res.MCP.P50us/res.Socket.P50us, res.MCP.P99us/res.Socket.P99us
	}
	logf("  run_progress: socket p50 %.0f µs, p99 %.0f µs; MCP p50 %.0f µs, p99 %.0f µs (%d calls each)",
		res.Socket.P50us, res.Socket.P99us, res.MCP.P50us, res.MCP.P99us, len(socket))
	logf("  CPU per call (client, scv mcp, daemon): socket %.0f, -, %.0f µs; MCP %.0f, %.0f, %.0f µs; scv mcp peak RSS %.1f MiB",
		res.SocketCPU.Client, res.SocketCPU.Daemon, res.MCPCPU.Client, res.MCPCPU.Server, res.MCPCPU.Daemon, float64(res.ServerVmHWMKiB)/1024)
	return res, nil
}
