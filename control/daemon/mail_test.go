package daemon

import (
	"context"
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

	"scv/control/agents/acpagenttest"
	"scv/control/api"
	"scv/control/mail/dovecottest"
	"scv/control/mail/imap"
)

// The email accounts in the daemon (docs/mail.md), against a private
// Dovecot (dovecottest), triaged by the project's scripted ACP agent
// (cmd/internal/acpagent --steps-only: the script hides in each mail's
// text, and reports usage).

// mailSettings writes a settings file with the mail chat local:mail and
// the email account email:work on server d (its URL url), the password in
// a file of its own; fields are the account's email object's other
// fields. It returns the file's path.
func mailSettings(t *testing.T, dir, url string, d *dovecottest.Server, password string, fields map[string]any) string {
	t.Helper()
	pass := filepath.Join(dir, "work.pass")
	require.NoError(t, os.WriteFile(pass, []byte(password+"\n"), 0o600))
	email := map[string]any{"imap": url, "user": d.User(), "password_file": pass, "mail_chat": "local:mail",
		"report_from": []string{"boss@example.com"}, "time_zone": "UTC",
		"triage_agent": []string{acpagenttest.Binary(t), "--state", filepath.Join(dir, "acpagent"), "--steps-only"}}
	for k, v := range fields {
		email[k] = v
	}
	b, err := json.Marshal(map[string]any{"accounts": []any{
		map[string]any{"channel": "local", "account": "mail", "purpose": "mail"},
		map[string]any{"channel": "email", "account": "work", "email": email},
	}})
	require.NoError(t, err)
	path := filepath.Join(dir, "channels.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// deliver appends a mail from from to d's user's INBOX.
func deliver(t *testing.T, d *dovecottest.Server, from, subject, text string, headers ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%d@test.example>\r\n",
		from, d.User(), subject, time.Now().Format(time.RFC1123Z), time.Now().UnixNano())
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n" + strings.ReplaceAll(text, "\n", "\r\n") + "\r\n")
	d.Append(t, d.User(), []byte(b.String()))
}

// component is the component id of a status reply.
func component(st *api.DaemonStatus, id string) (api.ComponentHealth, bool) {
	for _, c := range st.Components {
		if c.ID == id {
			return c, true
		}
	}
	return api.ComponentHealth{}, false
}

// waitComponent waits until ask's component id satisfies ok.
func waitComponent(t *testing.T, ask func() (*api.DaemonStatus, error), id, what string, ok func(api.ComponentHealth) bool) api.ComponentHealth {
	t.Helper()
	var last api.ComponentHealth
	require.Eventually(t, func() bool {
		st, err := ask()
		if err != nil {
			return false
		}
		c, found := component(st, id)
		last = c
		return found && ok(c)
	}, 60*time.Second, 20*time.Millisecond, "%s: %s is %+v (mail %+v)", what, id, func() api.ComponentHealth { return last }(),
		func() any {
			if last.Mail == nil {
				return nil
			}
			return *last.Mail
		}())
	return last
}

// TestMailAccountInTheDaemon: 20 mails (a third from the rule's sender, a
// third bulk, a third for the triage agent) through the daemon: status
// shows every count as expected on the account's component (and
// `purpose: mail` on the mail chat), the digest is in the local mail chat,
// and no subject of them is in the daemon's log. Then the server is
// stopped (disconnected, then connected again once it is back, nothing
// lost), and a wrong password fails the account with an error that names
// the refusal and holds no secret.
func TestMailAccountInTheDaemon(t *testing.T) {
	dc := dovecottest.Start(t)
	dir := shortDir(t)
	logs := &syncBuffer{}
	cfgPath := mailSettings(t, dir, dc.URL(), dc, dc.Password(), map[string]any{"token_budget": 100000})
	d, _ := serve(t, Config{ConfigPath: cfgPath, MailDial: imap.Options{RootCAs: dc.CAPool()}.Dial,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c := dial(t, d.cfg.Socket)
	ask := func() (*api.DaemonStatus, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Call(ctx, api.CmdStatus{})
	}

	var subjects []string
	for i := range 7 {
		subjects = append(subjects, fmt.Sprintf("Boss memo %d", i+1))
		deliver(t, dc, "The Boss <boss@example.com>", subjects[len(subjects)-1], "Please read.")
	}
	for i := range 7 {
		subjects = append(subjects, fmt.Sprintf("Newsletter issue %d", i+1))
		deliver(t, dc, "news@lists.example", subjects[len(subjects)-1], "News.", "List-Id: <news.lists.example>")
	}
	for i := range 6 {
		subjects = append(subjects, fmt.Sprintf("Friendly note %d", i+1))
		answer := fmt.Sprintf("say report: friend %d asks for a call", i+1)
		if i%3 == 2 {
			answer = "say skip: an advertisement"
		}
		deliver(t, dc, fmt.Sprintf("friend%d@home.example", i+1), subjects[len(subjects)-1], "Hi!\n"+answer+"\nusage 100 20")
	}
	must(t, c, api.CmdReload{})
	w := waitComponent(t, ask, "email:work", "twenty decided, one digest", func(c api.ComponentHealth) bool {
		return c.Mail != nil && c.Mail.SeenToday == 20 && c.Mail.Messages24h == 1
	})
	assert.Equal(t, api.ComponentConnected, w.State)
	require.NotNil(t, w.LastSuccessUnixSeconds)
	require.NotNil(t, w.Mail.LastCheckUnixSeconds)
	m := *w.Mail
	m.LastCheckUnixSeconds = nil
	assert.Equal(t, api.MailCounts{SeenToday: 20, TriagedToday: 6, ReportedToday: 11, TokensToday: 720, TokenBudget: 100000,
		Messages24h: 1}, m)
	st, err := ask()
	require.NoError(t, err)
	chat, ok := component(st, "local:mail")
	require.True(t, ok)
	assert.Equal(t, ptr(api.PurposeMail), chat.Purpose)
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	t.Logf("status of the account after the twenty mails: %s", mailJSON(t, st))

	mailChat := "local:mail"
	qs := must(t, c, api.CmdConfirmList{Chat: &mailChat}).Questions
	require.Len(t, qs, 1)
	assert.Equal(t, api.ConfirmNotice, qs[0].State)
	for i := range 7 {
		assert.Contains(t, qs[0].Question, fmt.Sprintf("%d. The Boss <boss@example.com>: Boss memo %d\n", i+1, i+1))
	}
	assert.Contains(t, qs[0].Question, "8. friend1@home.example: Friendly note 1\n   friend 1 asks for a call\n")
	assert.True(t, strings.HasSuffix(qs[0].Question, "11. friend5@home.example: Friendly note 5\n   friend 5 asks for a call"), qs[0].Question)
	assert.NotContains(t, qs[0].Question, "Newsletter")
	assert.NotContains(t, qs[0].Question, "Friendly note 3")

	// The server stopped: disconnected (then the manager's backoff); back:
	// connected, and the mail that came meanwhile decided.
	dc.Stop()
	waitComponent(t, ask, "email:work", "the connection lost", func(c api.ComponentHealth) bool {
		return c.State != api.ComponentConnected
	})
	dc.Start()
	deliver(t, dc, "boss@example.com", "While the server was down", "x")
	w = waitComponent(t, ask, "email:work", "connected again, nothing lost", func(c api.ComponentHealth) bool {
		return c.State == api.ComponentConnected && c.Mail.SeenToday == 21
	})
	assert.Positive(t, w.Restarts)
	assert.NotContains(t, logs.String(), "While the server was down")

	// A wrong password: failed, for good.
	mailSettings(t, dir, dc.URL(), dc, "not-the-password-42", nil)
	must(t, c, api.CmdReload{})
	w = waitComponent(t, ask, "email:work", "refused", func(c api.ComponentHealth) bool { return c.State == api.ComponentFailed })
	require.NotNil(t, w.Error)
	assert.Contains(t, *w.Error, "refused")
	assert.NotContains(t, *w.Error, "not-the-password-42")
	assert.NotNil(t, w.Mail, "its counts are still shown")

	logged := logs.String()
	for _, s := range append(subjects, "boss@", "friend1@", "asks for a call", "advertisement", "not-the-password-42", dc.Password()) {
		assert.NotContains(t, logged, s, "nothing of a mail, and no secret, in the daemon's log")
	}
	assert.NotContains(t, string(raw), "Boss memo", "status holds counts only")
}

// mailJSON is the email account's component of st, as JSON.
func mailJSON(t *testing.T, st *api.DaemonStatus) string {
	t.Helper()
	c, _ := component(st, "email:work")
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return string(b)
}

// TestMailAccountKilledInTheTriage: the daemon, a process, is killed with
// SIGKILL while the triage agent works on a mail; started again, every
// mail is decided once and reported once, in one digest.
func TestMailAccountKilledInTheTriage(t *testing.T) {
	bin := scvBinary(t, oldRelease)
	dc := dovecottest.Start(t, dovecottest.WithoutTLS()) // the process trusts no test certificate
	dir := shortDir(t)
	cfgPath := mailSettings(t, dir, dc.URL(), dc, dc.Password(), nil)
	db, sock := filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock")

	deliver(t, dc, "boss@example.com", "First", "x")
	deliver(t, dc, "friend@home.example", "Slow one", "sleep 3s\nsay report: the slow one\nusage 50 10")
	deliver(t, dc, "boss@example.com", "Third", "x")
	p := startProcess(t, bin, db, sock, "", "--config", cfgPath)
	p.must(t, api.CmdReload{})
	ask := func() (*api.DaemonStatus, error) { return p.call(api.CmdStatus{}) }
	w := waitComponent(t, ask, "email:work", "in the triage", func(c api.ComponentHealth) bool {
		return c.Mail != nil && c.Mail.Claimed == 1
	})
	t.Logf("killed with %+v", *w.Mail)
	require.True(t, p.Kill())
	assertSIGKILL(t, p.waitExit(t), p.Log())

	began := time.Now()
	p = startProcess(t, bin, db, sock, "", "--config", cfgPath)
	w = waitComponent(t, ask, "email:work", "each decided", func(c api.ComponentHealth) bool {
		return c.Mail != nil && c.Mail.SeenToday == 3 && c.Mail.Queued == 0
	})
	t.Logf("started again: %+v, %s after the start", *w.Mail, time.Since(began).Round(time.Millisecond))
	assert.Equal(t, uint64(1), w.Mail.TriagedToday)
	assert.Equal(t, uint64(3), w.Mail.ReportedToday)
	assert.Equal(t, uint64(60), w.Mail.TokensToday)

	mailChat := "local:mail"
	qs := p.must(t, api.CmdConfirmList{Chat: &mailChat}).Questions
	var digests []string
	for _, q := range qs {
		digests = append(digests, q.Question)
	}
	all := strings.Join(digests, "\n")
	for _, s := range []string{"First", "Slow one", "Third"} {
		assert.Equal(t, 1, strings.Count(all, ": "+s), "%s reported once: %q", s, all)
	}
	p.stop(t)
}
