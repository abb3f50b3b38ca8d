package view_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"scv/control/view"
	"scv/reducer"
)

// TestReportSpend: once runs reported usage, the report's summary shows
// the project's spend against its budget, and its tables a column of each
// task's and run's spend; before, none of it.
func TestReportSpend(t *testing.T) {
	spentCells := func(h *history) (string, []string) {
		var b bytes.Buffer
		require.NoError(t, view.Report(&b, h.p, h.rows, view.ReportOptions{Options: view.Options{Now: tm(20), StaleAfter: 5 * time.Minute}}))
		doc, err := html.Parse(&b)
		require.NoError(t, err)
		var summary string
		for _, n := range find(doc, func(n *html.Node) bool { return n.Data == "dd" && hasClass(n, "spent") }) {
			summary = text(n)
		}
		var cells []string
		for _, n := range find(doc, func(n *html.Node) bool { return n.Data == "td" && hasClass(n, "spent") }) {
			cells = append(cells, text(n))
		}
		return summary, cells
	}
	h := diamond(t, "build")
	summary, cells := spentCells(h)
	assert.Empty(t, summary)
	assert.Empty(t, cells)

	n := uint64(100)
	h.do(19, reducer.SetBudget{Project: pid, Tokens: &n, By: "owner"})
	h.do(19, reducer.FinishRun{Project: pid, RunID: "d1", Status: reducer.RunSucceeded,
		Usage: &reducer.Usage{Tokens: reducer.Tokens{Input: 120, Output: 30}, Cost: &reducer.Cost{Amount: "0.5", Currency: "EUR"}}})
	v, err := view.Build(h.p, h.rows, view.Options{Now: tm(20)})
	require.NoError(t, err)
	assert.Equal(t, "150 tokens, 0.5EUR", v.Spent)
	assert.Equal(t, "100 tokens", v.Budget)
	assert.Equal(t, "150 tokens spent of a budget of 100", v.BudgetReached)
	var tip string
	for _, r := range find(mustParse(t, v.Timeline), func(n *html.Node) bool { return n.Data == "rect" && hasClass(n, "bar") }) {
		if id, _ := attr(r, "data-run-id"); id == "d1" {
			tip = text(r)
		}
	}
	assert.Contains(t, tip, "spent 150 tokens, 0.5EUR", "the timeline's bar of the run")
	summary, cells = spentCells(h)
	assert.Equal(t, "150 tokens, 0.5EUR", summary)
	// A cell per task (a, b, c, d), then per run (a1, b1, b2, c1, c2, d1).
	assert.Equal(t, []string{"-", "-", "-", "150 tokens, 0.5EUR", "-", "-", "-", "-", "-", "150 tokens, 0.5EUR"}, cells)
}

func mustParse(t *testing.T, b []byte) *html.Node {
	doc, err := html.Parse(bytes.NewReader(b))
	require.NoError(t, err)
	return doc
}
