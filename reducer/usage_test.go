package reducer_test

import (
	"fmt"
	"maps"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

func usage(in, out uint64, cost string) *reducer.Usage {
	u := &reducer.Usage{Tokens: reducer.Tokens{Input: in, Output: out}}
	if cost != "" {
		c, err := reducer.ParseCost(cost)
		if err != nil {
			panic(err)
		}
		u.Cost = &c
	}
	return u
}

func TestParseCost(t *testing.T) {
	for in, want := range map[string]string{
		"0.42USD": "0.42USD", "0.420 USD": "0.42USD", "007EUR": "7EUR", "1.000JPY": "1JPY", "0.0USD": "0USD", " 3.5 GBP ": "3.5GBP",
	} {
		c, err := reducer.ParseCost(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, c.String(), in)
	}
	for _, in := range []string{"", "USD", "0.42", "-1USD", "1e3USD", ".5USD", "5.USD", "0.42usd", "0.42US", "0.42USDX", "1,5EUR", "0.1234567890123456789USD", "NaNUSD"} {
		_, err := reducer.ParseCost(in)
		assert.ErrorIs(t, err, reducer.ErrInvalidArgument, in)
	}
}

// TestUsageTotals: a run's usage is its newest report; a task's, the sum
// of its runs'; the project's, of its tasks'; currencies apart.
func TestUsageTotals(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 1), add("b", 0), start("a", "r1"))
	pr := progress("r1", "working")
	pr.Usage = usage(100, 10, "0.10USD")
	l.do(pr)
	pr.Usage = usage(200, 20, "") // the cost stands
	l.do(pr)
	hb := beat("", "r1")
	hb.Usage = &reducer.Usage{Tokens: reducer.Tokens{Input: 250, Output: 20, Thought: 5}, Model: "m1"}
	l.do(hb)
	fin := finish("r1", reducer.RunFailed)
	fin.Usage = usage(300, 30, "0.25USD")
	fin.Usage.Tokens.Thought = 5
	l.do(fin, start("a", "r2"), start("b", "r3"))
	fin = finish("r2", reducer.RunSucceeded)
	fin.Usage = usage(1, 2, "0.000001USD")
	l.do(fin)
	fin = finish("r3", reducer.RunSucceeded)
	fin.Usage = usage(5, 5, "3EUR")
	l.do(fin)

	p := l.project()
	r1, _ := p.Run("r1")
	assert.Equal(t, reducer.Usage{Tokens: reducer.Tokens{Input: 300, Output: 30, Thought: 5}, Cost: &reducer.Cost{Amount: "0.25", Currency: "USD"}, Model: "m1"}, r1.Usage)
	a, _ := p.Task("a")
	assert.Equal(t, reducer.Spend{Tokens: reducer.Tokens{Input: 301, Output: 32, Thought: 5}, Cost: []reducer.Cost{{Amount: "0.250001", Currency: "USD"}}}, a.Spend)
	assert.Equal(t, reducer.Spend{Tokens: reducer.Tokens{Input: 306, Output: 37, Thought: 5}, Cost: []reducer.Cost{{Amount: "3", Currency: "EUR"}, {Amount: "0.250001", Currency: "USD"}}}, p.Spend())

	// A snapshot carries them.
	b, err := reducer.Snapshot(p)
	require.NoError(t, err)
	q, err := reducer.Restore(b)
	require.NoError(t, err)
	assert.Equal(t, p.Spend(), q.Spend())
	qa, _ := q.Task("a")
	assert.Equal(t, a.Spend, qa.Spend)
	b2, err := reducer.Snapshot(q)
	require.NoError(t, err)
	assert.Equal(t, string(b), string(b2))
}

func TestUsageRefused(t *testing.T) {
	setup := func() *ledger {
		l := newLedger(t)
		l.do(baseProject, add("a", 0), start("a", "r1"))
		pr := progress("r1", "x")
		pr.Usage = usage(100, 10, "0.10USD")
		pr.Usage.Tokens.CachedRead = 7
		l.do(pr)
		return l
	}
	for name, tc := range map[string]struct {
		c    reducer.Command
		kind error
		msg  string
	}{
		"fewer input tokens":  {reducer.ProgressRun{Project: projID, RunID: "r1", Usage: usage(99, 10, "")}, reducer.ErrInvalidArgument, "usage goes backwards: run r1 reports 99 input tokens, fewer than its last 100"},
		"fewer cached tokens": {reducer.RecordHeartbeat{Project: projID, RunID: "r1", Usage: usage(100, 10, "")}, reducer.ErrInvalidArgument, "usage goes backwards: run r1 reports 0 cached_read tokens, fewer than its last 7"},
		"less cost":           {reducer.FinishRun{Project: projID, RunID: "r1", Status: reducer.RunSucceeded, Usage: &reducer.Usage{Tokens: reducer.Tokens{Input: 100, Output: 10, CachedRead: 7}, Cost: &reducer.Cost{Amount: "0.09", Currency: "USD"}}}, reducer.ErrInvalidArgument, "usage goes backwards: run r1 reports a cost of 0.09USD, less than its last 0.1USD"},
		"other currency":      {reducer.FinishRun{Project: projID, RunID: "r1", Status: reducer.RunSucceeded, Usage: &reducer.Usage{Tokens: reducer.Tokens{Input: 100, Output: 10, CachedRead: 7}, Cost: &reducer.Cost{Amount: "1", Currency: "EUR"}}}, reducer.ErrInvalidArgument, "run r1's cost is in USD, not EUR"},
		"bad currency":        {reducer.ProgressRun{Project: projID, RunID: "r1", Usage: &reducer.Usage{Cost: &reducer.Cost{Amount: "1", Currency: "usd"}}}, reducer.ErrInvalidArgument, "usage cost currency \"usd\""},
		"bad amount":          {reducer.ProgressRun{Project: projID, RunID: "r1", Usage: &reducer.Usage{Cost: &reducer.Cost{Amount: "-1", Currency: "USD"}}}, reducer.ErrInvalidArgument, "not a decimal"},
		"model control":       {reducer.ProgressRun{Project: projID, RunID: "r1", Usage: &reducer.Usage{Model: "a\x00b"}}, reducer.ErrInvalidArgument, "usage model contains control character"},
		"too many tokens":     {reducer.ProgressRun{Project: projID, RunID: "r1", Usage: usage(reducer.MaxTokens+1, 10, "")}, reducer.ErrInvalidArgument, "usage has 1000000000001 input tokens, more than 1000000000000"},
		"usage without a run": {reducer.RecordHeartbeat{Project: projID, TaskID: "a", Usage: usage(1000, 1000, "")}, reducer.ErrInvalidArgument, "usage is a run's"},
	} {
		t.Run(name, func(t *testing.T) {
			l := setup()
			before := l.project()
			_, err := l.s.decide(withNow(tc.c, l.now+10))
			require.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Same(t, before, l.project())
		})
	}
	t.Run("finished run", func(t *testing.T) {
		l := setup()
		l.do(finish("r1", reducer.RunSucceeded))
		_, err := l.s.decide(withNow(reducer.ProgressRun{Project: projID, RunID: "r1", Usage: usage(1000, 1000, "")}, l.now+10))
		require.ErrorIs(t, err, reducer.ErrRunNotRunning)
	})
}

// TestUsageCoalesced: a usage report within the heartbeat interval is
// checked and appends nothing; the finish carries the run's totals.
func TestUsageCoalesced(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 0), start("a", "r1"))
	pr := reducer.ProgressRun{Project: projID, RunID: "r1", Progress: "x", Usage: usage(10, 1, "0.01USD"), Every: 1_000_000}
	l.do(pr)
	n := len(l.events)
	pr.Usage = usage(20, 2, "0.02USD")
	l.do(pr)
	assert.Len(t, l.events, n, "coalesced")
	pr.Usage = usage(5, 2, "")
	_, err := l.s.decide(withNow(pr, l.now+10))
	require.ErrorIs(t, err, reducer.ErrInvalidArgument, "checked though coalesced")
	fin := finish("r1", reducer.RunSucceeded)
	fin.Usage = usage(30, 3, "0.03USD")
	l.do(fin)
	assert.Equal(t, reducer.Tokens{Input: 30, Output: 3}, l.project().Spend().Tokens)
	assert.Equal(t, []reducer.Cost{{Amount: "0.03", Currency: "USD"}}, l.project().Spend().Cost)
}

func TestBudget(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject, add("a", 0), add("b", 0), add("c", 0))
	ten := uint64(100)
	l.do(reducer.SetBudget{Project: projID, Tokens: &ten, Cost: &reducer.Cost{Amount: "1.00", Currency: "USD"}, By: "owner"})
	assert.Equal(t, "1", l.project().Budget().Cost.Amount, "canonical")
	l.do(start("a", "r1"), start("b", "r2"))
	pr := progress("r1", "x")
	pr.Usage = usage(60, 40, "0.5USD") // 100 tokens: the budget
	assert.Zero(t, l.project().BudgetReachedAt())
	l.do(pr)
	assert.Equal(t, "100 tokens spent of a budget of 100", l.project().BudgetReached())
	assert.Equal(t, l.seq, l.project().BudgetReachedAt(), "the progress that reached it")
	reachedAt := l.seq

	_, err := l.s.decide(withNow(start("c", "r3"), l.now+10))
	require.ErrorIs(t, err, reducer.ErrBudgetReached)
	assert.Contains(t, err.Error(), "budget reached: project proj: 100 tokens spent of a budget of 100")
	_, err = l.s.decide(withNow(reducer.NextTask{Project: projID, RunID: "r3", Agent: "codex"}, l.now+10))
	require.ErrorIs(t, err, reducer.ErrBudgetReached, "the next task is a run's start too")
	// A run under way may go on and finish.
	pr = progress("r2", "y")
	pr.Usage = usage(1, 1, "0.5USD")
	fin := finish("r2", reducer.RunSucceeded)
	fin.Usage = usage(1, 1, "0.6EUR")
	_, err = l.s.decide(withNow(fin, l.now+10))
	require.NoError(t, err, "a run with no cost reported yet may report one in any currency")
	l.do(pr, finish("r2", reducer.RunSucceeded))
	assert.Equal(t, reachedAt, l.project().BudgetReachedAt(), "reached once")

	// Raised for tokens: the cost (1.0USD of 1USD) now stops it.
	more := uint64(1000)
	l.do(reducer.SetBudget{Project: projID, Tokens: &more, Cost: &reducer.Cost{Amount: "1", Currency: "USD"}, By: "owner"})
	assert.Zero(t, l.project().BudgetReachedAt(), "set again")
	_, err = l.s.decide(withNow(start("c", "r3"), l.now+10))
	require.ErrorIs(t, err, reducer.ErrBudgetReached)
	assert.Contains(t, err.Error(), "1USD spent of a budget of 1USD")
	// Spend in another currency does not count against it.
	l.do(reducer.SetBudget{Project: projID, Cost: &reducer.Cost{Amount: "1", Currency: "EUR"}, By: "owner"})
	l.do(start("c", "r3"), finish("r3", reducer.RunFailed))
	// Removed.
	l.do(reducer.SetBudget{Project: projID, Tokens: new(uint64), By: "owner"})
	assert.NotEmpty(t, l.project().BudgetReached())
	l.do(reducer.SetBudget{Project: projID, By: "owner"})
	assert.Empty(t, l.project().BudgetReached())
	assert.False(t, l.project().Budget().Set())

	_, err = l.s.decide(withNow(reducer.SetBudget{Project: projID, Cost: &reducer.Cost{Amount: "1", Currency: "EURO"}}, l.now+10))
	require.ErrorIs(t, err, reducer.ErrInvalidArgument)
}

// TestPropertyUsageTotals: after any sequence of usage reports and
// compactions (a snapshot's round trip), the folded totals of every run,
// task and the project equal the sums computed from the events.
func TestPropertyUsageTotals(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { usageSequence(t, seed) })
	}
}

func usageSequence(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	l := newLedger(t)
	l.do(baseProject)
	currencies := []string{"USD", "EUR"}
	var tasks []string
	running := map[string]bool{}
	var runs []string
	for i := range 150 {
		p := l.project()
		var c reducer.Command
		switch k := r.IntN(10); {
		case k == 0 || len(tasks) == 0:
			id := fmt.Sprintf("t%d", i)
			tasks = append(tasks, id)
			c = add(id, 3)
		case k == 1:
			id := tasks[r.IntN(len(tasks))]
			c = start(id, fmt.Sprintf("r%d", i))
		case k == 2:
			n := uint64(r.IntN(5000))
			c = reducer.SetBudget{Project: projID, Tokens: &n, By: "o"}
			if r.IntN(3) == 0 {
				c = reducer.SetBudget{Project: projID, By: "o"}
			}
		case k == 3:
			// A compaction: the project goes on from its snapshot.
			b, err := reducer.Snapshot(p)
			require.NoError(t, err)
			q, err := reducer.Restore(b)
			require.NoError(t, err)
			l.s.projects[projID] = q
			continue
		default:
			if len(running) == 0 {
				continue
			}
			var live []string
			for _, id := range runs {
				if running[id] {
					live = append(live, id)
				}
			}
			id := live[r.IntN(len(live))]
			run, _ := p.Run(id)
			u := run.Usage
			grow := func(n uint64) uint64 { return n + uint64(r.IntN(3)*r.IntN(100)) }
			next := reducer.Usage{Tokens: reducer.Tokens{Input: grow(u.Tokens.Input), Output: grow(u.Tokens.Output), Thought: grow(u.Tokens.Thought),
				CachedRead: grow(u.Tokens.CachedRead), CachedWrite: grow(u.Tokens.CachedWrite)}}
			if r.IntN(2) == 0 {
				cur, amount := currencies[r.IntN(2)], new(big.Rat)
				if u.Cost != nil {
					cur, amount = u.Cost.Currency, rat(t, u.Cost.Amount)
				}
				amount.Add(amount, big.NewRat(int64(r.IntN(3)*r.IntN(1_000_000)), 1_000_000))
				c, err := reducer.ParseCost(amount.FloatString(6) + cur)
				require.NoError(t, err)
				next.Cost = &c
			}
			if r.IntN(4) == 0 {
				next.Model = fmt.Sprintf("m%d", r.IntN(3))
			}
			switch r.IntN(4) {
			case 0:
				c = reducer.FinishRun{Project: projID, RunID: id, Status: reducer.RunFailed, Usage: &next}
			case 1:
				c = reducer.RecordHeartbeat{Project: projID, RunID: id, Usage: &next, Every: int64(r.IntN(2)) * 25}
			default:
				c = reducer.ProgressRun{Project: projID, RunID: id, Progress: "p", Usage: &next, Every: int64(r.IntN(2)) * 25}
			}
		}
		l.now += 10
		evs, err := l.s.decide(withNow(c, l.now))
		if err != nil {
			continue // a refusal (a task not ready, the budget) appends nothing
		}
		l.evolve(evs...)
		for _, e := range evs {
			switch b := e.Body.(type) {
			case reducer.RunStarted:
				running[b.RunID] = true
				runs = append(runs, b.RunID)
			case reducer.RunFinished:
				delete(running, b.RunID)
			}
		}
	}
	checkUsageTotals(t, l.project(), l.events)
}

// checkUsageTotals compares p's totals with those summed from events.
func checkUsageTotals(t *testing.T, p *reducer.Project, events []reducer.Event) {
	t.Helper()
	last := map[string]reducer.Usage{}
	var order []string
	taskOf := map[string]string{}
	for _, e := range events {
		var id string
		var u *reducer.Usage
		switch b := e.Body.(type) {
		case reducer.RunStarted:
			taskOf[b.RunID] = b.TaskID
			order = append(order, b.RunID)
			continue
		case reducer.RunProgress:
			id, u = b.RunID, b.Usage
		case reducer.Heartbeat:
			id, u = b.RunID, b.Usage
		case reducer.RunFinished:
			id, u = b.RunID, b.Usage
		}
		if u == nil {
			continue
		}
		was := last[id]
		next := *u
		if next.Cost == nil {
			next.Cost = was.Cost
		}
		if next.Model == "" {
			next.Model = was.Model
		}
		last[id] = next
	}
	tokens := map[string]reducer.Tokens{}
	cost := map[string]map[string]*big.Rat{}
	var all reducer.Tokens
	allCost := map[string]*big.Rat{}
	add := func(m map[string]*big.Rat, c *reducer.Cost) {
		if m[c.Currency] == nil {
			m[c.Currency] = new(big.Rat)
		}
		m[c.Currency].Add(m[c.Currency], rat(t, c.Amount))
	}
	for _, id := range order {
		u := last[id]
		run, ok := p.Run(id)
		require.True(t, ok)
		assert.Equal(t, u, run.Usage, "run %s", id)
		task := taskOf[id]
		tt := tokens[task]
		tokens[task] = reducer.Tokens{Input: tt.Input + u.Tokens.Input, Output: tt.Output + u.Tokens.Output, Thought: tt.Thought + u.Tokens.Thought,
			CachedRead: tt.CachedRead + u.Tokens.CachedRead, CachedWrite: tt.CachedWrite + u.Tokens.CachedWrite}
		all = reducer.Tokens{Input: all.Input + u.Tokens.Input, Output: all.Output + u.Tokens.Output, Thought: all.Thought + u.Tokens.Thought,
			CachedRead: all.CachedRead + u.Tokens.CachedRead, CachedWrite: all.CachedWrite + u.Tokens.CachedWrite}
		if u.Cost != nil && rat(t, u.Cost.Amount).Sign() > 0 {
			if cost[task] == nil {
				cost[task] = map[string]*big.Rat{}
			}
			add(cost[task], u.Cost)
			add(allCost, u.Cost)
		}
	}
	// The spend's costs, exactly the sums: one entry per currency with
	// any, in the currencies' order, canonical.
	costs := func(m map[string]*big.Rat) []reducer.Cost {
		var out []reducer.Cost
		for _, cur := range slices.Sorted(maps.Keys(m)) {
			c, err := reducer.ParseCost(m[cur].FloatString(12) + cur)
			require.NoError(t, err)
			out = append(out, c)
		}
		return out
	}
	for _, task := range p.Tasks() {
		assert.Equal(t, tokens[task.ID], task.Spend.Tokens, "task %s", task.ID)
		assert.Equal(t, costs(cost[task.ID]), task.Spend.Cost, "task %s", task.ID)
	}
	assert.Equal(t, all, p.Spend().Tokens)
	assert.Equal(t, costs(allCost), p.Spend().Cost)
}

func rat(t *testing.T, s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	require.True(t, ok, s)
	return r
}
