package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/mcp"
	"scv/reducer"
)

// TestMCPUsage: usage on run_progress, run_heartbeat and run_finish is
// the run's, its schema carries the reducer's limits, bad usage is
// refused with nothing written, and a budget reached refuses task_claim
// (budget_reached) until it is raised.
func TestMCPUsage(t *testing.T) {
	e := newEnv(t, daemon.Config{HeartbeatEvery: 10 * time.Minute, StaleAfter: time.Hour})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	s := connect(t, e.h, "test-agent", mcp.Options{Project: "acme", Version: "v-test"}, nil)

	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tl := range res.Tools {
		props := tl.InputSchema.(map[string]any)["properties"].(map[string]any)
		switch tl.Name {
		case "run_progress", "run_heartbeat", "run_finish":
			u := props["usage"].(map[string]any)["properties"].(map[string]any)
			cost := u["cost"].(map[string]any)["properties"].(map[string]any)
			assert.Equal(t, float64(reducer.MaxCostLen), cost["amount"].(map[string]any)["maxLength"], tl.Name)
			assert.Equal(t, "^[A-Z]{3}$", cost["currency"].(map[string]any)["pattern"], tl.Name)
			assert.Equal(t, float64(reducer.MaxModelLen), u["model"].(map[string]any)["maxLength"], tl.Name)
			assert.Equal(t, 0.0, u["tokens"].(map[string]any)["properties"].(map[string]any)["input"].(map[string]any)["minimum"], tl.Name)
			assert.Equal(t, float64(reducer.MaxTokens), u["tokens"].(map[string]any)["properties"].(map[string]any)["output"].(map[string]any)["maximum"], tl.Name)
		default:
			assert.NotContains(t, props, "usage", tl.Name)
		}
	}

	mustCall(t, s, "task_add", map[string]any{"title": "build"}, nil)
	mustCall(t, s, "task_add", map[string]any{"title": "test"}, nil)
	e.must(api.CmdProjectBudget{Project: "acme", Tokens: ptr(uint64(1000))})
	var claimed struct {
		RunID string `json:"run_id"`
	}
	mustCall(t, s, "task_claim", map[string]any{"task": "build"}, &claimed)
	r := claimed.RunID
	mustCall(t, s, "run_progress", map[string]any{"run": r, "progress": "compiling",
		"usage": map[string]any{"tokens": map[string]any{"input": 100, "output": 10}, "cost": map[string]any{"amount": "0.01", "currency": "USD"}}}, nil)
	n := len(e.events("acme"))
	for args, want := range map[string]map[string]any{
		"usage.tokens.input: want at least 0 [invalid_argument]":     {"run": r, "usage": map[string]any{"tokens": map[string]any{"input": -1}}},
		"usage.tokens.input: want a whole number [invalid_argument]": {"run": r, "usage": map[string]any{"tokens": map[string]any{"input": 1.5}}},
		"usage.cost.currency: required [invalid_argument]":           {"run": r, "usage": map[string]any{"cost": map[string]any{"amount": "1"}}},
		"usage goes backwards":              {"run": r, "usage": map[string]any{"tokens": map[string]any{"input": 50}}},
		"usage.bogus: not a field of usage": {"run": r, "usage": map[string]any{"bogus": 1}},
	} {
		msg := call(t, s, "run_heartbeat", want, nil)
		assert.Contains(t, msg, args)
	}
	assert.Len(t, e.events("acme"), n, "nothing written")
	mustCall(t, s, "run_heartbeat", map[string]any{"run": r, "usage": map[string]any{"tokens": map[string]any{"input": 500, "output": 10}}}, nil)
	mustCall(t, s, "run_finish", map[string]any{"run": r, "status": "succeeded",
		"usage": map[string]any{"tokens": map[string]any{"input": 900, "output": 100}, "cost": map[string]any{"amount": "0.02", "currency": "USD"}, "model": "m1"}}, nil)

	report := e.must(api.CmdProjectReport{Project: "acme"}).Project.Report
	assert.Equal(t, &reducer.Usage{Tokens: reducer.Tokens{Input: 900, Output: 100}, Cost: &reducer.Cost{Amount: "0.02", Currency: "USD"}, Model: "m1"}, report.Runs[0].Usage)
	assert.Equal(t, "1000 tokens spent of a budget of 1000", report.Spend.BudgetReached)

	msg := call(t, s, "task_claim", map[string]any{"task": "test"}, nil)
	assert.Contains(t, msg, "budget reached: project acme: 1000 tokens spent of a budget of 1000")
	assert.Contains(t, msg, "[budget_reached]")
	e.must(api.CmdProjectBudget{Project: "acme", Tokens: ptr(uint64(2000))})
	mustCall(t, s, "task_claim", map[string]any{"task": "test"}, nil)
}

func ptr[T any](v T) *T { return &v }
