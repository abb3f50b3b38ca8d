package work

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

func TestPromptTemplate(t *testing.T) {
	for _, bad := range []string{"{{.Nope}}", "{{", "{{.Task.Nope}}", "{{range .Dependencies}}{{.Nope}}{{end}}"} {
		_, err := parseTemplate(bad)
		require.Error(t, err, bad)
		assert.ErrorIs(t, err, reducer.ErrInvalidArgument, bad)
		assert.Contains(t, err.Error(), "prompt_template", bad)
	}

	tmpl, err := parseTemplate("")
	require.NoError(t, err)
	out, err := render(tmpl, Prompt{Project: "acme", ProjectID: "P1", Workspace: "/w", Agent: "acme-1", RunID: "R1",
		Task:         PromptTask{ID: "T1", Title: "build", Description: "say hi\nsleep 1s", Acceptance: "tests pass", Attempt: 2},
		Dependencies: []PromptDependency{{ID: "T0", Title: "plan", Status: "done", Outcome: "the plan is ready"}}})
	require.NoError(t, err)
	assert.Equal(t, `Task: build (T1) of project acme, run R1, attempt 2.

say hi
sleep 1s

Done when: tests pass

It depends on:
- plan: done (the plan is ready)

Work in /w. Your turn is run R1 of the ledger: report your progress through the ledger's tools (scv mcp --project acme); ending your turn finishes the run succeeded, unless you finished it yourself.
`, out)

	// Without description, acceptance or dependencies, none of their lines.
	out, err = render(tmpl, Prompt{Project: "acme", Workspace: "/w", RunID: "R1", Task: PromptTask{ID: "T1", Title: "build", Attempt: 1}})
	require.NoError(t, err)
	assert.Equal(t, "Task: build (T1) of project acme, run R1, attempt 1.\n\nWork in /w. Your turn is run R1 of the ledger: report your progress through the ledger's tools (scv mcp --project acme); ending your turn finishes the run succeeded, unless you finished it yourself.\n", out)
}
