package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
)

// TestDurabilityPragmas: the promise that an acknowledged write survives a
// crash rests on these settings of the connections the ledger really uses.
// A SIGKILL test cannot see a missing fsync (the page cache survives the
// process), so they are checked here.
func TestDurabilityPragmas(t *testing.T) {
	l := open(t, dbPath(t), ledger.Options{})
	for which, want := range map[string]map[string]string{
		"w": {"journal_mode": "wal", "synchronous": "2", "journal_size_limit": "67108864", "query_only": "0"},
		"r": {"journal_mode": "wal", "query_only": "1"},
	} {
		for name, v := range want {
			got, err := l.Pragma(which, name)
			require.NoError(t, err)
			assert.Equal(t, v, got, "%s connection: PRAGMA %s", which, name)
		}
	}
}
