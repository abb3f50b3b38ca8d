package channels_test

import (
	"context"
	"os"
	"path/filepath"
	"scv/control/channels/channelstest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
	"scv/ledger/local"
	"scv/ledger/sqlite"
)

// wait bounds every Eventually: generous, for a loaded shared VM.
const (
	wait = 10 * time.Second
	tick = 2 * time.Millisecond
)

var ctx = context.Background()

// openLedger opens a real SQLite file in the test's folder (the store of
// the channel accounts) and closes it when the test ends.
func openLedger(t *testing.T, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func newFakeClock() *channelstest.Clock { return channelstest.NewClock(time.Unix(1_700_000_000, 0)) }

// testConnector is a connector the test drives: each Run announces itself
// on runs as a testRun, and then does what the test tells it.
type testConnector struct {
	runs chan *testRun
	made atomic.Int32

	mu         sync.Mutex
	delivered  []channels.Message
	deliverErr error
}

func newTestConnector() *testConnector {
	return &testConnector{runs: make(chan *testRun, 64)}
}

func (tc *testConnector) factory() channels.Connector {
	tc.made.Add(1)
	return testConn{tc}
}

func (tc *testConnector) Delivered() []channels.Message {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([]channels.Message(nil), tc.delivered...)
}

func (tc *testConnector) FailDeliveries(err error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.deliverErr = err
}

// next is the next Run to start.
func (tc *testConnector) next(t *testing.T) *testRun {
	t.Helper()
	select {
	case r := <-tc.runs:
		return r
	case <-time.After(wait):
		require.FailNow(t, "no connector run started")
		return nil
	}
}

// none asserts that no further Run has started.
func (tc *testConnector) none(t *testing.T) {
	t.Helper()
	select {
	case <-tc.runs:
		require.FailNow(t, "a connector run started")
	default:
	}
}

type testConn struct{ tc *testConnector }

func (c testConn) Run(ctx context.Context, s channels.Settings, h channels.Health) error {
	r := &testRun{Settings: s, Health: h, exit: make(chan error, 1), release: make(chan struct{})}
	c.tc.runs <- r
	select {
	case err := <-r.exit:
		return err
	case <-ctx.Done():
		if r.holding.Load() {
			<-r.release
		}
		return nil
	}
}

func (c testConn) Deliver(_ context.Context, _ channels.Settings, m channels.Message) error {
	c.tc.mu.Lock()
	defer c.tc.mu.Unlock()
	if c.tc.deliverErr != nil {
		return c.tc.deliverErr
	}
	c.tc.delivered = append(c.tc.delivered, m)
	return nil
}

// testRun is one Run of a testConnector. The test reports through its
// Health (Connected, Disconnected, Success, Identity) and ends it with
// Fail, FailPermanently or End.
type testRun struct {
	channels.Settings
	channels.Health
	exit    chan error
	holding atomic.Bool
	release chan struct{}
}

// Fail makes Run return a retryable error.
func (r *testRun) Fail(err error) { r.exit <- err }

// FailPermanently makes Run return a permanent error.
func (r *testRun) FailPermanently(err error) { r.exit <- channels.Permanent(err) }

// End makes Run return nil without being asked to stop.
func (r *testRun) End() { r.exit <- nil }

// HoldStop makes Run, once asked to stop, wait for Release before it
// returns: the component stays stopping meanwhile.
func (r *testRun) HoldStop() { r.holding.Store(true) }

func (r *testRun) Release() { close(r.release) }

// harness is a Manager on a real ledger with a fake clock, test connectors
// for every kind but local (which keeps its real connector unless
// replaced), and a settings file path in the test's folder.
type harness struct {
	t      *testing.T
	dbPath string
	l      *sqlite.DB
	m      *channels.Manager
	clock  *channelstest.Clock
	tc     map[channels.Kind]*testConnector
	file   string
	dir    string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dbPath: filepath.Join(dir, "ledger.db"), clock: newFakeClock(),
		tc: map[channels.Kind]*testConnector{}, file: filepath.Join(dir, "channels.json"), dir: dir}
	h.l = openLedger(t, h.dbPath)
	h.m = h.manager()
	return h
}

// manager is a new Manager on the harness's ledger, clock, connectors and
// file; it is closed when the test ends.
func (h *harness) manager() *channels.Manager {
	m := channels.New(h.l)
	m.Clock = h.clock
	m.Path = h.file
	for _, k := range channels.Kinds {
		if k == channels.KindLocal {
			continue
		}
		tc := h.tc[k]
		if tc == nil {
			tc = newTestConnector()
			h.tc[k] = tc
		}
		m.Connectors[k] = tc.factory
	}
	h.t.Cleanup(m.Close)
	return m
}

// restart is a daemon's restart: the Manager closed, the ledger
// reopened, a new Manager loaded from it.
func (h *harness) restart() {
	h.t.Helper()
	h.m.Close()
	require.NoError(h.t, h.l.Close())
	h.l = openLedger(h.t, h.dbPath)
	h.m = h.manager()
	require.NoError(h.t, h.m.Load(ctx))
}

// plug replaces kind k's connector by a test connector, in every Manager
// made afterwards and in h.m.
func (h *harness) plug(k channels.Kind) *testConnector {
	tc := h.tc[k]
	if tc == nil {
		tc = newTestConnector()
		h.tc[k] = tc
	}
	h.m.Connectors[k] = tc.factory
	return tc
}

func (h *harness) set(c api.CmdChannelSet) {
	h.t.Helper()
	require.NoError(h.t, h.m.Set(ctx, c))
}

// component is the health of id, which must exist.
func (h *harness) component(id string) api.ComponentHealth {
	h.t.Helper()
	for _, c := range h.m.Components() {
		if c.ID == id {
			return c
		}
	}
	require.FailNow(h.t, "no component "+id)
	return api.ComponentHealth{}
}

// has reports whether a component id exists.
func (h *harness) has(id string) bool {
	for _, c := range h.m.Components() {
		if c.ID == id {
			return true
		}
	}
	return false
}

// waitState waits until id is in state.
func (h *harness) waitState(id string, state api.ComponentState) api.ComponentHealth {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		for _, c := range h.m.Components() {
			if c.ID == id {
				return c.State == state
			}
		}
		return false
	}, wait, tick, "%s never reached %s (now %+v)", id, state, h.m.Components())
	return h.component(id)
}

// rows is every stored account.
func (h *harness) rows() []local.ChannelAccount {
	h.t.Helper()
	rs, err := h.l.ChannelAccounts(ctx)
	require.NoError(h.t, err)
	return rs
}

// writeFile writes the settings file.
func (h *harness) writeFile(text string) {
	h.t.Helper()
	require.NoError(h.t, os.WriteFile(h.file, []byte(text), 0o600))
}

// workspace is a new existing directory.
func (h *harness) workspace(name string) string {
	h.t.Helper()
	dir := filepath.Join(h.dir, name)
	require.NoError(h.t, os.MkdirAll(dir, 0o700))
	return dir
}

func ptr[T any](v T) *T { return &v }

// requireInvalid asserts err is a -32602 invalid_argument refusal.
func requireInvalid(t *testing.T, err error, contains string) {
	t.Helper()
	e := api.ErrorOf(err)
	require.NotNil(t, e)
	require.Equal(t, api.CodeInvalidParams, e.Code, e.Message)
	require.Equal(t, api.ReasonInvalidArgument, e.Data.Reason)
	require.Contains(t, e.Message, contains)
}

func uid() int { return os.Getuid() }
