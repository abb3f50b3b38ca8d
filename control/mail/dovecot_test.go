package mail_test

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/agents/acpagenttest"
	"scv/control/api"
	"scv/control/channels"
	"scv/control/mail"
	"scv/control/mail/dovecottest"
	"scv/control/mail/imap"
)

// The account against a real IMAP server: a private Dovecot
// (dovecottest), mail delivered with IMAP APPEND, the account's IMAP
// client (control/mail/imap) over STARTTLS, and a real triage agent: the
// project's scripted ACP agent (cmd/internal/acpagent --steps-only), whose
// script hides in each mail's text and which reports usage.

// withDovecot is env on a private Dovecot, its account the server's user
// over STARTTLS, triaged by the scripted agent (a private live agent, as
// the daemon starts one).
func withDovecot(t *testing.T) (*env, *dovecottest.Server) {
	t.Helper()
	d := dovecottest.Start(t)
	e := newEnv(t)
	e.s.Dial = imap.Options{RootCAs: d.CAPool()}.Dial
	e.s.Triage = mail.AgentTriage(t.TempDir(), os.Environ(),
		slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	e.set.Email.IMAP, e.set.Email.User, e.set.Password = d.URL(), d.User(), channels.Secret(d.Password())
	e.set.Email.TriageAgent = []string{acpagenttest.Binary(t), "--state", t.TempDir(), "--steps-only"}
	e.set.Email.Poll = channels.Duration(time.Hour) // IDLE, or nothing
	return e, d
}

// deliver appends a mail to the server's user's INBOX.
func deliver(t *testing.T, d *dovecottest.Server, from, subject, text string, headers ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%d.%s@test.example>\r\n",
		from, d.User(), subject, start.Format(time.RFC1123Z), time.Now().UnixNano(), strings.ReplaceAll(subject, " ", "-"))
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
	b.WriteString(strings.ReplaceAll(text, "\n", "\r\n") + "\r\n")
	d.Append(t, d.User(), []byte(b.String()))
}

// TestDovecotTwentyMails: 20 mails, a third from a rule's sender, a third
// bulk, a third for the triage agent (which reports usage): every count
// as expected, the digest as expected in the local mail chat, no subject
// or address of them in the log; then a new mail wakes the account
// through IDLE.
func TestDovecotTwentyMails(t *testing.T) {
	e, d := withDovecot(t)
	var subjects []string
	for i := range 7 {
		s := fmt.Sprintf("Boss memo %d", i+1)
		deliver(t, d, "The Boss <boss@example.com>", s, "Please read.")
		subjects = append(subjects, s)
	}
	for i := range 7 {
		s := fmt.Sprintf("Newsletter issue %d", i+1)
		deliver(t, d, "news@lists.example", s, "All the news.", "List-Id: News <news.lists.example>")
		subjects = append(subjects, s)
	}
	for i := range 6 {
		s := fmt.Sprintf("Friendly note %d", i+1)
		answer := fmt.Sprintf("say report: friend %d asks for a call", i+1)
		if i%3 == 2 {
			answer = "say skip: an advertisement"
		}
		deliver(t, d, fmt.Sprintf("Friend %d <friend%d@home.example>", i+1, i+1), s, "Hello!\n"+answer+"\nusage 100 20\nBye.")
		subjects = append(subjects, s)
	}
	e.run()
	c := e.until("all twenty decided and sent", func(c api.MailCounts) bool { return c.SeenToday == 20 && c.Messages24h == 1 })
	assert.Equal(t, api.MailCounts{SeenToday: 20, TriagedToday: 6, ReportedToday: 11, TokensToday: 720, Messages24h: 1}, c)
	assert.Contains(t, e.h.list(), "connected")

	digests := e.digests()
	require.Len(t, digests, 1)
	var want strings.Builder
	want.WriteString("Mail for work: 11 to report.")
	for i := range 7 {
		fmt.Fprintf(&want, "\n%d. The Boss <boss@example.com>: Boss memo %d", i+1, i+1)
	}
	n := 8
	for i := range 6 {
		if i%3 == 2 {
			continue
		}
		fmt.Fprintf(&want, "\n%d. Friend %d <friend%d@home.example>: Friendly note %d\n   friend %d asks for a call", n, i+1, i+1, i+1, i+1)
		n++
	}
	assert.Equal(t, want.String(), digests[0].Question)

	// IDLE: a new mail wakes the account at once (the poll is an hour).
	began := time.Now()
	deliver(t, d, "boss@example.com", "Boss memo 8", "Now.")
	e.until("woken by IDLE", func(c api.MailCounts) bool { return c.SeenToday == 21 })
	t.Logf("a new mail decided %s after its APPEND", time.Since(began).Round(time.Millisecond))

	require.NoError(t, e.stop())
	logged := e.logs.String()
	for _, s := range append(subjects, "Boss memo 8", "boss@", "friend1@", "asks for a call", "advertisement", d.Password()) {
		assert.NotContains(t, logged, s, "nothing of a mail in the log")
	}
	for _, r := range e.journal() {
		assert.NotContains(t, r.Data, "@")
	}
}

// TestDovecotStopStart: the server stopped, the account is disconnected
// (its Run ends with the error, for the manager's backoff); started again,
// a new run decides what came meanwhile, and nothing is lost or decided
// twice.
func TestDovecotStopStart(t *testing.T) {
	e, d := withDovecot(t)
	deliver(t, d, "boss@example.com", "Before", "x")
	e.run()
	e.until("decided", func(c api.MailCounts) bool { return c.SeenToday == 1 })
	d.Stop()
	err := e.ended()
	require.Error(t, err, "the connection lost")
	assert.False(t, channels.IsPermanent(err))
	events := e.h.list()
	assert.True(t, strings.HasPrefix(events[len(events)-1], "disconnected: "), "%v", events)

	e.run()
	err = e.ended()
	require.Error(t, err, "no server: the dial fails, to be retried")
	assert.False(t, channels.IsPermanent(err))

	d.Start()
	deliver(t, d, "boss@example.com", "While away", "x")
	deliver(t, d, "boss@example.com", "And another", "x")
	e.run()
	e.until("nothing lost", func(c api.MailCounts) bool { return c.SeenToday == 3 && c.Queued == 2 })
	e.clock.Advance(15 * time.Minute)
	e.until("the next digest", func(c api.MailCounts) bool { return c.Queued == 0 && c.Messages24h == 2 })
	require.NoError(t, e.stop())
	for k, n := range steps(e.journal()) {
		assert.Equal(t, 1, n, k)
	}
	digests := e.digests()
	require.Len(t, digests, 2)
	assert.Equal(t, "Mail for work: 1 to report.\n1. boss@example.com: Before", digests[0].Question)
	assert.Equal(t, "Mail for work: 2 to report.\n1. boss@example.com: While away\n2. boss@example.com: And another", digests[1].Question)
}

// TestDovecotWrongPassword: the server refuses the password: the account
// fails for good, with an error that names the refusal and holds no
// secret.
func TestDovecotWrongPassword(t *testing.T) {
	e, d := withDovecot(t)
	e.set.Password = "not-the-password-42"
	e.run()
	err := e.ended()
	require.Error(t, err)
	assert.True(t, channels.IsPermanent(err), "failed, not retried")
	assert.ErrorIs(t, err, mail.ErrRefused)
	assert.Contains(t, err.Error(), "refused")
	assert.NotContains(t, err.Error(), "not-the-password-42")
	assert.NotContains(t, err.Error(), d.Password())
	assert.NotContains(t, e.logs.String(), "not-the-password-42")
}

// TestDovecotBudget: once the day's tokens reach the budget the rest wait,
// unclaimed; the next day (the injected clock) they are triaged.
func TestDovecotBudget(t *testing.T) {
	e, d := withDovecot(t)
	e.set.Email.TokenBudget = 250
	for i := range 5 {
		deliver(t, d, fmt.Sprintf("friend%d@home.example", i+1), fmt.Sprintf("Note %d", i+1),
			fmt.Sprintf("say report: note %d\nusage 100 20", i+1))
	}
	e.run()
	c := e.until("the budget reached", func(c api.MailCounts) bool { return c.SeenToday == 3 && c.Messages24h == 1 })
	assert.Equal(t, api.MailCounts{SeenToday: 3, TriagedToday: 3, ReportedToday: 3, TokensToday: 360, TokenBudget: 250, Messages24h: 1}, c,
		"the third began under the budget; the fourth and fifth wait, unclaimed")
	e.clock.Advance(14 * time.Hour) // 23:00 UTC: the next day in Berlin
	c = e.until("the next day", func(c api.MailCounts) bool { return c.SeenToday == 2 && c.Messages24h == 2 })
	assert.Equal(t, api.MailCounts{SeenToday: 2, TriagedToday: 2, ReportedToday: 2, TokensToday: 240, TokenBudget: 250, Messages24h: 2}, c)
	require.NoError(t, e.stop())
	assert.Len(t, e.digests(), 2)
}
