package channels_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
)

func login(account, imap, user, password string, mailChat *string) api.CmdChannelLogin {
	return api.CmdChannelLogin{Channel: "email", Account: account, IMAP: imap, User: user, Password: password, MailChat: mailChat}
}

// TestLoginCreates: channel_login of a new account creates it (source
// api, enabled, the defaults) with its IMAP URL, user, mail chat and
// password; the connector gets them; they survive a restart; a second
// login changes them; logout removes them.
func TestLoginCreates(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindEmail)
	h.set(api.CmdChannelSet{Channel: "local", Account: "mail", Enabled: true, Purpose: ptr(api.PurposeMail)})
	require.NoError(t, h.m.Login(ctx, login("work", "imaps://mail.example.com", "me@example.com", secret, ptr("local:mail"))))

	s, ok := h.m.Settings("email:work")
	require.True(t, ok)
	assert.Equal(t, channels.Settings{Channel: "email", Account: "work", Enabled: true, RemoteTools: "none", Senders: "owner",
		Purpose: "chat", Source: channels.SourceAPI, Password: secret,
		Email: &channels.Email{IMAP: "imaps://mail.example.com", User: "me@example.com", MailChat: "local:mail"}}, s)
	r := tc.next(t)
	assert.Equal(t, channels.Secret(secret), r.Settings.Password)
	r.Connected()
	h.waitState("email:work", api.ComponentConnected)
	assert.Empty(t, h.m.ConnectedChats(), "an email account carries no questions (and local:mail is a mail chat)")
	c := h.component("email:work")
	assert.Equal(t, &api.EmailAccount{IMAP: "imaps://mail.example.com", User: "me@example.com", MailChat: "local:mail"}, c.Email)
	assert.Nil(t, h.component("local:mail").Email, "a chat account shows no email settings")

	// A restart keeps it.
	h.restart()
	again, _ := h.m.Settings("email:work")
	assert.Equal(t, s, again)
	tc.next(t)

	// A second login changes URL, user and password, keeps the mail chat,
	// and restarts the component with them.
	require.NoError(t, h.m.Login(ctx, login("work", "imap://127.0.0.1:1143", "you", "other-"+secret, nil)))
	r = tc.next(t)
	assert.Equal(t, &channels.Email{IMAP: "imap://127.0.0.1:1143", User: "you", MailChat: "local:mail"}, r.Settings.Email)
	assert.Equal(t, channels.Secret("other-"+secret), r.Settings.Password)

	require.NoError(t, h.m.Logout(ctx, api.CmdChannelLogout{Channel: "email", Account: "work"}))
	assert.False(t, h.has("email:work"))
	assert.Len(t, h.rows(), 1, "only local:mail is left")
}

// TestLoginKeepsFileSettings: a login of an account of the settings file
// keeps its other email settings and its source; a reload whose file
// names no password_file keeps the login's password, one that names one
// sets the file's.
func TestLoginKeepsFileSettings(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindEmail)
	h.writeFile(emailFile(`{"imap":"imaps://mail.example.com","user":"me","mail_chat":"local:mail","report_from":["@boss.example"],"digests_per_day":3}`))
	require.NoError(t, h.m.Reload(ctx))
	s, _ := h.m.Settings("email:work")
	assert.Empty(t, s.Password, "no password yet")
	tc.next(t)

	require.NoError(t, h.m.Login(ctx, login("work", "imaps://mail.example.com", "me", secret, nil)))
	s, _ = h.m.Settings("email:work")
	assert.Equal(t, channels.SourceFile, s.Source, "the source is kept")
	assert.Equal(t, &channels.Email{IMAP: "imaps://mail.example.com", User: "me", MailChat: "local:mail",
		ReportFrom: []string{"@boss.example"}, DigestsPerDay: 3}, s.Email, "the other settings are kept")
	assert.Equal(t, channels.Secret(secret), s.Password)
	tc.next(t)

	rows := h.rows()
	require.NoError(t, h.m.Reload(ctx))
	s, _ = h.m.Settings("email:work")
	assert.Equal(t, channels.Secret(secret), s.Password, "a file without password_file keeps the login's password")
	assert.Equal(t, rows, h.rows(), "nothing changed")
	tc.none(t)

	pw := h.passwordFile("pw", "file-"+secret+"\n")
	h.writeFile(emailFile(fmt.Sprintf(`{"imap":"imaps://mail.example.com","user":"me","mail_chat":"local:mail","password_file":%q}`, pw)))
	require.NoError(t, h.m.Reload(ctx))
	s, _ = h.m.Settings("email:work")
	assert.Equal(t, channels.Secret("file-"+secret), s.Password)
}

// TestLoginInvalid: channel_login of another channel, or with a bad URL,
// user, password or mail chat, is refused with -32602 invalid_argument
// naming the problem, and changes nothing; no error holds the password.
func TestLoginInvalid(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindEmail)
	h.set(api.CmdChannelSet{Channel: "local", Account: "mail", Enabled: false, Purpose: ptr(api.PurposeMail)})
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: false})
	h.set(api.CmdChannelSet{Channel: "email", Account: "idle", Enabled: false})
	rows, components := h.rows(), h.m.Components()
	ok := login("work", "imaps://mail.example.com", "me", secret, ptr("local:mail"))
	with := func(f func(*api.CmdChannelLogin)) api.CmdChannelLogin {
		c := ok
		f(&c)
		return c
	}
	for _, c := range []struct {
		name string
		cmd  api.CmdChannelLogin
		want string
	}{
		{"another channel", with(func(c *api.CmdChannelLogin) { c.Channel = "wechat" }), "channel_login: channel wechat takes no login: only email does"},
		{"an unknown channel", with(func(c *api.CmdChannelLogin) { c.Channel = "irc" }), `unknown channel "irc"`},
		{"a bad account", with(func(c *api.CmdChannelLogin) { c.Account = "a b" }), `account "a b"`},
		{"not IMAP", with(func(c *api.CmdChannelLogin) { c.IMAP = "pop3://mail.example.com" }), "want imaps:// (TLS) or imap:// (STARTTLS), not pop3://"},
		{"a password in the URL", with(func(c *api.CmdChannelLogin) { c.IMAP = "imaps://me:" + secret + "@mail.example.com" }), "email.imap holds a user or password"},
		{"no user", with(func(c *api.CmdChannelLogin) { c.User = "" }), "email.user is empty"},
		{"no password", with(func(c *api.CmdChannelLogin) { c.Password = "" }), "the password is empty"},
		{"a password of two lines", with(func(c *api.CmdChannelLogin) { c.Password = secret + "\n" + secret }), "one line"},
		{"a password too long", with(func(c *api.CmdChannelLogin) { c.Password = strings.Repeat(secret, 100) }), "longer than 1024 bytes"},
		{"no mail chat for a new account", with(func(c *api.CmdChannelLogin) { c.MailChat = nil }), "email.mail_chat is empty"},
		{"an empty mail chat", with(func(c *api.CmdChannelLogin) { c.MailChat = ptr("") }), "email.mail_chat is empty"},
		{"an unknown mail chat", with(func(c *api.CmdChannelLogin) { c.MailChat = ptr("local:nope") }), "email.mail_chat local:nope: no such chat account"},
		{"a mail chat of purpose chat", with(func(c *api.CmdChannelLogin) { c.MailChat = ptr("local:owner") }), "is a chat of purpose chat"},
		{"an email account as mail chat", with(func(c *api.CmdChannelLogin) { c.MailChat = ptr("email:idle") }), "is an email account"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := h.m.Login(ctx, c.cmd)
			requireInvalid(t, err, c.want)
			assert.NotContains(t, err.Error(), secret)
			assert.Equal(t, rows, h.rows(), "no row changed")
			assert.Equal(t, components, h.m.Components(), "no component changed")
			assert.Zero(t, tc.made.Load(), "no connector started")
		})
	}
}

// TestLoginCommandPrintsNoPassword: the command prints and logs without
// its password.
func TestLoginCommandPrintsNoPassword(t *testing.T) {
	c := login("work", "imaps://mail.example.com", "me", secret, ptr("local:mail"))
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c)} {
		assert.NotContains(t, s, secret)
		assert.Contains(t, s, "email:work imap imaps://mail.example.com user me password [secret] mail_chat local:mail")
	}
	c.IMAP = "imaps://me:" + secret + "@mail.example.com"
	assert.NotContains(t, c.String(), secret)
}
