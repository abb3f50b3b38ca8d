package channels_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
	"scv/ledger/local"
)

// TestNewAccountDefaults: a new account takes the seed's defaults (no
// workspace, remote tools none, senders owner, purpose chat) and source
// api, stored as such.
func TestNewAccountDefaults(t *testing.T) {
	h := newHarness(t)
	h.set(api.CmdChannelSet{Channel: "slack", Account: "team", Enabled: false})
	rows := h.rows()
	require.Len(t, rows, 1)
	r := rows[0]
	assert.Equal(t, local.ChannelAccount{
		Channel: "slack", Account: "team", Enabled: false, Workspace: "",
		RemoteTools: "none", Senders: "owner", Purpose: "chat", Source: "api",
		Credentials: "{}", State: "{}", Updated: h.clock.Now().UnixMilli(),
	}, r)
	c := h.component("slack:team")
	assert.Equal(t, api.RemoteToolsNone, c.RemoteTools)
	assert.Equal(t, ptr(api.SendersOwner), c.Senders)
	assert.Nil(t, c.Purpose, "an ordinary chat reports no purpose")
	assert.Nil(t, c.UserID)
	assert.Nil(t, c.BotID)
	assert.Nil(t, c.Mail)
}

// TestSettingsRoundTrip: settings set by channel_set survive a new Manager
// on a reopened ledger (Load gives the same settings and components);
// channel_set with omitted fields and a null workspace keeps the saved
// values; the workspace is stored cleaned; an empty workspace clears it.
func TestSettingsRoundTrip(t *testing.T) {
	h := newHarness(t)
	ws := h.workspace("ws")
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true,
		Workspace: ptr(ws + "/sub/.."), RemoteTools: ptr(api.RemoteToolsOwner),
		Senders: ptr(api.SendersAnyone), Purpose: ptr(api.PurposeChat)})
	h.set(api.CmdChannelSet{Channel: "email", Account: "inbox", Enabled: false,
		Purpose: ptr(api.PurposeMail)})
	h.waitState("local:owner", api.ComponentConnected)

	// Omitted fields and a null workspace keep the saved values.
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	saved, ok := h.m.Settings("local:owner")
	require.True(t, ok)
	assert.Equal(t, ws, saved.Workspace, "kept, and stored cleaned")
	assert.Equal(t, api.RemoteToolsOwner, saved.RemoteTools)
	assert.Equal(t, api.SendersAnyone, saved.Senders)
	assert.Equal(t, api.PurposeChat, saved.Purpose)
	assert.Equal(t, channels.SourceAPI, saved.Source)

	before := h.rows()
	components := h.m.Components()
	require.Len(t, before, 2)
	h.restart()
	assert.Equal(t, before, h.rows(), "rows kept field for field")
	h.waitState("local:owner", api.ComponentConnected)
	assert.Equal(t, components, h.m.Components(), "the same settings and states after a restart")
	again, ok := h.m.Settings("local:owner")
	require.True(t, ok)
	assert.Equal(t, saved, again)

	// An empty workspace clears it; the other settings stay.
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: false, Workspace: ptr("")})
	s, _ := h.m.Settings("local:owner")
	assert.Empty(t, s.Workspace)
	assert.Equal(t, api.SendersAnyone, s.Senders)
	assert.False(t, s.Enabled)
}

// TestInvalidSetChangesNothing: channel_set with an empty channel, an
// empty or malformed account, a relative or missing workspace, or an
// unknown kind is refused with -32602 invalid_argument, and nothing
// changes: no row, no component, no connector run.
func TestInvalidSetChangesNothing(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindLocal)
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: false})
	rows, components := h.rows(), h.m.Components()

	for _, c := range []struct {
		name string
		cmd  api.CmdChannelSet
		want string
	}{
		{"empty channel", api.CmdChannelSet{Account: "owner", Enabled: true}, "channel is empty"},
		{"empty account", api.CmdChannelSet{Channel: "local", Enabled: true}, "account is empty"},
		{"bad account", api.CmdChannelSet{Channel: "local", Account: "a b", Enabled: true}, `account "a b"`},
		{"relative workspace", api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true, Workspace: ptr("rel/dir")}, "not an absolute path"},
		{"missing workspace", api.CmdChannelSet{Channel: "local", Account: "new", Enabled: true, Workspace: ptr(filepath.Join(h.dir, "nope"))}, "not an existing directory"},
		{"unknown kind", api.CmdChannelSet{Channel: "irc", Account: "owner", Enabled: true}, `unknown channel "irc"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireInvalid(t, h.m.Set(ctx, c.cmd), c.want)
			assert.Equal(t, rows, h.rows(), "no row changed")
			assert.Equal(t, components, h.m.Components(), "no component changed")
			assert.Zero(t, tc.made.Load(), "no connector started")
		})
	}
}

// TestLogout: logout stops a running component (it is stopping until its
// connector returns, and logout waits), removes the row and the
// component; an unknown account is not_found; a malformed one is
// invalid_argument.
func TestLogout(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindFeishu)
	h.set(api.CmdChannelSet{Channel: "feishu", Account: "work", Enabled: true})
	h.set(api.CmdChannelSet{Channel: "feishu", Account: "other", Enabled: false})
	r := tc.next(t)
	r.Connected()
	r.HoldStop()

	done := make(chan error, 1)
	go func() { done <- h.m.Logout(ctx, api.CmdChannelLogout{Channel: "feishu", Account: "work"}) }()
	h.waitState("feishu:work", api.ComponentStopping)
	r.Release()
	require.NoError(t, <-done)
	assert.False(t, h.has("feishu:work"))
	require.Len(t, h.rows(), 1)
	assert.Equal(t, "other", h.rows()[0].Account)

	err := h.m.Logout(ctx, api.CmdChannelLogout{Channel: "feishu", Account: "work"})
	e := api.ErrorOf(err)
	require.NotNil(t, e)
	assert.Equal(t, api.CodeNotFound, e.Code)
	assert.Equal(t, api.ReasonNotFound, e.Data.Reason)

	requireInvalid(t, h.m.Logout(ctx, api.CmdChannelLogout{Channel: "irc", Account: "x"}), "unknown channel")
}

// TestWechatWithoutConnector: this build has no wechat connector: an
// enabled wechat account fails saying so (never connected), and with
// remote_tools owner but no owner ID its effective tools are none;
// disabling it keeps its settings; logout removes it from Components and
// the database.
func TestWechatWithoutConnector(t *testing.T) {
	dir := t.TempDir()
	l := openLedger(t, filepath.Join(dir, "ledger.db"))
	m := channels.New(l) // the build's own connectors
	m.Path = filepath.Join(dir, "channels.json")
	t.Cleanup(m.Close)
	require.NoError(t, m.Load(ctx))

	require.NoError(t, m.Set(ctx, api.CmdChannelSet{Channel: "wechat", Account: "main", Enabled: true,
		RemoteTools: ptr(api.RemoteToolsOwner), Senders: ptr(api.SendersAnyone)}))
	cs := m.Components()
	require.Len(t, cs, 1)
	c := cs[0]
	assert.Equal(t, "wechat:main", c.ID)
	assert.Equal(t, "wechat", c.Channel)
	assert.Equal(t, "main", c.Account)
	assert.Equal(t, api.ComponentFailed, c.State)
	assert.Equal(t, ptr("no wechat connector in this build"), c.Error)
	assert.Equal(t, api.RemoteToolsNone, c.RemoteTools, "owner is not effective without an owner ID")
	assert.Nil(t, c.UserID)
	assert.False(t, m.Connected("wechat:main"))

	require.NoError(t, m.Set(ctx, api.CmdChannelSet{Channel: "wechat", Account: "main", Enabled: false}))
	c = m.Components()[0]
	assert.Equal(t, api.ComponentDisabled, c.State)
	s, ok := m.Settings("wechat:main")
	require.True(t, ok)
	assert.Equal(t, api.RemoteToolsOwner, s.RemoteTools, "settings kept while disabled")
	assert.Equal(t, api.SendersAnyone, s.Senders)
	rows, err := l.ChannelAccounts(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.False(t, rows[0].Enabled)
	assert.Equal(t, "owner", rows[0].RemoteTools)

	require.NoError(t, m.Logout(ctx, api.CmdChannelLogout{Channel: "wechat", Account: "main"}))
	assert.Empty(t, m.Components())
	rows, err = l.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Empty(t, rows)
}

// TestLocalOwnerConnects: local:owner with the build's local connector
// connects with the daemon's user as its owner (user_id uid:N) and bot
// scv, so remote_tools owner is effective; Deliver to it succeeds.
func TestLocalOwnerConnects(t *testing.T) {
	dir := t.TempDir()
	l := openLedger(t, filepath.Join(dir, "ledger.db"))
	m := channels.New(l)
	t.Cleanup(m.Close)
	require.NoError(t, m.Load(ctx))
	require.NoError(t, m.Set(ctx, api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true,
		RemoteTools: ptr(api.RemoteToolsOwner)}))
	require.Eventually(t, func() bool { return m.Connected("local:owner") }, wait, tick)

	c := m.Components()[0]
	assert.Equal(t, api.ComponentConnected, c.State)
	owner := channels.Local{UID: uid()}.OwnerID()
	assert.Regexp(t, `^uid:\d+$`, owner)
	assert.Equal(t, ptr(owner), c.UserID)
	assert.Equal(t, ptr("scv"), c.BotID)
	assert.Equal(t, api.RemoteToolsOwner, c.RemoteTools, "owner is effective: the owner ID is known")
	assert.NotNil(t, c.LastSuccessUnixSeconds)
	assert.Nil(t, c.Error)

	s, _ := m.Settings("local:owner")
	assert.True(t, channels.ToolsFor(s, owner))
	assert.False(t, channels.ToolsFor(s, "uid:99999"))
	assert.Equal(t, []string{"local:owner"}, m.ConnectedChats())
	require.NoError(t, m.Deliver(ctx, "local:owner", "q1", "Deploy?"))

	rows, err := l.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Empty(t, rows[0].OwnerID, "a reported identity is not a setting")
}

// TestLoadInvalidStoredAccount: a stored account whose settings this build
// refuses (here an unknown kind, as a newer build might have written) is
// still shown after Load, failed with the reason if enabled; logout
// removes it.
func TestLoadInvalidStoredAccount(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.l.ReplaceChannelAccounts(ctx, []local.ChannelAccount{{
		Channel: "irc", Account: "libera", Enabled: true, RemoteTools: "none", Senders: "owner",
		Purpose: "chat", Source: "api",
	}}, nil))
	require.NoError(t, h.m.Load(ctx))
	c := h.component("irc:libera")
	assert.Equal(t, api.ComponentFailed, c.State)
	require.NotNil(t, c.Error)
	assert.Contains(t, *c.Error, `stored settings are invalid: unknown channel "irc"`)

	require.NoError(t, h.m.Logout(ctx, api.CmdChannelLogout{Channel: "irc", Account: "libera"}))
	assert.Empty(t, h.m.Components())
	assert.Empty(t, h.rows())
}
