package mail_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
	"scv/control/mail"
)

// TestAccountDecidesEachMail: every way of deciding, each mail claimed
// and decided once, the reported ones in one digest with their sender,
// subject and summary, the counts as the journal says, and no text of a
// mail in the log.
func TestAccountDecidesEachMail(t *testing.T) {
	e := newEnv(t)
	big := letter("big@files.example", "Big attachment", "")
	big.Size, big.Partial = mail.MaxMailSize+1, true
	part := letter("part@files.example", "Half a mail", "")
	part.Partial = true
	e.box.add(
		letter("boss@example.com", "Q3 numbers", "Send them by Friday."),
		letter("x@spam.example", "Buy now", "cheap"),
		letter("news@lists.example", "Weekly news", "news", "List-Id", "<weekly.lists.example>"),
		letter("friend@home.example", "Dinner", "answer: report: Dinner on Friday at 8\\nmore words"),
		letter("shop@shop.example", "Sale", "answer: skip: an advertisement"),
		letter("odd@odd.example", "Odd one", "answer: I cannot decide this one"),
		big, part,
		letter("crash@odd.example", "Crash it", "fail"),
		letter("after@home.example", "After the crash", "answer: REPORT: the agent was started again"),
	)
	e.run()
	c := e.until("all decided and sent", func(c api.MailCounts) bool { return c.SeenToday == 10 && c.Messages24h == 1 })
	assert.Equal(t, api.MailCounts{SeenToday: 10, TriagedToday: 3, ReportedToday: 7, TokensToday: 500, Messages24h: 1}, c)

	digests := e.digests()
	require.Len(t, digests, 1)
	assert.Equal(t, "mail-work-1", digests[0].ID)
	assert.Equal(t, api.ConfirmNotice, digests[0].State)
	assert.Equal(t, `Mail for work: 7 to report.
1. boss@example.com: Q3 numbers
2. friend@home.example: Dinner
   Dinner on Friday at 8
3. odd@odd.example: Odd one
   the triage answer was not understood
4. big@files.example: Big attachment
   (not triaged: the mail is over the size limit)
5. part@files.example: Half a mail
   (not triaged: the mail could not be read whole)
6. crash@odd.example: Crash it
   (not triaged: the triage agent failed)
7. after@home.example: After the crash
   the agent was started again`, digests[0].Question)

	recs := e.journal()
	want := map[string]int{}
	for uid := 1; uid <= 10; uid++ {
		want[fmt.Sprintf("7/%d claimed", uid)] = 1
		want[fmt.Sprintf("7/%d decided", uid)] = 1
	}
	for _, uid := range []int{1, 4, 6, 7, 8, 9, 10} {
		want[fmt.Sprintf("7/%d sent", uid)] = 1
	}
	assert.Equal(t, want, steps(recs), "each mail claimed and decided once, each reported one sent once")
	var decisions []string
	for _, r := range recs {
		if r.Kind == mail.KindDecided {
			decisions = append(decisions, r.Data)
		}
	}
	assert.Equal(t, []string{
		`{"decision":"reported","by":"rule"}`,
		`{"decision":"skipped","by":"rule"}`,
		`{"decision":"skipped","by":"bulk"}`,
		`{"decision":"reported","by":"triage","tokens":100}`,
		`{"decision":"skipped","by":"triage","tokens":100}`,
		`{"decision":"reported","by":"untriaged","why":"nonsense","tokens":100}`,
		`{"decision":"reported","by":"untriaged","why":"oversize"}`,
		`{"decision":"reported","by":"untriaged","why":"partial"}`,
		`{"decision":"reported","by":"untriaged","why":"triage_failed","tokens":100}`,
		`{"decision":"reported","by":"triage","tokens":100}`,
	}, decisions)
	for _, r := range recs {
		assert.NotContains(t, r.Data, "@", "no address in the journal")
	}
	outbox, err := e.db.MailOutbox(e.ctx, "work")
	require.NoError(t, err)
	assert.Empty(t, outbox, "all sent")

	e.tr.mu.Lock()
	assert.Len(t, e.tr.prompts, 5, "the five mails no rule decides, whole and readable")
	assert.Equal(t, 2, e.tr.started, "started again after the failure")
	e.tr.mu.Unlock()
	assert.Equal(t, []mail.Credentials{{URL: "imaps://mail.example.com", User: "me@example.com", Password: "hunter2"}}, e.box.creds)

	// One more: queued until digest_every has passed since the last.
	e.box.add(letter("boss@example.com", "One more thing", "x"))
	e.until("queued", func(c api.MailCounts) bool { return c.Queued == 1 })
	e.clock.Advance(14 * time.Minute)
	e.until("still queued", func(c api.MailCounts) bool { return c.Queued == 1 && c.SeenToday == 11 })
	assert.Len(t, e.digests(), 1)
	e.clock.Advance(time.Minute)
	e.until("sent", func(c api.MailCounts) bool { return c.Queued == 0 && c.Messages24h == 2 })
	digests = e.digests()
	require.Len(t, digests, 2)
	assert.Equal(t, "Mail for work: 1 to report.\n1. boss@example.com: One more thing", digests[1].Question)

	assert.NoError(t, e.stop())
	assert.Contains(t, e.h.list(), "connected")
	assert.Contains(t, e.h.list(), "success")
	logged := e.logs.String()
	for _, s := range []string{"Q3", "Dinner", "Friday", "advertisement", "@home.example", "boss@", "hunter2", "Crash it", "agent that failed"} {
		assert.NotContains(t, logged, s, "no mail text, address or secret in the log")
	}
}

// TestAccountAfterACrashInTheTriage: the daemon stops in the middle of a
// mail's triage; started again, it decides that mail (once) before any
// other, and the claimed count shows it until then.
func TestAccountAfterACrashInTheTriage(t *testing.T) {
	e := newEnv(t)
	e.tr.blocked = make(chan struct{})
	e.box.add(letter("friend@home.example", "Blocked", "block"), letter("boss@example.com", "Next", "x"))
	e.run()
	<-e.tr.blocked
	assert.Equal(t, api.MailCounts{Claimed: 1}, e.counts())
	e.restart()
	e.until("decided", func(c api.MailCounts) bool { return c.SeenToday == 2 && c.Messages24h == 1 })
	assert.Equal(t, map[string]int{
		"7/1 claimed": 1, "7/1 decided": 1, "7/1 sent": 1,
		"7/2 claimed": 1, "7/2 decided": 1, "7/2 sent": 1,
	}, steps(e.journal()))
	require.Len(t, e.digests(), 1)
	assert.Contains(t, e.digests()[0].Question, "1. friend@home.example: Blocked\n   decided after the restart\n2. boss@example.com: Next")
}

// TestAccountAfterACrashInADigest: a digest told and not recorded sent
// (the daemon stopped in between) is recorded sent at the next start, and
// never told again.
func TestAccountAfterACrashInADigest(t *testing.T) {
	e := newEnv(t)
	e.chats.mu.Lock()
	e.chats.connected = false
	e.chats.mu.Unlock()
	e.box.add(letter("boss@example.com", "Once", "x"), letter("boss@example.com", "Twice", "x"))
	e.run()
	e.until("queued", func(c api.MailCounts) bool { return c.Queued == 2 })
	require.Eventually(t, func() bool { return strings.Contains(e.logs.String(), "the mail chat did not take the digest") },
		20*time.Second, 5*time.Millisecond)
	assert.NoError(t, e.stop())
	assert.Empty(t, e.digests(), "the chat was not connected")

	// The digest as the account told it, just before the daemon died.
	e.chats.mu.Lock()
	e.chats.connected = true
	e.chats.mu.Unlock()
	told, err := e.q.TellMail(e.ctx, "local:mail", "mail-work-1", "Mail for work: 2 to report. (as told)")
	require.NoError(t, err)
	require.True(t, told)
	e.restart()
	e.until("sent", func(c api.MailCounts) bool { return c.Queued == 0 && c.Messages24h == 1 })
	e.clock.Advance(time.Hour)
	e.box.add(letter("boss@example.com", "Thrice", "x"))
	e.until("the next digest", func(c api.MailCounts) bool { return c.Messages24h == 2 })
	digests := e.digests()
	require.Len(t, digests, 2)
	assert.Equal(t, "Mail for work: 2 to report. (as told)", digests[0].Question, "told once")
	assert.Equal(t, "mail-work-2", digests[1].ID)
	assert.Equal(t, "Mail for work: 1 to report.\n1. boss@example.com: Thrice", digests[1].Question)
	for _, uid := range []int{1, 2, 3} {
		assert.Equal(t, 1, steps(e.journal())[fmt.Sprintf("7/%d sent", uid)])
	}
}

// TestAccountDigestWaitsForItsChat: a digest the mail chat cannot take
// waits, and is told once the chat is back and its retry is due.
func TestAccountDigestWaitsForItsChat(t *testing.T) {
	e := newEnv(t)
	e.chats.mu.Lock()
	e.chats.connected = false
	e.chats.mu.Unlock()
	e.box.add(letter("boss@example.com", "Wait for it", "x"))
	e.run()
	e.until("queued", func(c api.MailCounts) bool { return c.Queued == 1 })
	e.chats.mu.Lock()
	e.chats.connected = true
	e.chats.mu.Unlock()
	e.clock.Advance(30 * time.Second)
	e.until("sent", func(c api.MailCounts) bool { return c.Queued == 0 && c.Messages24h == 1 })
	assert.Len(t, e.digests(), 1)
}

// TestAccountBudget: once the day's tokens reach the budget, the next
// mail for the triage waits unclaimed (a rule's mail before it is still
// decided), and the next local day it is triaged.
func TestAccountBudget(t *testing.T) {
	e := newEnv(t)
	e.set.Email.TokenBudget = 250
	e.box.add(
		letter("a@home.example", "One", "answer: report: one"),
		letter("b@home.example", "Two", "answer: report: two"),
		letter("c@home.example", "Three", "answer: skip: three"),
		letter("boss@example.com", "Boss", "x"),
		letter("d@home.example", "Four", "answer: report: four"),
		letter("boss@example.com", "Boss again", "x"),
	)
	e.run()
	c := e.until("held", func(c api.MailCounts) bool { return c.SeenToday == 4 && c.Messages24h == 1 })
	assert.Equal(t, api.MailCounts{SeenToday: 4, TriagedToday: 3, ReportedToday: 3, TokensToday: 300, TokenBudget: 250, Messages24h: 1}, c,
		"three triaged (the third began under the budget), the boss by rule; the fourth and what follows wait, unclaimed")
	assert.NotContains(t, steps(e.journal()), "7/5 claimed")

	// Berlin's next day begins at 23:00 UTC, 14 hours on.
	e.clock.Advance(13*time.Hour + 59*time.Minute)
	e.box.add(letter("boss@example.com", "Late", "x")) // a check on the same day: still held
	e.until("still held", func(c api.MailCounts) bool { return c.SeenToday == 4 })
	assert.NotContains(t, steps(e.journal()), "7/5 claimed")
	e.clock.Advance(time.Minute)
	c = e.until("the next day", func(c api.MailCounts) bool { return c.SeenToday == 3 })
	assert.Equal(t, uint64(100), c.TokensToday)
	assert.Equal(t, uint64(0), c.Claimed)
	assert.Equal(t, 1, steps(e.journal())["7/5 decided"])
}

// TestAccountDigestLimits: at most one digest per digest_every, at most
// digests_per_day a local day, at most MaxDigestMails mails in one.
func TestAccountDigestLimits(t *testing.T) {
	e := newEnv(t)
	e.set.Email.DigestsPerDay = 2
	for i := range mail.MaxCheck + 20 {
		e.box.add(letter("boss@example.com", fmt.Sprintf("Mail %d", i+1), "x"))
	}
	e.run()
	e.until("one digest", func(c api.MailCounts) bool { return c.SeenToday == mail.MaxCheck+20 && c.Messages24h == 1 })
	assert.Equal(t, uint64(mail.MaxCheck+20-mail.MaxDigestMails), e.counts().Queued)
	first := e.digests()[0].Question
	assert.True(t, strings.HasPrefix(first, "Mail for work: 50 to report.\n1. boss@example.com: Mail 1\n"), first)
	assert.True(t, strings.HasSuffix(first, "\n50. boss@example.com: Mail 50\n(70 more in the next digest)"), first)

	e.clock.Advance(15 * time.Minute)
	e.until("two digests", func(c api.MailCounts) bool { return c.Messages24h == 2 })
	e.clock.Advance(15 * time.Minute)
	e.box.add(letter("boss@example.com", "Wake up", "x"))
	e.until("the day's two", func(c api.MailCounts) bool { return c.Queued == 21 })
	assert.Len(t, e.digests(), 2)
	e.clock.Advance(13*time.Hour + 30*time.Minute) // 23:00 UTC: the next day in Berlin
	e.until("the next day's", func(c api.MailCounts) bool { return c.Queued == 0 })
	assert.Len(t, e.digests(), 3)
	assert.Equal(t, uint64(3), e.counts().Messages24h)
}

// TestAccountNewUIDValidity: a mail claimed under the old UIDVALIDITY and
// gone with it is skipped; the box's mails are claimed anew under the new
// one.
func TestAccountNewUIDValidity(t *testing.T) {
	e := newEnv(t)
	e.tr.blocked = make(chan struct{})
	e.box.add(letter("boss@example.com", "First", "x"), letter("friend@home.example", "Blocked", "block"))
	e.run()
	<-e.tr.blocked
	require.NoError(t, e.stop())
	e.box.renumber()
	e.restart()
	e.until("decided anew", func(c api.MailCounts) bool { return c.SeenToday == 4 })
	s := steps(e.journal())
	assert.Equal(t, 1, s["7/2 decided"])
	for _, r := range e.journal() {
		if r.UIDValidity == 7 && r.UID == 2 && r.Kind == mail.KindDecided {
			assert.Equal(t, `{"decision":"skipped","by":"untriaged","why":"gone"}`, r.Data)
		}
	}
	assert.Equal(t, 1, s["8/1 decided"])
	assert.Equal(t, 1, s["8/2 decided"])

	// A mail expunged while claimed is gone too.
	e2 := newEnv(t)
	e2.tr.blocked = make(chan struct{})
	e2.box.add(letter("friend@home.example", "Blocked", "block"))
	e2.run()
	<-e2.tr.blocked
	require.NoError(t, e2.stop())
	e2.box.expunge(1)
	e2.restart()
	e2.until("gone", func(c api.MailCounts) bool { return c.SeenToday == 1 })
	assert.Equal(t, api.MailCounts{SeenToday: 1}, e2.counts())
}

// TestAccountConnection: a refusal of the credentials fails the account
// for good, with no secret in its error; any other failure to connect is
// retried; a connection lost mid-wait is reported, then retried.
func TestAccountConnection(t *testing.T) {
	e := newEnv(t)
	e.box.refuse = true
	e.run()
	err := e.ended()
	require.Error(t, err)
	assert.True(t, channels.IsPermanent(err))
	assert.ErrorIs(t, err, mail.ErrRefused)
	assert.NotContains(t, err.Error(), "hunter2")
	assert.Equal(t, api.MailCounts{}, e.counts(), "its counts are shown all the same")

	e.box.refuse, e.box.down = false, errors.New("connection refused")
	e.run()
	err = e.ended()
	require.Error(t, err)
	assert.False(t, channels.IsPermanent(err))

	e.box.down = nil
	e.run()
	e.box.add(letter("boss@example.com", "Before", "x"))
	e.until("decided", func(c api.MailCounts) bool { return c.SeenToday == 1 })
	e.box.breakWith(errors.New("connection reset by peer"))
	err = e.ended()
	assert.EqualError(t, err, "connection reset by peer")
	assert.False(t, channels.IsPermanent(err))
	assert.Equal(t, "disconnected: connection reset by peer", e.h.list()[len(e.h.list())-1])

	e.run()
	e.box.add(letter("boss@example.com", "After", "x"))
	e.until("nothing lost", func(c api.MailCounts) bool { return c.SeenToday == 2 })
	assert.NoError(t, e.stop())
	assert.NotNil(t, e.s.Counts("work").LastCheckUnixSeconds)
	assert.Nil(t, e.s.Counts("home"), "an account that never ran")
}

// TestAccountWithoutTriage: with no triage agent, or one that does not
// start, the mail no rule decides is reported untriaged.
func TestAccountWithoutTriage(t *testing.T) {
	e := newEnv(t)
	e.set.Email.TriageAgent = nil
	e.box.add(letter("a@home.example", "No agent", "answer: skip: x"))
	e.run()
	e.until("reported", func(c api.MailCounts) bool { return c.ReportedToday == 1 && c.Messages24h == 1 })
	assert.Contains(t, e.digests()[0].Question, "(not triaged: the account has no triage agent)")
	require.NoError(t, e.stop())

	e.set.Email.TriageAgent = []string{"missing"}
	e.tr.noStart = true
	e.box.add(letter("b@home.example", "Agent missing", "answer: skip: x"))
	e.run()
	e.until("reported", func(c api.MailCounts) bool { return c.ReportedToday == 2 })
	assert.Equal(t, uint64(0), e.counts().TriagedToday)
	require.NoError(t, e.stop())
}
