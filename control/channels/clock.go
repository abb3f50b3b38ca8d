package channels

import "time"

// Clock is the Manager's time: when a connector last succeeded, and how
// long a backoff waits. Tests inject a fake one to step through backoffs.
type Clock interface {
	Now() time.Time
	// After sends the time on the returned channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
