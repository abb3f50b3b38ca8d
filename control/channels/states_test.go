package channels_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/channels"
)

// TestComponentStates walks one account through every ComponentState with
// the test connector (plugged in for telegram: any kind takes one):
// disabled, starting, connected, disconnected, connected again, backoff
// (restarts counted, error set), starting, failed (permanent: error set,
// not restarted), starting again when re-enabled, stopping and disabled,
// and stopped when its connector ends by itself.
func TestComponentStates(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindTelegram)
	const id = "telegram:bot"
	set := func(enabled bool) {
		h.set(api.CmdChannelSet{Channel: "telegram", Account: "bot", Enabled: enabled})
	}

	set(false)
	c := h.component(id)
	assert.Equal(t, api.ComponentDisabled, c.State)
	assert.False(t, c.Enabled)
	assert.Zero(t, tc.made.Load(), "a disabled account runs no connector")

	set(true)
	assert.Equal(t, api.ComponentStarting, h.component(id).State, "starting as soon as enabled")
	r := tc.next(t)
	assert.Equal(t, api.ComponentStarting, h.component(id).State)
	assert.Nil(t, h.component(id).LastSuccessUnixSeconds, "no success yet")

	r.Connected()
	c = h.component(id)
	assert.Equal(t, api.ComponentConnected, c.State)
	require.NotNil(t, c.LastSuccessUnixSeconds, "connecting is a success")
	assert.Equal(t, uint64(h.clock.Now().Unix()), *c.LastSuccessUnixSeconds)

	h.clock.Advance(10 * time.Second)
	r.Success()
	assert.Equal(t, uint64(h.clock.Now().Unix()), *h.component(id).LastSuccessUnixSeconds, "an exchange is a success")

	r.Disconnected(errors.New("socket closed"))
	c = h.component(id)
	assert.Equal(t, api.ComponentDisconnected, c.State)
	assert.Equal(t, ptr("socket closed"), c.Error)
	assert.Zero(t, c.Restarts, "a disconnection is not a restart")

	r.Connected()
	assert.Equal(t, api.ComponentConnected, h.component(id).State, "recovered")

	r.Fail(errors.New("platform 502"))
	c = h.waitState(id, api.ComponentBackoff)
	assert.Equal(t, uint64(1), c.Restarts)
	assert.Equal(t, ptr("platform 502"), c.Error)

	h.clock.Advance(time.Second)
	r = tc.next(t)
	c = h.component(id)
	assert.Equal(t, api.ComponentStarting, c.State)
	assert.Equal(t, ptr("platform 502"), c.Error, "the latest error is kept")

	r.FailPermanently(errors.New("credentials expired"))
	c = h.waitState(id, api.ComponentFailed)
	assert.Equal(t, ptr("credentials expired"), c.Error)
	assert.Equal(t, uint64(1), c.Restarts, "a permanent failure is not restarted")
	assert.True(t, c.Enabled)
	assert.Empty(t, h.clock.Pending(), "no backoff")
	tc.none(t)

	set(true)
	assert.Equal(t, api.ComponentStarting, h.component(id).State, "channel_set enabled restarts a failed account")
	r = tc.next(t)
	r.Connected()

	r.HoldStop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		set(false)
	}()
	h.waitState(id, api.ComponentStopping)
	select {
	case <-done:
		require.FailNow(t, "channel_set returned before the component stopped")
	default:
	}
	r.Release()
	<-done
	c = h.component(id)
	assert.Equal(t, api.ComponentDisabled, c.State)
	assert.False(t, c.Enabled)

	set(true)
	r = tc.next(t)
	r.Connected()
	r.End()
	c = h.waitState(id, api.ComponentStopped)
	assert.True(t, c.Enabled, "ended by its connector, not disabled")
	assert.Equal(t, uint64(1), c.Restarts, "a clean end is not a restart")
	tc.none(t)
	assert.Empty(t, h.clock.Pending())
}

// TestCloseStopsComponents: at daemon shutdown every running component
// goes stopping, then stopped, and Close waits for it; a disabled account
// stays disabled; afterwards changes are refused as unavailable.
func TestCloseStopsComponents(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindSlack)
	h.set(api.CmdChannelSet{Channel: "slack", Account: "a", Enabled: true})
	h.set(api.CmdChannelSet{Channel: "slack", Account: "off", Enabled: false})
	r := tc.next(t)
	r.Connected()
	r.HoldStop()

	done := make(chan struct{})
	go func() {
		defer close(done)
		h.m.Close()
	}()
	h.waitState("slack:a", api.ComponentStopping)
	r.Release()
	<-done
	assert.Equal(t, api.ComponentStopped, h.component("slack:a").State)
	assert.Equal(t, api.ComponentDisabled, h.component("slack:off").State)

	err := h.m.Set(ctx, api.CmdChannelSet{Channel: "slack", Account: "a", Enabled: true})
	e := api.ErrorOf(err)
	require.NotNil(t, e)
	assert.Equal(t, api.ReasonUnavailable, e.Data.Reason)
	tc.none(t)
}

// TestBackoffDoublesToCap: with the default backoff, each retry waits
// exactly 1s, 2s, 4s, … doubling up to 5 min, then 5 min again; the
// component stays in backoff until the whole delay has passed on the
// injected clock, then starts again; restarts counts every failure.
func TestBackoffDoublesToCap(t *testing.T) {
	h := newHarness(t)
	assert.Equal(t, time.Second, h.m.BackoffBase)
	assert.Equal(t, 5*time.Minute, h.m.BackoffCap)
	tc := h.plug(channels.KindLocal)
	const id = "local:owner"
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	r := tc.next(t)

	delays := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i, d := range delays {
		d *= time.Second
		msg := fmt.Sprintf("failure %d", i+1)
		r.Fail(errors.New(msg))
		c := h.waitState(id, api.ComponentBackoff)
		assert.Equal(t, uint64(i+1), c.Restarts)
		assert.Equal(t, ptr(msg), c.Error)
		require.Equal(t, []time.Duration{d}, h.clock.Pending(), "retry %d waits %s", i+1, d)

		h.clock.Advance(d - time.Millisecond)
		assert.Equal(t, api.ComponentBackoff, h.component(id).State, "still waiting 1ms before %s", d)
		assert.Equal(t, []time.Duration{d}, h.clock.Pending())
		tc.none(t)

		h.clock.Advance(time.Millisecond)
		r = tc.next(t)
		assert.Equal(t, api.ComponentStarting, h.component(id).State)
	}
}

// TestBackoffResetsAfterConnected: once a connector has connected, its
// next failure waits the base delay again; the configured base and cap
// are used.
func TestBackoffResetsAfterConnected(t *testing.T) {
	h := newHarness(t)
	h.m.BackoffBase, h.m.BackoffCap = 3*time.Second, 10*time.Second
	tc := h.plug(channels.KindLocal)
	const id = "local:owner"
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	r := tc.next(t)
	for _, d := range []time.Duration{3, 6, 10, 10} {
		r.Fail(errors.New("down"))
		h.waitState(id, api.ComponentBackoff)
		require.Equal(t, []time.Duration{d * time.Second}, h.clock.Pending())
		h.clock.Advance(d * time.Second)
		r = tc.next(t)
	}
	r.Connected()
	r.Fail(errors.New("down again"))
	h.waitState(id, api.ComponentBackoff)
	assert.Equal(t, []time.Duration{3 * time.Second}, h.clock.Pending(), "back to the base after connecting")
	assert.Equal(t, uint64(5), h.component(id).Restarts)
}

// TestStopDuringBackoff: disabling an account that waits in backoff stops
// it at once (no connector runs again) and it shows disabled.
func TestStopDuringBackoff(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindLocal)
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	tc.next(t).Fail(errors.New("down"))
	h.waitState("local:owner", api.ComponentBackoff)
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: false})
	assert.Equal(t, api.ComponentDisabled, h.component("local:owner").State)
	h.clock.Advance(time.Hour)
	tc.none(t)
	assert.Equal(t, api.ComponentDisabled, h.component("local:owner").State)
}

// TestChangedSettingsRestart: a changed setting of a running account
// restarts its component with the new settings (not counted as a
// restart); the same settings again leave it running.
func TestChangedSettingsRestart(t *testing.T) {
	h := newHarness(t)
	tc := h.plug(channels.KindLocal)
	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	r := tc.next(t)
	r.Connected()
	assert.Equal(t, api.SendersOwner, r.Senders)

	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	tc.none(t)
	assert.Equal(t, api.ComponentConnected, h.component("local:owner").State, "nothing changed")

	h.set(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true, Senders: ptr(api.SendersAnyone)})
	r = tc.next(t)
	assert.Equal(t, api.SendersAnyone, r.Senders, "the new run has the new settings")
	c := h.component("local:owner")
	assert.Equal(t, api.ComponentStarting, c.State)
	assert.Zero(t, c.Restarts)
}

// TestMailCounts: an email account's component carries its counts, as
// MailCounts gives them, and no other account's does.
func TestMailCounts(t *testing.T) {
	h := newHarness(t)
	counts := map[string]*api.MailCounts{"work": {SeenToday: 3, TokenBudget: 100}}
	h.m.MailCounts = func(account string) *api.MailCounts { return counts[account] }
	h.set(api.CmdChannelSet{Channel: "email", Account: "work", Enabled: false})
	h.set(api.CmdChannelSet{Channel: "email", Account: "home", Enabled: false})
	h.set(api.CmdChannelSet{Channel: "telegram", Account: "work", Enabled: false})
	assert.Equal(t, counts["work"], h.component("email:work").Mail)
	assert.Nil(t, h.component("email:home").Mail, "not run since the daemon started")
	assert.Nil(t, h.component("telegram:work").Mail, "no email account")
}
