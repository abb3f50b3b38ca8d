// Package channelstest has what the tests of the channel accounts and of
// the email accounts share: a channels.Clock that moves only when told to.
package channelstest

import (
	"sync"
	"time"
)

// Clock is a channels.Clock whose time moves only by Advance, which fires
// the timers it passes.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
}

type waiter struct {
	at time.Time
	d  time.Duration
	ch chan time.Time
}

// NewClock is a Clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After sends the time on the channel once Advance has moved the clock by
// d; at once when d is not positive.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, &waiter{at: c.now.Add(d), d: d, ch: ch})
	return ch
}

// Advance moves the clock by d and fires every timer that is due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			keep = append(keep, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = keep
}

// Pending is the durations of the timers that have not fired.
func (c *Clock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []time.Duration
	for _, w := range c.waiters {
		ds = append(ds, w.d)
	}
	return ds
}
