package postgres_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/postgres"
	"scv/ledger/postgres/pgcluster"
	"scv/ledger/postgres/pgtest"
	"scv/reducer"
)

// failoverWait bounds how long the open ledger may take to write again
// once the standby is promoted.
const failoverWait = 30 * time.Second

// TestFailoverToSynchronousStandby: a ledger opened once, on a URL naming
// a primary and its synchronous standby (target_session_attrs=read-write),
// goes on writing on the standby once it is promoted, without being
// opened again, and loses nothing it acknowledged.
//
// The first failover is between writes: with the primary dead and the
// standby not promoted, every write is refused unavailable; once the
// standby is promoted, the same ledger writes again. The second, on a new
// standby of the promoted one, is under eight writers, so commits are in
// flight when the primary dies. In the end every acknowledged task is on
// the last primary, and every refused one is not (unless its refusal says
// it may have been recorded), read through the ledger and through a
// ledger opened afresh on that server, whose chain verifies.
func TestFailoverToSynchronousStandby(t *testing.T) {
	if !pgcluster.Installed() {
		msg := "no PostgreSQL programs (initdb, pg_ctl, pg_basebackup) to run a primary and a standby: install PostgreSQL (Debian: apt-get install postgresql)"
		if os.Getenv(pgtest.RequireEnv) != "" {
			t.Fatal(msg + "; " + pgtest.RequireEnv + " is set, so this is a failure")
		}
		t.Skip(msg)
	}
	ctx := context.Background()
	// A short folder (a socket's path must fit in 108 bytes) that the
	// clusters' user may pass through when the test runs as root.
	dir, err := os.MkdirTemp("", "pgf")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o711))
	t.Cleanup(func() { os.RemoveAll(dir) })

	primary := &pgcluster.Cluster{Dir: filepath.Join(dir, "a")}
	require.NoError(t, primary.Start())
	t.Cleanup(func() { primary.Kill() })
	require.NoError(t, primary.CreateDB("ledger"))
	standby := startSyncStandby(t, primary, filepath.Join(dir, "b"), "b")
	// The URL names, as a fleet's would, every server that may be the
	// primary: c is the standby of the second failover, not there yet.
	third := &pgcluster.Cluster{Dir: filepath.Join(dir, "c")}
	u := pgcluster.MultiHostURL("ledger", primary, standby, third)

	db, err := postgres.Open(ctx, u, postgres.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Execute(ctx, reducer.CreateProject{ProjectID: "P1", Name: "acme", Workspace: dir})
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		acked   []string
		refused = map[string]error{}
	)
	for i := range 10 {
		id := fmt.Sprintf("before%d", i)
		_, err := l.Execute(ctx, reducer.AddTask{Project: "acme", TaskID: id, Title: id})
		require.NoError(t, err)
		acked = append(acked, id)
	}

	// The first failover, between writes.
	require.NoError(t, primary.Kill())
	killed := time.Now()
	for i := range 2 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		id := fmt.Sprint("refused", i)
		_, err := l.Execute(wctx, reducer.AddTask{Project: "acme", TaskID: id, Title: id})
		cancel()
		refused[id] = err
		require.ErrorIs(t, err, driver.ErrUnavailable, "a write with the primary dead and the standby not promoted")
		assert.Less(t, time.Since(start), 5*time.Second, "refused at once, not at a timeout")
		t.Logf("refused, %s after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
	}
	start := time.Now()
	require.NoError(t, standby.Promote())
	promoted := time.Since(start)
	var tries int
	for {
		tries++
		id := fmt.Sprint("after", tries)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := l.Execute(wctx, reducer.AddTask{Project: "acme", TaskID: id, Title: id})
		cancel()
		if err == nil {
			acked = append(acked, id)
			break
		}
		require.ErrorIs(t, err, driver.ErrUnavailable)
		require.Less(t, time.Since(start), failoverWait, "the open ledger writes again after the promotion: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("FAILOVER between writes: promoted in %s; the open ledger wrote again %s after the promotion was asked for (%d tries)",
		promoted.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), tries)

	// The second failover, under writers, to a new standby of the
	// promoted one.
	next := startSyncStandby(t, standby, third.Dir, "c")
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%dn%d", w, n)
				wctx, cancel := context.WithTimeout(ctx, 2*ledger.InDoubtWait)
				_, err := l.Execute(wctx, reducer.AddTask{Project: "acme", TaskID: id, Title: id})
				cancel()
				mu.Lock()
				if err == nil {
					acked = append(acked, id)
				} else {
					refused[id] = err
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	waitFor := func(n int, what string) {
		t.Helper()
		deadline := time.Now().Add(failoverWait)
		for count() < n {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("%s: %d acknowledged, not %d, within %s", what, count(), n, failoverWait)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(count()+200, "writers on the promoted standby")
	require.NoError(t, standby.Kill())
	ackedAtKill := count()
	time.Sleep(time.Second)
	start = time.Now()
	require.NoError(t, next.Promote())
	promoted = time.Since(start)
	waitFor(count()+200, "writers after the second promotion")
	close(stop)
	wg.Wait()

	inDoubt := 0
	for id, err := range refused {
		require.ErrorIs(t, err, driver.ErrUnavailable, "task %s", id)
		if strings.Contains(err.Error(), "did not come back") {
			inDoubt++
		}
	}
	t.Logf("FAILOVER under 8 writers: %d acknowledged in all, %d when the primary was killed; %d refused unavailable in all (%d of them in doubt); promoted in %s",
		len(acked), ackedAtKill, len(refused), inDoubt, promoted.Round(time.Millisecond))

	// Every acknowledged task is there, and no refused one, through the
	// open ledger and through one opened afresh on the last primary.
	db2, err := postgres.Open(ctx, next.URL("ledger"), postgres.Options{})
	require.NoError(t, err)
	fresh, err := ledger.Open(ctx, db2, ledger.Options{})
	require.NoError(t, err)
	defer fresh.Close()
	for name, lg := range map[string]*ledger.Ledger{"the open ledger": l, "a ledger opened afresh": fresh} {
		p, err := lg.Project(ctx, "acme")
		require.NoError(t, err, name)
		for _, id := range acked {
			_, ok := p.Task(id)
			assert.True(t, ok, "%s: acknowledged task %s is there", name, id)
		}
		for id, err := range refused {
			if _, ok := p.Task(id); ok && !strings.Contains(err.Error(), "did not come back") {
				t.Errorf("%s: refused task %s is there (%v)", name, id, err)
			}
		}
		assert.Equal(t, len(acked), p.TaskCount(), "%s: the tasks are the acknowledged ones", name)
	}
	ro, err := postgres.Open(ctx, next.URL("ledger"), postgres.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	rep, err := ledger.Verify(ctx, ro, ledger.VerifyOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems, "the chain across both failovers")
}

// startSyncStandby starts a standby of primary in dir, named name, makes
// it the primary's synchronous standby, and waits until it is one.
func startSyncStandby(t *testing.T, primary *pgcluster.Cluster, dir, name string) *pgcluster.Cluster {
	t.Helper()
	s, err := primary.StartStandby(dir, name)
	require.NoError(t, err)
	t.Cleanup(func() { s.Kill() })
	require.NoError(t, primary.SetSynchronous(name))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, primary.WaitSync(ctx, name))
	return s
}
