package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger/driver"
	"scv/ledger/local"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// The local store keeps the machine's own state in the ledger file: none
// of it is project history.

func delegation(handle string, started int64) local.Delegation {
	return local.Delegation{
		Handle: handle, Agent: "codex", Session: "s1", Depth: 2,
		Parent: "01JOUTER," + handle, PID: 4242, PIDStart: 1_000_001,
		OwnerPID: 4241, OwnerStart: 1_000_000, BootID: "boot-a", Cwd: "/work/x", Started: started, Chat: "local:owner",
	}
}

func channelAccount(channel, account string) local.ChannelAccount {
	return local.ChannelAccount{
		Channel: channel, Account: account, Enabled: true, Workspace: "/work/x",
		RemoteTools: "owner", Senders: "anyone", Purpose: "chat", OwnerID: "uid:1000", BotID: "scv",
		Source: "api", Credentials: `{"token":"t"}`, State: `{"cursor":7}`, Updated: 1_700_000_000_123,
	}
}

func confirm(question, kind string, ms int64, data string) local.ConfirmRecord {
	return local.ConfirmRecord{QuestionID: question, Kind: kind, Timestamp: ms, Data: data}
}

// assertNoEvents checks that the file holds no project history.
func assertNoEvents(t *testing.T, path string) {
	t.Helper()
	c := contents(t, path)
	assert.Empty(t, c.Events, "the machine's state is not history")
	assert.Zero(t, c.LastSequence)
	assert.Empty(t, c.Projects)
}

// TestDelegationRegistry: a registered delegation survives a reopen field
// for field, a second registration of its handle is refused and changes
// nothing, and deleting it reports whether it was there.
func TestDelegationRegistry(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store := openDB(t, path)
	d := delegation("01JDELEGATION0000000000000", 1_700_000_000_123)
	require.NoError(t, store.PutDelegation(ctx, d))
	other := d
	other.Agent, other.PID = "claude", 1
	assert.ErrorIs(t, store.PutDelegation(ctx, other), reducer.ErrConflict)
	second := delegation("01JSECOND", d.Started+1)
	require.NoError(t, store.PutDelegation(ctx, second))
	require.NoError(t, store.Close())

	store = openDB(t, path)
	got, err := store.Delegations(ctx)
	require.NoError(t, err)
	assert.Equal(t, []local.Delegation{d, second}, got, "oldest first, every field kept")

	found, err := store.DeleteDelegation(ctx, d.Handle)
	require.NoError(t, err)
	assert.True(t, found)
	found, err = store.DeleteDelegation(ctx, d.Handle)
	require.NoError(t, err)
	assert.False(t, found, "already gone")
	got, err = store.Delegations(ctx)
	require.NoError(t, err)
	assert.Equal(t, []local.Delegation{second}, got)
	assertNoEvents(t, path)
}

// TestAgents: a live agent's row survives a reopen field for field; a put
// of the same handle replaces it; a name another handle has, or a spec
// that is not a JSON object, is refused and changes nothing; deleting
// reports whether it was there.
func TestAgents(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store := openDB(t, path)
	a := local.Agent{Handle: "01JAGENT", Name: "gemini", Spec: `{"command":["gemini","--acp"]}`, Started: 1_700_000_000_123}
	require.NoError(t, store.PutAgent(ctx, a))
	a.Conversation, a.Turn, a.RunID = "sess-1", 3, "01JRUN"
	require.NoError(t, store.PutAgent(ctx, a), "the same handle again replaces its row")
	b := local.Agent{Handle: "01JOTHER", Name: "gemini", Spec: `{}`, Started: a.Started + 1}
	assert.ErrorIs(t, store.PutAgent(ctx, b), reducer.ErrConflict, "the name is taken")
	b.Name = "codex"
	b.Spec = `["not","an","object"]`
	assert.ErrorIs(t, store.PutAgent(ctx, b), reducer.ErrInvalidArgument)
	b.Spec = `{"command":["codex"]}`
	require.NoError(t, store.PutAgent(ctx, b))
	require.NoError(t, store.Close())

	store = openDB(t, path)
	got, err := store.Agents(ctx)
	require.NoError(t, err)
	assert.Equal(t, []local.Agent{a, b}, got, "oldest first, every field kept")
	found, err := store.DeleteAgent(ctx, a.Handle)
	require.NoError(t, err)
	assert.True(t, found)
	found, err = store.DeleteAgent(ctx, a.Handle)
	require.NoError(t, err)
	assert.False(t, found, "already gone")
	got, err = store.Agents(ctx)
	require.NoError(t, err)
	assert.Equal(t, []local.Agent{b}, got)
	assertNoEvents(t, path)
}

// TestChannelAccountsRoundTrip: accounts survive a reopen field for
// field, ordered by channel and account; empty credentials and state are
// stored as {}; a zero Updated is stamped with the store's clock; a second
// put of the same key replaces the row; a delete reports whether the row
// was there.
func TestChannelAccountsRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store, err := sqlite.Open(ctx, path, sqlite.Options{Clock: func() time.Time { return time.UnixMilli(1_800_000_000_000) }})
	require.NoError(t, err)
	wechat := channelAccount("wechat", "main")
	wechat.Email = `{"imap":"imaps://mail.example.com","user":"me"}` // kept as it is given
	loc := channelAccount("local", "owner")
	loc.Credentials, loc.State, loc.Updated = "", "", 0
	loc.Enabled, loc.Source = false, "file"
	require.NoError(t, store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{wechat}, nil))
	require.NoError(t, store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{loc}, nil))
	require.NoError(t, store.Close())

	store = openDB(t, path)
	got, err := store.ChannelAccounts(ctx)
	require.NoError(t, err)
	wantLocal := loc
	wantLocal.Credentials, wantLocal.State, wantLocal.Updated = "{}", "{}", 1_800_000_000_000
	assert.Equal(t, []local.ChannelAccount{wantLocal, wechat}, got, "ordered by channel, every field kept")

	changed := wechat
	changed.Enabled, changed.Workspace, changed.Senders, changed.Updated = false, "", "owner", wechat.Updated+1
	require.NoError(t, store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{changed}, nil))
	got, err = store.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []local.ChannelAccount{wantLocal, changed}, got, "a put of the same key replaces the row")

	found, err := store.DeleteChannelAccount(ctx, "wechat", "main")
	require.NoError(t, err)
	assert.True(t, found)
	found, err = store.DeleteChannelAccount(ctx, "wechat", "main")
	require.NoError(t, err)
	assert.False(t, found, "already gone")
	got, err = store.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []local.ChannelAccount{wantLocal}, got)
	assertNoEvents(t, path)
}

// TestChannelAccountsRefuseNonJSON: credentials or state that are not
// JSON, and email settings that are neither empty nor JSON, are refused
// and nothing is stored.
func TestChannelAccountsRefuseNonJSON(t *testing.T) {
	ctx := context.Background()
	store := openDB(t, dbPath(t))
	a := channelAccount("local", "owner")
	a.Credentials = "not json"
	require.ErrorIs(t, store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{a}, nil), reducer.ErrInvalidArgument)
	b := channelAccount("local", "other")
	b.State = "{"
	require.ErrorIs(t, store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{channelAccount("slack", "x"), b}, nil), reducer.ErrInvalidArgument)
	c := channelAccount("email", "work")
	c.Email = "imaps://mail.example.com"
	require.ErrorIs(t, store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{c}, nil), reducer.ErrInvalidArgument)
	got, err := store.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// TestReplaceChannelAccountsAtomic: a replace deletes and puts in one
// transaction; when the database refuses one of its rows (a trigger
// standing in for a disk failure) it fails with ErrStorage and none of it
// is kept, not even the deletes and puts that ran before the refusal.
func TestReplaceChannelAccountsAtomic(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store := openDB(t, path)
	a, b := channelAccount("local", "a"), channelAccount("local", "b")
	require.NoError(t, store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{a, b}, nil))

	c := channelAccount("slack", "c")
	a2 := a
	a2.Workspace = "/elsewhere"
	require.NoError(t, store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{a2, c}, [][2]string{{"local", "b"}, {"local", "never-there"}}))
	got, err := store.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []local.ChannelAccount{a2, c}, got, "b deleted, a changed, c added")

	_, err = rawDB(t, path).Exec(`CREATE TRIGGER refuse_boom BEFORE INSERT ON channel_accounts
		WHEN NEW.account = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END`)
	require.NoError(t, err)
	a3 := a2
	a3.Enabled = false
	err = store.ReplaceChannelAccounts(ctx,
		[]local.ChannelAccount{a3, channelAccount("email", "new"), channelAccount("local", "boom")},
		[][2]string{{"slack", "c"}})
	require.ErrorIs(t, err, driver.ErrStorage)
	got, err = store.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []local.ChannelAccount{a2, c}, got, "nothing of the failed replace is kept")
}

// TestConfirmLogRoundTrip: records appended together get increasing
// sequences, survive a reopen field for field, and read back in order
// after any sequence; a call with a record that is not JSON appends
// nothing.
func TestConfirmLogRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store := openDB(t, path)
	got, err := store.AppendConfirm(ctx)
	require.NoError(t, err)
	assert.Empty(t, got, "nothing to append")

	asked := confirm("Q1", "asked", 1_700_000_000_123, `{"question":"Deploy?","chat":"local:owner","deadline_ms":1700001800123}`)
	first, err := store.AppendConfirm(ctx, asked)
	require.NoError(t, err)
	require.Len(t, first, 1)
	assert.Equal(t, uint64(1), first[0].Seq)
	assert.Zero(t, asked.Seq, "the caller's record is not changed")
	rest, err := store.AppendConfirm(ctx,
		confirm("Q1", "answered", 1_700_000_060_000, `{"answer":"yes","by":"uid 1000 pid 4242"}`),
		confirm("Q2", "asked", 1_700_000_060_000, `{}`),
		confirm("Q2", "failed", 1_700_000_060_000, `{"reason":"no chat connected"}`))
	require.NoError(t, err)
	require.Len(t, rest, 3)
	for i, r := range rest {
		assert.Equal(t, uint64(i+2), r.Seq)
	}
	require.NoError(t, store.Close())

	store = openDB(t, path)
	all, err := store.ConfirmLog(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, append(first, rest...), all, "in order, every field kept")
	tail, err := store.ConfirmLog(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, rest[1:], tail, "only after seq 2")
	none, err := store.ConfirmLog(ctx, 4)
	require.NoError(t, err)
	assert.Empty(t, none)

	_, err = store.AppendConfirm(ctx, asked, confirm("Q3", "asked", 0, "not json"))
	assert.ErrorIs(t, err, reducer.ErrInvalidArgument)
	again, err := store.ConfirmLog(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, all, again, "nothing appended")
	assertNoEvents(t, path)

	require.NoError(t, store.Close())
	_, err = store.AppendConfirm(ctx, asked)
	assert.ErrorIs(t, err, driver.ErrStorage, "a closed store")
}
