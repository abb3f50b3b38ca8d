package reducer

import (
	"fmt"
	"slices"
	"strings"
)

// What the work costs (docs/usage.md). A run's usage is cumulative: each
// report is the run's so far and replaces the one before, so the newest
// wins, and a report lower than the run's last is refused, never
// subtracted. The reducer folds the runs' usage into totals per task (all
// its attempts) and per project, tokens by kind and cost per currency:
// several currencies are kept apart, never added. A project's budget, an
// owner's decision, stops new runs once its spend has reached it.

// The limits of usage and cost.
const (
	// MaxCostLen is the longest cost amount, in characters.
	MaxCostLen = 40
	// MaxCostPlaces is the most digits after a cost amount's point.
	MaxCostPlaces = 18
	// MaxModelLen is the longest model name of a run's usage.
	MaxModelLen = MaxNameLen
	// MaxTokens is the most tokens of one kind a run reports: far above
	// any run's, and low enough that no sum of runs' overflows.
	MaxTokens = 1_000_000_000_000
)

// Tokens counts tokens by kind; a kind left out of its JSON is 0.
type Tokens struct {
	Input       uint64 `json:"input,omitempty" serde:"default"`
	Output      uint64 `json:"output,omitempty" serde:"default"`
	Thought     uint64 `json:"thought,omitempty" serde:"default"`
	CachedRead  uint64 `json:"cached_read,omitempty" serde:"default"`
	CachedWrite uint64 `json:"cached_write,omitempty" serde:"default"`
}

// TokenKinds are the kinds of token, as Tokens' JSON and the metrics
// name them.
var TokenKinds = []string{"input", "output", "thought", "cached_read", "cached_write"}

// ByKind returns the counts in TokenKinds' order.
func (t Tokens) ByKind() []uint64 {
	return []uint64{t.Input, t.Output, t.Thought, t.CachedRead, t.CachedWrite}
}

// Total is the sum of every kind: what a budget of tokens counts.
func (t Tokens) Total() uint64 {
	return t.Input + t.Output + t.Thought + t.CachedRead + t.CachedWrite
}

func (t Tokens) plus(d Tokens) Tokens {
	return Tokens{t.Input + d.Input, t.Output + d.Output, t.Thought + d.Thought, t.CachedRead + d.CachedRead, t.CachedWrite + d.CachedWrite}
}

func (t Tokens) minus(d Tokens) Tokens {
	return Tokens{t.Input - d.Input, t.Output - d.Output, t.Thought - d.Thought, t.CachedRead - d.CachedRead, t.CachedWrite - d.CachedWrite}
}

// below names the first kind of t lower than in u, or "".
func (t Tokens) below(u Tokens) string {
	a, b := t.ByKind(), u.ByKind()
	for i := range a {
		if a[i] < b[i] {
			return fmt.Sprintf("%d %s tokens, fewer than its last %d", a[i], TokenKinds[i], b[i])
		}
	}
	return ""
}

// Cost is an exact amount of money: Amount a decimal without sign or
// exponent ("0.42"), Currency an ISO 4217-like code of three upper-case
// letters ("USD"). The reducer's costs are canonical: no leading zeros,
// no trailing zeros after the point, no point without a digit after it.
type Cost struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// String is the cost as ParseCost reads it: "0.42USD".
func (c Cost) String() string { return c.Amount + c.Currency }

// ParseCost reads a cost written as an amount and a currency, "0.42USD"
// or "0.42 USD", and returns it canonical.
func ParseCost(s string) (Cost, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		return Cost{}, fmt.Errorf("%w: cost %q has no currency: write an amount and a currency, as 0.42USD", ErrInvalidArgument, s)
	}
	if i == 0 {
		return Cost{}, fmt.Errorf("%w: cost %q does not start with an amount: write an amount and a currency, as 0.42USD", ErrInvalidArgument, s)
	}
	c := Cost{Amount: t[:i], Currency: strings.TrimSpace(t[i:])}
	if err := c.valid("cost"); err != nil {
		return Cost{}, err
	}
	return c.canonical(), nil
}

// valid checks the form of c: a decimal of at most MaxCostLen characters
// and MaxCostPlaces places, and a currency code.
func (c Cost) valid(field string) error {
	a := c.Amount
	whole, frac, point := strings.Cut(a, ".")
	digits := func(s string) bool { return strings.Trim(s, "0123456789") == "" }
	switch {
	case len(a) > MaxCostLen:
		return fmt.Errorf("%w: %s amount is %d characters, more than %d", ErrInvalidArgument, field, len(a), MaxCostLen)
	case whole == "" || !digits(whole) || !digits(frac) || (point && frac == ""):
		return fmt.Errorf("%w: %s amount %q is not a decimal without sign or exponent (as 0.42)", ErrInvalidArgument, field, a)
	case len(frac) > MaxCostPlaces:
		return fmt.Errorf("%w: %s amount %q has %d places, more than %d", ErrInvalidArgument, field, a, len(frac), MaxCostPlaces)
	case len(c.Currency) != 3 || strings.Trim(c.Currency, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "":
		return fmt.Errorf("%w: %s currency %q is not a code of three upper-case letters (as USD)", ErrInvalidArgument, field, c.Currency)
	}
	return nil
}

// canonical is c, valid, written the one way.
func (c Cost) canonical() Cost {
	whole, frac, _ := strings.Cut(c.Amount, ".")
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	if frac = strings.TrimRight(frac, "0"); frac != "" {
		whole += "." + frac
	}
	return Cost{Amount: whole, Currency: c.Currency}
}

// The arithmetic of amounts, exact, on their decimal digits (math/big
// would bring math/rand into the reducer).

// aligned writes the amounts a and b, valid, with as many digits each
// before and after the point, without it, so that they compare as
// strings and add digit by digit.
func aligned(a, b string) (string, string, int) {
	aw, af, _ := strings.Cut(a, ".")
	bw, bf, _ := strings.Cut(b, ".")
	w, f := max(len(aw), len(bw)), max(len(af), len(bf))
	pad := func(whole, frac string) string {
		return strings.Repeat("0", w-len(whole)) + whole + frac + strings.Repeat("0", f-len(frac))
	}
	return pad(aw, af), pad(bw, bf), f
}

// CompareAmount compares the amounts of a and b: -1, 0 or +1.
func CompareAmount(a, b Cost) int {
	x, y, _ := aligned(a.Amount, b.Amount)
	return strings.Compare(x, y)
}

// addAmount is a + b, of a's currency, canonical.
func addAmount(a, b Cost) Cost { return digitwise(a, b, 1) }

// subAmount is a - b, of a's currency, canonical; b is not more than a.
func subAmount(a, b Cost) Cost { return digitwise(a, b, -1) }

func digitwise(a, b Cost, sign int) Cost {
	x, y, places := aligned(a.Amount, b.Amount)
	out := make([]byte, len(x)+1)
	carry := 0
	for i := len(x) - 1; i >= 0; i-- {
		d := int(x[i]-'0') + sign*int(y[i]-'0') + carry
		carry = 0
		switch {
		case d > 9:
			d, carry = d-10, 1
		case d < 0:
			d, carry = d+10, -1
		}
		out[i+1] = byte('0' + d)
	}
	if carry < 0 {
		panic(fmt.Sprintf("reducer: %s less %s is below zero", a, b))
	}
	out[0] = byte('0' + carry)
	s := string(out)
	if places > 0 {
		s = s[:len(s)-places] + "." + s[len(s)-places:]
	}
	return Cost{Amount: s, Currency: a.Currency}.canonical()
}

// zero reports whether c's amount is zero.
func (c Cost) zero() bool { return strings.Trim(c.Amount, "0.") == "" }

// Usage is what a run has spent so far, as its agent reports it: tokens
// by kind, the cost when known (nil: none reported, or the last one
// stands), the model when known.
type Usage struct {
	Tokens Tokens `json:"tokens,omitempty" serde:"default"`
	Cost   *Cost  `json:"cost,omitempty"`
	Model  string `json:"model,omitempty" serde:"default"`
}

// Spend is a sum of usage: tokens by kind, and cost per currency, in the
// currencies' order, one entry each.
type Spend struct {
	Tokens Tokens `json:"tokens"`
	Cost   []Cost `json:"cost"`
}

// CostIn is s's cost in currency, "0" when none.
func (s Spend) CostIn(currency string) Cost {
	for _, c := range s.Cost {
		if c.Currency == currency {
			return c
		}
	}
	return Cost{Amount: "0", Currency: currency}
}

// plus is s with tokens and cost added; s is not changed.
func (s Spend) plus(tokens Tokens, cost *Cost) Spend {
	out := Spend{Tokens: s.Tokens.plus(tokens), Cost: slices.Clone(s.Cost)}
	if cost == nil || cost.zero() {
		return out
	}
	i, found := slices.BinarySearchFunc(out.Cost, cost.Currency, func(c Cost, cur string) int { return strings.Compare(c.Currency, cur) })
	if found {
		out.Cost[i] = addAmount(out.Cost[i], *cost)
	} else {
		out.Cost = slices.Insert(out.Cost, i, *cost)
	}
	return out
}

// Budget is a project's limit of spend: tokens (of every kind together),
// cost (in one currency; spend in others does not count against it).
// Either may be nil, for no limit.
type Budget struct {
	Tokens *uint64 `json:"tokens,omitempty"`
	Cost   *Cost   `json:"cost,omitempty"`
}

// Set reports whether b limits anything.
func (b Budget) Set() bool { return b.Tokens != nil || b.Cost != nil }

// Reached says why spend has reached b, or "" when it has not.
func (b Budget) Reached(s Spend) string {
	if b.Tokens != nil && s.Tokens.Total() >= *b.Tokens {
		return fmt.Sprintf("%d tokens spent of a budget of %d", s.Tokens.Total(), *b.Tokens)
	}
	if b.Cost != nil {
		if spent := s.CostIn(b.Cost.Currency); CompareAmount(spent, *b.Cost) >= 0 {
			return fmt.Sprintf("%s spent of a budget of %s", spent, b.Cost)
		}
	}
	return ""
}

// SetBudget sets a project's budget (the owner's decision): the limits
// it names, and no other; a SetBudget with neither removes the budget.
// By is who set it.
type SetBudget struct {
	Project string
	Tokens  *uint64
	Cost    *Cost
	By      string
	Now     int64
}

func (c SetBudget) ProjectRef() string { return c.Project }
func (SetBudget) command()             {}

// KindBudgetSet is the kind of BudgetSet events.
const KindBudgetSet = "budget_set"

// BudgetSet records a project's budget, as SetBudget set it.
type BudgetSet struct {
	Tokens *uint64 `json:"tokens,omitempty"`
	Cost   *Cost   `json:"cost,omitempty"`
	By     string  `json:"by"`
}

func (BudgetSet) Kind() string { return KindBudgetSet }

// Spend is the project's spend: the sum of its runs' usage.
func (p *Project) Spend() Spend { return p.spend }

// Budget is the project's budget; zero when none.
func (p *Project) Budget() Budget { return p.budget }

// BudgetReached says why the project's spend has reached its budget, or
// "" when it has not (or there is none).
func (p *Project) BudgetReached() string { return p.budget.Reached(p.spend) }

// checkBudget refuses evs, the events of a command decided against p,
// when one starts a run and p's budget is reached.
func checkBudget(p *Project, evs []Event) error {
	if !slices.ContainsFunc(evs, func(e Event) bool { _, ok := e.Body.(RunStarted); return ok }) {
		return nil
	}
	if why := p.BudgetReached(); why != "" {
		return fmt.Errorf("%w: project %s: %s; raise or remove the budget to go on", ErrBudgetReached, p.Name, why)
	}
	return nil
}

// validUsage checks the form of u, when there is one.
func validUsage(u *Usage) error {
	if u == nil {
		return nil
	}
	for i, n := range u.Tokens.ByKind() {
		if n > MaxTokens {
			return fmt.Errorf("%w: usage has %d %s tokens, more than %d", ErrInvalidArgument, n, TokenKinds[i], uint64(MaxTokens))
		}
	}
	if u.Cost != nil {
		if err := u.Cost.valid("usage cost"); err != nil {
			return err
		}
	}
	return validText("usage model", u.Model, MaxModelLen, "")
}

// decideUsage checks u (nil for none) against run r's last: none of its
// token counts, nor its cost, lower; its cost in the same currency. It
// returns the usage the event records, its cost canonical.
func decideUsage(r *Run, u *Usage) (*Usage, error) {
	if u == nil {
		return nil, nil
	}
	out := *u
	if why := u.Tokens.below(r.Usage.Tokens); why != "" {
		return nil, fmt.Errorf("%w: usage goes backwards: run %s reports %s", ErrInvalidArgument, r.ID, why)
	}
	if u.Cost != nil {
		c := u.Cost.canonical()
		if last := r.Usage.Cost; last != nil {
			switch {
			case c.Currency != last.Currency:
				return nil, fmt.Errorf("%w: usage goes backwards: run %s's cost is in %s, not %s", ErrInvalidArgument, r.ID, last.Currency, c.Currency)
			case CompareAmount(c, *last) < 0:
				return nil, fmt.Errorf("%w: usage goes backwards: run %s reports a cost of %s, less than its last %s", ErrInvalidArgument, r.ID, c, last)
			}
		}
		out.Cost = &c
	}
	return &out, nil
}

// BudgetReachedAt is the sequence of the event whose usage made the
// project's spend reach its budget, 0 while it has not (or since the
// budget was set again): the daemon tells the owner of that event once.
func (p *Project) BudgetReachedAt() uint64 { return p.reachedAt }

// spendUsage records u (nil for none), the usage of run id so far, at
// event seq: the run's becomes u (its cost and model, when u has none,
// stay), and what it adds to the run's last is added to its task's and
// the project's spend.
func (p *Project) spendUsage(id string, u *Usage, seq uint64) {
	if u == nil {
		return
	}
	defer func() {
		if p.reachedAt == 0 && p.BudgetReached() != "" {
			p.reachedAt = seq
		}
	}()
	var dt Tokens
	var dc *Cost
	r := p.updateRun(id, func(r *Run) {
		last := r.Usage
		if why := u.Tokens.below(last.Tokens); why != "" {
			panic(fmt.Sprintf("reducer: run %s's usage goes backwards: %s", id, why))
		}
		dt = u.Tokens.minus(last.Tokens)
		next := Usage{Tokens: u.Tokens, Cost: last.Cost, Model: last.Model}
		if u.Cost != nil {
			d := *u.Cost
			if last.Cost != nil {
				if last.Cost.Currency != u.Cost.Currency || CompareAmount(*u.Cost, *last.Cost) < 0 {
					panic(fmt.Sprintf("reducer: run %s's cost goes from %s to %s", id, last.Cost, u.Cost))
				}
				d = subAmount(d, *last.Cost)
			}
			dc, next.Cost = &d, u.Cost
		}
		if u.Model != "" {
			next.Model = u.Model
		}
		r.Usage = next
	})
	p.updateTask(r.TaskID, func(t *Task) { t.Spend = t.Spend.plus(dt, dc) })
	p.spend = p.spend.plus(dt, dc)
}

// restoreSpend sums the restored runs' usage into their tasks' and the
// project's spend.
func (p *Project) restoreSpend() {
	for _, r := range p.Runs() {
		if r.Usage == (Usage{}) {
			continue
		}
		p.updateTask(r.TaskID, func(t *Task) { t.Spend = t.Spend.plus(r.Usage.Tokens, r.Usage.Cost) })
		p.spend = p.spend.plus(r.Usage.Tokens, r.Usage.Cost)
	}
}

func decideBudget(c SetBudget) (Body, error) {
	b := BudgetSet{Tokens: c.Tokens, By: c.By}
	if c.Tokens != nil {
		n := *c.Tokens // the event owns its data
		b.Tokens = &n
	}
	if c.Cost != nil {
		if err := c.Cost.valid("budget cost"); err != nil {
			return nil, err
		}
		k := c.Cost.canonical()
		b.Cost = &k
	}
	return b, nil
}

// ClipModel makes s a model name that a usage's check accepts, for a
// name the daemon is told by an agent, which is cut rather than refused
// (as ClipProgress does).
func ClipModel(s string) string { return clipText(s, MaxModelLen, "") }

// String is s on one line, as people read it: "5745 tokens, 0.06USD"
// (every currency, in their order); "-" when nothing was spent.
func (s Spend) String() string {
	if s.Tokens == (Tokens{}) && len(s.Cost) == 0 {
		return "-"
	}
	out := fmt.Sprintf("%d tokens", s.Tokens.Total())
	for _, c := range s.Cost {
		out += ", " + c.String()
	}
	return out
}

// Spend is u as a spend: its tokens and its cost, if any.
func (u Usage) Spend() Spend {
	s := Spend{Tokens: u.Tokens}
	if u.Cost != nil {
		s.Cost = []Cost{*u.Cost}
	}
	return s
}

// String is b on one line: "50000 tokens, 1.5USD"; "none" when it limits
// nothing.
func (b Budget) String() string {
	var parts []string
	if b.Tokens != nil {
		parts = append(parts, fmt.Sprintf("%d tokens", *b.Tokens))
	}
	if b.Cost != nil {
		parts = append(parts, b.Cost.String())
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
