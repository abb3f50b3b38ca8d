package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/postgres"
	"scv/ledger/postgres/pgtest"
	"scv/reducer"
)

// TestSessionSettings: every connection of the pool runs with the
// driver's session settings and its application_name, straight to the
// server and through PgBouncer in session mode (which refuses those
// settings as start-up parameters, so the driver sets them once
// connected).
func TestSessionSettings(t *testing.T) {
	for _, via := range []string{"server", "pgbouncer"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			u := pgtest.Database(t)
			if via == "pgbouncer" {
				u = pgtest.Via(pgtest.Bouncer(t, "session"), u)
			}
			db, err := postgres.Open(ctx, u, postgres.Options{LockTimeout: 1500 * time.Millisecond, MaxConns: 4})
			require.NoError(t, err)
			defer db.Close()
			pool := postgres.PoolOf(db)
			// Every connection of the pool, each held while the next is
			// taken.
			var wg sync.WaitGroup
			held := make(chan struct{})
			seen := make(chan [4]string, 4)
			for range 4 {
				c, err := pool.Acquire(ctx)
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Release()
					var s [4]string
					assert.NoError(t, c.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),
						current_setting('idle_in_transaction_session_timeout'), current_setting('application_name')`).Scan(&s[0], &s[1], &s[2], &s[3]))
					seen <- s
					<-held
				}()
			}
			for range 4 {
				assert.Equal(t, [4]string{"30s", "1500ms", "5s", "scv"}, <-seen)
			}
			close(held)
			wg.Wait()
		})
	}
}

// TestTransactionPoolingIsNamed: behind a PgBouncer in transaction mode,
// where clients share server connections, the driver does not work: pgx
// prepares statements per connection, so a client meets the statement
// another prepared on the same server connection (and goose's session
// lock, the session settings, would not hold either). Whether Open or a
// later request meets it first depends on which server connection each
// statement gets; the error then says why, instead of only naming a
// prepared statement.
func TestTransactionPoolingIsNamed(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Via(pgtest.Bouncer(t, "transaction"), pgtest.Database(t))
	err := func() error {
		db, err := postgres.Open(ctx, u, postgres.Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		l, err := ledger.Open(ctx, db, ledger.Options{})
		if err != nil {
			return err
		}
		defer l.Close()
		// Requests from many goroutines, over the pool's connections.
		for round := range 100 {
			errs := make(chan error, 16)
			for i := range 16 {
				go func() {
					name := fmt.Sprintf("p%d-%d", round, i)
					if _, err := l.Execute(ctx, reducer.CreateProject{ProjectID: name, Name: name, Workspace: "/tmp"}); err != nil {
						errs <- err
						return
					}
					_, err := l.Projects(ctx, true)
					errs <- err
				}()
			}
			var first error
			for range 16 {
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			if first != nil {
				return first
			}
		}
		return nil
	}()
	require.ErrorIs(t, err, ledger.ErrStorage, "1,600 requests through transaction pooling")
	assert.Contains(t, err.Error(), "the daemon needs session pooling")
}
