package control_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// blockingRestarter holds a restart_when_idle request in flight until
// the test releases it: a request that is being answered.
type blockingRestarter struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingRestarter) RestartWhenIdle(api.CmdRestartWhenIdle) (*api.RestartInfo, error) {
	b.entered <- struct{}{}
	<-b.release
	return &api.RestartInfo{ToVersion: "next"}, nil
}

func (b *blockingRestarter) Pending() *api.RestartInfo { return nil }

// pauseServer serves a real ledger on a real socket with a restarter that
// blocks; Serve's result arrives on the returned channel after Shutdown
// (done in cleanup, also while paused).
func pauseServer(t *testing.T) (*control.Server, string, *blockingRestarter, chan error) {
	t.Helper()
	br := &blockingRestarter{entered: make(chan struct{}, 8), release: make(chan struct{})}
	srv, sock, served := serveService(t, func(l *ledger.Ledger) *control.Service {
		return &control.Service{Ledger: l, Version: "test", PID: 1, Restarter: br}
	})
	return srv, sock, br, served
}

// serveService serves the service that service makes of a real ledger,
// on a real socket, as pauseServer does.
func serveService(t *testing.T, service func(*ledger.Ledger) *control.Service) (*control.Server, string, chan error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "scv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "ledger.db"), sqlite.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(context.Background(), db, ledger.Options{})
	require.NoError(t, err)
	sock := filepath.Join(dir, "d.sock")
	ln, err := control.Listen(sock)
	require.NoError(t, err)
	srv := &control.Server{Service: service(l)}
	return srv, sock, serve(t, srv, ln, l)
}

// dialRaw connects by hand, for reading exactly what the server sends.
func dialRaw(t *testing.T, sock string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, ioTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// assertClosed checks that the server closed rc (EOF, no more replies).
func assertClosed(t *testing.T, rc *rawConn) {
	t.Helper()
	require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(ioTimeout)))
	line, err := rc.r.ReadBytes('\n')
	assert.ErrorIs(t, err, io.EOF, "connection closed, got %q", line)
}

var statusLine = request("1", `{"action":"status"}`)

// TestServerPause: Pause closes an idle connection at once; a request
// being answered gets its reply first (and a request the client had
// already sent behind it on the same connection too), then its
// connection is closed; Pause returns only then. A connection made while
// paused is not refused: it is served after Resume. Shutdown ends a
// paused Serve with nil.
func TestServerPause(t *testing.T) {
	srv, sock, br, served := pauseServer(t)

	idle := dialRaw(t, sock)
	idle.roundTrip(statusLine) // registered and idle

	busy := dialRaw(t, sock)
	// Two requests in one write: the second is read with the first and
	// waits behind it, read but not started when the pause begins.
	busy.write([]byte(request("2", `{"action":"restart_when_idle"}`) + "\n" + request("3", `{"action":"status"}`) + "\n"))
	<-br.entered
	// The idle connection's reply may be out a moment before the server
	// marks it idle.
	assert.Eventually(t, func() bool { return srv.InFlight() == 1 }, ioTimeout, time.Millisecond)

	paused := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		paused <- srv.Pause(ctx)
	}()
	assertClosed(t, idle)
	select {
	case err := <-paused:
		t.Fatalf("Pause returned (%v) while a request was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}

	// A connection made now queues in the backlog: not refused, not
	// answered while paused.
	queued := dialRaw(t, sock)
	queued.write([]byte(statusLine + "\n"))

	close(br.release)
	r := parseReply(t, busy.readLine())
	assert.JSONEq(t, `2`, string(r.id))
	assert.Contains(t, string(r.result), `"to_version":"next"`)
	r = parseReply(t, busy.readLine())
	assert.JSONEq(t, `3`, string(r.id), "the request read behind it is answered too")
	assertClosed(t, busy)
	require.NoError(t, <-paused)
	assert.Equal(t, 0, srv.InFlight())

	require.NoError(t, queued.c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err := queued.r.ReadBytes('\n')
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing is answered while paused")
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) on a pause", err)
	default:
	}

	srv.Resume()
	r = parseReply(t, queued.readLine())
	assert.Contains(t, string(r.result), `"version":"test"`, "the queued connection is served after Resume")
	fresh := dialRaw(t, sock)
	fresh.roundTrip(statusLine)

	// A second pause with nothing to wait for returns at once, and
	// Shutdown (in cleanup) ends the paused Serve.
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	fresh2 := dialRaw(t, sock)
	fresh2.roundTrip(statusLine)
	require.NoError(t, srv.Pause(ctx))
	assertClosed(t, fresh)
	assertClosed(t, fresh2)
	assert.Error(t, srv.Pause(ctx), "already paused")
}

// TestServerPauseTimeout: Pause gives up at its context while a request
// is still being answered; after Resume the server works as before, and
// the request still gets its reply on a connection that stays open.
func TestServerPauseTimeout(t *testing.T) {
	srv, sock, br, _ := pauseServer(t)
	busy := dialRaw(t, sock)
	busy.write([]byte(request("2", `{"action":"restart_when_idle"}`) + "\n"))
	<-br.entered

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := srv.Pause(ctx)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	srv.Resume()
	close(br.release)
	parseReply(t, busy.readLine())
	busy.roundTrip(statusLine) // the connection was not closed
	dialRaw(t, sock).roundTrip(statusLine)
}

// gatedLedger is the real ledger, except that a submitted write is held
// until the test releases it: the connection has gone back to reading,
// and the write is in flight.
type gatedLedger struct {
	*ledger.Ledger
	entered chan struct{}
	release chan struct{}
}

func (g *gatedLedger) Submit(ctx context.Context, cmd reducer.Command, done func(ledger.Result, error)) {
	g.entered <- struct{}{}
	go func() {
		<-g.release
		g.Ledger.Submit(ctx, cmd, done)
	}()
}

// TestServerPauseWithSubmittedWrite: a write whose reply is written by
// the goroutine that commits it, not by its connection's, holds a Pause
// like any request in flight; once its reply is out, its connection,
// which Pause could not close while it was busy, is closed, and Pause
// returns.
func TestServerPauseWithSubmittedWrite(t *testing.T) {
	var g *gatedLedger
	srv, sock, _ := serveService(t, func(l *ledger.Ledger) *control.Service {
		g = &gatedLedger{Ledger: l, entered: make(chan struct{}, 1), release: make(chan struct{})}
		return &control.Service{Ledger: g, Version: "test", PID: 1}
	})

	busy := dialRaw(t, sock)
	busy.write([]byte(request("2", encode(t, api.CmdProjectCreate{Name: "acme", Workspace: t.TempDir()})) + "\n"))
	<-g.entered
	require.Equal(t, 1, srv.InFlight(), "the submitted write is in flight")

	paused := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		paused <- srv.Pause(ctx)
	}()
	select {
	case err := <-paused:
		t.Fatalf("Pause returned (%v) while a write was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(g.release)
	r := parseReply(t, busy.readLine())
	assert.JSONEq(t, `2`, string(r.id))
	assert.Contains(t, string(r.result), `"kind":"created"`)
	assertClosed(t, busy)
	require.NoError(t, <-paused, "Pause returns once the write's connection is closed")
	srv.Resume()
}

// TestWaitsAreNotInFlight: a long poll (confirm_list with wait_seconds)
// is not a request in flight, which a restart would wait for; a request
// that works is.
func TestWaitsAreNotInFlight(t *testing.T) {
	d := startDaemon(t, nil)
	wait := uint64(5)
	done := make(chan error, 1)
	go func() {
		_, err := d.client(t).Call(testCtx(t), api.CmdConfirmList{WaitSeconds: &wait})
		done <- err
	}()
	require.Eventually(t, func() bool { return d.srv.Waiting() == 1 }, ioTimeout, time.Millisecond, "the wait began")
	assert.Equal(t, 0, d.srv.InFlight(), "a wait is not in flight")
	require.NoError(t, <-done)
	assert.Zero(t, d.srv.Waiting())
}
