package agents

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCostSince: a run's cost is the session's now less the session's when
// its turn began, exact in decimal, and unknown (with why) when that base
// is unknown, in another currency, or more than now.
func TestCostSince(t *testing.T) {
	usd := func(s string) sessionCost { return sessionCost{known: true, amount: s, currency: "USD"} }
	for _, c := range []struct {
		now, base sessionCost
		want, err string
	}{
		{usd("0.3"), usd("0.1"), "0.2", ""}, // in floating point, 0.19999999999999998
		{usd("0.045"), sessionCost{known: true}, "0.045", ""},
		{usd("0.045"), usd("0.045"), "0", ""},
		{usd("12"), usd("0.5"), "11.5", ""},
		{usd("0.045"), sessionCost{}, "", "not known"},
		{usd("0.045"), sessionCost{known: true, amount: "0.01", currency: "EUR"}, "", "was in EUR when the turn began, now in USD"},
		{usd("0.01"), usd("0.045"), "", "went down, from 0.045 to 0.01 USD"},
	} {
		got, err := c.now.since(c.base)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "%+v since %+v", c.now, c.base)
			continue
		}
		assert.NoError(t, err)
		assert.Equal(t, c.want, got, "%+v since %+v", c.now, c.base)
	}
}
