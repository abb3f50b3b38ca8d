package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"scv/ledger/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The URL is the operator's: what it sets is kept, and the driver's
// defaults fill in only what it leaves out. The session settings are set
// on each new connection, none sent at start-up (PgBouncer refuses them
// there); application_name, which poolers pass on, is.
func TestPoolConfig(t *testing.T) {
	cfg, settings, err := poolConfig("postgres://scv@db.example/ledger", Options{})
	require.NoError(t, err)
	assert.EqualValues(t, DefaultMaxConns, cfg.MaxConns)
	assert.Equal(t, []setting{{"statement_timeout", "30000"}, {"lock_timeout", "10000"}, {"idle_in_transaction_session_timeout", "5000"}}, settings)
	assert.Equal(t, map[string]string{"application_name": "scv"}, cfg.ConnConfig.RuntimeParams)
	assert.NotNil(t, cfg.AfterConnect)

	cfg, settings, err = poolConfig("postgres://scv@db.example/ledger?pool_max_conns=3&statement_timeout=5000&application_name=fleet-a", Options{})
	require.NoError(t, err)
	assert.EqualValues(t, 3, cfg.MaxConns, "pool_max_conns of the URL")
	assert.Equal(t, []setting{{"statement_timeout", "5000"}, {"lock_timeout", "10000"}, {"idle_in_transaction_session_timeout", "5000"}}, settings,
		"statement_timeout of the URL")
	assert.Equal(t, map[string]string{"application_name": "fleet-a"}, cfg.ConnConfig.RuntimeParams)

	cfg, settings, err = poolConfig("postgres://scv@db.example/ledger?pool_max_conns=3&statement_timeout=5000",
		Options{MaxConns: 2, StatementTimeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	assert.EqualValues(t, 2, cfg.MaxConns, "Options win")
	assert.Equal(t, []setting{{"statement_timeout", "1500"}, {"lock_timeout", "10000"}, {"idle_in_transaction_session_timeout", "5000"}}, settings)
}

// A server message that does not decode leaves pgx's connection without
// its place in the stream, and pgx closes it: the driver says the
// database is unavailable, as for a lost connection, so that a COMMIT
// whose answer was cut so is settled, not refused. The errors are pgx's
// own, from decoding cut messages.
func TestCutMessagesAreUnavailable(t *testing.T) {
	d := &DB{name: "postgres://scv@db.example/ledger"}
	for _, c := range []struct {
		msg  interface{ Decode([]byte) error }
		body []byte
	}{
		{&pgproto3.DataRow{}, []byte{0, 1, 0, 0, 0, 5, 'x'}}, // a row cut inside its field
		{&pgproto3.CommandComplete{}, []byte("INSERT 0 1")},  // a tag without its terminator
		{&pgproto3.ReadyForQuery{}, nil},                     // a status without its byte
		{&pgproto3.RowDescription{}, []byte{0, 1, 'a'}},      // a description cut short
	} {
		err := c.msg.Decode(c.body)
		require.Error(t, err, "%T", c.msg)
		assert.ErrorIs(t, d.fail(err), driver.ErrUnavailable, "%T: %v", c.msg, err)
	}
	assert.ErrorIs(t, d.fail(errors.New("ERROR: something else")), driver.ErrStorage)
}
