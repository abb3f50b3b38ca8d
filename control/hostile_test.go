package control_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	scvdaemon "scv/control/daemon"
	"scv/ledger/driver"
)

// lastSequence is the highest event sequence the ledger ever handed out,
// read from the database itself (which also counts events compaction
// removed): if it did not move, nothing was appended.
func lastSequence(t testing.TB, d *daemon) uint64 {
	t.Helper()
	var seq uint64
	ctx := context.Background()
	require.NoError(t, d.ledger.Driver().Read(ctx, func(r driver.Reader) (err error) {
		seq, _, err = r.LastSequence(ctx)
		return err
	}))
	return seq
}

// startDaemonLineTimeout is startDaemon with the server's LineTimeout set.
func startDaemonLineTimeout(t *testing.T, timeout time.Duration) *daemon {
	t.Helper()
	return startDaemonWith(t, scvdaemon.Config{LineTimeout: timeout})
}

// closedByPeer reports whether err is how a read sees a connection the
// daemon closed: end of file, or a reset because it left bytes unread.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// hostileLine is one malformed request line and the error it must get.
type hostileLine struct {
	name   string
	line   string
	id     string // the reply's id, as JSON; "" for no reply at all
	code   int
	reason string
}

// hostileLines builds the malformed lines; each would change the ledger if
// it were wrongly accepted (a project_create, a task_add) where it can.
func hostileLines() []hostileLine {
	const env = `{"jsonrpc":"2.0","id":7,"method":"daemon.control","params":`
	req := func(params string) string { return env + params + "}" }
	create := `{"action":"project_create","name":"evil","workspace":"/"}`
	add := func(maxRetries string) string {
		return req(`{"action":"project_task_add","project":"acme","title":"evil","depends_on":[],"max_retries":` + maxRetries + `}`)
	}
	const parse, invalid, params = -32700, -32600, -32602
	return []hostileLine{
		{"not JSON", `this is not json`, `null`, parse, "parse_error"},
		{"single quotes", `{'jsonrpc':'2.0','id':7}`, `null`, parse, "parse_error"},
		{"a comment", `// {"jsonrpc":"2.0"}`, `null`, parse, "parse_error"},
		{"truncated", req(create)[:40], `null`, parse, "parse_error"},
		{"byte order mark", "\xef\xbb\xbf" + req(create), `null`, parse, "parse_error"},
		{"invalid UTF-8", req(`{"action":"project_create","name":"ev` + "\xff\xfe" + `il","workspace":"/"}`), `null`, parse, "parse_error"},
		{"overlong UTF-8 slash", req(`{"action":"project_create","name":"` + "\xc0\xaf" + `","workspace":"/"}`), `null`, parse, "parse_error"},
		{"raw NUL in a string", req(`{"action":"project_create","name":"e` + "\x00" + `vil","workspace":"/"}`), `null`, parse, "parse_error"},
		{"raw control character in a string", req(`{"action":"project_create","name":"e` + "\x1b" + `vil","workspace":"/"}`), `null`, parse, "parse_error"},
		{"NaN", add("NaN"), `null`, parse, "parse_error"},
		{"deep nesting, unclosed", req(`{"action":"status","x":` + strings.Repeat("[", 10000)), `null`, parse, "parse_error"},
		{"deep nesting, 10,000 levels", req(`{"action":"status","x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`), `null`, parse, "parse_error"},
		{"empty object", `{}`, `null`, invalid, "invalid_request"},
		{"empty batch", `[]`, `null`, invalid, "invalid_request"},
		{"batch over the limit", `[` + strings.Repeat(req(create)+`,`, control.MaxBatch) + req(create) + `]`, `null`, invalid, "too_large"},
		{"batch cut off", `[` + req(create) + `,` + req(create)[:40], `null`, parse, "parse_error"},
		{"string instead of object", `"daemon.control"`, `null`, invalid, "invalid_request"},
		{"number instead of object", `18446744073709551616`, `null`, invalid, "invalid_request"},
		{"duplicate envelope member", `{"jsonrpc":"2.0","id":7,"method":"daemon.control","method":"daemon.control","params":` + create + `}`, `null`, invalid, "invalid_request"},
		{"id is an object", `{"jsonrpc":"2.0","id":{"a":1},"method":"daemon.control","params":` + create + `}`, `null`, invalid, "invalid_request"},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":7,"method":"daemon.control","params":` + create + `}`, `7`, invalid, "invalid_request"},
		{"jsonrpc a number", `{"jsonrpc":2.0,"id":7,"method":"daemon.control","params":` + create + `}`, `7`, invalid, "invalid_request"},
		{"missing jsonrpc", `{"id":7,"method":"daemon.control","params":` + create + `}`, `7`, invalid, "invalid_request"},
		{"missing method", `{"jsonrpc":"2.0","id":7,"params":` + create + `}`, `7`, invalid, "invalid_request"},
		{"method not a string", `{"jsonrpc":"2.0","id":7,"method":["daemon.control"],"params":` + create + `}`, `7`, invalid, "invalid_request"},
		{"wrong method", `{"jsonrpc":"2.0","id":7,"method":"daemon.shutdown","params":` + create + `}`, `7`, -32601, "method_not_found"},
		{"wrong-case method", `{"jsonrpc":"2.0","id":7,"method":"Daemon.Control","params":` + create + `}`, `7`, -32601, "method_not_found"},
		{"params missing", `{"jsonrpc":"2.0","id":7,"method":"daemon.control"}`, `7`, params, "invalid_params"},
		{"params null", req(`null`), `7`, params, "invalid_params"},
		{"params an array (serde's sequence form)", req(`["project_create","evil","/"]`), `7`, params, "invalid_params"},
		{"params a string", req(`"status"`), `7`, params, "invalid_params"},
		{"unknown action", req(`{"action":"drop_database"}`), `7`, params, "invalid_params"},
		{"wrong-case key Action", req(`{"Action":"project_create","name":"evil","workspace":"/"}`), `7`, params, "invalid_params"},
		{"wrong-case action STATUS", req(`{"action":"STATUS"}`), `7`, params, "invalid_params"},
		{"duplicate action", req(`{"action":"status","action":"project_create","name":"evil","workspace":"/"}`), `7`, params, "invalid_params"},
		{"duplicate field", req(`{"action":"project_create","name":"evil","name":"evil2","workspace":"/"}`), `7`, params, "invalid_params"},
		{"missing required field", req(`{"action":"project_task_add","project":"acme","title":"evil","depends_on":[]}`), `7`, params, "invalid_params"},
		{"wrong type: string for u32", add(`"1"`), `7`, params, "invalid_params"},
		{"wrong type: number for string", req(`{"action":"project_create","name":42,"workspace":"/"}`), `7`, params, "invalid_params"},
		{"wrong type: string for array", req(`{"action":"project_task_add","project":"acme","title":"evil","depends_on":"x","max_retries":0}`), `7`, params, "invalid_params"},
		{"wrong type: null for required", req(`{"action":"project_create","name":null,"workspace":"/"}`), `7`, params, "invalid_params"},
		{"negative u32", add(`-1`), `7`, params, "invalid_params"},
		{"fraction", add(`1.5`), `7`, params, "invalid_params"},
		{"exponent", add(`1e3`), `7`, params, "invalid_params"},
		{"minus zero", add(`-0`), `7`, params, "invalid_params"},
		{"u32 overflow", add(`4294967296`), `7`, params, "invalid_params"},
		{"u64 overflow", req(`{"action":"project_events","project":"acme","after":18446744073709551616}`), `7`, params, "invalid_params"},
		{"number beyond float range in an ignored field", req(`{"action":"project_create","name":"evil","workspace":"/","x":1e400}`), `7`, params, "invalid_params"},
		{"unknown enum", req(`{"action":"project_task_update","project":"acme","task":"x","status":"paused","progress":null}`), `7`, params, "invalid_params"},
		{"wrong-case enum", req(`{"action":"project_run_finish","project":"acme","run":"x","status":"Succeeded"}`), `7`, params, "invalid_params"},
		{"lone leading surrogate", req(`{"action":"project_create","name":"\ud800","workspace":"/"}`), `7`, params, "invalid_params"},
		{"lone trailing surrogate", req(`{"action":"project_create","name":"x\udc00","workspace":"/"}`), `7`, params, "invalid_params"},
		{"trailing garbage", req(create) + ` xyz`, `7`, params, "invalid_params"},
		{"two requests on one line", req(create) + req(create), `7`, params, "invalid_params"},
		{"decoded but invalid value", req(`{"action":"project_create","name":"","workspace":"/"}`), `7`, params, "invalid_argument"},
		// A notification gets no reply, not even an error: the status
		// after it must be the next line the daemon sends.
		{"notification with an unknown action", `{"jsonrpc":"2.0","method":"daemon.control","params":{"action":"drop_database"}}`, "", 0, ""},
		{"notification refused by validation", `{"jsonrpc":"2.0","method":"daemon.control","params":{"action":"project_create","name":"","workspace":"/"}}`, "", 0, ""},
	}
}

// TestReliabilityHostileInput sends malformed lines over a real socket:
// each gets its JSON-RPC error on the same connection, which stays usable
// (a status after each is answered); a 2 MiB line is refused with
// too_large and its connection closed; nothing is appended; the daemon
// keeps serving; and lines over 1 MiB cost the server no lasting memory.
func TestReliabilityHostileInput(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 1})
	before := lastSequence(t, d)
	require.NotZero(t, before)

	lines := hostileLines()
	require.GreaterOrEqual(t, len(lines), 20)
	rc := d.raw(t)
	for i, h := range lines {
		statusID := fmt.Sprintf(`"after-%d"`, i)
		if h.id == "" {
			rc.write([]byte(h.line + "\n"))
		} else {
			r := rc.roundTrip(h.line)
			assertError(t, r, h.id, h.code, h.reason)
		}
		// The same connection still serves, and the next line is the
		// status reply: nothing else was sent in between.
		r := rc.roundTrip(request(statusID, `{"action":"status"}`))
		if assert.Nil(t, r.err, "%s: status after it: %s", h.name, r.raw) {
			assert.Equal(t, statusID, string(r.id), "%s: the next reply is the status", h.name)
		}
		assert.Equal(t, before, lastSequence(t, d), "%s: nothing appended", h.name)
	}
	for _, name := range []string{"evil", "evil2"} {
		e := callErr(t, c, api.CmdProjectStatus{Project: name})
		assertCode(t, e, -32001, "not_found", "no hostile line created "+name)
	}

	// A 2 MiB line ends the same connection with too_large.
	huge := bigRequest(t, "8", `{"action":"project_create","name":"huge","workspace":"/"}`, 2<<20)
	writeErr := make(chan error, 1)
	go func() {
		rc.c.SetWriteDeadline(time.Now().Add(ioTimeout))
		_, err := rc.c.Write(append(huge, '\n'))
		writeErr <- err
	}()
	assertError(t, parseReply(t, rc.readLine()), `null`, -32600, "too_large")
	require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(ioTimeout)))
	_, err := rc.r.ReadByte()
	assert.True(t, closedByPeer(err), "the daemon closed the connection after too_large, got %v", err)
	<-writeErr // the daemon stopped reading: the write may have failed
	huge = nil // not part of the heap measured below

	// The daemon keeps serving new connections, and nothing was appended.
	fresh := d.raw(t)
	assertError(t, fresh.roundTrip(request("9", `{"action":"project_status","project":"huge"}`)), `9`, -32001, "not_found")
	assert.Equal(t, before, lastSequence(t, d), "nothing appended")

	// Memory: sixteen 2 MiB lines without a newline, at once, on
	// connections the clients keep open. The server reads at most
	// MaxLine+1 bytes of each, answers too_large and lets go of them: were
	// it to keep what it read, the heap would grow by 16 MiB or more.
	const n = 16
	payload := bigRequest(t, "10", `{"action":"status"}`, 2<<20)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	heapBefore := heap()
	conns := make([]*rawConn, n)
	var wg sync.WaitGroup
	for i := range conns {
		conns[i] = d.raw(t)
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			c.SetWriteDeadline(time.Now().Add(ioTimeout))
			c.Write(payload) // fails once the daemon closes: fine
		}(conns[i].c)
	}
	for _, c := range conns {
		assertError(t, parseReply(t, c.readLine()), `null`, -32600, "too_large")
	}
	wg.Wait()
	heapAfter := heap()
	runtime.KeepAlive(payload) // in both measurements
	growth := int64(heapAfter) - int64(heapBefore)
	assert.LessOrEqual(t, growth, int64(8<<20), "heap growth after %d lines of 2 MiB", n)
	fresh = d.raw(t)
	assert.Nil(t, fresh.roundTrip(request("11", `{"action":"status"}`)).err, "still serving")
	assert.Equal(t, before, lastSequence(t, d), "nothing appended")

	t.Logf("RELIABILITY: hostile input: %d malformed lines each refused with its JSON-RPC error (or, as notifications, silently) on one connection that kept serving; a 2 MiB line refused with too_large and its connection closed; %d lines of 2 MiB at once moved the heap in use by %+.2f MiB (%.1f -> %.1f MiB, limit 8); last sequence stayed %d",
		len(lines), n, float64(growth)/(1<<20), float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20), before)
}

// TestReliabilitySlowClient: a request line that trickles in is cut once
// LineTimeout has passed since its first byte, without a reply and without
// running; an idle connection is not cut; and slow clients do not hold up
// anyone else, nor Shutdown.
func TestReliabilitySlowClient(t *testing.T) {
	const timeout = 300 * time.Millisecond
	var cutAfter time.Duration
	var sentBeforeCut, lineLen int

	t.Run("trickle is cut", func(t *testing.T) {
		d := startDaemonLineTimeout(t, timeout)
		before := lastSequence(t, d)

		// Idle for three timeouts, then a request: still served.
		idle := d.raw(t)
		time.Sleep(3 * timeout)
		assert.Nil(t, idle.roundTrip(request("1", `{"action":"status"}`)).err, "an idle connection is not cut")

		// A byte every 100 ms: the whole line would take seconds.
		line := []byte(request("2", `{"action":"project_create","name":"slow","workspace":"/"}`) + "\n")
		lineLen = len(line)
		rc := d.raw(t)
		start := time.Now()
		stop := make(chan struct{})
		sent := make(chan int, 1)
		go func() {
			n := 0
			defer func() { sent <- n }()
			for _, b := range line {
				if _, err := rc.c.Write([]byte{b}); err != nil {
					return
				}
				n++
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(ioTimeout)))
		got, err := rc.r.ReadByte()
		cutAfter = time.Since(start)
		close(stop)
		sentBeforeCut = <-sent
		assert.True(t, closedByPeer(err), "the daemon closed the trickling connection without a reply (read %q, %v)", got, err)
		assert.GreaterOrEqual(t, cutAfter, timeout, "not cut before LineTimeout")
		assert.Less(t, sentBeforeCut, len(line), "cut before the line was complete")

		c := d.client(t)
		e := callErr(t, c, api.CmdProjectStatus{Project: "slow"})
		assertCode(t, e, -32001, "not_found", "the cut line did not run")
		assert.Equal(t, before, lastSequence(t, d), "nothing appended")

		// Complete lines with idle gaps longer than the timeout are fine:
		// the clock runs per line.
		for i := range 2 {
			time.Sleep(2 * timeout)
			assert.Nil(t, idle.roundTrip(request(fmt.Sprint(10+i), `{"action":"status"}`)).err)
		}
	})

	var served int
	const slowClients = 10
	t.Run("slow clients starve no one", func(t *testing.T) {
		// A timeout no test run reaches: the slow clients stay connected
		// for as long as the others need.
		d := startDaemonLineTimeout(t, time.Hour)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		slow := make([]*rawConn, slowClients)
		writeErrs := make(chan error, slowClients)
		for i := range slow {
			slow[i] = d.raw(t)
			slow[i].write([]byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":{"action":"status","pad":"`))
			wg.Add(1)
			go func(c net.Conn) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if _, err := c.Write([]byte("x")); err != nil {
						writeErrs <- err
						return
					}
				}
			}(slow[i].c)
		}

		const clients, each = 5, 10
		done := make(chan int, clients)
		for range clients {
			c := d.client(t)
			go func() {
				n := 0
				for range each {
					if _, err := c.Call(context.Background(), api.CmdStatus{}); err != nil {
						break
					}
					n++
				}
				done <- n
			}()
		}
		for range clients {
			served += <-done
		}
		assert.Equal(t, clients*each, served, "every normal request was answered")

		// The slow clients are all still connected, mid-line.
		for i, rc := range slow {
			require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
			_, err := rc.r.ReadByte()
			assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "slow client %d is still connected and unanswered", i)
		}
		select {
		case err := <-writeErrs:
			t.Errorf("a slow client's write failed: %v", err)
		default:
		}

		// Shutdown does not wait for a line that trickles.
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		require.NoError(t, d.srv.Shutdown(ctx), "Shutdown with slow clients mid-line")
		close(stop)
		wg.Wait()
		for i, rc := range slow {
			require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(ioTimeout)))
			_, err := rc.r.ReadByte()
			assert.True(t, closedByPeer(err), "slow client %d closed by Shutdown, got %v", i, err)
		}
	})

	t.Logf("RELIABILITY: slow clients: with LineTimeout %v a line trickled at a byte per 100 ms was cut %v after its first byte, after %d of its %d bytes, without a reply and without running; an idle connection survived 3 timeouts; %d requests on 5 other connections were all answered while %d clients trickled lines; Shutdown closed the trickling connections",
		timeout, cutAfter.Round(time.Millisecond), sentBeforeCut, lineLen, served, slowClients)
}
