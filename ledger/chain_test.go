package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"scv/ledger"
)

// TestChainHashCoversEveryField: changing any input changes the hash, and
// the field boundaries are part of it.
func TestChainHashCoversEveryField(t *testing.T) {
	base := ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1000, `{}`)
	assert.Len(t, base, ledger.HashSize)
	for name, h := range map[string][]byte{
		"prev":         ledger.ChainHash([]byte("prev2"), 7, "p", "k", 1, 1000, `{}`),
		"no prev":      ledger.ChainHash(nil, 7, "p", "k", 1, 1000, `{}`),
		"sequence":     ledger.ChainHash([]byte("prev"), 8, "p", "k", 1, 1000, `{}`),
		"project":      ledger.ChainHash([]byte("prev"), 7, "q", "k", 1, 1000, `{}`),
		"kind":         ledger.ChainHash([]byte("prev"), 7, "p", "j", 1, 1000, `{}`),
		"timestamp":    ledger.ChainHash([]byte("prev"), 7, "p", "k", 2, 1000, `{}`),
		"timestamp_ms": ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1001, `{}`),
		"data":         ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1000, `{ }`),
		"boundaries":   ledger.ChainHash([]byte("prev"), 7, "pk", "", 1, 1000, `{}`),
	} {
		assert.NotEqual(t, base, h, name)
	}
	assert.Equal(t, base, ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1000, `{}`), "deterministic")
}
