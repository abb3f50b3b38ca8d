package mcp_test

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"scv/control/api"
	"scv/control/mcp"
)

// BenchmarkRunProgress is a run_progress tool call from the SDK's client
// over its in-memory transport, to a server whose handler answers at
// once with a project's summary: what the MCP layers cost a call, with
// no daemon and no pipes (docs/performance.md, MCP).
func BenchmarkRunProgress(b *testing.B) {
	ctx := context.Background()
	hb := uint64(1700000000)
	reply := &api.DaemonStatus{Version: "bench", Project: &api.ProjectResponse{Project: &api.ProjectSummary{
		ID: "01HZZZZZZZZZZZZZZZZZZZZZZZ", Name: "acme", Workspace: "/work/acme", Phase: "execution", Status: "active",
		CreatedUnixSeconds: hb, UpdatedUnixSeconds: hb, TaskCount: 12, CompletedTasks: 3, LastHeartbeatUnixSeconds: &hb,
	}}}
	list := &api.DaemonStatus{Projects: &[]api.ProjectListItem{}}
	h := api.HandlerFunc(func(_ context.Context, cmd api.Command) (*api.DaemonStatus, error) {
		if _, ok := cmd.(api.CmdProjectList); ok {
			return list, nil
		}
		return reply, nil
	})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := mcp.NewServer(h, mcp.Options{Project: "acme", Run: "01HYYYYYYYYYYYYYYYYYYYYYYY"}).Connect(ctx, st, nil)
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
