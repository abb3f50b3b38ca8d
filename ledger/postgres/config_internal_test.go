package postgres

import (
	"testing"
	"time"

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
	assert.Equal(t, []setting{{"statement_timeout", "30000"}, {"lock_timeout", "10000"}, {"idle_in_transaction_session_timeout", "60000"}}, settings)
	assert.Equal(t, map[string]string{"application_name": "scv"}, cfg.ConnConfig.RuntimeParams)
	assert.NotNil(t, cfg.AfterConnect)

	cfg, settings, err = poolConfig("postgres://scv@db.example/ledger?pool_max_conns=3&statement_timeout=5000&application_name=fleet-a", Options{})
	require.NoError(t, err)
	assert.EqualValues(t, 3, cfg.MaxConns, "pool_max_conns of the URL")
	assert.Equal(t, []setting{{"statement_timeout", "5000"}, {"lock_timeout", "10000"}, {"idle_in_transaction_session_timeout", "60000"}}, settings,
		"statement_timeout of the URL")
	assert.Equal(t, map[string]string{"application_name": "fleet-a"}, cfg.ConnConfig.RuntimeParams)

	cfg, settings, err = poolConfig("postgres://scv@db.example/ledger?pool_max_conns=3&statement_timeout=5000",
		Options{MaxConns: 2, StatementTimeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	assert.EqualValues(t, 2, cfg.MaxConns, "Options win")
	assert.Equal(t, []setting{{"statement_timeout", "1500"}, {"lock_timeout", "10000"}, {"idle_in_transaction_session_timeout", "3000"}}, settings)
}
