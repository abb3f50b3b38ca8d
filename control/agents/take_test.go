package agents

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpdatesBeforeTheSession: updates that come before the answer to
// session/new has named the agent's session wait for it; then those about
// it are kept, in order, and the others dropped with a warning.
func TestUpdatesBeforeTheSession(t *testing.T) {
	var logs strings.Builder
	a := &agent{m: &Manager{}, name: "a", updates: newUpdateLog(),
		log: slog.New(slog.NewTextHandler(&logs, nil)).With("agent", "a")}
	chunk := func(text string) []byte {
		return []byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}`)
	}
	require.NoError(t, a.take("s1", chunk("early")))
	require.NoError(t, a.take("s2", chunk("other")))
	assert.Zero(t, a.updates.seq(), "nothing is kept before the session is known")
	a.opened("s1")
	require.NoError(t, a.take("s1", chunk("later")))
	require.NoError(t, a.take("s2", chunk("other again")))
	ups, _, _ := a.updates.pageLocked(0)
	var texts []string
	for _, u := range ups {
		texts = append(texts, u.Text)
	}
	assert.Equal(t, []string{"early", "later"}, texts)
	assert.Equal(t, 2, strings.Count(logs.String(), "level=WARN msg=\"agent sent an update about a session the daemon did not open; dropped\" agent=a session=s2 kind=agent_message_chunk"))
}
