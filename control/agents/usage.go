package agents

import (
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// Usage is what a turn's run has spent, as its agent reported it over ACP
// (docs/agents.md, "Usage"): the tokens of the answer to the turn's
// session/prompt (`usage`), and the context window and the cost of its
// `usage_update` notifications, the cost made the run's share of the
// session's. Each value is the run's so far: a newer report replaces it.
type Usage struct {
	InputTokens       uint64
	OutputTokens      uint64
	ThoughtTokens     uint64
	CachedReadTokens  uint64
	CachedWriteTokens uint64
	ContextUsed       uint64 // tokens in the context window, at the newest report
	ContextSize       uint64 // the context window's size
	CostAmount        string // a decimal ("0.035"); "" when no cost is known
	CostCurrency      string // the agent's ISO 4217 code, as it sent it
	Model             string // the session's model, when the agent named it
}

// LogValue is u in the log: its fields, as a group.
func (u Usage) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Uint64("input_tokens", u.InputTokens), slog.Uint64("output_tokens", u.OutputTokens),
		slog.Uint64("thought_tokens", u.ThoughtTokens), slog.Uint64("cached_read_tokens", u.CachedReadTokens),
		slog.Uint64("cached_write_tokens", u.CachedWriteTokens),
		slog.Uint64("context_used", u.ContextUsed), slog.Uint64("context_size", u.ContextSize),
		slog.String("cost", strings.TrimSpace(u.CostAmount+" "+u.CostCurrency)), slog.String("model", u.Model))
}

// sessionCost is a session's cumulative cost as its agent last reported
// it: the base of the next turn's run's share.
type sessionCost struct {
	// known: the cost so far is known, zero when amount is "" (a session
	// the daemon opened, before its agent reported any). A resumed
	// session's is not, until its agent reports it.
	known    bool
	amount   string // a decimal, without exponent
	currency string
}

// costOf is the session's cost c reports.
func costOf(c *acp.Cost) sessionCost {
	return sessionCost{known: true, amount: strconv.FormatFloat(c.Amount, 'f', -1, 64), currency: c.Currency}
}

// since is the cost spent since base: now less base, exactly, as a
// decimal. It is unknown (an error saying why) when base is not known, is
// in another currency, or is more than now.
func (now sessionCost) since(base sessionCost) (string, error) {
	switch {
	case !base.known:
		return "", fmt.Errorf("the session's cost when the turn began is not known")
	case base.amount == "":
		base.amount = "0"
	case base.currency != now.currency:
		return "", fmt.Errorf("the session's cost was in %s when the turn began, now in %s", base.currency, now.currency)
	}
	x, okx := new(big.Rat).SetString(now.amount)
	y, oky := new(big.Rat).SetString(base.amount)
	if !okx || !oky {
		return "", fmt.Errorf("the cost %q or %q is not a decimal", now.amount, base.amount)
	}
	d := x.Sub(x, y)
	if d.Sign() < 0 {
		return "", fmt.Errorf("the session's cost went down, from %s to %s %s", base.amount, now.amount, now.currency)
	}
	s := d.FloatString(max(places(now.amount), places(base.amount)))
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s, nil
}

// places is the number of digits after the decimal point of s.
func places(s string) int {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// tokens is n as a count of tokens; false when it is negative (the
// schema's counts are unsigned).
func tokens(n int) (uint64, bool) { return uint64(n), n >= 0 }

// noteUsage takes the agent's usage_update: the session's cost becomes
// the base of the next turn's run, and the running turn's run gets the
// context window and its share of the cost (the session's cost now less
// the session's cost when the turn began). An update with a count below
// zero is dropped, and a share that cannot be known is left as it was,
// each with a warning.
func (a *agent) noteUsage(up *acp.SessionUsageUpdate) {
	used, ok1 := tokens(up.Used)
	size, ok2 := tokens(up.Size)
	if !ok1 || !ok2 {
		a.log.Warn("agent reported a usage_update with a count below zero; dropped", "used", up.Used, "size", up.Size)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var now sessionCost
	if up.Cost != nil {
		now = costOf(up.Cost)
		a.cost = now
	}
	run := a.run
	if run == nil {
		return // between turns: the session's, no run's
	}
	u := run.spent()
	u.ContextUsed, u.ContextSize, u.Model = used, size, a.model
	if up.Cost != nil {
		if amount, err := now.since(run.base); err != nil {
			a.log.Warn("the cost of a turn's run is not known", "run", run.run, "why", err)
		} else {
			u.CostAmount, u.CostCurrency = amount, now.currency
		}
	}
	run.usage(u)
}

// noteAnswerUsage takes the `usage` of the agent's answer to the turn's
// session/prompt: the turn's tokens, its run's. Usage with a count below
// zero is dropped, with a warning.
func (a *agent) noteAnswerUsage(run *turnRun, au *acp.Usage) {
	in, ok1 := tokens(au.InputTokens)
	out, ok2 := tokens(au.OutputTokens)
	var opt [3]uint64
	ok := ok1 && ok2
	for i, p := range []*int{au.ThoughtTokens, au.CachedReadTokens, au.CachedWriteTokens} {
		if p != nil {
			var okp bool
			opt[i], okp = tokens(*p)
			ok = ok && okp
		}
	}
	if !ok {
		a.log.Warn("agent answered a prompt with usage counts below zero; dropped", "run", run.run)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u := run.spent()
	u.InputTokens, u.OutputTokens, u.Model = in, out, a.model
	u.ThoughtTokens, u.CachedReadTokens, u.CachedWriteTokens = opt[0], opt[1], opt[2]
	run.usage(u)
}
