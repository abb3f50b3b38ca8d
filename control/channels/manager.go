package channels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"scv/control/api"
	"scv/ledger/local"
)

// Backoff defaults: the first retry waits DefaultBackoffBase, each next
// one twice as long, up to DefaultBackoffCap.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffCap  = 5 * time.Minute
)

// ErrNotConnected: a message for a chat that is unknown or not connected.
var ErrNotConnected = errors.New("chat not connected")

// Log keys.
const (
	logComponent = "account" // the daemon's logger already names this component "channels"
	logState     = "state"
	logError     = "error"
	logDelay     = "delay"
)

// Manager keeps the channel accounts' settings in the ledger and runs one
// component per enabled account. It implements control.Channels. Set the
// fields before Load; New fills in the defaults.
type Manager struct {
	Store local.Channels
	// Path is the settings file Reload reads; "" is DefaultPath(). The
	// daemon sets it from --config.
	Path string
	// Connectors makes a connector for a run of an account of each kind;
	// an enabled account of a kind without one fails. nil is
	// DefaultConnectors().
	Connectors map[Kind]func() Connector
	// Clock defaults to SystemClock.
	Clock Clock
	// BackoffBase is the wait before the first restart after a failure,
	// doubling with each further failure up to BackoffCap; zero is the
	// default.
	BackoffBase time.Duration
	BackoffCap  time.Duration
	Logger      *slog.Logger
	// MailCounts is an email account's counts for its component's `mail`
	// (mail.Service.Counts), nil when it has none; nil: none. It is
	// called with the manager's lock held, and must not call it.
	MailCounts func(account string) *api.MailCounts

	// ops makes changes one at a time (Load, Set, Logout, Reload, Close),
	// so that the ledger's rows and accounts agree; mu guards accounts
	// and their components, and is never held while waiting.
	ops      sync.Mutex
	mu       sync.Mutex
	accounts map[string]*account
	loaded   bool
	closed   bool
}

// account is one account: its saved settings and its component.
type account struct {
	s   Settings
	row local.ChannelAccount
	// bad says why the stored settings are invalid (found by Load); the
	// component fails instead of starting.
	bad string

	state       api.ComponentState
	err         string
	restarts    uint64
	lastSuccess time.Time
	// ownerID and botID are what the connector reported.
	ownerID, botID string
	run            *run
}

// run is one running component: a goroutine that runs connectors, one
// after another, until it is stopped, fails permanently or ends.
type run struct {
	s      Settings
	cancel context.CancelFunc
	done   chan struct{}
	// stopping: a stop was asked; the stopper sets the state from now on.
	stopping bool
	// conn is the connector whose Run is running, nil between attempts.
	conn Connector
}

// New is a Manager of the accounts in l, with the default connectors,
// clock and backoff.
func New(store local.Channels) *Manager {
	return &Manager{
		Store: store, Connectors: DefaultConnectors(), Clock: SystemClock,
		BackoffBase: DefaultBackoffBase, BackoffCap: DefaultBackoffCap,
	}
}

func (m *Manager) clock() Clock {
	if m.Clock == nil {
		return SystemClock
	}
	return m.Clock
}

func (m *Manager) connectors() map[Kind]func() Connector {
	if m.Connectors == nil {
		m.Connectors = DefaultConnectors()
	}
	return m.Connectors
}

func (m *Manager) backoff() (base, limit time.Duration) {
	base, limit = m.BackoffBase, m.BackoffCap
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if limit <= 0 {
		limit = DefaultBackoffCap
	}
	return base, limit
}

func (m *Manager) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (m *Manager) path() (string, error) {
	if m.Path != "" {
		return m.Path, nil
	}
	return DefaultPath()
}

// Load reads the accounts from the ledger and starts a component for each
// enabled one. A stored account whose settings are no longer valid is
// shown, and failed if enabled. Set, Logout and Reload load first if Load
// was not called; a second Load does nothing.
func (m *Manager) Load(ctx context.Context) error {
	m.ops.Lock()
	defer m.ops.Unlock()
	return m.ready(ctx)
}

// ready loads the accounts once, and refuses after Close. The caller holds
// ops.
func (m *Manager) ready(ctx context.Context) error {
	if m.closed {
		return api.Errorf(api.ErrUnavailable, "the channel accounts are shut down")
	}
	if m.loaded {
		return nil
	}
	rows, err := m.Store.ChannelAccounts(ctx)
	if err != nil {
		return err
	}
	m.connectors()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accounts = map[string]*account{}
	for _, r := range rows {
		s, err := fromRow(r)
		a := &account{s: s, row: r, state: api.ComponentDisabled}
		if err == nil {
			err = a.s.check(false)
		}
		if err != nil {
			a.bad = "stored settings are invalid: " + err.Error()
			a.err = a.bad
		}
		m.accounts[a.s.ID()] = a
		if a.s.Enabled {
			m.start(a)
		}
	}
	m.loaded = true
	return nil
}

// Close stops every component (their state becomes stopped) and waits for
// them. Afterwards Components still reports, and changes are refused.
func (m *Manager) Close() {
	m.ops.Lock()
	defer m.ops.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	m.mu.Lock()
	all := make([]*account, 0, len(m.accounts))
	for _, a := range m.accounts {
		all = append(all, a)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range all {
		wg.Go(func() { m.stop(a, api.ComponentStopped) })
	}
	wg.Wait()
}

// Set creates or changes one account (channel_set): omitted fields and a
// null workspace keep the saved values (a new account's are the
// defaults); an empty workspace clears it. A new account's source is api;
// an existing one keeps its source. Then the component follows: disabled
// stops it, enabled starts it (also after it failed or ended), a changed
// setting restarts it. Invalid input changes nothing.
func (m *Manager) Set(ctx context.Context, c api.CmdChannelSet) error {
	if err := checkKey(c.Channel, c.Account); err != nil {
		return err
	}
	m.ops.Lock()
	defer m.ops.Unlock()
	if err := m.ready(ctx); err != nil {
		return err
	}
	id := ID(Kind(c.Channel), c.Account)
	m.mu.Lock()
	a := m.accounts[id]
	prev, row := Defaults(Kind(c.Channel), c.Account), local.ChannelAccount{}
	if a != nil {
		prev, row = a.s, a.row
	}
	m.mu.Unlock()
	s, err := apply(prev, c)
	if err != nil {
		return err
	}
	return m.put(ctx, id, a, s, row)
}

// Logout removes one account's row (settings, credentials and state),
// then stops its component and waits for it. An unknown account is
// refused with not_found.
func (m *Manager) Logout(ctx context.Context, c api.CmdChannelLogout) error {
	m.ops.Lock()
	defer m.ops.Unlock()
	if err := m.ready(ctx); err != nil {
		return err
	}
	id := ID(Kind(c.Channel), c.Account)
	m.mu.Lock()
	a := m.accounts[id]
	m.mu.Unlock()
	if a == nil {
		if err := checkKey(c.Channel, c.Account); err != nil {
			return err
		}
		return notFound("channel account %s not found", id)
	}
	if _, err := m.Store.DeleteChannelAccount(ctx, c.Channel, c.Account); err != nil {
		return err
	}
	m.remove(id, a)
	return nil
}

// Reload rereads the settings file and reconciles: every account it lists
// is created or set to the file's values (source file); an account of
// source file that it no longer lists is logged out; api accounts it does
// not list are left alone. A missing file lists nothing. An invalid file
// is refused (invalid_argument) and changes nothing. The rows change in
// one transaction, then the components follow.
func (m *Manager) Reload(ctx context.Context) error {
	path, err := m.path()
	if err != nil {
		return api.Errorf(api.ErrUnavailable, "no settings file path: %v", err)
	}
	list, err := ReadFile(path)
	if err != nil {
		return err
	}
	m.ops.Lock()
	defer m.ops.Unlock()
	if err := m.ready(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	current := make(map[string]account, len(m.accounts))
	for id, a := range m.accounts {
		current[id] = account{s: a.s, row: a.row, bad: a.bad}
	}
	m.mu.Unlock()
	if list, err = fileEmail(list, current); err != nil {
		return fmt.Errorf("settings file %s: %w", path, err)
	}

	now := m.clock().Now().UnixMilli()
	listed := map[string]bool{}
	var put []local.ChannelAccount
	var rows []local.ChannelAccount // every listed account's row after the reload
	for _, s := range list {
		listed[s.ID()] = true
		cur, ok := current[s.ID()]
		row := cur.row
		if !ok || !cur.s.equal(s) || cur.bad != "" {
			row = toRow(s, cur.row, now)
			put = append(put, row)
		}
		rows = append(rows, row)
	}
	var del [][2]string
	var gone []string
	for id, cur := range current {
		if cur.s.Source == SourceFile && !listed[id] {
			del = append(del, [2]string{string(cur.s.Channel), cur.s.Account})
			gone = append(gone, id)
		}
	}
	if len(put) > 0 || len(del) > 0 {
		if err := m.Store.ReplaceChannelAccounts(ctx, put, del); err != nil {
			return err
		}
	}

	for _, id := range gone {
		m.mu.Lock()
		a := m.accounts[id]
		m.mu.Unlock()
		m.remove(id, a)
	}
	for i, s := range list {
		m.mu.Lock()
		a := m.accounts[s.ID()]
		if a == nil {
			a = &account{state: api.ComponentDisabled}
			m.accounts[s.ID()] = a
		}
		a.s, a.row, a.bad = s, rows[i], ""
		m.mu.Unlock()
		m.reconcile(a)
	}
	return nil
}

// Components is every account's health, in ID order.
func (m *Manager) Components() []api.ComponentHealth {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]api.ComponentHealth, 0, len(m.accounts))
	for _, a := range m.accounts {
		h := health(a.effective())
		h.State = a.state
		h.Restarts = a.restarts
		if a.err != "" {
			h.Error = new(a.err)
		}
		if !a.lastSuccess.IsZero() {
			h.LastSuccessUnixSeconds = new(uint64(max(a.lastSuccess.Unix(), 0)))
		}
		if a.s.Channel == KindEmail && m.MailCounts != nil {
			h.Mail = m.MailCounts(a.s.Account)
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(x, y api.ComponentHealth) int {
		switch {
		case x.ID < y.ID:
			return -1
		case x.ID > y.ID:
			return 1
		}
		return 0
	})
	return out
}

// Settings is the account's settings as the policy sees them: the saved
// settings, with an owner or bot ID its connector reported filling in what
// they leave empty.
func (m *Manager) Settings(chat string) (Settings, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.accounts[chat]
	if !ok {
		return Settings{}, false
	}
	return a.effective(), true
}

// Connected reports whether the account chat (`<channel>:<account>`) is
// connected.
func (m *Manager) Connected(chat string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.accounts[chat]
	return ok && a.state == api.ComponentConnected
}

// ConnectedChats is the IDs of the connected accounts that carry chats
// (purpose chat; a mail chat never carries questions, nor does an email
// account), sorted.
func (m *Manager) ConnectedChats() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id, a := range m.accounts {
		if a.state == api.ComponentConnected && a.s.Purpose == api.PurposeChat && a.s.Channel != KindEmail {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Deliver hands the message id (text) to the owner of the account chat
// through its running connector. It fails with ErrNotConnected unless the
// account is connected, and with the connector's error if it could not
// hand it over. A delivery counts as a success of the account. (Its
// signature is confirm.Chats's: the question manager delivers through it.)
func (m *Manager) Deliver(ctx context.Context, chat, id, text string) error {
	msg := Message{ID: id, Text: text}
	m.mu.Lock()
	a, ok := m.accounts[chat]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is not a channel account", ErrNotConnected, chat)
	}
	if a.state != api.ComponentConnected || a.run == nil || a.run.conn == nil {
		state := a.state
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is %s", ErrNotConnected, chat, state)
	}
	r, conn, s := a.run, a.run.conn, a.effective()
	m.mu.Unlock()
	if err := conn.Deliver(ctx, s, msg); err != nil {
		return fmt.Errorf("deliver to %s: %w", chat, err)
	}
	m.mu.Lock()
	if a.run == r && !r.stopping {
		a.lastSuccess = m.clock().Now()
	}
	m.mu.Unlock()
	return nil
}

// effective is a's settings with the reported identity filling in.
func (a *account) effective() Settings {
	s := a.s
	if s.OwnerID == "" {
		s.OwnerID = a.ownerID
	}
	if s.BotID == "" {
		s.BotID = a.botID
	}
	return s
}

// remove stops a's component and forgets a. The caller holds ops.
func (m *Manager) remove(id string, a *account) {
	m.stop(a, api.ComponentStopped)
	m.mu.Lock()
	delete(m.accounts, id)
	m.mu.Unlock()
}

// reconcile makes a's component follow its settings: stopped when
// disabled; started when enabled and not running; restarted when it runs
// with other settings. The caller holds ops.
func (m *Manager) reconcile(a *account) {
	m.mu.Lock()
	s, r := a.s, a.run
	m.mu.Unlock()
	if !s.Enabled {
		m.stop(a, api.ComponentDisabled)
		return
	}
	if r != nil && runnable(r.s).equal(runnable(s)) {
		return
	}
	if r != nil {
		m.stop(a, api.ComponentStopped)
	}
	m.mu.Lock()
	m.start(a)
	m.mu.Unlock()
}

// runnable is what a connector runs with: the settings apart from who set
// them.
func runnable(s Settings) Settings {
	s.Source = ""
	return s
}
