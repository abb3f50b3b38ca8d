package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"scv/reducer"
)

// TestProjectPageSpend: the project page shows no cost until a run
// reports usage; then each task's and run's spend, and the project's
// against its budget, reached.
func TestProjectPageSpend(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("acme", "build")
	cells := func() (string, []string) {
		resp, body := e.get("/p/" + pid)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		doc := parse(t, body)
		var total string
		for _, n := range find(doc, func(n *html.Node) bool { return n.Data == "span" && hasClass(n, "spent") }) {
			total = text(n)
		}
		var out []string
		for _, n := range find(doc, func(n *html.Node) bool { return n.Data == "td" && hasClass(n, "spent") }) {
			out = append(out, text(n))
		}
		return total, out
	}
	total, spent := cells()
	assert.Empty(t, total)
	assert.Empty(t, spent)

	e.exec(reducer.SetBudget{Project: pid, Cost: &reducer.Cost{Amount: "0.5", Currency: "USD"}, By: "owner"})
	e.exec(reducer.StartRun{Project: pid, TaskID: tasks["c"], RunID: "r-lint", Agent: "codex"})
	e.exec(reducer.FinishRun{Project: pid, RunID: "r-lint", Status: reducer.RunSucceeded,
		Usage: &reducer.Usage{Tokens: reducer.Tokens{Input: 900, Output: 100}, Cost: &reducer.Cost{Amount: "0.5", Currency: "USD"}}})
	total, spent = cells()
	assert.Equal(t, "spent 1000 tokens, 0.5USD of a budget of 0.5USD", total)
	assert.Equal(t, []string{"-", "-", "1000 tokens, 0.5USD", "-", "-", "-", "1000 tokens, 0.5USD"}, spent, "tasks a–d, then runs a, b, lint")
}
