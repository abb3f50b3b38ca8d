package confirm

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/ledger"
	"scv/ledger/local"
	"scv/ledger/sqlite"
)

// start is the fake clock's first reading; its milliseconds make sure that
// nothing rounds where it should not.
var start = time.Date(2025, 3, 1, 12, 0, 0, 123_000_000, time.UTC)

// clock is a settable Manager.Clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// delivery is one question a fake chat was handed.
type delivery struct{ Chat, ID, Text string }

// chats is a fake Chats: listed are the connected chats the owner chats
// in, others are connected but not listed (mail accounts), and fail makes
// Deliver fail.
type chats struct {
	mu        sync.Mutex
	listed    []string
	others    []string
	fail      error
	onDeliver func(delivery)
	delivered []delivery
}

func (c *chats) Connected(chat string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.listed, chat) || slices.Contains(c.others, chat)
}

func (c *chats) ConnectedChats() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.listed)
}

func (c *chats) Deliver(ctx context.Context, chat, id, text string) error {
	d := delivery{chat, id, text}
	c.mu.Lock()
	hook, fail := c.onDeliver, c.fail
	c.mu.Unlock()
	if hook != nil {
		hook(d)
	}
	if fail != nil {
		return fail
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delivered = append(c.delivered, d)
	return nil
}

func (c *chats) Delivered() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.delivered)
}

// env is a Manager over a real ledger file, a fake clock and fake chats.
type env struct {
	t     *testing.T
	path  string
	db    *sqlite.DB
	l     *ledger.Ledger // on db
	clock *clock
	chats *chats
	m     *Manager
}

// newEnv opens a fresh ledger with one connected chat, local:owner, and a
// loaded Manager over it.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "ledger.db"), clock: &clock{now: start},
		chats: &chats{listed: []string{"local:owner"}}}
	e.db, e.l = openLedger(t, e.path)
	e.m = e.manager()
	return e
}

// openLedger opens the database at path and a ledger on it (which closes
// it).
func openLedger(t *testing.T, path string) (*sqlite.DB, *ledger.Ledger) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(context.Background(), db, ledger.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return db, l
}

// manager is a new loaded Manager over e's ledger, clock and chats.
func (e *env) manager() *Manager {
	e.t.Helper()
	m := &Manager{Log: e.db, Clock: e.clock.Now, Chats: e.chats}
	require.NoError(e.t, m.Load(context.Background()))
	return m
}

// ask asks text with the given parent chain ("" for none) and timeout (0
// for the default) and requires an answer.
func (e *env) ask(text, parent string, timeout uint64) api.ConfirmInfo {
	e.t.Helper()
	c := api.CmdConfirmAsk{Question: text}
	if parent != "" {
		c.Parent = &parent
	}
	if timeout != 0 {
		c.TimeoutSeconds = &timeout
	}
	info, err := e.m.Ask(context.Background(), c)
	require.NoError(e.t, err)
	return info
}

func (e *env) status(id string) api.ConfirmState {
	e.t.Helper()
	info, err := e.m.Status(context.Background(), id)
	require.NoError(e.t, err)
	return info.State
}

func (e *env) tick() {
	e.t.Helper()
	require.NoError(e.t, e.m.Tick(context.Background()))
}

// log is the whole question log.
func (e *env) log() []local.ConfirmRecord {
	e.t.Helper()
	recs, err := e.db.ConfirmLog(context.Background(), 0)
	require.NoError(e.t, err)
	return recs
}

// list is every question of the manager.
func (e *env) list() []api.Question {
	e.t.Helper()
	qs, err := e.m.List(context.Background(), api.CmdConfirmList{})
	require.NoError(e.t, err)
	return qs
}

// question is the listing of question id.
func (e *env) question(id string) api.Question {
	e.t.Helper()
	for _, q := range e.list() {
		if q.ID == id {
			return q
		}
	}
	e.t.Fatalf("question %s not listed", id)
	return api.Question{}
}

// assertRefused checks that err is the control error with code and reason.
func assertRefused(t *testing.T, err error, code int, reason string, msgAndArgs ...any) bool {
	t.Helper()
	ce := api.ErrorOf(err)
	if !assert.NotNil(t, ce, msgAndArgs...) {
		return false
	}
	return assert.Equal(t, code, ce.Code, msgAndArgs...) && assert.Equal(t, reason, ce.Data.Reason, msgAndArgs...)
}

// kinds is the kinds of recs, in order.
func kinds(recs []local.ConfirmRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Kind
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func secs(t time.Time) uint64 { return uint64(t.Unix()) }
