package channels_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
	"scv/ledger/local"
)

// secret is the password of the tests' email accounts: no output may hold
// it.
const secret = "hunter2-Sup3rSecret"

// passwordFile writes a password file holding text and returns its path.
func (h *harness) passwordFile(name, text string) string {
	h.t.Helper()
	p := filepath.Join(h.dir, name)
	require.NoError(h.t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// emailFile is a settings file with the mail chat local:mail and the
// email account email:work, whose email object is email (JSON).
func emailFile(email string) string {
	return `{"accounts":[
		{"channel":"local","account":"mail","purpose":"mail"},
		{"channel":"email","account":"work","email":` + email + `}
	]}`
}

// TestReloadEmailAccount: the settings file's email object (the issue's
// example) is read whole; the password file's content, one trailing
// newline trimmed, becomes the account's password, which the connector
// gets; the settings hold the file's path, never the password; nothing
// shown holds it.
func TestReloadEmailAccount(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindEmail)
	pw := h.passwordFile("work.pass", secret+"\n")
	h.writeFile(emailFile(fmt.Sprintf(`{
		"imap": "imaps://mail.example.com", "user": "me@example.com", "password_file": %q,
		"mail_chat": "local:mail", "report_from": ["boss@example.com", "@client.example"], "skip_from": ["news@example.com"],
		"triage_agent": ["gemini", "--experimental-acp"], "token_budget": 200000,
		"digest_every": "15m", "digests_per_day": 24, "poll": "30s", "time_zone": "Europe/Berlin"}`, pw)))
	require.NoError(t, h.m.Reload(ctx))

	want := &channels.Email{IMAP: "imaps://mail.example.com", User: "me@example.com", PasswordFile: pw,
		MailChat: "local:mail", ReportFrom: []string{"boss@example.com", "@client.example"}, SkipFrom: []string{"news@example.com"},
		TriageAgent: []string{"gemini", "--experimental-acp"}, TokenBudget: 200000,
		DigestEvery: channels.Duration(15 * time.Minute), DigestsPerDay: 24, Poll: channels.Duration(30 * time.Second),
		TimeZone: "Europe/Berlin"}
	s, ok := h.m.Settings("email:work")
	require.True(t, ok)
	assert.Equal(t, want, s.Email)
	assert.Equal(t, channels.Secret(secret), s.Password, "the file's content, its newline trimmed")
	assert.True(t, s.Enabled)
	r := tc.next(t)
	assert.Equal(t, channels.Secret(secret), r.Settings.Password, "the connector gets the password")
	assert.Equal(t, want, r.Settings.Email)

	shown, err := json.Marshal(h.m.Components())
	require.NoError(t, err)
	assert.NotContains(t, string(shown), secret)
	assert.NotContains(t, fmt.Sprintf("%v %+v %#v", s, s, s), secret, "Settings print without the password")

	// The same file again changes nothing: the lists compare by value.
	rows := h.rows()
	h.clock.Advance(time.Second)
	require.NoError(t, h.m.Reload(ctx))
	assert.Equal(t, rows, h.rows(), "nothing rewritten")
	tc.none(t)

	// A new password in the file restarts the account with it.
	require.NoError(t, os.WriteFile(pw, []byte("n3w-"+secret+"\r\n"), 0o600))
	require.NoError(t, h.m.Reload(ctx))
	r = tc.next(t)
	assert.Equal(t, channels.Secret("n3w-"+secret), r.Settings.Password, "\\r\\n trimmed too")
}

// TestReloadEmailMailChat: the mail chat may be an account the file does
// not list but the daemon keeps (an api account of purpose mail); a file
// account the reload removes does not count.
func TestReloadEmailMailChat(t *testing.T) {
	h := newHarness(t)
	pw := h.passwordFile("pw", secret)
	h.set(api.CmdChannelSet{Channel: "telegram", Account: "mail", Enabled: false, Purpose: ptr(api.PurposeMail)})
	email := fmt.Sprintf(`{"imap":"imap://mail.example.com:143","user":"me","password_file":%q,"mail_chat":"telegram:mail"}`, pw)
	h.writeFile(`{"accounts":[{"channel":"email","account":"work","email":` + email + `}]}`)
	require.NoError(t, h.m.Reload(ctx), "imap:// to a remote host is accepted: the connector requires STARTTLS")

	// local:mail listed once, then dropped while an account names it.
	h.writeFile(emailFile(strings.ReplaceAll(email, "telegram:mail", "local:mail")))
	require.NoError(t, h.m.Reload(ctx))
	rows := h.rows()
	h.writeFile(`{"accounts":[{"channel":"email","account":"work","email":` + strings.ReplaceAll(email, "telegram:mail", "local:mail") + `}]}`)
	requireInvalid(t, h.m.Reload(ctx), "accounts[0]: email.mail_chat local:mail: no such chat account")
	assert.Equal(t, rows, h.rows())
}

// TestReloadEmailInvalid: every bad email object the issue names is
// refused with -32602 invalid_argument naming the field, and nothing
// changes; no error holds the password or a password in a URL.
func TestReloadEmailInvalid(t *testing.T) {
	h := newHarness(t)
	pw := h.passwordFile("pw", secret+"\n")
	h.writeFile(`{"accounts":[{"channel":"local","account":"mail","purpose":"mail"}]}`)
	require.NoError(t, h.m.Reload(ctx))
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	h.waitState("local:owner", api.ComponentConnected)
	rows, components := h.rows(), h.m.Components()

	good := map[string]any{"imap": "imaps://mail.example.com", "user": "me@example.com", "password_file": pw, "mail_chat": "local:mail"}
	with := func(k string, v any) string {
		e := map[string]any{}
		for k, v := range good {
			e[k] = v
		}
		if v == nil {
			delete(e, k)
		} else {
			e[k] = v
		}
		b, err := json.Marshal(e)
		require.NoError(t, err)
		return emailFile(string(b))
	}
	raw := func(k, v string) string { // a member of any JSON value
		return strings.Replace(with(k, "X"), `"`+k+`":"X"`, `"`+k+`":`+v, 1)
	}
	many := make([]string, channels.MaxFromRules+1)
	for i := range many {
		many[i] = fmt.Sprintf("a%d@example.com", i)
	}
	for _, c := range []struct{ name, file, want string }{
		{"http URL", with("imap", "http://mail.example.com"), `email.imap "http://mail.example.com": want imaps:// (TLS) or imap:// (STARTTLS), not http://`},
		{"no scheme", with("imap", "mail.example.com"), "before the host"},
		{"password in the URL", with("imap", "imaps://me:"+secret+"@mail.example.com"), "email.imap holds a user or password"},
		{"no host", with("imap", "imaps://:993"), "has no host"},
		{"a path", with("imap", "imaps://mail.example.com/INBOX"), "without a path"},
		{"bad port", with("imap", "imaps://mail.example.com:99999"), `port "99999"`},
		{"empty URL", with("imap", nil), "email.imap is empty"},
		{"empty user", with("user", ""), "email.user is empty"},
		{"user with a newline", with("user", "me\nyou"), "control character"},
		{"password file missing", with("password_file", filepath.Join(h.dir, "nope")), "email.password_file " + filepath.Join(h.dir, "nope") + " does not exist"},
		{"password file relative", with("password_file", "pw"), `email.password_file "pw" is not an absolute path`},
		{"password file unreadable", with("password_file", h.dir), "cannot be read"},
		{"password file empty", with("password_file", h.passwordFile("empty", "\n")), "the password is empty"},
		{"password file of two lines", with("password_file", h.passwordFile("two", secret+"\nmore\n")), "one line"},
		{"no mail chat", with("mail_chat", nil), "email.mail_chat is empty"},
		{"mail chat unknown", with("mail_chat", "local:nope"), "email.mail_chat local:nope: no such chat account"},
		{"mail chat of purpose chat", with("mail_chat", "local:owner"), "email.mail_chat local:owner is a chat of purpose chat"},
		{"mail chat malformed", with("mail_chat", "mail"), `email.mail_chat: chat "mail": want <channel>:<account>`},
		{"mail chat an email account", with("mail_chat", "email:work"), "is an email account"},
		{"report_from not an address", with("report_from", []string{"boss"}), `email.report_from[0]: "boss": want an address`},
		{"skip_from two @", with("skip_from", []string{"a@b@c"}), "email.skip_from[0]"},
		{"skip_from bare @", with("skip_from", []string{"@"}), `"" is not a domain name`},
		{"report_from with a name", with("report_from", []string{"Boss <boss@example.com>"}), "without a name"},
		{"too many rules", with("report_from", many), fmt.Sprintf("more than %d entries", channels.MaxFromRules)},
		{"digest_every under 1s", with("digest_every", "500ms"), `email.digest_every: want a duration such as "15m" or "30s", at least 1s`},
		{"poll zero", with("poll", "0s"), "email.poll: want a duration"},
		{"poll not a duration", with("poll", "soon"), "email.poll: want a duration"},
		{"digest_every a number", raw("digest_every", "15"), "email.digest_every: want a duration"},
		{"digests_per_day zero", raw("digests_per_day", "0"), "email.digests_per_day: want a whole number, at least 1"},
		{"digests_per_day a string", raw("digests_per_day", `"24"`), "email.digests_per_day: want a whole number"},
		{"digests_per_day too many", raw("digests_per_day", "86401"), "email.digests_per_day 86401: want 1 to 86400"},
		{"token_budget a string", raw("token_budget", `"lots"`), "email.token_budget: want a whole number of tokens"},
		{"token_budget negative", raw("token_budget", "-5"), "email.token_budget: want a whole number of tokens"},
		{"token_budget a fraction", raw("token_budget", "1.5"), "email.token_budget: want a whole number of tokens"},
		{"time zone unknown", with("time_zone", "Mars/Olympus_Mons"), `email.time_zone "Mars/Olympus_Mons": not a time zone`},
		{"triage agent empty", raw("triage_agent", "[]"), "email.triage_agent: the command is empty"},
		{"triage agent empty command", raw("triage_agent", `["", "x"]`), "email.triage_agent: the command is empty"},
		{"triage agent not a list", raw("triage_agent", `"gemini"`), "email.triage_agent: want a list"},
		{"unknown field", raw("imap_url", `"x"`), `email: json: unknown field "imap_url"`},
		{"email on a chat account", `{"accounts":[{"channel":"local","account":"mail","purpose":"mail","email":{"imap":"imaps://h","user":"u","mail_chat":"local:mail"}}]}`, "local:mail: only an email account has email settings"},
		{"enabled email without email", `{"accounts":[{"channel":"email","account":"work"}]}`, "email:work: an enabled email account needs its email settings"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.writeFile(c.file)
			err := h.m.Reload(ctx)
			requireInvalid(t, err, c.want)
			assert.Contains(t, err.Error(), h.file, "names the file")
			assert.NotContains(t, err.Error(), secret)
			assert.Equal(t, rows, h.rows(), "no row changed")
			assert.Equal(t, components, h.m.Components(), "no component changed")
		})
	}

	// A disabled email account may wait for its settings.
	h.writeFile(`{"accounts":[{"channel":"email","account":"work","enabled":false}]}`)
	require.NoError(t, h.m.Reload(ctx))
}

// TestIsLoopback: the hosts a connector may speak plain text to.
func TestIsLoopback(t *testing.T) {
	for u, want := range map[string]bool{
		"imap://127.0.0.1:1143": true, "imap://127.8.9.1": true, "imap://[::1]:143": true, "imap://localhost": true,
		"imap://LOCALHOST:143": true, "imap://mail.example.com": false, "imap://10.0.0.1": false, "imap://[::2]": false,
		"imap://localhost.example.com": false, "::": false,
	} {
		assert.Equal(t, want, channels.IsLoopback(u), u)
	}
}

// TestEmailStored: an email account's settings and password survive a
// daemon restart (a new Manager on the reopened ledger): the settings in
// the row's email column, the password in its credentials, nowhere else
// in the row. channel_logout removes the row, settings and credentials
// with it, and the account stays gone after a restart.
func TestEmailStored(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindEmail)
	pw := h.passwordFile("pw", secret+"\n")
	h.writeFile(emailFile(fmt.Sprintf(`{"imap":"imaps://mail.example.com","user":"me","password_file":%q,"mail_chat":"local:mail","skip_from":["@news.example"],"poll":"5s"}`, pw)))
	require.NoError(t, h.m.Reload(ctx))
	tc.next(t)
	saved, _ := h.m.Settings("email:work")

	rows := h.rows()
	require.Len(t, rows, 2)
	row := rows[0]
	require.Equal(t, "email", row.Channel)
	assert.JSONEq(t, fmt.Sprintf(`{"imap":"imaps://mail.example.com","user":"me","password_file":%q,"mail_chat":"local:mail","skip_from":["@news.example"],"poll":"5s"}`, pw), row.Email)
	assert.JSONEq(t, fmt.Sprintf(`{"password":%q}`, secret), row.Credentials, "the password is in the credentials")
	row.Credentials = ""
	assert.NotContains(t, fmt.Sprintf("%+v", row), secret, "and nowhere else in the row")
	assert.Empty(t, rows[1].Email, "a chat account has no email settings")

	h.restart()
	again, ok := h.m.Settings("email:work")
	require.True(t, ok)
	assert.Equal(t, saved, again, "the same settings and password after a restart")
	assert.Equal(t, channels.Secret(secret), again.Password)
	r := tc.next(t)
	assert.Equal(t, channels.Secret(secret), r.Settings.Password, "the restarted connector gets the password")

	require.NoError(t, h.m.Logout(ctx, api.CmdChannelLogout{Channel: "email", Account: "work"}))
	assert.False(t, h.has("email:work"))
	for _, row := range h.rows() {
		assert.NotEqual(t, "email", row.Channel)
		assert.NotContains(t, fmt.Sprintf("%+v", row), secret)
	}
	h.restart()
	assert.False(t, h.has("email:work"), "gone after a restart too")
	_, ok = h.m.Settings("email:work")
	assert.False(t, ok)
}

// TestEmailStoredUnreadable: a stored email account whose settings or
// credentials cannot be read is shown failed, saying which, without what
// the credentials hold, and can be logged out.
func TestEmailStoredUnreadable(t *testing.T) {
	h := newHarness(t)
	bad := channelRow("email", "work")
	bad.Email = `{"imap":"imaps://mail.example.com","user":"me","mail_chat":"local:mail","poll":"1ms"}`
	worse := channelRow("email", "home")
	worse.Email = `{"imap":"imaps://mail.example.com","user":"me","mail_chat":"local:mail"}`
	worse.Credentials = `{"password":["` + secret + `"]}`
	require.NoError(t, h.l.ReplaceChannelAccounts(ctx, []local.ChannelAccount{bad, worse}, nil))
	h.m.Close()
	h.m = h.manager()
	require.NoError(t, h.m.Load(ctx))

	c := h.component("email:work")
	assert.Equal(t, api.ComponentFailed, c.State)
	require.NotNil(t, c.Error)
	assert.Contains(t, *c.Error, "stored settings are invalid: the stored email settings cannot be read: email.poll: want a duration")
	c = h.component("email:home")
	assert.Equal(t, api.ComponentFailed, c.State)
	require.NotNil(t, c.Error)
	assert.Equal(t, "stored settings are invalid: the stored credentials cannot be read", *c.Error)
	require.NoError(t, h.m.Logout(ctx, api.CmdChannelLogout{Channel: "email", Account: "home"}))
	assert.False(t, h.has("email:home"))
}

// channelRow is a stored enabled account with the defaults.
func channelRow(channel, account string) local.ChannelAccount {
	return local.ChannelAccount{Channel: channel, Account: account, Enabled: true, RemoteTools: "none",
		Senders: "owner", Purpose: "chat", Source: "api", Updated: 1}
}

// TestPasswordNeverShown: through a reload, a connector's failures and
// restarts, a restart of the daemon and a logout, neither the components
// nor the Manager's log (at debug level) hold the password.
func TestPasswordNeverShown(t *testing.T) {
	h := newHarness(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.m.Logger = logger
	tc := h.plug(channels.KindEmail)
	pw := h.passwordFile("pw", secret)
	h.writeFile(emailFile(fmt.Sprintf(`{"imap":"imaps://mail.example.com","user":"me","password_file":%q,"mail_chat":"local:mail"}`, pw)))
	require.NoError(t, h.m.Reload(ctx))
	r := tc.next(t)
	r.Connected()
	r.Fail(fmt.Errorf("connection reset"))
	h.waitState("email:work", api.ComponentBackoff)
	h.clock.Advance(time.Minute)
	r = tc.next(t)
	r.FailPermanently(fmt.Errorf("the server refused the credentials of user me"))
	h.waitState("email:work", api.ComponentFailed)
	shown, err := json.Marshal(h.m.Components())
	require.NoError(t, err)
	assert.NotContains(t, string(shown), secret)

	h.m.Close()
	h.m = h.manager()
	h.m.Logger = logger
	require.NoError(t, h.m.Load(ctx))
	tc.next(t)
	require.NoError(t, h.m.Logout(ctx, api.CmdChannelLogout{Channel: "email", Account: "work"}))
	assert.Contains(t, logs.String(), "email:work", "the log speaks of the account")
	assert.NotContains(t, logs.String(), secret)
}
