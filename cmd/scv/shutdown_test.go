package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/daemon"
)

// TestShutdownEndsLongPoll: a client in a confirm_list long poll (what
// `scv chat` keeps open) does not hold the daemon's shutdown: Close
// returns well within 2 s, without its 10 s deadline, and the waiting
// client is answered unavailable instead of losing its connection.
func TestShutdownEndsLongPoll(t *testing.T) {
	d, stop := inDaemonStop(t, daemon.Config{})
	sock := d.Config().Socket
	ctx := context.Background()
	cl, err := control.Dial(ctx, sock)
	require.NoError(t, err)
	defer cl.Close()
	chat, after, wait := "local:owner", uint64(1<<40), uint64(control.MaxListWait)
	answered := make(chan error, 1)
	go func() {
		_, err := cl.Call(ctx, control.CmdConfirmList{Chat: &chat, After: &after, WaitSeconds: &wait})
		answered <- err
	}()
	require.Eventually(t, func() bool { return d.Server().InFlight() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the long poll is in flight")

	began := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		assert.NoError(t, err, "no deadline ran out")
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown waited for the long poll")
	}
	took := time.Since(began)
	assert.Less(t, took, 2*time.Second, "shutdown took %s", took)
	select {
	case err := <-answered:
		var e *control.Error
		require.True(t, errors.As(err, &e), "an error reply, not a lost connection: %v", err)
		assert.Equal(t, control.ReasonUnavailable, e.Data.Reason)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting client got nothing")
	}
	stop()
}
