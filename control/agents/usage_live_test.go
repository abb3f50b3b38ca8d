package agents_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// usageOf is the usage the log line of the turn of run's end shows
// (turnRun.usage's, kept with the run), as its attributes without the
// "usage." prefix; nil when it shows none.
func (e *env) usageOf(run string) map[string]string {
	e.t.Helper()
	for _, l := range e.logs.lines("turn ended") {
		if !strings.Contains(l, " run="+run+" ") && !strings.HasSuffix(l, " run="+run) {
			continue
		}
		var got map[string]string
		rest := l
		for {
			i := strings.Index(rest, " usage.")
			if i < 0 {
				return got
			}
			rest = rest[i+len(" usage."):]
			k, v, _ := strings.Cut(rest, "=")
			if strings.HasPrefix(v, `"`) {
				end := strings.Index(v[1:], `"`)
				v = v[1 : end+1]
			} else if j := strings.IndexByte(v, ' '); j >= 0 {
				v = v[:j]
			}
			if got == nil {
				got = map[string]string{}
			}
			got[k] = v
		}
	}
	e.t.Fatalf("no log line of the end of run %s", run)
	return nil
}

// turn runs text as a turn on task title, returning its run's ID.
func (e *env) turn(name, title, text string) string {
	e.t.Helper()
	info, page, err := e.m.PromptAgent(e.ctx, api.CmdAgentPrompt{Agent: name, Text: text, Task: &title})
	require.NoError(e.t, err)
	ups := e.follow(name, info.Turn, page.Next)
	require.Equal(e.t, "succeeded", last(e.t, ups, "turn_ended").Status)
	runs := e.runs(title)
	require.Len(e.t, runs, 1)
	return runs[0].ID
}

// spent is the usage attributes of a run: the tokens, the context and
// cost of the newest usage_update, the model.
func spent(in, out, thought, read, write, used, cost string) map[string]string {
	return map[string]string{"input_tokens": in, "output_tokens": out, "thought_tokens": thought,
		"cached_read_tokens": read, "cached_write_tokens": write, "context_used": used, "context_size": "200000",
		"cost": cost, "model": "m-1"}
}

// TestUsage: over a three-turn conversation, each turn's run gets the
// tokens of the agent's answer to its prompt, the context of its newest
// usage_update, and the session's cost since the turn began (the
// session's cumulative cost less the cost at the turn's start), with the
// model the agent named for the session.
func TestUsage(t *testing.T) {
	e := newEnv(t, "one", "two", "three", "four")
	e.agent("a", "one", "--model", "m-1")

	r1 := e.turn("a", "one", "usage_update 1000 200000 0.01 USD\nsay one\nusage 100 20 5 30 40")
	r2 := e.turn("a", "two", "usage_update 1500 200000 0.025 USD\nsay two\nusage_update 2500 200000 0.045 USD\nusage 200 50")
	r3 := e.turn("a", "three", "usage_update 3000 200000 0.045 USD\nusage 7 3 0 100")
	assert.Equal(t, spent("100", "20", "5", "30", "40", "1000", "0.01 USD"), e.usageOf(r1))
	assert.Equal(t, spent("200", "50", "0", "0", "0", "2500", "0.035 USD"), e.usageOf(r2), "the newest usage_update's cost less the first turn's")
	assert.Equal(t, spent("7", "3", "0", "100", "0", "3000", "0 USD"), e.usageOf(r3), "the session spent nothing more")

	r4 := e.turn("a", "four", "say nothing measured")
	assert.Nil(t, e.usageOf(r4), "a turn the agent reported nothing of has no usage")

	// The ledger's: each run's usage what its agent sent, each task's
	// and the project's the sums.
	p := e.project()
	usd := func(a string) *reducer.Cost { return &reducer.Cost{Amount: a, Currency: "USD"} }
	want := map[string]reducer.Usage{
		r1: {Tokens: reducer.Tokens{Input: 100, Output: 20, Thought: 5, CachedRead: 30, CachedWrite: 40}, Cost: usd("0.01"), Model: "m-1"},
		r2: {Tokens: reducer.Tokens{Input: 200, Output: 50}, Cost: usd("0.035"), Model: "m-1"},
		r3: {Tokens: reducer.Tokens{Input: 7, Output: 3, CachedRead: 100}, Cost: usd("0"), Model: "m-1"},
		r4: {},
	}
	for id, u := range want {
		r, ok := p.Run(id)
		require.True(t, ok)
		assert.Equal(t, u, r.Usage, "run %s", id)
		task, _ := p.Task(r.TaskID)
		var cost []reducer.Cost
		if u.Cost != nil && u.Cost.Amount != "0" {
			cost = []reducer.Cost{*u.Cost}
		}
		assert.Equal(t, reducer.Spend{Tokens: u.Tokens, Cost: cost}, task.Spend, "task %s", task.Title)
	}
	assert.Equal(t, reducer.Spend{Tokens: reducer.Tokens{Input: 307, Output: 73, Thought: 5, CachedRead: 130, CachedWrite: 40},
		Cost: []reducer.Cost{*usd("0.045")}}, p.Spend())
}

// TestUsageAfterRestart: a resumed session's cost so far is what its agent
// reports while session/load replays it, so the next turn's run gets only
// what it spent; an agent that reports nothing there leaves the next
// run's cost unknown rather than counting the whole session's in it.
func TestUsageAfterRestart(t *testing.T) {
	e := newEnv(t, "one", "two", "three", "four")
	e.agent("a", "one", "--model", "m-1")
	e.agent("b", "three", "--model", "m-1")
	e.turn("a", "one", "usage_update 1000 200000 0.045 USD\nusage 1 1")
	e.turn("b", "three", "usage 1 1")
	e.m.Stop()
	e.start()
	require.Eventually(t, func() bool {
		as := e.m.ListAgents()
		return len(as) == 2 && as[0].State == api.AgentIdle && as[1].State == api.AgentIdle
	}, 20*time.Second, 20*time.Millisecond, "both resumed")
	r2 := e.turn("a", "two", "usage_update 1100 200000 0.05 USD\nusage 2 2")
	assert.Equal(t, spent("2", "2", "0", "0", "0", "1100", "0.005 USD"), e.usageOf(r2))
	r4 := e.turn("b", "four", "usage_update 500 200000 0.5 USD\nusage 3 3")
	assert.Equal(t, spent("3", "3", "0", "0", "0", "500", ""), e.usageOf(r4), "no cost: the session's before the turn is not known")
	assert.NotEmpty(t, e.logs.lines("the cost of a turn's run is not known"))
}
