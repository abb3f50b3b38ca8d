package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestDelegationRegistry: a registered delegation survives a reopen field
// for field, a second registration of its handle is refused and changes
// nothing, and deleting it reports whether it was there.
func TestDelegationRegistry(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	d := ledger.Delegation{
		Handle: "01JDELEGATION0000000000000", Agent: "codex", Session: "s1", Depth: 2,
		Parent: "01JOUTER,01JDELEGATION0000000000000", PID: 4242, PIDStart: 1_000_001,
		OwnerPID: 4241, OwnerStart: 1_000_000, BootID: "boot-a", Cwd: "/work/x", Started: 1_700_000_000_123, Chat: "local:owner",
	}
	require.NoError(t, l.PutDelegation(ctx, d))
	other := d
	other.Agent, other.PID = "claude", 1
	assert.ErrorIs(t, l.PutDelegation(ctx, other), reducer.ErrConflict)
	second := d
	second.Handle, second.Started = "01JSECOND", d.Started+1
	require.NoError(t, l.PutDelegation(ctx, second))
	require.NoError(t, l.Close())

	l = open(t, path, ledger.Options{})
	got, err := l.Delegations(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ledger.Delegation{d, second}, got, "oldest first, every field kept")

	found, err := l.DeleteDelegation(ctx, d.Handle)
	require.NoError(t, err)
	assert.True(t, found)
	found, err = l.DeleteDelegation(ctx, d.Handle)
	require.NoError(t, err)
	assert.False(t, found, "already gone")
	got, err = l.Delegations(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ledger.Delegation{second}, got)

	// The registry is not history: no event was appended for any of it.
	var events int
	require.NoError(t, rawDB(t, path).Get(&events, `SELECT count(*) FROM events`))
	assert.Zero(t, events)
}
