package mail_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/textproto"
	"path/filepath"
	"scv/control/channels/channelstest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
	"scv/control/confirm"
	"scv/control/mail"
	"scv/ledger/local"
	"scv/ledger/sqlite"
)

// The account's loop is tested against a mailbox over a slice of mails
// (box), a scripted triage (triage), the real question log for the
// digests (confirm.Manager on a real SQLite file), and a fake clock.

// box is a Mailbox over a slice: the server's side of one mailbox, which
// every Dial of the test connects to.
type box struct {
	mu      sync.Mutex
	uv      uint32
	mails   []mail.Mail
	next    uint32
	changed chan struct{} // closed and replaced when mail comes or the box breaks
	broken  error         // Check and Wait fail with it
	refuse  bool          // Dial refuses the credentials
	down    error         // Dial fails with it
	dials   int
	creds   []mail.Credentials
}

func newBox() *box { return &box{uv: 7, next: 1, changed: make(chan struct{})} }

// add delivers m, numbered with the next UID, and wakes a Wait.
func (b *box) add(ms ...mail.Mail) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range ms {
		m.UID = b.next
		b.next++
		b.mails = append(b.mails, m)
	}
	b.kick()
}

func (b *box) kick() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// renumber gives the box a new UIDVALIDITY, its mails new UIDs.
func (b *box) renumber() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.uv++
	b.next = 1
	for i := range b.mails {
		b.mails[i].UID = b.next
		b.next++
	}
	b.kick()
}

func (b *box) expunge(uid uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mails = slices.DeleteFunc(b.mails, func(m mail.Mail) bool { return m.UID == uid })
}

func (b *box) breakWith(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.broken = err
	b.kick()
}

func (b *box) dial(_ context.Context, c mail.Credentials) (mail.Mailbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dials++
	b.creds = append(b.creds, c)
	switch {
	case b.refuse:
		return nil, fmt.Errorf("%w: LOGIN said NO [AUTHENTICATIONFAILED]", mail.ErrRefused)
	case b.down != nil:
		return nil, b.down
	}
	b.broken = nil
	return &conn{b: b}, nil
}

// conn is one connection to the box. A Wait returns at once when mail
// came since its last Check, as IDLE reports what it has not told.
type conn struct {
	b    *box
	seen uint32 // the box's next UID at the last Check
}

func (c *conn) Check(_ context.Context, after uint32, limit int) (uint32, []mail.Mail, error) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.b.broken != nil {
		return 0, nil, c.b.broken
	}
	c.seen = c.b.next
	var out []mail.Mail
	for _, m := range c.b.mails {
		if m.UID > after && len(out) < limit {
			out = append(out, m)
		}
	}
	return c.b.uv, out, nil
}

func (c *conn) Wait(ctx context.Context, _ time.Duration) error {
	c.b.mu.Lock()
	ch, broken, news := c.b.changed, c.b.broken, c.b.next != c.seen
	c.b.mu.Unlock()
	if broken != nil || news {
		return broken
	}
	select {
	case <-ch:
		c.b.mu.Lock()
		defer c.b.mu.Unlock()
		return c.b.broken
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *conn) Close() error { return nil }

// triage is a scripted Triager: a mail's text says what it answers.
// "answer: TEXT" answers TEXT (its \n new lines), "block" waits for its
// context the first time and reports the next, "fail" fails; every answer
// costs tokens.
type triage struct {
	mu      sync.Mutex
	tokens  uint64
	prompts []string
	started int
	closed  int
	blocked chan struct{} // closed when a triage blocks
	blocks  int
	noStart bool
}

func (tr *triage) start(_ context.Context, _ string, command []string) (mail.Triager, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.noStart {
		return nil, errors.New("no such agent")
	}
	tr.started++
	return &triager{tr}, nil
}

type triager struct{ tr *triage }

func (t *triager) Triage(ctx context.Context, prompt string) (string, uint64, error) {
	t.tr.mu.Lock()
	t.tr.prompts = append(t.tr.prompts, prompt)
	tokens, blocked := t.tr.tokens, t.tr.blocked
	t.tr.mu.Unlock()
	text := prompt[strings.Index(prompt, "<<<\n")+4 : strings.LastIndex(prompt, "\n>>>")]
	switch {
	case strings.HasPrefix(text, "answer: "):
		return strings.ReplaceAll(strings.TrimPrefix(text, "answer: "), `\n`, "\n"), tokens, nil
	case text == "block":
		t.tr.mu.Lock()
		t.tr.blocks++
		again := t.tr.blocks > 1
		t.tr.mu.Unlock()
		if again {
			return "report: decided after the restart", tokens, nil
		}
		if blocked != nil {
			close(blocked)
		}
		<-ctx.Done()
		return "", 0, ctx.Err()
	case text == "fail":
		return "report: words of the agent that failed", tokens, errors.New("the agent crashed: " + text)
	}
	return "", tokens, nil
}

func (t *triager) Close() {
	t.tr.mu.Lock()
	defer t.tr.mu.Unlock()
	t.tr.closed++
}

// health records what a Run reported.
type health struct {
	mu     sync.Mutex
	events []string
}

func (h *health) add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, s)
}

func (h *health) Connected()             { h.add("connected") }
func (h *health) Disconnected(err error) { h.add("disconnected: " + err.Error()) }
func (h *health) Success()               { h.add("success") }
func (h *health) Identity(_, _ string)   {}

func (h *health) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// chats is the channel side of the question log: local:mail connected.
type chats struct {
	mu        sync.Mutex
	connected bool
}

func (c *chats) Connected(chat string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected && chat == "local:mail"
}
func (c *chats) ConnectedChats() []string                              { return nil }
func (c *chats) Deliver(context.Context, string, string, string) error { return nil }

// logBuffer is a log to search.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// env is a mail Service over a real store, the box, the scripted triage,
// the real question log, and the fake clock: a daemon's worth of it.
// restart makes them anew over the same file, as a daemon's restart does.
type env struct {
	t      *testing.T
	ctx    context.Context
	path   string
	db     *sqlite.DB
	box    *box
	tr     *triage
	clock  *channelstest.Clock
	chats  *chats
	q      *confirm.Manager
	s      *mail.Service
	logs   *logBuffer
	set    channels.Settings
	cancel context.CancelFunc
	done   chan error
	h      *health
}

// start is the fake clock's first reading: a Monday morning in Berlin.
var start = time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, path: filepath.Join(t.TempDir(), "ledger.db"), box: newBox(),
		tr: &triage{tokens: 100}, clock: channelstest.NewClock(start), chats: &chats{connected: true}, logs: &logBuffer{}}
	e.set = channels.Settings{Channel: channels.KindEmail, Account: "work", Enabled: true, Password: "hunter2",
		Email: &channels.Email{
			IMAP: "imaps://mail.example.com", User: "me@example.com", MailChat: "local:mail",
			ReportFrom: []string{"boss@example.com"}, SkipFrom: []string{"@spam.example"},
			TriageAgent: []string{"triage-agent"}, DigestEvery: channels.Duration(15 * time.Minute), DigestsPerDay: 24,
			TimeZone: "Europe/Berlin",
		}}
	e.open()
	return e
}

// open opens the store, the question log and the Service.
func (e *env) open() {
	var err error
	e.db, err = sqlite.Open(e.ctx, e.path, sqlite.Options{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.db.Close() })
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.q = &confirm.Manager{Log: e.db, Chats: e.chats, Clock: e.clock.Now, Logger: log}
	require.NoError(e.t, e.q.Load(e.ctx))
	e.s = &mail.Service{Dial: e.box.dial, Store: e.db, Chats: e.q, Triage: e.tr.start, Clock: e.clock, Logger: log}
}

// run starts the account's connector, as the channel manager does.
func (e *env) run() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	e.cancel, e.done, e.h = cancel, make(chan error, 1), &health{}
	conn := e.s.Connector()
	go func() { e.done <- conn.Run(ctx, e.set, e.h) }()
}

// stop stops the run and returns what Run returned.
func (e *env) stop() error {
	e.t.Helper()
	e.cancel()
	e.cancel = nil
	select {
	case err := <-e.done:
		return err
	case <-e.ctx.Done():
		e.t.Fatal("the account did not stop")
		return nil
	}
}

// ended waits for Run to return on its own.
func (e *env) ended() error {
	e.t.Helper()
	e.cancel = nil
	select {
	case err := <-e.done:
		return err
	case <-e.ctx.Done():
		e.t.Fatal("the account did not end")
		return nil
	}
}

// restart is the daemon stopped and started again over the same file.
func (e *env) restart() {
	e.t.Helper()
	if e.cancel != nil {
		e.stop()
	}
	require.NoError(e.t, e.db.Close())
	e.open()
	e.run()
}

func (e *env) counts() api.MailCounts {
	c := e.s.Counts("work")
	if c == nil {
		return api.MailCounts{}
	}
	c.LastCheckUnixSeconds = nil
	return *c
}

// until waits for the counts to satisfy ok.
func (e *env) until(what string, ok func(api.MailCounts) bool) api.MailCounts {
	e.t.Helper()
	var c api.MailCounts
	require.Eventually(e.t, func() bool { c = e.counts(); return ok(c) }, 20*time.Second, 5*time.Millisecond,
		"%s: the counts are %+v", what, func() api.MailCounts { return e.counts() }())
	return c
}

// journal is the account's whole journal.
func (e *env) journal() []local.MailRecord {
	e.t.Helper()
	recs, err := e.db.MailJournal(e.ctx, "work", 0)
	require.NoError(e.t, err)
	return recs
}

// digests is the notices of the mail chat, in order.
func (e *env) digests() []api.Question {
	e.t.Helper()
	chat := "local:mail"
	qs, err := e.q.List(e.ctx, api.CmdConfirmList{Chat: &chat})
	require.NoError(e.t, err)
	return qs
}

// steps counts the journal's records by mail and kind.
func steps(recs []local.MailRecord) map[string]int {
	out := map[string]int{}
	for _, r := range recs {
		out[fmt.Sprintf("%d/%d %s", r.UIDValidity, r.UID, r.Kind)]++
	}
	return out
}

// letter is a mail from from with subject and text.
func letter(from, subject, text string, kv ...string) mail.Mail {
	h := textproto.MIMEHeader{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return mail.Mail{MessageID: "<" + subject + "@test>", From: from, Subject: subject, Text: text, Header: h,
		Date: start, Size: uint32(len(text) + 200)}
}
