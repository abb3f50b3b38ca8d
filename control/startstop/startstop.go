// Package startstop runs a daemon's background work as services with
// Start and Stop, the way River's rivershared/startstop does: Start runs a
// loop in its own goroutine until Stop, which cancels it and waits for it
// to return. The daemon starts its services together and stops them
// together.
package startstop

import (
	"context"
	"sync"
)

// Service is background work the daemon owns.
type Service interface {
	// Start begins the work; it returns at once, or with the error that
	// kept it from starting.
	Start(ctx context.Context) error
	// Stop ends the work and returns once it has ended. A service not
	// started, or stopped already, returns at once.
	Stop()
}

// Loop is the start-and-stop of one goroutine, for a service to embed.
// Its zero value is stopped.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Run starts run in a goroutine with a context that Stop cancels; while
// it runs, Run does nothing more.
func (l *Loop) Run(ctx context.Context, run func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	l.done = done
	go func() {
		defer close(done)
		run(ctx)
	}()
}

// Stop cancels the goroutine and waits for it to return.
func (l *Loop) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	l.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

// Running reports whether the goroutine was started and not stopped.
func (l *Loop) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done != nil
}

// Group starts services in order and stops them in the reverse order.
type Group []Service

// Start starts every service; if one fails, those already started are
// stopped again and its error is returned.
func (g Group) Start(ctx context.Context) error {
	for i, s := range g {
		if err := s.Start(ctx); err != nil {
			g[:i].Stop()
			return err
		}
	}
	return nil
}

// Stop stops every service, the last started first.
func (g Group) Stop() {
	for i := len(g) - 1; i >= 0; i-- {
		g[i].Stop()
	}
}
