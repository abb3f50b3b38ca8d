package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger/postgres/pgcluster"
)

// needPostgres skips t where PostgreSQL's programs are missing, or fails
// it where SCV_REQUIRE_PG says they must be there (as in CI).
func needPostgres(t *testing.T) {
	t.Helper()
	if !pgcluster.Installed() {
		msg := "no PostgreSQL programs (initdb, pg_ctl, pg_basebackup) to run private clusters: install PostgreSQL (Debian: apt-get install postgresql)"
		if os.Getenv("SCV_REQUIRE_PG") != "" {
			t.Fatal(msg + "; SCV_REQUIRE_PG is set, so this is a failure")
		}
		t.Skip(msg)
	}
}

// shortDir is a folder for clusters, removed when the test ends: short,
// since a socket's path must fit in 108 bytes, and one the cluster's user
// may pass through when the test runs as root.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgc")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o711))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// connect connects to u, failing t if it cannot.
func connect(t *testing.T, ctx context.Context, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err, "connect to %s", u)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// rows is every n of table t, in order.
func rows(t *testing.T, ctx context.Context, conn *pgx.Conn) []int {
	t.Helper()
	var ns []int
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(array_agg(n ORDER BY n), '{}') FROM t`).Scan(&ns))
	return ns
}

// TestSynchronousStandby: a primary with one synchronous standby, reached
// through its Unix socket only and through TCP too. A commit returns only
// once the standby has it: with the standby stopped, it waits, past the
// statement timeout (and other sessions do not see it), until the standby
// is back. Then the primary
// dies (immediate shutdown, no checkpoint): a read-write connection on
// the URL naming both servers fails, since the one left is a read-only
// standby, until the standby is promoted; then the same URL reaches it,
// every committed row is there, and it takes writes.
func TestSynchronousStandby(t *testing.T) {
	needPostgres(t)
	for _, tc := range []struct {
		name string
		tcp  bool
	}{{"socket", false}, {"tcp", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()

			p := &pgcluster.Cluster{Dir: filepath.Join(dir, "p")}
			if tc.tcp {
				port, err := pgcluster.FreePort()
				require.NoError(t, err)
				p.Port = port
			}
			require.NoError(t, p.Start())
			t.Cleanup(func() { p.Kill() })
			require.NoError(t, p.CreateDB("ha"))
			primaryURL := p.URL("ha")
			if tc.tcp {
				primaryURL = p.TCPURL("ha")
			}
			onPrimary := connect(t, ctx, primaryURL)
			_, err := onPrimary.Exec(ctx, `CREATE TABLE t (n int PRIMARY KEY)`)
			require.NoError(t, err)

			// Synchronous before the standby exists: the copy carries the
			// setting, which the standby must not keep for itself.
			require.NoError(t, p.SetSynchronous("s1"))
			started := time.Now()
			s, err := p.StartStandby(filepath.Join(dir, "s"), "s1")
			require.NoError(t, err)
			t.Cleanup(func() { s.Kill() })
			t.Logf("standby copied and started in %s", time.Since(started).Round(time.Millisecond))
			assert.Equal(t, tc.tcp, s.Port != 0, "the standby listens on TCP if the primary does")
			assert.Error(t, s.CreateDB("other"), "a standby is read-only")
			require.NoError(t, p.WaitSync(ctx, "s1"))

			standbyURL := s.URL("ha")
			if tc.tcp {
				standbyURL = s.TCPURL("ha")
			}
			onStandby := connect(t, ctx, standbyURL)
			var recovering bool
			require.NoError(t, onStandby.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&recovering))
			require.True(t, recovering, "the standby is in recovery")

			// synchronous_commit = on (the daemon's): the commit returns
			// once the standby has flushed it; remote_apply, for this one
			// session, once it also shows it to its readers.
			_, err = onPrimary.Exec(ctx, `SET synchronous_commit = remote_apply`)
			require.NoError(t, err)
			_, err = onPrimary.Exec(ctx, `INSERT INTO t VALUES (1)`)
			require.NoError(t, err)
			assert.Equal(t, []int{1}, rows(t, ctx, onStandby), "on the standby as soon as the commit returned")
			_, err = onPrimary.Exec(ctx, `RESET synchronous_commit`)
			require.NoError(t, err)

			// The standby stops: a commit waits for it, past the statement
			// timeout too, which does not end that wait.
			require.NoError(t, s.Stop())
			_, err = onPrimary.Exec(ctx, `SET statement_timeout = '500ms'`)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				_, err := onPrimary.Exec(ctx, `INSERT INTO t VALUES (2)`)
				done <- err
			}()
			select {
			case err := <-done:
				t.Fatalf("a commit returned with the synchronous standby stopped (err %v)", err)
			case <-time.After(2 * time.Second):
			}
			other := connect(t, ctx, primaryURL)
			assert.Equal(t, []int{1}, rows(t, ctx, other), "a commit waiting for the standby is not seen by other sessions")
			started = time.Now()
			require.NoError(t, s.Start())
			select {
			case err := <-done:
				require.NoError(t, err, "the waiting commit")
				t.Logf("the waiting commit returned %s after the standby was started again", time.Since(started).Round(time.Millisecond))
			case <-time.After(30 * time.Second):
				t.Fatal("the commit still waits 30 s after the standby was started again")
			}
			_, err = onPrimary.Exec(ctx, `RESET statement_timeout`)
			require.NoError(t, err)
			require.NoError(t, p.WaitSync(ctx, "s1"))
			for n := 3; n <= 10; n++ {
				_, err := onPrimary.Exec(ctx, `INSERT INTO t VALUES ($1)`, n)
				require.NoError(t, err)
			}

			// The primary dies.
			require.NoError(t, p.Kill())
			multi := pgcluster.MultiHostURL("ha", p, s)
			if tc.tcp {
				multi = pgcluster.MultiHostTCPURL("ha", p, s)
			}
			t.Logf("multi-host URL: %s", multi)
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = pgx.Connect(cctx, multi)
			ccancel()
			require.Error(t, err, "no server accepts writes")
			assert.ErrorIs(t, err, pgconn.ErrReadOnlyConnection, "the standby was reached and refused as read-only")
			t.Logf("with no primary: %v", err)

			started = time.Now()
			require.NoError(t, s.Promote())
			t.Logf("promoted in %s", time.Since(started).Round(time.Millisecond))
			rw := connect(t, ctx, multi)
			var dataDir string
			require.NoError(t, rw.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir))
			assert.Equal(t, filepath.Join(s.Dir, "data"), dataDir, "the URL reaches the promoted standby")
			assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, rows(t, ctx, rw), "every committed row")
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			_, err = rw.Exec(wctx, `INSERT INTO t VALUES (11)`)
			require.NoError(t, err, "the promoted standby takes writes without waiting for a standby of its own")
		})
	}
}
