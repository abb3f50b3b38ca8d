package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

func channelAccount(channel, account string) ledger.ChannelAccount {
	return ledger.ChannelAccount{
		Channel: channel, Account: account, Enabled: true, Workspace: "/work/x",
		RemoteTools: "owner", Senders: "anyone", Purpose: "chat", OwnerID: "uid:1000", BotID: "scv",
		Source: "api", Credentials: `{"token":"t"}`, State: `{"cursor":7}`, Updated: 1_700_000_000_123,
	}
}

// TestChannelAccountsRoundTrip: accounts survive a reopen field for field,
// ordered by channel and account; empty credentials and state are stored
// as {}; a zero Updated is stamped with the ledger's clock; a second put of
// the same key replaces the row; a delete reports whether the row was
// there; and none of it is an event.
func TestChannelAccountsRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{Clock: newClock(1_800_000_000_000).Now})

	wechat := channelAccount("wechat", "main")
	local := channelAccount("local", "owner")
	local.Credentials, local.State, local.Updated = "", "", 0
	local.Enabled, local.Source = false, "file"
	require.NoError(t, l.PutChannelAccount(ctx, wechat))
	require.NoError(t, l.PutChannelAccount(ctx, local))
	require.NoError(t, l.Close())

	l = open(t, path, ledger.Options{})
	got, err := l.ChannelAccounts(ctx)
	require.NoError(t, err)
	wantLocal := local
	wantLocal.Credentials, wantLocal.State, wantLocal.Updated = "{}", "{}", 1_800_000_000_000
	assert.Equal(t, []ledger.ChannelAccount{wantLocal, wechat}, got, "ordered by channel, every field kept")

	changed := wechat
	changed.Enabled, changed.Workspace, changed.Senders, changed.Updated = false, "", "owner", wechat.Updated+1
	require.NoError(t, l.PutChannelAccount(ctx, changed))
	got, err = l.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ledger.ChannelAccount{wantLocal, changed}, got, "a put of the same key replaces the row")

	found, err := l.DeleteChannelAccount(ctx, "wechat", "main")
	require.NoError(t, err)
	assert.True(t, found)
	found, err = l.DeleteChannelAccount(ctx, "wechat", "main")
	require.NoError(t, err)
	assert.False(t, found, "already gone")
	got, err = l.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ledger.ChannelAccount{wantLocal}, got)

	var events int
	require.NoError(t, rawDB(t, path).Get(&events, `SELECT count(*) FROM events`))
	assert.Zero(t, events, "settings are not history")
}

// TestChannelAccountsRefuseNonJSON: credentials or state that are not JSON
// are refused and nothing is stored.
func TestChannelAccountsRefuseNonJSON(t *testing.T) {
	ctx := context.Background()
	l := open(t, dbPath(t), ledger.Options{})
	a := channelAccount("local", "owner")
	a.Credentials = "not json"
	require.ErrorIs(t, l.PutChannelAccount(ctx, a), reducer.ErrInvalidArgument)
	b := channelAccount("local", "other")
	b.State = "{"
	require.ErrorIs(t, l.ReplaceChannelAccounts(ctx, []ledger.ChannelAccount{channelAccount("slack", "x"), b}, nil), reducer.ErrInvalidArgument)
	got, err := l.ChannelAccounts(ctx)
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
	l := open(t, path, ledger.Options{})
	a, b := channelAccount("local", "a"), channelAccount("local", "b")
	require.NoError(t, l.ReplaceChannelAccounts(ctx, []ledger.ChannelAccount{a, b}, nil))

	c := channelAccount("slack", "c")
	a2 := a
	a2.Workspace = "/elsewhere"
	require.NoError(t, l.ReplaceChannelAccounts(ctx, []ledger.ChannelAccount{a2, c}, [][2]string{{"local", "b"}, {"local", "never-there"}}))
	got, err := l.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ledger.ChannelAccount{a2, c}, got, "b deleted, a changed, c added")

	_, err = rawDB(t, path).Exec(`CREATE TRIGGER refuse_boom BEFORE INSERT ON channel_accounts
		WHEN NEW.account = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END`)
	require.NoError(t, err)
	a3 := a2
	a3.Enabled = false
	err = l.ReplaceChannelAccounts(ctx,
		[]ledger.ChannelAccount{a3, channelAccount("email", "new"), channelAccount("local", "boom")},
		[][2]string{{"slack", "c"}})
	require.ErrorIs(t, err, ledger.ErrStorage)
	got, err = l.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ledger.ChannelAccount{a2, c}, got, "nothing of the failed replace is kept")
}
