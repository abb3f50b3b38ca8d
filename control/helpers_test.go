package control_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	scvdaemon "scv/control/daemon"
	"scv/control/rpc"
	"scv/ledger"
	"scv/ledger/local"
)

// ioTimeout bounds every read and write a test does on a socket, so that a
// daemon that never answers fails the test instead of hanging it.
const ioTimeout = 10 * time.Second

// testClock is a clock the test sets by hand: the ledger stamps events and
// the service stamps reports with it, so replies are reproducible.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock(unix int64) *testClock { return &testClock{now: time.Unix(unix, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(unix int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = time.Unix(unix, 0)
}

// daemon is a real in-process daemon (package control/daemon, as `scv
// daemon` runs it): a ledger on a temporary SQLite file and the server on
// a Unix socket in a temporary folder.
type daemon struct {
	dir       string // the temporary folder holding everything
	sock      string
	workspace string // an existing directory, usable as a project workspace
	d         *scvdaemon.Daemon
	ledger    *ledger.Ledger
	srv       *control.Server
	store     local.Store
	stop      func() // closes the daemon (at most once; also at cleanup)
}

// startDaemon starts a daemon whose ledger and service use clock (nil: the
// system clock). Everything is torn down in t.Cleanup.
func startDaemon(t testing.TB, clock func() time.Time) *daemon {
	t.Helper()
	return startDaemonWith(t, scvdaemon.Config{Clock: clock})
}

// startDaemonWith starts a daemon with cfg, its database, socket and
// channel settings file in a temporary folder.
func startDaemonWith(t testing.TB, cfg scvdaemon.Config) *daemon {
	t.Helper()
	// t.TempDir() can be too long for sun_path (108 bytes): keep it short.
	dir, err := os.MkdirTemp("", "scv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Mkdir(filepath.Join(dir, "acme"), 0o755))
	return startDaemonIn(t, dir, cfg)
}

// startDaemonIn starts a daemon with cfg on the database, socket and
// settings of folder dir (again, after a stop).
func startDaemonIn(t testing.TB, dir string, cfg scvdaemon.Config) *daemon {
	t.Helper()
	ws := filepath.Join(dir, "acme")
	cfg.DB = filepath.Join(dir, "ledger.db")
	cfg.Socket = filepath.Join(dir, "run", "d.sock")
	cfg.ConfigPath = filepath.Join(dir, "channels.json")
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 500 * time.Millisecond
	}
	if cfg.PID == 0 {
		cfg.PID = 1
	}
	d := scvdaemon.New(cfg)
	require.NoError(t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			assert.NoError(t, d.Close(), "close")
			select {
			case err := <-served:
				assert.NoError(t, err, "Serve after Close")
			case <-time.After(ioTimeout):
				t.Error("Serve did not return after Close")
			}
		})
	}
	t.Cleanup(stop)
	return &daemon{dir: dir, sock: cfg.Socket, workspace: ws, d: d, ledger: d.Ledger(), srv: d.Server(), store: d.Store(), stop: stop}
}

// serve runs srv on ln until the test ends, then shuts it down, checks
// that Serve returned nil, and closes l. Serve's result arrives on the
// returned channel, which only a failing test reads.
func serve(t testing.TB, srv *control.Server, ln net.Listener, l *ledger.Ledger) chan error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx), "shutdown")
		select {
		case err := <-served:
			assert.NoError(t, err, "Serve after Shutdown")
		case <-ctx.Done():
			t.Error("Serve did not return after Shutdown")
		}
		assert.NoError(t, l.Close(), "ledger close")
	})
	return served
}

// client dials the daemon with the same client the CLI uses.
func (d *daemon) client(t testing.TB) *rpc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, err := rpc.Dial(ctx, d.sock)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn speaks the protocol by hand, byte for byte.
type rawConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func (d *daemon) raw(t testing.TB) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("unix", d.sock, ioTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	require.NoError(rc.t, rc.c.SetWriteDeadline(time.Now().Add(ioTimeout)))
	_, err := rc.c.Write(b)
	require.NoError(rc.t, err)
}

// readLine reads one reply line, without its newline.
func (rc *rawConn) readLine() []byte {
	rc.t.Helper()
	require.NoError(rc.t, rc.c.SetReadDeadline(time.Now().Add(ioTimeout)))
	line, err := rc.r.ReadBytes('\n')
	require.NoError(rc.t, err, "reading a reply line (got %q)", line)
	return line[:len(line)-1]
}

// roundTrip writes one line (a newline is added) and reads one reply.
func (rc *rawConn) roundTrip(line string) reply {
	rc.t.Helper()
	rc.write([]byte(line + "\n"))
	return parseReply(rc.t, rc.readLine())
}

// reply is one JSON-RPC response as read from the wire.
type reply struct {
	raw     []byte
	members map[string]json.RawMessage
	id      json.RawMessage
	result  json.RawMessage
	err     *api.Error
}

// parseReply checks the response envelope (jsonrpc 2.0, an id, exactly one
// of result and error) and splits it.
func parseReply(t testing.TB, line []byte) reply {
	t.Helper()
	r := reply{raw: line}
	require.NoError(t, json.Unmarshal(line, &r.members), "reply is not a JSON object: %s", line)
	assert.JSONEq(t, `"2.0"`, string(r.members["jsonrpc"]), "jsonrpc of %s", line)
	id, ok := r.members["id"]
	require.True(t, ok, "reply without id: %s", line)
	r.id = id
	res, hasResult := r.members["result"]
	e, hasError := r.members["error"]
	require.True(t, hasResult != hasError, "reply must carry exactly one of result and error: %s", line)
	if hasResult {
		r.result = res
	} else {
		r.err = new(api.Error)
		require.NoError(t, json.Unmarshal(e, r.err), "error object: %s", line)
	}
	return r
}

// request is a daemon.control request line (without newline); id is raw
// JSON, "" for a notification.
func request(id, params string) string {
	if id == "" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"daemon.control","params":%s}`, params)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"daemon.control","params":%s}`, id, params)
}

// encode is EncodeCommand that cannot fail the caller's flow.
func encode(t testing.TB, c api.Command) string {
	t.Helper()
	b, err := api.EncodeCommand(c)
	require.NoError(t, err)
	return string(b)
}

// assertError checks that r is an error reply with this id, code and
// reason, and a message.
func assertError(t testing.TB, r reply, id string, code int, reason string) bool {
	t.Helper()
	if !assert.NotNil(t, r.err, "want error %d %s, got result: %s", code, reason, r.raw) {
		return false
	}
	ok := assert.JSONEq(t, id, string(r.id), "id of %s", r.raw)
	ok = assert.Equal(t, code, r.err.Code, "code of %s", r.raw) && ok
	ok = assert.Equal(t, reason, r.err.Data.Reason, "data.reason of %s", r.raw) && ok
	ok = assert.NotEmpty(t, r.err.Message, "message of %s", r.raw) && ok
	return ok
}

// ulidRE matches a canonical ULID: 26 Crockford base32 characters, the
// first at most 7 (48-bit time).
var ulidRE = regexp.MustCompile(`\b[0-7][0-9A-HJKMNP-TV-Z]{25}\b`)

// ulidNormalizer replaces each distinct ULID by <ULID-n>, n counting in
// order of first appearance, across every call on the same normalizer.
type ulidNormalizer map[string]string

func (n ulidNormalizer) normalize(b []byte) []byte {
	return ulidRE.ReplaceAllFunc(b, func(id []byte) []byte {
		p, ok := n[string(id)]
		if !ok {
			p = fmt.Sprintf("<ULID-%d>", len(n)+1)
			n[string(id)] = p
		}
		return []byte(p)
	})
}

func isULID(s string) bool { return len(s) == 26 && ulidRE.MatchString(s) }
