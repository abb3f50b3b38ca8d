package channels_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
)

const owner = "u-owner"

// chat is an ordinary chat account with the given remote tools, senders
// and owner ID.
func chat(tools api.RemoteTools, senders api.Senders, ownerID string) channels.Settings {
	s := channels.Defaults(channels.KindTelegram, "bot")
	s.RemoteTools, s.Senders, s.OwnerID = tools, senders, ownerID
	return s
}

// TestPolicyRemoteToolsOwnerNeedsOwnerID: remote_tools owner is effective
// only when the owner ID is known.
func TestPolicyRemoteToolsOwnerNeedsOwnerID(t *testing.T) {
	assert.Equal(t, api.RemoteToolsOwner, channels.EffectiveRemoteTools(chat(api.RemoteToolsOwner, api.SendersOwner, owner)))
	assert.Equal(t, api.RemoteToolsNone, channels.EffectiveRemoteTools(chat(api.RemoteToolsOwner, api.SendersOwner, "")))
}

// TestPolicyRemoteToolsNoneStaysNone: remote_tools none is none, whoever
// the owner is.
func TestPolicyRemoteToolsNoneStaysNone(t *testing.T) {
	s := chat(api.RemoteToolsNone, api.SendersOwner, owner)
	assert.Equal(t, api.RemoteToolsNone, channels.EffectiveRemoteTools(s))
	assert.False(t, channels.ToolsFor(s, owner))
}

// TestPolicyMailHasNoTools: a mail chat's effective remote tools are none,
// even set to owner with a known owner.
func TestPolicyMailHasNoTools(t *testing.T) {
	s := chat(api.RemoteToolsOwner, api.SendersOwner, owner)
	s.Purpose = api.PurposeMail
	assert.Equal(t, api.RemoteToolsNone, channels.EffectiveRemoteTools(s))
	assert.False(t, channels.ToolsFor(s, owner))
}

// TestPolicySendersOwnerAnswersOnlyOwner: senders owner answers the owner
// and nobody else.
func TestPolicySendersOwnerAnswersOnlyOwner(t *testing.T) {
	s := chat(api.RemoteToolsNone, api.SendersOwner, owner)
	assert.True(t, channels.Answers(s, owner))
	assert.False(t, channels.Answers(s, "u-stranger"))
	assert.False(t, channels.Answers(s, ""))
}

// TestPolicySendersOwnerWithoutOwnerIDAnswersNobody: senders owner with no
// known owner ID answers nobody, not even an empty sender ID.
func TestPolicySendersOwnerWithoutOwnerIDAnswersNobody(t *testing.T) {
	s := chat(api.RemoteToolsOwner, api.SendersOwner, "")
	assert.False(t, channels.Answers(s, "u-anyone"))
	assert.False(t, channels.Answers(s, ""))
}

// TestPolicySendersAnyoneToolsOnlyForOwner: senders anyone answers
// everyone, but only the owner's session gets tools.
func TestPolicySendersAnyoneToolsOnlyForOwner(t *testing.T) {
	s := chat(api.RemoteToolsOwner, api.SendersAnyone, owner)
	assert.True(t, channels.Answers(s, owner))
	assert.True(t, channels.Answers(s, "u-stranger"))
	assert.True(t, channels.ToolsFor(s, owner))
	assert.False(t, channels.ToolsFor(s, "u-stranger"))

	s.OwnerID = ""
	assert.True(t, channels.Answers(s, "u-stranger"), "anyone, owner known or not")
	assert.False(t, channels.ToolsFor(s, ""), "no tools without a known owner")
}

// TestPolicyMailNeverAnswers: a model never answers in a mail chat, not
// even the owner, whatever senders says.
func TestPolicyMailNeverAnswers(t *testing.T) {
	for _, senders := range []api.Senders{api.SendersOwner, api.SendersAnyone} {
		s := chat(api.RemoteToolsOwner, senders, owner)
		s.Purpose = api.PurposeMail
		assert.False(t, channels.ModelAnswers(s))
		assert.False(t, channels.Answers(s, owner))
		assert.False(t, channels.Answers(s, "u-stranger"))
	}
	assert.True(t, channels.ModelAnswers(chat(api.RemoteToolsNone, api.SendersOwner, "")))
}

// TestHealthReportsSettings: a component reports senders as set, purpose
// only for a mail chat, user_id and bot_id when known (configured or
// reported by its connector; configured wins), effective remote tools,
// and never mail counts.
func TestHealthReportsSettings(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindSlack)
	h.writeFile(`{"accounts":[
		{"channel":"slack","account":"chat","senders":"anyone","remote_tools":"owner"},
		{"channel":"slack","account":"mail","purpose":"mail","remote_tools":"owner","owner_id":"u-configured"}
	]}`)
	require.NoError(t, h.m.Reload(ctx))
	runs := map[string]*testRun{}
	for range 2 {
		r := tc.next(t)
		runs[r.Account] = r
	}

	c := h.component("slack:chat")
	assert.Equal(t, ptr(api.SendersAnyone), c.Senders)
	assert.Nil(t, c.Purpose, "absent for ordinary chats")
	assert.Nil(t, c.UserID, "unknown")
	assert.Nil(t, c.BotID)
	assert.Equal(t, api.RemoteToolsNone, c.RemoteTools, "no owner ID yet")
	assert.Nil(t, c.Mail)

	runs["chat"].Identity("u-reported", "b-reported")
	c = h.component("slack:chat")
	assert.Equal(t, ptr("u-reported"), c.UserID)
	assert.Equal(t, ptr("b-reported"), c.BotID)
	assert.Equal(t, api.RemoteToolsOwner, c.RemoteTools, "owner is effective once the owner ID is known")

	runs["mail"].Identity("u-reported", "b-mail")
	m := h.component("slack:mail")
	assert.Equal(t, ptr(api.PurposeMail), m.Purpose)
	assert.Equal(t, ptr(api.SendersOwner), m.Senders)
	assert.Equal(t, ptr("u-configured"), m.UserID, "a configured owner ID wins")
	assert.Equal(t, ptr("b-mail"), m.BotID, "a reported ID fills in what is not configured")
	assert.Equal(t, api.RemoteToolsNone, m.RemoteTools, "a mail chat has no tools")
	assert.Nil(t, m.Mail)
}

// TestChatsForQuestions: Connected and ConnectedChats see only connected
// accounts, and ConnectedChats only those that carry chats (not mail);
// Deliver hands a message to the running connector, refuses an account
// that is not connected with ErrNotConnected, passes on the connector's
// error, and counts a delivery as a success.
func TestChatsForQuestions(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindTelegram)
	h.set(api.CmdChannelSet{Channel: "telegram", Account: "b", Enabled: true})
	h.set(api.CmdChannelSet{Channel: "telegram", Account: "a", Enabled: true})
	h.set(api.CmdChannelSet{Channel: "telegram", Account: "mail", Enabled: true, Purpose: ptr(api.PurposeMail)})
	h.set(api.CmdChannelSet{Channel: "telegram", Account: "idle", Enabled: true})
	runs := map[string]*testRun{}
	for range 4 {
		r := tc.next(t)
		runs[r.Account] = r
	}
	assert.Empty(t, h.m.ConnectedChats(), "starting is not connected")
	for _, a := range []string{"b", "a", "mail"} {
		runs[a].Connected()
	}
	assert.Equal(t, []string{"telegram:a", "telegram:b"}, h.m.ConnectedChats(), "sorted, no mail chat")
	assert.True(t, h.m.Connected("telegram:mail"))
	assert.False(t, h.m.Connected("telegram:idle"))
	assert.False(t, h.m.Connected("telegram:nope"))

	h.clock.Advance(60e9)
	require.NoError(t, h.m.Deliver(ctx, "telegram:a", "q1", "Ship it?"))
	assert.Equal(t, []channels.Message{{ID: "q1", Text: "Ship it?"}}, tc.Delivered())
	assert.Equal(t, ptr(uint64(h.clock.Now().Unix())), h.component("telegram:a").LastSuccessUnixSeconds)

	assert.ErrorIs(t, h.m.Deliver(ctx, "telegram:idle", "q2", ""), channels.ErrNotConnected)
	assert.ErrorIs(t, h.m.Deliver(ctx, "telegram:nope", "q2", ""), channels.ErrNotConnected)
	runs["b"].Disconnected(nil)
	assert.ErrorIs(t, h.m.Deliver(ctx, "telegram:b", "q2", ""), channels.ErrNotConnected)
	assert.Equal(t, []string{"telegram:a"}, h.m.ConnectedChats())

	refused := errors.New("platform refused")
	tc.FailDeliveries(refused)
	assert.ErrorIs(t, h.m.Deliver(ctx, "telegram:a", "q3", ""), refused)
	assert.Len(t, tc.Delivered(), 1)
}

// TestPermanent: Permanent marks an error (also through wrapping) without
// changing its text; nil stays nil.
func TestPermanent(t *testing.T) {
	base := errors.New("expired")
	p := channels.Permanent(base)
	assert.True(t, channels.IsPermanent(p))
	assert.True(t, channels.IsPermanent(errors.Join(errors.New("login"), p)))
	assert.ErrorIs(t, p, base)
	assert.Equal(t, "expired", p.Error())
	assert.False(t, channels.IsPermanent(base))
	assert.NoError(t, channels.Permanent(nil))
}
