package ledger

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseFailpoints: SCV_FAILPOINTS takes comma-separated NAME=ACTION
// pairs of known names and actions; anything else is refused with a
// message naming what is wrong, never ignored.
func TestParseFailpoints(t *testing.T) {
	for spec, want := range map[string]Failpoints{
		"":                   nil,
		"  ":                 nil,
		"after-insert=crash": {FailAfterInsert: failCrash},
		" after-begin=error , restart-exec=crash ": {FailAfterBegin: failError, FailRestartExec: failCrash},
		"after-begin=crash,after-insert=error,after-commit=crash,snapshot=error,compact-archive=crash,compact-delete=error,restart-exec=error": {
			FailAfterBegin: failCrash, FailAfterInsert: failError, FailAfterCommit: failCrash,
			FailSnapshot: failError, FailCompactArchive: failCrash, FailCompactDelete: failError,
			FailRestartExec: failError,
		},
		"head-check=off": {FailHeadCheck: failOff},
	} {
		got, err := ParseFailpoints(spec)
		if assert.NoError(t, err, "%q", spec) {
			assert.Equal(t, want, got, "%q", spec)
		}
	}
	for spec, msg := range map[string]string{
		"after-insrt=crash":                     `unknown failpoint "after-insrt" (known: after-begin, after-insert, after-commit, snapshot, compact-archive, compact-delete, restart-exec, head-check)`,
		"after-insert=boom":                     `failpoint after-insert: unknown action "boom" (crash, error or off)`,
		"after-insert=off":                      `failpoint after-insert takes crash or error only, not "off"`,
		"head-check=crash":                      `failpoint head-check takes off only, not "crash"`,
		"after-insert":                          `"after-insert" is not NAME=ACTION`,
		"=crash":                                `"=crash" is not NAME=ACTION`,
		"after-insert=":                         `"after-insert=" is not NAME=ACTION`,
		"after-insert=crash,":                   `"" is not NAME=ACTION`,
		"after-insert=crash,after-insert=error": `failpoint after-insert is set twice`,
		"after-commit=error":                    `failpoint after-commit takes crash only, not "error"`,
		"AFTER-INSERT=crash":                    `unknown failpoint "AFTER-INSERT"`,
		"after-insert=crash;after-begin=crash":  `unknown action "crash;after-begin=crash"`,
	} {
		_, err := ParseFailpoints(spec)
		if assert.Error(t, err, "%q", spec) {
			assert.Contains(t, err.Error(), msg, "%q", spec)
			assert.True(t, strings.HasPrefix(err.Error(), FailpointsEnv+": "), "%q: the message names the variable", spec)
		}
	}
}

// TestFailpointHit: a point set to error returns ErrFailpoint naming it;
// one not set, or no failpoints at all, returns nothing.
func TestFailpointHit(t *testing.T) {
	fp, err := ParseFailpoints("after-insert=error,after-begin=crash")
	require.NoError(t, err)
	err = fp.Hit(FailAfterInsert)
	assert.ErrorIs(t, err, ErrFailpoint)
	assert.EqualError(t, err, "injected failure at failpoint after-insert")
	assert.NoError(t, fp.Hit(FailSnapshot))
	off, err := ParseFailpoints("head-check=off")
	require.NoError(t, err)
	assert.True(t, off.Off(FailHeadCheck))
	assert.NoError(t, off.Hit(FailHeadCheck), "a safeguard turned off is no error")
	assert.False(t, fp.Off(FailHeadCheck))
	var none Failpoints
	assert.False(t, none.Off(FailHeadCheck))
	assert.NoError(t, none.Hit(FailAfterInsert))
	assert.NotPanics(t, func() { none.crashAt(FailAfterCommit) })
}
