package follow

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"scv/control/api"
)

// The reconnect policy (doc.go).
const (
	// FirstRetry is the pause before the first retry of a request the
	// daemon did not answer.
	FirstRetry = 100 * time.Millisecond
	// MaxRetry is the longest pause between two retries.
	MaxRetry = time.Second
	// GiveUp is how long a daemon may go without answering before the
	// follow ends.
	GiveUp = time.Minute
	// RequestTimeout bounds one request: the longest a daemon waits
	// before it answers a long poll (api.MaxListWait), and as long again.
	RequestTimeout = 2 * api.MaxListWait * time.Second
)

// Step is what comes after a reply.
type Step int

const (
	// Wait sends the next request after Pause.
	Wait Step = iota
	// Now sends the next request at once.
	Now
	// Stop ends the follow: Run returns nil.
	Stop
)

// A Follower sends a daemon one request after another and hands on each
// reply (doc.go). Handler, Request and Reply are required.
type Follower struct {
	// Handler is the daemon.
	Handler api.Handler
	// Request is the request to send now.
	Request func() api.Command
	// Reply takes each reply, in order, and says what comes next; an
	// error ends the follow with it.
	Reply func(*api.DaemonStatus) (Step, error)
	// Pause is how long Wait waits.
	Pause time.Duration
	// Away is called when the daemon goes away, with the error of the
	// request it did not answer; Back when it answers again. Either may
	// be nil.
	Away func(err error)
	Back func()
	// Answered says the daemon answered a request before the follow: its
	// first request is waited for like the others.
	Answered bool
	// GiveUp, when set, replaces the package's GiveUp.
	GiveUp time.Duration
}

// AwayError ends a follow whose daemon did not answer for the give-up
// time. Err is the last request's error.
type AwayError struct {
	After time.Duration
	Err   error
}

func (e *AwayError) Error() string {
	return fmt.Sprintf("the daemon did not come back within %s: %v", e.After, e.Err)
}

func (e *AwayError) Unwrap() error { return e.Err }

// Run follows until Reply says Stop, a refusal, the give-up time or the
// end of ctx (doc.go).
func (f *Follower) Run(ctx context.Context) error {
	giveUp := f.GiveUp
	if giveUp == 0 {
		giveUp = GiveUp
	}
	answered := f.Answered
	var (
		awaySince time.Time // zero while the daemon answers
		retries   int       // requests in a row it did not answer
	)
	for {
		st, err := f.ask(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if !answered || api.ErrorOf(err).Data.Reason != api.ReasonUnavailable {
				return err
			}
			if awaySince.IsZero() {
				awaySince = time.Now()
				if f.Away != nil {
					f.Away(err)
				}
			}
			if time.Since(awaySince) >= giveUp {
				return &AwayError{After: giveUp, Err: err}
			}
			if !sleep(ctx, retryPause(retries)) {
				return ctx.Err()
			}
			retries++
			continue
		}
		answered, retries = true, 0
		if !awaySince.IsZero() {
			awaySince = time.Time{}
			if f.Back != nil {
				f.Back()
			}
		}
		step, err := f.Reply(st)
		switch {
		case err != nil:
			return err
		case step == Stop:
			return nil
		case step == Wait && !sleep(ctx, f.Pause):
			return ctx.Err()
		}
	}
}

// ask sends the next request, within RequestTimeout. A daemon that does
// not answer in time is taken for one that went away.
func (f *Follower) ask(ctx context.Context) (*api.DaemonStatus, error) {
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	st, err := f.Handler.Handle(rctx, f.Request())
	if err != nil && rctx.Err() != nil && ctx.Err() == nil {
		err = api.Errorf(api.ErrUnavailable, "the daemon did not answer within %s", RequestTimeout)
	}
	return st, err
}

// retryPause is the pause before retry n (from 0): FirstRetry doubled n
// times, at most MaxRetry, less a random part of up to half.
func retryPause(n int) time.Duration {
	d := MaxRetry
	if n < 10 && FirstRetry<<n < MaxRetry {
		d = FirstRetry << n
	}
	return d - rand.N(d/2+1)
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
