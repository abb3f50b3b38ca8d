package control_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"scv/control/api"
	"scv/ledger"
	"scv/ledger/local"
	"scv/reducer"
)

// Every error the layers below return has one code and one reason, and
// its message reaches the wire as it is.
func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		reason string
	}{
		{reducer.ErrNotFound, api.CodeNotFound, api.ReasonNotFound},
		{reducer.ErrConflict, api.CodeConflict, api.ReasonConflict},
		{local.ErrConflict, api.CodeConflict, api.ReasonConflict},
		{reducer.ErrRunNotRunning, api.CodeRunNotRunning, api.ReasonRunNotRunning},
		{reducer.ErrInvalidTransition, api.CodeInvalidTransition, api.ReasonInvalidTransition},
		{reducer.ErrInvalidArgument, api.CodeInvalidParams, api.ReasonInvalidArgument},
		{local.ErrInvalid, api.CodeInvalidParams, api.ReasonInvalidArgument},
		{ledger.ErrBeyondHead, api.CodeInvalidParams, api.ReasonInvalidArgument},
		{ledger.ErrLeaseLost, api.CodeConflict, api.ReasonConflict},
		{api.ErrUnavailable, api.CodeUnavailable, api.ReasonUnavailable},
		{ledger.ErrClosed, api.CodeUnavailable, api.ReasonUnavailable},
		{ledger.ErrStorageFull, api.CodeStorageFull, api.ReasonStorageFull},
		{ledger.ErrUnavailable, api.CodeUnavailable, api.ReasonUnavailable},
		{ledger.ErrStorage, api.CodeStorage, api.ReasonStorage},
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
