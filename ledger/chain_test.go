package ledger_test

import (
	"encoding/hex"
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

// TestChainHashIsStable pins the encoding: every hash already stored was
// made with it, so a change here would fail every existing ledger's
// verify.
func TestChainHashIsStable(t *testing.T) {
	assert.Equal(t, "877e85e2c75260924bfea2b23b5cc0a379a80c34de72b06dfd66bdcd4ce788e7",
		hex.EncodeToString(ledger.ChainHash([]byte("prev"), 7, "p", "k", 1, 1000, `{}`)))
	assert.Equal(t, "e01e03095bf67e41f3d7160ea07535cc40b8b80ecd9a58d44b91b7d60c73a7a8",
		hex.EncodeToString(ledger.ChainHash(nil, 18446744073709551615, "01JPROJECT", "run_progress", -5, 1733000000123, `{"run_id":"r","progress":"é"}`)))
}
