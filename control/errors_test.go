package control_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/local"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// Every error the layers below return has one code and one reason, and
// its message reaches the wire as it is. The stores' errors are of the
// domain's kinds: a full or unreachable database is a storage failure too,
// and is told apart from one.
func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		reason string
	}{
		{reducer.ErrNotFound, api.CodeNotFound, api.ReasonNotFound},
		{reducer.ErrConflict, api.CodeConflict, api.ReasonConflict},
		{reducer.ErrRunNotRunning, api.CodeRunNotRunning, api.ReasonRunNotRunning},
		{reducer.ErrInvalidTransition, api.CodeInvalidTransition, api.ReasonInvalidTransition},
		{reducer.ErrInvalidArgument, api.CodeInvalidParams, api.ReasonInvalidArgument},
		{reducer.ErrUnavailable, api.CodeUnavailable, api.ReasonUnavailable},
		{reducer.ErrStorage, api.CodeStorage, api.ReasonStorage},
		{reducer.ErrStorageFull, api.CodeStorageFull, api.ReasonStorageFull},
		{ledger.ErrBeyondHead, api.CodeInvalidParams, api.ReasonInvalidArgument},
		{ledger.ErrLeaseLost, api.CodeConflict, api.ReasonConflict},
		{api.ErrUnavailable, api.CodeUnavailable, api.ReasonUnavailable},
		{ledger.ErrClosed, api.CodeUnavailable, api.ReasonUnavailable},
		{driver.ErrStorageFull, api.CodeStorageFull, api.ReasonStorageFull},
		{driver.ErrUnavailable, api.CodeUnavailable, api.ReasonUnavailable},
		{driver.ErrStorage, api.CodeStorage, api.ReasonStorage},
		{errors.New("a bug"), api.CodeInternal, api.ReasonInternal},
	} {
		err := fmt.Errorf("%w: what happened", tc.err)
		e := api.ErrorOf(err)
		assert.Equal(t, tc.code, e.Code, "%v", tc.err)
		assert.Equal(t, tc.reason, e.Data.Reason, "%v", tc.err)
		assert.Equal(t, err.Error(), e.Message)
	}
	assert.Nil(t, api.ErrorOf(nil))
}

// The local store refuses with the domain's kinds, which the wire maps
// as it maps the ledger's.
func TestLocalStoreErrorMapping(t *testing.T) {
	ctx := t.Context()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "scv.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })

	d := local.Delegation{Handle: "h1", Agent: "claude", PID: 1, BootID: "b", Started: 1}
	require.NoError(t, db.PutDelegation(ctx, d))
	e := api.ErrorOf(db.PutDelegation(ctx, d))
	assert.Equal(t, api.CodeConflict, e.Code, "a handle registered twice: %s", e.Message)
	assert.Equal(t, api.ReasonConflict, e.Data.Reason)

	e = api.ErrorOf(db.PutAgent(ctx, local.Agent{Handle: "a1", Name: "a", Spec: "not json"}))
	assert.Equal(t, api.CodeInvalidParams, e.Code, "a spec that is not JSON: %s", e.Message)
	assert.Equal(t, api.ReasonInvalidArgument, e.Data.Reason)
}
