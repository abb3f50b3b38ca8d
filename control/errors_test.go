package control_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"scv/control"
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
		{reducer.ErrNotFound, control.CodeNotFound, control.ReasonNotFound},
		{reducer.ErrConflict, control.CodeConflict, control.ReasonConflict},
		{local.ErrConflict, control.CodeConflict, control.ReasonConflict},
		{reducer.ErrRunNotRunning, control.CodeRunNotRunning, control.ReasonRunNotRunning},
		{reducer.ErrInvalidTransition, control.CodeInvalidTransition, control.ReasonInvalidTransition},
		{reducer.ErrInvalidArgument, control.CodeInvalidParams, control.ReasonInvalidArgument},
		{local.ErrInvalid, control.CodeInvalidParams, control.ReasonInvalidArgument},
		{ledger.ErrBeyondHead, control.CodeInvalidParams, control.ReasonInvalidArgument},
		{ledger.ErrLeaseLost, control.CodeConflict, control.ReasonConflict},
		{control.ErrUnavailable, control.CodeUnavailable, control.ReasonUnavailable},
		{ledger.ErrClosed, control.CodeUnavailable, control.ReasonUnavailable},
		{ledger.ErrStorageFull, control.CodeStorageFull, control.ReasonStorageFull},
		{ledger.ErrUnavailable, control.CodeUnavailable, control.ReasonUnavailable},
		{ledger.ErrStorage, control.CodeStorage, control.ReasonStorage},
		{errors.New("a bug"), control.CodeInternal, control.ReasonInternal},
	} {
		err := fmt.Errorf("%w: what happened", tc.err)
		e := control.ErrorOf(err)
		assert.Equal(t, tc.code, e.Code, "%v", tc.err)
		assert.Equal(t, tc.reason, e.Data.Reason, "%v", tc.err)
		assert.Equal(t, err.Error(), e.Message)
	}
	assert.Nil(t, control.ErrorOf(nil))
}
