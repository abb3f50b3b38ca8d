package follow_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/follow"
	"scv/control/rpc"
)

// guard bounds every wait of a test for something the follower does, so
// that a follower that never does it fails the test instead of hanging it.
const guard = 10 * time.Second

// testDaemon is a real in-process daemon on a SQLite file and a socket in
// a folder of the test's own; it can be stopped and started again on the
// same socket and file.
type testDaemon struct {
	t    *testing.T
	dir  string
	sock string

	mu     sync.Mutex
	d      *daemon.Daemon
	served chan error
}

func newDaemon(t *testing.T) *testDaemon {
	t.Helper()
	// t.TempDir() can be too long for sun_path (108 bytes): keep it short.
	dir, err := os.MkdirTemp("", "scvfollow")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Mkdir(filepath.Join(dir, "acme"), 0o755))
	td := &testDaemon{t: t, dir: dir, sock: filepath.Join(dir, "d.sock")}
	t.Cleanup(td.stop)
	return td
}

// start opens the daemon and serves its socket.
func (td *testDaemon) start() {
	td.t.Helper()
	d := daemon.New(daemon.Config{
		DB: filepath.Join(td.dir, "ledger.db"), Socket: td.sock, ConfigPath: filepath.Join(td.dir, "channels.json"),
		Version: "test", PID: 1, KillGrace: 500 * time.Millisecond,
	})
	require.NoError(td.t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	td.mu.Lock()
	td.d, td.served = d, served
	td.mu.Unlock()
}

// stop closes the daemon, if it runs.
func (td *testDaemon) stop() {
	td.mu.Lock()
	d, served := td.d, td.served
	td.d = nil
	td.mu.Unlock()
	if d == nil {
		return
	}
	assert.NoError(td.t, d.Close(), "close")
	select {
	case err := <-served:
		assert.NoError(td.t, err, "Serve after Close")
	case <-time.After(guard):
		td.t.Error("Serve did not return after Close")
	}
}

// must sends cmd on a connection of its own and returns the reply.
func (td *testDaemon) must(cmd api.Command) *api.DaemonStatus {
	td.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	st, err := (&rpc.Remote{Socket: td.sock}).Handle(ctx, cmd)
	require.NoError(td.t, err, "%T", cmd)
	return st
}

// acme creates project acme with n tasks.
func (td *testDaemon) acme(n int) {
	td.t.Helper()
	td.must(api.CmdProjectCreate{Name: "acme", Workspace: filepath.Join(td.dir, "acme")})
	for range n {
		td.must(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}})
	}
}

// head is the sequence of acme's last event.
func (td *testDaemon) head() uint64 {
	td.t.Helper()
	evs := td.must(api.CmdProjectEvents{Project: "acme"}).Project.Events
	require.NotEmpty(td.t, evs)
	return evs[len(evs)-1].Sequence
}

// receive is the next value of ch, within guard.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// eventsFollower follows acme's events after *after: each reply's
// sequences go to batches (a reply with none is not sent), and the
// follower waits in Reply until the test sends on proceed, so that the
// test chooses what happens to the daemon before the next request.
type eventsFollower struct {
	follow.Follower
	after   uint64
	batches chan []uint64
	proceed chan struct{}
	away    chan error
	back    chan struct{}
}

func newEventsFollower(ctx context.Context, h api.Handler) *eventsFollower {
	f := &eventsFollower{batches: make(chan []uint64), proceed: make(chan struct{}),
		away: make(chan error, 8), back: make(chan struct{}, 8)}
	f.Follower = follow.Follower{
		Handler: h,
		Pause:   5 * time.Millisecond,
		Request: func() api.Command {
			after := f.after
			return api.CmdProjectEvents{Project: "acme", After: &after}
		},
		Reply: func(st *api.DaemonStatus) (follow.Step, error) {
			var seqs []uint64
			for _, e := range st.Project.Events {
				seqs = append(seqs, e.Sequence)
				f.after = e.Sequence
			}
			if len(seqs) == 0 {
				return follow.Wait, nil
			}
			select {
			case f.batches <- seqs:
			case <-ctx.Done():
				return follow.Stop, ctx.Err()
			}
			select {
			case <-f.proceed:
			case <-ctx.Done():
				return follow.Stop, ctx.Err()
			}
			return follow.Wait, nil
		},
		Away: func(err error) { f.away <- err },
		Back: func() { f.back <- struct{}{} },
	}
	return f
}

// run runs the follower in a goroutine; its end comes on the channel.
func (f *eventsFollower) run(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	return done
}

// TestFollowThroughARestart: a daemon stopped and started again on the
// same socket in the middle of a follow: the follower says it went away
// once and came back once, and the events come each once, in order, the
// ones appended just before the stop among them.
func TestFollowThroughARestart(t *testing.T) {
	t.Parallel()
	td := newDaemon(t)
	td.start()
	td.acme(2)
	rem := &rpc.Remote{Socket: td.sock, Keep: true}
	defer rem.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newEventsFollower(ctx, rem)
	done := f.run(ctx)

	var seen []uint64
	seen = append(seen, receive(t, f.batches, "history")...)
	// The follower is in Reply: an event is appended and the daemon
	// stops before it asks again.
	td.must(api.CmdProjectTaskAdd{Project: "acme", Title: "before the stop", DependsOn: []string{}})
	td.stop()
	f.proceed <- struct{}{}
	err := receive(t, f.away, "note that the daemon went away")
	assert.ErrorIs(t, err, api.ErrUnavailable, "%v", err)

	td.start()
	receive(t, f.back, "note that the daemon is back")
	seen = append(seen, receive(t, f.batches, "the event appended before the stop")...)
	f.proceed <- struct{}{}
	td.must(api.CmdProjectTaskAdd{Project: "acme", Title: "after the start", DependsOn: []string{}})
	seen = append(seen, receive(t, f.batches, "the event appended after the start")...)

	var want []uint64
	for s := uint64(1); s <= td.head(); s++ {
		want = append(want, s)
	}
	assert.Equal(t, want, seen, "every event once, in order")
	assert.Empty(t, f.away, "one note of the daemon going away")
	assert.Empty(t, f.back, "one of it coming back")

	cancel()
	assert.ErrorIs(t, receive(t, done, "the follow's end"), context.Canceled)
}

// TestFollowEndsOnARefusal: a refusal that is not unavailable ends the
// follow with it, at the first request or later, and is not waited out.
func TestFollowEndsOnARefusal(t *testing.T) {
	t.Parallel()
	td := newDaemon(t)
	td.start()
	td.acme(1)
	rem := &rpc.Remote{Socket: td.sock, Keep: true}
	defer rem.Close()

	var replies, aways atomic.Int32
	err := (&follow.Follower{
		Handler: rem,
		Request: func() api.Command { return api.CmdProjectEvents{Project: "nobody"} },
		Reply:   func(*api.DaemonStatus) (follow.Step, error) { replies.Add(1); return follow.Now, nil },
		Away:    func(error) { aways.Add(1) },
	}).Run(context.Background())
	assert.Equal(t, api.ReasonNotFound, api.ErrorOf(err).Data.Reason, "%v", err)

	// Later: a project removed from the cursor, say.
	project := "acme"
	err = (&follow.Follower{
		Handler: rem,
		Request: func() api.Command { return api.CmdProjectEvents{Project: project} },
		Reply: func(*api.DaemonStatus) (follow.Step, error) {
			replies.Add(1)
			project = "nobody"
			return follow.Now, nil
		},
		Away: func(error) { aways.Add(1) },
	}).Run(context.Background())
	assert.Equal(t, api.ReasonNotFound, api.ErrorOf(err).Data.Reason, "%v", err)
	assert.Equal(t, int32(1), replies.Load(), "the first follow had no reply, the second one")
	assert.Zero(t, aways.Load(), "a refusal is no daemon going away")

	// Reply's own error ends it too, as it is.
	mine := errors.New("enough")
	err = (&follow.Follower{
		Handler: rem,
		Request: func() api.Command { return api.CmdProjectEvents{Project: "acme"} },
		Reply:   func(*api.DaemonStatus) (follow.Step, error) { return follow.Now, mine },
	}).Run(context.Background())
	assert.Same(t, mine, err)
}

// TestFollowEndsWithItsContext: the end of the context ends the follow at
// once, in a long poll the daemon holds and while the daemon is away.
func TestFollowEndsWithItsContext(t *testing.T) {
	t.Parallel()
	td := newDaemon(t)
	td.start()
	rem := &rpc.Remote{Socket: td.sock, Keep: true}
	defer rem.Close()

	ctx, cancel := context.WithCancel(context.Background())
	chat, wait := "local:owner", uint64(0)
	looked := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- (&follow.Follower{
			Handler: rem,
			Request: func() api.Command {
				after, wait := uint64(1<<40), wait
				return api.CmdConfirmList{Chat: &chat, After: &after, WaitSeconds: &wait}
			},
			Reply: func(*api.DaemonStatus) (follow.Step, error) {
				if wait == 0 {
					close(looked)
				}
				wait = api.MaxListWait
				return follow.Now, nil
			},
		}).Run(ctx)
	}()
	receive(t, looked, "first look")
	require.Eventually(t, func() bool { return td.d.Server().Waiting() == 1 }, guard, 5*time.Millisecond,
		"the long poll is under way")
	cancel()
	assert.ErrorIs(t, receive(t, done, "the follow's end"), context.Canceled)

	// While the daemon is away.
	td.acme(0)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	f := newEventsFollower(ctx, rem)
	f.Answered = true
	td.stop()
	end := f.run(ctx)
	receive(t, f.away, "note that the daemon went away")
	cancel()
	assert.ErrorIs(t, receive(t, end, "the follow's end"), context.Canceled)
	assert.Empty(t, f.back)
}

// TestFollowGivesUp: a daemon that does not answer for the give-up time
// ends the follow with an *AwayError carrying the last request's error;
// a daemon not there at the first request ends it at once, unless a
// request before the follow was answered.
func TestFollowGivesUp(t *testing.T) {
	t.Parallel()
	td := newDaemon(t)
	rem := &rpc.Remote{Socket: td.sock, Keep: true}
	defer rem.Close()
	var asked atomic.Int32
	counted := api.HandlerFunc(func(ctx context.Context, cmd api.Command) (*api.DaemonStatus, error) {
		asked.Add(1)
		return rem.Handle(ctx, cmd)
	})

	// No daemon, and none answered before: at once.
	ctx := context.Background()
	f := newEventsFollower(ctx, counted)
	err := f.Run(ctx)
	assert.ErrorIs(t, err, api.ErrUnavailable)
	var away *follow.AwayError
	assert.False(t, errors.As(err, &away), "not waited for: %v", err)
	assert.Equal(t, int32(1), asked.Load())
	assert.Empty(t, f.away)

	// A daemon that answered, then stopped for good.
	td.start()
	td.acme(0)
	asked.Store(0)
	f = newEventsFollower(ctx, counted)
	f.GiveUp = 300 * time.Millisecond
	end := f.run(ctx)
	receive(t, f.batches, "the history")
	td.stop()
	f.proceed <- struct{}{}
	err = receive(t, end, "the follow's end")
	require.ErrorAs(t, err, &away)
	assert.Equal(t, f.GiveUp, away.After)
	assert.ErrorIs(t, err, api.ErrUnavailable, "the last request's error")
	assert.Contains(t, err.Error(), "the daemon did not come back within 300ms: ")
	assert.Greater(t, asked.Load(), int32(2), "asked again before giving up")
	assert.Len(t, f.away, 1, "one note of the daemon going away")
	assert.Empty(t, f.back)
}

// TestFollowInProcess: the daemon's own Service is a Handler too; once it
// is closed it answers unavailable, and the follower waits for it.
func TestFollowInProcess(t *testing.T) {
	t.Parallel()
	td := newDaemon(t)
	td.start()
	td.acme(1)
	svc := td.d.Server().Service
	ctx := context.Background()
	f := newEventsFollower(ctx, svc)
	f.GiveUp = 100 * time.Millisecond
	end := f.run(ctx)
	assert.Len(t, receive(t, f.batches, "the history"), 2)
	td.stop()
	f.proceed <- struct{}{}
	err := receive(t, f.away, "note that the daemon went away")
	assert.Equal(t, api.ReasonUnavailable, api.ErrorOf(err).Data.Reason, "%v", err)
	var away *follow.AwayError
	assert.ErrorAs(t, receive(t, end, "the follow's end"), &away)
}
