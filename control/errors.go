package control

import (
	"errors"
	"fmt"

	"scv/ledger"
	"scv/reducer"
)

// JSON-RPC error codes. -32700 to -32600 are JSON-RPC's own; application
// errors use -32000 to -32099.
const (
	CodeParseError        = -32700
	CodeInvalidRequest    = -32600
	CodeMethodNotFound    = -32601
	CodeInvalidParams     = -32602
	CodeInternal          = -32603
	CodeNotFound          = -32001
	CodeConflict          = -32002
	CodeInvalidTransition = -32003
	CodeRunNotRunning     = -32004
	CodeUnavailable       = -32005
	CodeStorage           = -32006
	CodeUnimplemented     = -32007
	CodeForbidden         = -32008
	CodeStorageFull       = -32009
)

// Reasons: the stable word in every error's data.reason.
const (
	ReasonParseError        = "parse_error"
	ReasonInvalidRequest    = "invalid_request"
	ReasonTooLarge          = "too_large"
	ReasonMethodNotFound    = "method_not_found"
	ReasonInvalidParams     = "invalid_params"
	ReasonInvalidArgument   = "invalid_argument"
	ReasonInternal          = "internal"
	ReasonNotFound          = "not_found"
	ReasonConflict          = "conflict"
	ReasonInvalidTransition = "invalid_transition"
	ReasonRunNotRunning     = "run_not_running"
	ReasonUnavailable       = "unavailable"
	ReasonStorage           = "storage"
	ReasonUnimplemented     = "unimplemented"
	ReasonForbidden         = "forbidden"
	ReasonStorageFull       = "storage_full"
)

// Error is a JSON-RPC error object. The client returns it for every error
// reply, so callers can match on Code or Reason.
type Error struct {
	Code    int       `json:"code"`
	Message string    `json:"message"`
	Data    ErrorData `json:"data"`
}

// ErrorData carries the stable reason word.
type ErrorData struct {
	Reason string `json:"reason"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%s)", e.Message, e.Data.Reason) }

func newError(code int, reason, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Data: ErrorData{Reason: reason}}
}

// errorFor maps an error from the layers below to its wire error. It is
// the one place where domain errors meet codes and reasons.
func errorFor(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	for _, m := range []struct {
		target error
		code   int
		reason string
	}{
		{reducer.ErrNotFound, CodeNotFound, ReasonNotFound},
		{reducer.ErrConflict, CodeConflict, ReasonConflict},
		{reducer.ErrRunNotRunning, CodeRunNotRunning, ReasonRunNotRunning},
		{reducer.ErrInvalidTransition, CodeInvalidTransition, ReasonInvalidTransition},
		{reducer.ErrInvalidArgument, CodeInvalidParams, ReasonInvalidArgument},
		{ledger.ErrClosed, CodeUnavailable, ReasonUnavailable},
		// Before ErrStorage, which it wraps. Its message says the disk
		// is full and that nothing of the request was kept.
		{ledger.ErrStorageFull, CodeStorageFull, ReasonStorageFull},
		{ledger.ErrStorage, CodeStorage, ReasonStorage},
	} {
		if errors.Is(err, m.target) {
			return &Error{Code: m.code, Message: err.Error(), Data: ErrorData{Reason: m.reason}}
		}
	}
	return &Error{Code: CodeInternal, Message: err.Error(), Data: ErrorData{Reason: ReasonInternal}}
}
