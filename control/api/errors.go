package api

import (
	"errors"
	"fmt"

	"scv/reducer"
)

// The refusals a service returns, wrapped with its detail (Errorf); the
// mapping in errorFor turns them into codes and reasons. They are the
// domain's kinds (package reducer), so that an error means the same
// whichever layer says it.
var (
	ErrNotFound          = reducer.ErrNotFound
	ErrConflict          = reducer.ErrConflict
	ErrInvalidArgument   = reducer.ErrInvalidArgument
	ErrInvalidTransition = reducer.ErrInvalidTransition
	// ErrUnavailable: the service cannot do it now (it is shutting down,
	// or lacks what it needs); a later try may succeed.
	ErrUnavailable = reducer.ErrUnavailable
)

// Errorf is the refusal kind (one of the errors above) with its detail.
// The message is the detail alone.
func Errorf(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}

type refusal struct {
	kind error
	msg  string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.kind }

// JSON-RPC error codes. -32700 to -32600 are JSON-RPC's own; application
// errors use -32000 to -32099.
// Method is the one JSON-RPC method the daemon serves.
const Method = "daemon.control"

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
	// ReasonNothingReady: project_task_next found no task to claim; the
	// message says why. Its code is CodeInvalidTransition's, which a seed
	// client knows.
	ReasonNothingReady = "nothing_ready"
	// ReasonBudgetReached: the project's spend reached its budget, and
	// no run starts until the owner raises or removes it; its code is
	// CodeInvalidTransition's.
	ReasonBudgetReached = "budget_reached"
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

// NewError is the wire error with code and reason, and the message
// format gives.
func NewError(code int, reason, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Data: ErrorData{Reason: reason}}
}

// ErrorOf is the wire error err is answered with (nil for nil).
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	return errorFor(err)
}

// errorFor maps an error from the layers below to its wire error. It is
// the one place where the domain's kinds of error (package reducer) meet
// codes and reasons; every store wraps its errors in those kinds.
func errorFor(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	for _, m := range []struct {
		kind   error
		code   int
		reason string
	}{
		{reducer.ErrNothingReady, CodeInvalidTransition, ReasonNothingReady},
		{reducer.ErrNotFound, CodeNotFound, ReasonNotFound},
		{reducer.ErrConflict, CodeConflict, ReasonConflict},
		{reducer.ErrRunNotRunning, CodeRunNotRunning, ReasonRunNotRunning},
		{reducer.ErrInvalidTransition, CodeInvalidTransition, ReasonInvalidTransition},
		{reducer.ErrBudgetReached, CodeInvalidTransition, ReasonBudgetReached},
		{reducer.ErrInvalidArgument, CodeInvalidParams, ReasonInvalidArgument},
		// Before ErrStorage: a database that is full or cannot be reached
		// is a storage failure too (the drivers' ErrStorageFull and
		// ErrUnavailable are of both kinds), and the more particular kind
		// names it. Their messages say what failed and that nothing of
		// the request was kept.
		{reducer.ErrStorageFull, CodeStorageFull, ReasonStorageFull},
		{reducer.ErrUnavailable, CodeUnavailable, ReasonUnavailable},
		{reducer.ErrStorage, CodeStorage, ReasonStorage},
	} {
		if errors.Is(err, m.kind) {
			return &Error{Code: m.code, Message: err.Error(), Data: ErrorData{Reason: m.reason}}
		}
	}
	return &Error{Code: CodeInternal, Message: err.Error(), Data: ErrorData{Reason: ReasonInternal}}
}
