package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/control/api"
)

// MCPResult is run_progress through `scv mcp` (an MCP client's tool call,
// on the server's standard input and output, which sends it to the daemon
// on its socket) against the same request sent on the socket by a client
// of the daemon's own, one after the other, into one run. Two MCP clients
// make the calls, each to an `scv mcp` of its own: the Go MCP SDK's
// client (MCP), and a client that writes each request as one line and
// reads the one line of its answer (Line), which costs its process about
// what the socket's client does, so that what the figure has beyond the
// socket's is `scv mcp`'s.
type MCPResult struct {
	Calls  int     `json:"calls"`
	Socket Latency `json:"socket"`
	MCP    Latency `json:"mcp"`
	Line   Latency `json:"line"`
	// P50Ratio and P99Ratio are MCP's over the socket's, LineP50Ratio
	// and LineP99Ratio Line's (the targets).
	P50Ratio     float64 `json:"p50_ratio"`
	P99Ratio     float64 `json:"p99_ratio"`
	LineP50Ratio float64 `json:"line_p50_ratio"`
	LineP99Ratio float64 `json:"line_p99_ratio"`
	// SocketCPU, MCPCPU and LineCPU are the CPU time of one call each
	// way, by process.
	SocketCPU CallCPU `json:"socket_cpu_us_per_call"`
	MCPCPU    CallCPU `json:"mcp_cpu_us_per_call"`
	LineCPU   CallCPU `json:"line_cpu_us_per_call"`
	// ServerVmHWMKiB is the peak memory of the SDK client's `scv mcp`
	// after the calls.
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
	pids  [3]int // client, scv mcp (0: none), daemon
	secs  [3]float64
	calls int
}

// measure runs f, which makes n calls, and adds the CPU it took.
func (c *callCPU) measure(n int, f func(int) error) error {
	read := func() (s [3]float64, err error) {
		for i, pid := range c.pids {
			if pid == 0 {
				continue
			}
			if s[i], err = cpuSeconds([]int{pid}); err != nil {
				return s, err
			}
		}
		return s, nil
	}
	before, err := read()
	if err != nil {
		return err
	}
	if err := f(n); err != nil {
		return err
	}
	after, err := read()
	if err != nil {
		return err
	}
	for i := range c.secs {
		c.secs[i] += after[i] - before[i]
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

// mcpLatency measures cfg.MCPCalls run_progress calls each way, in halves
// in the order socket, line client, SDK client, SDK client, line client,
// socket, pooled: into one run of a project, every one coalesced as the
// MCP tool's are (the daemon's default interval).
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
	serve := func() *exec.Cmd {
		return exec.CommandContext(ctx, bin, "--socket", d.Sock, "mcp", "--project", "mcp", "--run", run)
	}

	cmd := serve()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "scvbench", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return res, fmt.Errorf("start scv mcp: %w", err)
	}
	defer s.Close()
	lc, err := startLineClient(ctx, serve())
	if err != nil {
		return res, fmt.Errorf("start scv mcp for the line client: %w", err)
	}
	defer lc.close()

	var socket, viaMCP, viaLine []time.Duration
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
	byLine := func(n int) error {
		for i := range n {
			t := time.Now()
			if err := lc.progress(i); err != nil {
				return err
			}
			viaLine = append(viaLine, time.Since(t))
		}
		return nil
	}
	self, daemon := os.Getpid(), d.Cmd.Process.Pid
	sockCPU := &callCPU{pids: [3]int{self, 0, daemon}}
	mcpCPU := &callCPU{pids: [3]int{self, cmd.Process.Pid, daemon}}
	lineCPU := &callCPU{pids: [3]int{self, lc.cmd.Process.Pid, daemon}}
	half := cfg.MCPCalls / 2
	for _, step := range []struct {
		cpu *callCPU
		f   func(int) error
	}{{sockCPU, bySocket}, {lineCPU, byLine}, {mcpCPU, byMCP}, {mcpCPU, byMCP}, {lineCPU, byLine}, {sockCPU, bySocket}} {
		if err := step.cpu.measure(half, step.f); err != nil {
			return res, err
		}
	}
	res.Socket, res.MCP, res.Line = latencyOf(socket), latencyOf(viaMCP), latencyOf(viaLine)
	res.SocketCPU, res.MCPCPU, res.LineCPU = sockCPU.perCall(), mcpCPU.perCall(), lineCPU.perCall()
	if res.ServerVmHWMKiB, err = vmHWM(cmd.Process.Pid); err != nil {
		return res, err
	}
	if res.Socket.P50us > 0 && res.Socket.P99us > 0 {
		res.P50Ratio, res.P99Ratio = res.MCP.P50us/res.Socket.P50us, res.MCP.P99us/res.Socket.P99us
		res.LineP50Ratio, res.LineP99Ratio = res.Line.P50us/res.Socket.P50us, res.Line.P99us/res.Socket.P99us
	}
	logf("  run_progress (%d calls each): socket p50 %.0f µs, p99 %.0f µs; MCP, line client p50 %.0f µs, p99 %.0f µs; MCP, SDK client p50 %.0f µs, p99 %.0f µs",
		len(socket), res.Socket.P50us, res.Socket.P99us, res.Line.P50us, res.Line.P99us, res.MCP.P50us, res.MCP.P99us)
	logf("  CPU per call (client, scv mcp, daemon): socket %.0f, -, %.0f µs; line client %.0f, %.0f, %.0f µs; SDK client %.0f, %.0f, %.0f µs; scv mcp peak RSS %.1f MiB",
		res.SocketCPU.Client, res.SocketCPU.Daemon, res.LineCPU.Client, res.LineCPU.Server, res.LineCPU.Daemon,
		res.MCPCPU.Client, res.MCPCPU.Server, res.MCPCPU.Daemon, float64(res.ServerVmHWMKiB)/1024)
	return res, nil
}

// lineClient is an MCP client that does the least a client can: it
// writes each request as one line on `scv mcp`'s standard input and
// reads lines from its output until the answer to it, which it decodes
// only as far as to know that it is one, and not an error.
type lineClient struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	id   int
	line []byte
}

// startLineClient starts cmd, an `scv mcp`, and opens its session.
func startLineClient(ctx context.Context, cmd *exec.Cmd) (*lineClient, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l := &lineClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	if _, err := l.call(`"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"scvbench-line","version":"1"}}`); err != nil {
		l.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// progress calls run_progress, its progress "line i".
func (l *lineClient) progress(i int) error {
	res, err := l.call(`"tools/call","params":{"name":"run_progress","arguments":{"progress":"line ` + strconv.Itoa(i) + `"}}`)
	if err != nil {
		return err
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.IsError {
		return fmt.Errorf("run_progress refused: %.300s", res)
	}
	return nil
}

// call sends the request whose method and what follows it are rest, and
// returns the result of its answer.
func (l *lineClient) call(rest string) (json.RawMessage, error) {
	l.id++
	l.line = append(l.line[:0], `{"jsonrpc":"2.0","id":`...)
	l.line = strconv.AppendInt(l.line, int64(l.id), 10)
	l.line = append(l.line, `,"method":`...)
	l.line = append(l.line, rest...)
	l.line = append(l.line, "}\n"...)
	if _, err := l.in.Write(l.line); err != nil {
		return nil, err
	}
	for {
		line, err := l.out.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("%w: %.300s", err, line)
		}
		if m.Method != "" || !bytes.Equal(m.ID, strconv.AppendInt(nil, int64(l.id), 10)) {
			continue // a notification, or a request of the server's
		}
		if m.Error != nil {
			return nil, fmt.Errorf("error: %.300s", m.Error)
		}
		return m.Result, nil
	}
}

// close ends the session: the end of its input, on which `scv mcp`
// exits.
func (l *lineClient) close() error {
	l.in.Close()
	return l.cmd.Wait()
}
