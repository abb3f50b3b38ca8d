package reducer

import "errors"

// The kinds of error, one per way a request can fail. Decide refuses with
// the first six, wrapped with the detail of the case; the stores wrap
// the last three around their own failures. Callers match with
// errors.Is, and the wire gives each kind one code and reason.
var (
	ErrNotFound          = errors.New("not found")
	ErrConflict          = errors.New("conflict")
	ErrInvalidArgument   = errors.New("invalid argument")
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrRunNotRunning fences writes from a run that finished or went stale.
	ErrRunNotRunning = errors.New("run is not running")
	// ErrBudgetReached: the project's spend has reached its budget, and
	// it starts no new run until the owner raises or removes it.
	ErrBudgetReached = errors.New("budget reached")
	// ErrUnavailable: it cannot be done now (the service is shutting
	// down, or cannot reach what it needs); a later try may succeed.
	ErrUnavailable = errors.New("unavailable")
	// ErrStorage: the store failed; nothing of the request was kept.
	ErrStorage = errors.New("storage failure")
	// ErrStorageFull: the store had no room; nothing of the request was
	// kept, and writes succeed again once there is room.
	ErrStorageFull = errors.New("storage full")
)

// ErrNothingReady refuses a NextTask when no task is ready to claim; its
// detail says why (all done, all running, waiting for an approval,
// blocked by failed work, no tasks).
var ErrNothingReady = errors.New("nothing ready")

// IsRefusal reports whether err is a refusal of Decide's: one command
// refused, which a batch of commands goes on without.
func IsRefusal(err error) bool {
	for _, s := range []error{ErrNotFound, ErrConflict, ErrInvalidArgument, ErrInvalidTransition, ErrRunNotRunning, ErrBudgetReached, ErrNothingReady} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
