package control_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
)

// TestSeedParsesDelegationReplies: the replies of the delegation actions,
// with entries and killed filled in from a real tree, parse through the
// seed's DaemonStatus, and serde writes them back byte for byte.
func TestSeedParsesDelegationReplies(t *testing.T) {
	bin := seedClient(t)
	d := startDaemon(t, nil)
	c := d.client(t)
	h := ulid.Make().String()
	tree := startTree(t, h, "sleep 60 & wait")
	var input strings.Builder
	reply := func(name string, cmd api.Command) {
		raw, err := c.CallRaw(testCtx(t), cmd)
		require.NoError(t, err)
		fmt.Fprintf(&input, "%s\tstatus\t%s\n", name, raw)
	}
	reply("register", register(h, tree.Pid))
	reply("delegations", api.CmdDelegations{All: true})
	reply("status", api.CmdStatus{})
	reply("kill", api.CmdDelegationKill{Handle: &h})
	reply("kill orphans", api.CmdDelegationKill{Orphans: true})

	sent := strings.Split(strings.TrimSuffix(input.String(), "\n"), "\n")
	for i, v := range seedDecode(t, bin, sent) {
		assert.True(t, v.ok, "%s: serde refused: %s", v.name, v.out)
		assert.Equal(t, sent[i][strings.LastIndex(sent[i], "\t")+1:], v.out, "%s: serde writes it otherwise", v.name)
	}
	assert.Contains(t, input.String(), `"entries":[{"handle":"`+h+`"`)
	assert.Contains(t, input.String(), `"killed":["`+h+`"]`)
}

// TestSeedParsesChannelAndQuestionReplies: replies carrying components and
// questions, from the daemon's real channel and question managers, parse
// through the seed's DaemonStatus; those the seed describes fully come
// back from serde byte for byte (confirm_list's extension field is
// ignored by the seed, so only its parsing is checked).
func TestSeedParsesChannelAndQuestionReplies(t *testing.T) {
	bin := seedClient(t)
	d := startDaemon(t, nil) // with the daemon's real channel and question managers
	c := d.client(t)

	var input strings.Builder
	exact := map[string]bool{}
	reply := func(name string, same bool, cmd api.Command) {
		raw, err := c.CallRaw(testCtx(t), cmd)
		require.NoError(t, err)
		fmt.Fprintf(&input, "%s\tstatus\t%s\n", name, raw)
		exact[name] = same
	}
	reply("channel_set wechat", true, api.CmdChannelSet{Channel: "wechat", Account: "main", Enabled: true,
		RemoteTools: ptr(api.RemoteToolsOwner), Purpose: ptr(api.PurposeMail)})
	reply("channel_set local", true, api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	reply("channel_set local mail", true, api.CmdChannelSet{Channel: "local", Account: "mail", Enabled: true, Purpose: ptr(api.PurposeMail)})
	require.Eventually(t, func() bool { return d.srv.Service.Channels.(*channels.Manager).Connected("local:owner") }, 10*time.Second, 10*time.Millisecond)
	reply("status", true, api.CmdStatus{})
	reply("confirm_ask", true, api.CmdConfirmAsk{Question: "ship it?"})
	reply("confirm_list", false, api.CmdConfirmList{})
	// channel_login's reply, and every reply after it, carries the
	// extension field email, which the seed ignores.
	reply("channel_login", false, api.CmdChannelLogin{Channel: "email", Account: "work", IMAP: "imaps://mail.example.com",
		User: "me@example.com", Password: "hunter2", MailChat: ptr("local:mail")})

	sent := strings.Split(strings.TrimSuffix(input.String(), "\n"), "\n")
	for i, v := range seedDecode(t, bin, sent) {
		assert.True(t, v.ok, "%s: serde refused: %s", v.name, v.out)
		if exact[v.name] {
			assert.Equal(t, sent[i][strings.LastIndex(sent[i], "\t")+1:], v.out, "%s: serde writes it otherwise", v.name)
		}
	}
	assert.Contains(t, input.String(), `"id":"local:owner"`)
	assert.Contains(t, input.String(), `"state":"connected"`)
	assert.Contains(t, input.String(), `"purpose":"mail"`)
	assert.Contains(t, input.String(), `"email":{"imap":"imaps://mail.example.com","user":"me@example.com","mail_chat":"local:mail"}`)
	assert.NotContains(t, input.String(), "hunter2")
	assert.Contains(t, input.String(), `"questions":[{`)
}
