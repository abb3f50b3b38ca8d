package channels_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
)

// TestReloadAddsChangesRemoves: reload creates the accounts the file lists
// (source file, the file's values, defaults for what it omits, enabled
// unless it says otherwise), changes them when the file changes, and logs
// out a file account the file no longer lists; an api account the file
// does not list is left alone, and one it lists becomes a file account.
func TestReloadAddsChangesRemoves(t *testing.T) {
	h := newHarness(t)
	ws := h.workspace("proj")
	h.set(api.CmdChannelSet{Channel: "slack", Account: "mine", Enabled: false, Senders: ptr(api.SendersAnyone)})
	h.set(api.CmdChannelSet{Channel: "telegram", Account: "adopted", Enabled: false})

	h.writeFile(fmt.Sprintf(`{"accounts":[
		{"channel":"local","account":"owner","enabled":true,"workspace":%q,"remote_tools":"owner","senders":"owner","purpose":"chat","owner_id":"uid:7","bot_id":"scv"},
		{"channel":"email","account":"inbox","enabled":false,"purpose":"mail"},
		{"channel":"telegram","account":"adopted"}
	]}`, ws))
	require.NoError(t, h.m.Reload(ctx))

	local, ok := h.m.Settings("local:owner")
	require.True(t, ok)
	assert.Equal(t, channels.Settings{Channel: "local", Account: "owner", Enabled: true, Workspace: ws,
		RemoteTools: "owner", Senders: "owner", Purpose: "chat", OwnerID: "uid:7", BotID: "scv", Source: channels.SourceFile}, local)
	inbox, _ := h.m.Settings("email:inbox")
	assert.Equal(t, channels.Settings{Channel: "email", Account: "inbox", Enabled: false,
		RemoteTools: "none", Senders: "owner", Purpose: "mail", Source: channels.SourceFile}, inbox, "omitted fields take the defaults")
	adopted, _ := h.m.Settings("telegram:adopted")
	assert.True(t, adopted.Enabled, "enabled unless the file says otherwise")
	assert.Equal(t, channels.SourceFile, adopted.Source, "a listed api account becomes a file account")
	mine, _ := h.m.Settings("slack:mine")
	assert.Equal(t, channels.SourceAPI, mine.Source)
	assert.Equal(t, api.SendersAnyone, mine.Senders)
	h.waitState("local:owner", api.ComponentConnected)
	assert.Equal(t, api.ComponentStarting, h.component("telegram:adopted").State)
	assert.Equal(t, api.ComponentDisabled, h.component("email:inbox").State)
	assert.Equal(t, ptr(api.PurposeMail), h.component("email:inbox").Purpose)
	assert.Len(t, h.rows(), 4)

	// channel_set on a file account keeps its source.
	h.set(api.CmdChannelSet{Channel: "email", Account: "inbox", Enabled: false, Senders: ptr(api.SendersAnyone)})
	inbox, _ = h.m.Settings("email:inbox")
	assert.Equal(t, channels.SourceFile, inbox.Source)

	// Change local, drop email and telegram from the file.
	h.writeFile(`{"accounts":[{"channel":"local","account":"owner","enabled":false,"senders":"anyone"}]}`)
	require.NoError(t, h.m.Reload(ctx))
	local, _ = h.m.Settings("local:owner")
	assert.Equal(t, channels.Settings{Channel: "local", Account: "owner", Enabled: false,
		RemoteTools: "none", Senders: "anyone", Purpose: "chat", Source: channels.SourceFile,
		OwnerID: fmt.Sprintf("uid:%d", uid()), BotID: "scv"}, local, "set to the file's values; the identity the connector reported fills in")
	assert.Empty(t, h.rows()[0].OwnerID, "the stored owner ID is the file's: none")
	assert.Equal(t, api.ComponentDisabled, h.component("local:owner").State)
	assert.False(t, h.has("email:inbox"), "a file account no longer listed is logged out")
	assert.False(t, h.has("telegram:adopted"))
	assert.True(t, h.has("slack:mine"), "an api account not listed is left alone")
	rows := h.rows()
	require.Len(t, rows, 2)
	assert.Equal(t, "local", rows[0].Channel)
	assert.Equal(t, "slack", rows[1].Channel)

	// A missing file lists nothing: file accounts go, api accounts stay.
	require.NoError(t, os.Remove(h.file))
	require.NoError(t, h.m.Reload(ctx))
	assert.False(t, h.has("local:owner"))
	assert.True(t, h.has("slack:mine"))
	assert.Len(t, h.rows(), 1)
}

// TestReloadUnchangedKeepsRunning: reloading the same file leaves running
// components alone (no restart, no rewrite), and restarts an enabled one
// that failed.
func TestReloadUnchangedKeepsRunning(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindLocal)
	h.writeFile(`{"accounts":[{"channel":"local","account":"owner"}]}`)
	require.NoError(t, h.m.Reload(ctx))
	r := tc.next(t)
	r.Connected()
	rows := h.rows()

	h.clock.Advance(time.Second)
	require.NoError(t, h.m.Reload(ctx))
	tc.none(t)
	assert.Equal(t, api.ComponentConnected, h.component("local:owner").State)
	assert.Equal(t, rows, h.rows(), "nothing rewritten")

	r.FailPermanently(fmt.Errorf("revoked"))
	h.waitState("local:owner", api.ComponentFailed)
	require.NoError(t, h.m.Reload(ctx))
	tc.next(t)
	assert.Equal(t, api.ComponentStarting, h.component("local:owner").State)
}

// TestReloadInvalidFileChangesNothing: a file with bad JSON, an unknown
// field, a relative workspace, an unknown kind, an empty account, or a
// channel:account listed twice refuses the whole reload with -32602
// invalid_argument naming the problem, and changes nothing: rows and
// components are the same before and after.
func TestReloadInvalidFileChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.writeFile(`{"accounts":[{"channel":"local","account":"owner"},{"channel":"wechat","account":"w","enabled":false}]}`)
	require.NoError(t, h.m.Reload(ctx))
	h.set(api.CmdChannelSet{Channel: "slack", Account: "api", Enabled: false})
	h.waitState("local:owner", api.ComponentConnected)
	rows, components := h.rows(), h.m.Components()

	for _, c := range []struct {
		name, file, want string
	}{
		{"bad JSON", `{"accounts":[`, "unexpected EOF"},
		{"unknown field", `{"accounts":[{"channel":"local","account":"owner","enable":true}]}`, `unknown field "enable"`},
		{"unknown top-level field", `{"account":[]}`, `unknown field "account"`},
		{"relative workspace", `{"accounts":[{"channel":"local","account":"owner","workspace":"proj"}]}`, `accounts[0]: invalid argument: workspace "proj" is not an absolute path`},
		{"unknown kind", `{"accounts":[{"channel":"local","account":"owner"},{"channel":"irc","account":"x"}]}`, `accounts[1]: unknown channel "irc"`},
		{"empty account", `{"accounts":[{"channel":"local","account":""}]}`, "accounts[0]: account is empty"},
		{"duplicate", `{"accounts":[{"channel":"local","account":"owner"},{"channel":"local","account":"owner","enabled":false}]}`, "accounts[1]: local:owner is listed twice"},
		{"unknown enum", `{"accounts":[{"channel":"local","account":"owner","senders":"everyone"}]}`, "unknown variant `everyone`"},
		{"trailing data", `{"accounts":[]} {}`, "unexpected data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.writeFile(c.file)
			err := h.m.Reload(ctx)
			requireInvalid(t, err, c.want)
			assert.Contains(t, err.Error(), h.file, "names the file")
			assert.Equal(t, rows, h.rows())
			assert.Equal(t, components, h.m.Components())
		})
	}
}

// TestDefaultPath: the settings file is $XDG_CONFIG_HOME/scv/channels.json,
// else ~/.config/scv/channels.json.
func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/cfg")
	p, err := channels.DefaultPath()
	require.NoError(t, err)
	assert.Equal(t, "/cfg/scv/channels.json", p)

	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/someone")
	p, err = channels.DefaultPath()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join("/home/someone", ".config", "scv", "channels.json"), p)
}
