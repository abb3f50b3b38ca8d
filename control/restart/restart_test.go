package restart

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"scv/control/api"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeScript installs a shell script at path.
func writeScript(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path+".new", []byte("#!/bin/sh\n"+body), 0o755))
	require.NoError(t, os.Rename(path+".new", path))
}

// TestWaitIdle: the wait loop restarts as soon as nothing is waited for,
// or at the deadline of its clock even if something still is, shows
// what it waits for at each poll, and gives up when cancelled.
func TestWaitIdle(t *testing.T) {
	var mu sync.Mutex
	now, busy := time.Unix(1000, 0), "delegation D"
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(at int64, waiting string) { mu.Lock(); defer mu.Unlock(); now, busy = time.Unix(at, 0), waiting }
	var shown []string
	waitingFor := func() *string {
		mu.Lock()
		defer mu.Unlock()
		shown = append(shown, busy)
		if busy == "" {
			return nil
		}
		w := busy
		return &w
	}
	show := func(*string) {}
	deadline := time.Unix(1010, 0)
	run := func(cancel chan struct{}) chan bool {
		res := make(chan bool, 1)
		go func() { res <- waitIdle(cancel, deadline, clock, time.Millisecond, waitingFor, show) }()
		return res
	}
	pending := func(res chan bool) bool {
		select {
		case <-res:
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}

	// Idle: at once.
	set(1000, "")
	assert.True(t, <-run(make(chan struct{})))

	// Busy until the delegation ends.
	set(1000, "delegation D")
	res := run(make(chan struct{}))
	assert.True(t, pending(res), "waits while the delegation is active")
	set(1005, "")
	assert.True(t, <-res)

	// Busy past the deadline: restarts anyway.
	set(1000, "2 requests in flight")
	res = run(make(chan struct{}))
	assert.True(t, pending(res))
	set(1010, "2 requests in flight")
	assert.True(t, <-res, "the deadline passed")

	// Cancelled (replaced, or the daemon closes): no restart.
	set(1000, "delegation D")
	cancel := make(chan struct{})
	res = run(cancel)
	assert.True(t, pending(res))
	close(cancel)
	assert.False(t, <-res)
	mu.Lock()
	assert.Contains(t, shown, "2 requests in flight")
	mu.Unlock()
}

// TestRestartRequest: the checks and the reply of restart_when_idle,
// without restarting: the release's version is checked (or taken as
// is), the requester is the last delegation of the parent chain, the
// deadline is max_wait_seconds away (600 s by default), and waiting_for
// names the active delegation and the other requests in flight.
func TestRestartRequest(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "scv")
	writeScript(t, exe, `echo " 3.1.4 "`)
	var mu sync.Mutex
	active, inFlight, restarts := map[string]bool{}, 1, 0
	now := time.Unix(1_000_000, 0)
	r := &Restarter{
		Exe:      exe,
		Active:   func(h string) bool { mu.Lock(); defer mu.Unlock(); return active[h] },
		InFlight: func() int { mu.Lock(); defer mu.Unlock(); return inFlight },
		Handoff:  func(string) error { mu.Lock(); defer mu.Unlock(); restarts++; return nil },
		Now:      func() time.Time { return now },
		Poll:     time.Millisecond,
	}
	t.Cleanup(r.Stop)

	_, err := (&Restarter{}).RestartWhenIdle(api.CmdRestartWhenIdle{})
	e := api.ErrorOf(err)
	require.NotNil(t, e)
	assert.Equal(t, api.ReasonUnavailable, e.Data.Reason, "no executable known (in-process daemon)")

	_, err = r.RestartWhenIdle(api.CmdRestartWhenIdle{Version: ptr("3.1.5")})
	e = api.ErrorOf(err)
	require.NotNil(t, e)
	assert.Equal(t, api.ReasonConflict, e.Data.Reason)
	assert.Contains(t, e.Message, `"3.1.4"`)
	assert.Contains(t, e.Message, `"3.1.5"`)
	assert.Contains(t, e.Message, exe)
	assert.Nil(t, r.Pending())

	mu.Lock()
	active["D2"], inFlight = true, 3
	mu.Unlock()
	info, err := r.RestartWhenIdle(api.CmdRestartWhenIdle{Parent: ptr("D1, D2")})
	require.NoError(t, err)
	assert.Equal(t, "3.1.4", info.ToVersion, "no version asked: the installed one, trimmed")
	require.NotNil(t, info.Requester)
	assert.Equal(t, "D2", *info.Requester)
	require.NotNil(t, info.WaitingFor)
	assert.Equal(t, "delegation D2, 2 requests in flight", *info.WaitingFor, "the request itself is not waited for")
	assert.Equal(t, uint64(1_000_600), info.DeadlineUnixSeconds)
	pending := r.Pending()
	require.NotNil(t, pending, "status shows it")
	assert.Equal(t, info.ToVersion, pending.ToVersion)
	assert.Equal(t, info.Requester, pending.Requester)
	assert.Equal(t, info.DeadlineUnixSeconds, pending.DeadlineUnixSeconds)
	require.NotNil(t, pending.WaitingFor, "what the last poll saw, the request itself maybe included")
	assert.Contains(t, *pending.WaitingFor, "delegation D2")

	// A second request replaces the first.
	info, err = r.RestartWhenIdle(api.CmdRestartWhenIdle{Version: ptr("3.1.4"), Parent: ptr("D3"), MaxWaitSeconds: ptr(uint64(5))})
	require.NoError(t, err)
	assert.Equal(t, uint64(1_000_005), info.DeadlineUnixSeconds)
	assert.Equal(t, "D3", *r.Pending().Requester)
	_, err = r.RestartWhenIdle(api.CmdRestartWhenIdle{MaxWaitSeconds: ptr(uint64(1) << 63)})
	require.NoError(t, err, "a huge max wait is capped, not overflowed")
	assert.Greater(t, r.Pending().DeadlineUnixSeconds, uint64(1_000_000))

	// Idle at last: one restart, for the pending request only.
	mu.Lock()
	active["D2"], inFlight = false, 0
	mu.Unlock()
	require.Eventually(t, func() bool { return r.Pending() == nil }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	assert.Equal(t, 1, restarts)
	mu.Unlock()
}

// TestHold: when nothing is waited for any more, the restart first holds
// new turns back (Hold); a turn that began as the wait ended is waited
// for too (Release, and the wait goes on); at the deadline Hold is asked
// to end what runs and the hand-over goes whatever it says; a failed
// hand-over lifts the hold.
func TestHold(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "scv")
	writeScript(t, exe, `echo 2.0`)
	var mu sync.Mutex
	var calls []string
	turns := []string{"agent a (turn 3)"}
	begun := false // the turn began as the wait ended: Busy sees it after Hold did
	now := time.Unix(1_000_000, 0)
	handoff := make(chan error, 1)
	r := &Restarter{
		Exe:      exe,
		InFlight: func() int { return 0 },
		Busy: func() []string {
			mu.Lock()
			defer mu.Unlock()
			if !begun {
				return nil
			}
			return turns
		},
		Hold: func(why string, end bool) []string {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf("hold(%s, end=%v)", why, end))
			busy := turns
			if end {
				busy = nil // ended
			}
			begun = true
			return busy
		},
		Release: func() { mu.Lock(); defer mu.Unlock(); calls = append(calls, "release") },
		Handoff: func(string) error {
			mu.Lock()
			calls = append(calls, "handoff")
			mu.Unlock()
			return <-handoff
		},
		Now:  func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Poll: time.Millisecond,
	}
	t.Cleanup(r.Stop)
	seen := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(calls) }

	_, err := r.RestartWhenIdle(api.CmdRestartWhenIdle{MaxWaitSeconds: ptr(uint64(60))})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(seen()) >= 2 }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // twenty polls
	assert.Equal(t, []string{"hold(the daemon restarts into 2.0, end=false)", "release"}, seen(), "a turn under way holds it back")
	require.NotNil(t, r.Pending().WaitingFor)
	assert.Equal(t, "agent a (turn 3)", *r.Pending().WaitingFor)

	// The turn ends: held, handed over (and it fails: the hold is lifted).
	mu.Lock()
	turns, calls = nil, nil
	mu.Unlock()
	require.Eventually(t, func() bool { return slices.Contains(seen(), "handoff") }, 5*time.Second, time.Millisecond)
	handoff <- errors.New("the new release did not start")
	require.Eventually(t, func() bool { return r.Pending() == nil }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"hold(the daemon restarts into 2.0, end=false)", "handoff", "release"}, seen())

	// At the deadline, the turns are ended and the restart goes.
	mu.Lock()
	turns, calls, begun = []string{"agent a (turn 4)"}, nil, false
	mu.Unlock()
	_, err = r.RestartWhenIdle(api.CmdRestartWhenIdle{MaxWaitSeconds: ptr(uint64(60))})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(seen()) >= 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"hold(the daemon restarts into 2.0, end=false)", "release"}, seen())
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	require.Eventually(t, func() bool { return slices.Contains(seen(), "handoff") }, 5*time.Second, time.Millisecond)
	handoff <- nil
	require.Eventually(t, func() bool { return r.Pending() == nil }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"hold(the daemon restarts into 2.0, end=false)", "release",
		"hold(the daemon restarts into 2.0, end=true)", "handoff"}, seen(), "handed over: nothing to lift")
}
