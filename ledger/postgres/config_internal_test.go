package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The URL is the operator's: what it sets is kept, and the driver's
// defaults fill in only what it leaves out.
func TestPoolConfig(t *testing.T) {
	cfg, err := poolConfig("postgres://scv@db.example/ledger", Options{})
	require.NoError(t, err)
	assert.EqualValues(t, DefaultMaxConns, cfg.MaxConns)
	rp := cfg.ConnConfig.RuntimeParams
	assert.Equal(t, "30000", rp["statement_timeout"])
	assert.Equal(t, "10000", rp["lock_timeout"])
	assert.Equal(t, "60000", rp["idle_in_transaction_session_timeout"])
	assert.Equal(t, "scv", rp["application_name"])

	cfg, err = poolConfig("postgres://scv@db.example/ledger?pool_max_conns=3&statement_timeout=5000&application_name=fleet-a", Options{})
	require.NoError(t, err)
	assert.EqualValues(t, 3, cfg.MaxConns, "pool_max_conns of the URL")
	rp = cfg.ConnConfig.RuntimeParams
	assert.Equal(t, "5000", rp["statement_timeout"], "statement_timeout of the URL")
	assert.Equal(t, "10000", rp["lock_timeout"])
	assert.Equal(t, "fleet-a", rp["application_name"])

	cfg, err = poolConfig("postgres://scv@db.example/ledger?pool_max_conns=3&statement_timeout=5000",
		Options{MaxConns: 2, StatementTimeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	assert.EqualValues(t, 2, cfg.MaxConns, "Options win")
	assert.Equal(t, "1500", cfg.ConnConfig.RuntimeParams["statement_timeout"])
	assert.Equal(t, "3000", cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"])
}
