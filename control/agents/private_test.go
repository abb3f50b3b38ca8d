package agents_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/agents"
	"scv/reducer"
)

// TestPrivateAgent: a private agent answers each prompt in a session of
// its own with its message and the turn's tokens; nothing it was told or
// said reaches the log; a crash ends it (the next prompt is an error),
// and a prompt whose context ends stops it.
func TestPrivateAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logs := &logBuffer{}
	spec := agents.PrivateSpec{
		Name: "triage-work", Command: []string{acpagent(t), "--state", t.TempDir(), "--steps-only"},
		Workspace: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Grace: 500 * time.Millisecond,
	}
	p, err := agents.StartPrivate(ctx, spec)
	require.NoError(t, err)
	require.True(t, p.Alive())

	turn, err := p.Prompt(ctx, "Private words one.\nsay report: secret-one\nsay  and more\nusage 100 20 5")
	require.NoError(t, err)
	assert.Equal(t, agents.Turn{Text: "report: secret-one and more", Tokens: reducer.Tokens{Input: 100, Output: 20, Thought: 5},
		Status: reducer.RunSucceeded}, turn)

	turn, err = p.Prompt(ctx, "Private words two.\nsay skip: secret-two")
	require.NoError(t, err)
	assert.Equal(t, "skip: secret-two", turn.Text, "a session of its own: nothing of the first turn")
	assert.Zero(t, turn.Tokens, "no usage reported")

	turn, err = p.Prompt(ctx, "say secret-three\nstop refusal")
	require.NoError(t, err)
	assert.Equal(t, reducer.RunFailed, turn.Status)

	_, _ = p.Prompt(ctx, "say secret-four\ncrash") // ends in a failed turn, or in an error if the crash came first
	require.Eventually(t, func() bool { return !p.Alive() }, 10*time.Second, 10*time.Millisecond, "the crash ends it")
	_, err = p.Prompt(ctx, "say secret-five")
	assert.Error(t, err, "an ended agent takes no prompt")

	q, err := agents.StartPrivate(ctx, spec)
	require.NoError(t, err)
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	_, err = q.Prompt(short, "say secret-six\nsleep 1m")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, q.Alive(), "stopped when the prompt's context ended")

	out := logs.String()
	assert.Contains(t, out, "triage-work", "the log names it")
	for _, s := range []string{"secret", "Private words"} {
		assert.NotContains(t, out, s, "nothing it was told or said is logged")
	}
}
