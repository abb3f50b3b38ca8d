package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strconv"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/control/api"
	"scv/control/mcp"
)

// benchOpts is the benchmarks' session: confined to a run of a project.
var benchOpts = mcp.Options{Project: "acme", Run: "01HYYYYYYYYYYYYYYYYYYYYYYY"}

// benchHandler answers at once, with a project's summary.
func benchHandler() api.Handler {
	hb := uint64(1700000000)
	reply := &api.DaemonStatus{Version: "bench", Project: &api.ProjectResponse{Project: &api.ProjectSummary{
		ID: "01HZZZZZZZZZZZZZZZZZZZZZZZ", Name: "acme", Workspace: "/work/acme", Phase: "execution", Status: "active",
		CreatedUnixSeconds: hb, UpdatedUnixSeconds: hb, TaskCount: 12, CompletedTasks: 3, LastHeartbeatUnixSeconds: &hb,
	}}}
	list := &api.DaemonStatus{Projects: &[]api.ProjectListItem{}}
	return api.HandlerFunc(func(_ context.Context, cmd api.Command) (*api.DaemonStatus, error) {
		if _, ok := cmd.(api.CmdProjectList); ok {
			return list, nil
		}
		return reply, nil
	})
}

// BenchmarkRunProgress is a run_progress tool call from the SDK's client
// over its in-memory transport, to a server whose handler answers at
// once with a project's summary: what the MCP layers cost a call, with
// no daemon and no pipes (docs/performance.md, MCP).
func BenchmarkRunProgress(b *testing.B) {
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := mcp.NewServer(benchHandler(), benchOpts).Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		s.Close()
		ss.Wait()
	}()
	params := &sdk.CallToolParams{Name: "run_progress", Arguments: map[string]any{"progress": "step"}}
	b.ReportAllocs()
	for b.Loop() {
		r, err := s.CallTool(ctx, params)
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
	}
}

// BenchmarkStdioRunProgress is a run_progress tool call as `scv mcp` has
// it: a line on its standard input (a pipe), answered by a line on its
// standard output, read by a client that only splits lines, to a server
// whose handler answers at once: what the stdio transport and the MCP
// layers of the server cost a call (docs/performance.md, MCP).
func BenchmarkStdioRunProgress(b *testing.B) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ran := make(chan error, 1)
	go func() {
		ran <- mcp.Run(context.Background(), benchHandler(), benchOpts, inR, outW, io.Discard)
		outW.Close()
	}()
	answers := bufio.NewReader(outR)
	call := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			b.Fatal(err)
		}
		a, err := answers.ReadBytes('\n')
		if err != nil || !bytes.Contains(a, []byte(`"result"`)) || bytes.Contains(a, []byte(`"isError":true`)) {
			b.Fatal(err, string(a))
		}
	}
	call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		b.Fatal(err)
	}
	id := 1
	b.ReportAllocs()
	for b.Loop() {
		id++
		call(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"run_progress","arguments":{"progress":"step"}}}`)
	}
	b.StopTimer()
	inW.Close()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}
