package channels

import (
	"context"
	"scv/control/api"
)

// The supervisor: one goroutine per running component.
//
//	start ─▶ starting ─(Connected)─▶ connected ⇄ disconnected
//	Run returns an error  ─▶ backoff (restarts+1, error) ─(delay)─▶ starting
//	Run returns Permanent ─▶ failed (error), not restarted
//	Run returns nil       ─▶ stopped, not restarted
//	stop                  ─▶ stopping ─▶ disabled or stopped
//
// The delay is BackoffBase, doubled after each failure up to BackoffCap,
// and back to BackoffBase once a connector has connected.

// start starts a's component: starting, or failed at once when its kind
// has no connector in this build or its stored settings are invalid. The
// caller holds mu, and a has no component running.
func (m *Manager) start(a *account) {
	log := m.logger().With(logComponent, a.s.ID())
	newConn := m.connectors()[a.s.Channel]
	why := a.bad
	if why == "" && newConn == nil {
		why = errNoConnector(a.s.Channel).Error()
	}
	if why != "" {
		a.state, a.err = api.ComponentFailed, why
		log.Warn("channel account failed", logError, why)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{s: a.s, cancel: cancel, done: make(chan struct{})}
	a.run = r
	a.state = api.ComponentStarting
	log.Info("channel account starting")
	go m.supervise(ctx, a, r, newConn)
}

// supervise runs connectors for r until r is stopped, a connector fails
// permanently, or one ends cleanly.
func (m *Manager) supervise(ctx context.Context, a *account, r *run, newConn func() Connector) {
	defer close(r.done)
	log := m.logger().With(logComponent, r.s.ID())
	base, limit := m.backoff()
	delay := base
	for {
		conn := newConn()
		h := &reporter{m: m, a: a, r: r}
		m.mu.Lock()
		if r.stopping {
			m.mu.Unlock()
			return
		}
		r.conn = conn
		a.state = api.ComponentStarting
		m.mu.Unlock()

		err := conn.Run(ctx, r.s, h)

		m.mu.Lock()
		r.conn, h.over = nil, true
		if r.stopping {
			m.mu.Unlock()
			return
		}
		if h.connected {
			delay = base
		}
		switch {
		case err == nil:
			a.state, a.run = api.ComponentStopped, nil
			m.mu.Unlock()
			log.Info("channel account ended")
			return
		case IsPermanent(err):
			a.state, a.err, a.run = api.ComponentFailed, err.Error(), nil
			m.mu.Unlock()
			log.Error("channel account failed", logError, err)
			return
		}
		a.restarts++
		a.err = err.Error()
		// The timer is set before the state shows backoff, so that whoever
		// sees backoff can count on the wait having begun.
		wait := m.clock().After(delay)
		a.state = api.ComponentBackoff
		m.mu.Unlock()
		log.Warn("channel account restarting", logError, err, logDelay, delay)

		select {
		case <-ctx.Done():
			return
		case <-wait:
		}
		delay = min(delay*2, limit)
	}
}

// stop stops a's component, if one runs: stopping, then final once it
// has ended. An account without one becomes disabled if final is
// disabled, and otherwise keeps its state. The caller holds ops, not mu.
func (m *Manager) stop(a *account, final api.ComponentState) {
	m.mu.Lock()
	r := a.run
	if r == nil {
		if final == api.ComponentDisabled {
			a.state = final
		}
		m.mu.Unlock()
		return
	}
	r.stopping = true
	a.state = api.ComponentStopping
	m.mu.Unlock()
	m.logger().Info("channel account stopping", logComponent, r.s.ID())

	r.cancel()
	<-r.done

	m.mu.Lock()
	if a.run == r {
		a.run = nil
	}
	a.state = final
	m.mu.Unlock()
	m.logger().Info("channel account stopped", logComponent, r.s.ID(), logState, final)
}

// reporter is the Health of one connector's Run: its reports count only
// while that Run runs and no stop was asked.
type reporter struct {
	m *Manager
	a *account
	r *run
	// over: Run returned. connected: it connected. Both guarded by mu.
	over, connected bool
}

// live reports whether the reports still count. The caller holds mu.
func (h *reporter) live() bool { return !h.over && !h.r.stopping && h.a.run == h.r }

func (h *reporter) Connected() {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.live() {
		h.connected = true
		h.a.state = api.ComponentConnected
		h.a.lastSuccess = h.m.clock().Now()
	}
}

func (h *reporter) Disconnected(err error) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.live() {
		h.a.state = api.ComponentDisconnected
		if err != nil {
			h.a.err = err.Error()
		}
	}
}

func (h *reporter) Success() {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.live() {
		h.a.lastSuccess = h.m.clock().Now()
	}
}

func (h *reporter) Identity(ownerID, botID string) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.live() {
		if ownerID != "" {
			h.a.ownerID = ownerID
		}
		if botID != "" {
			h.a.botID = botID
		}
	}
}
