package drivertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// gen makes random commands, valid and invalid. It mostly aims at what
// the ledger serves (so that runs start, progress and finish), and
// sometimes at IDs that collide or do not exist.
type gen struct {
	r               *rand.Rand
	l               *ledger.Ledger
	ws, prefix      string
	projects, names []string
	agents          []string
	taskStatus      []reducer.TaskStatus
	runStatus       []reducer.RunStatus
	fresh, progN    int
}

func newGen(seed uint64, stream int, l *ledger.Ledger, ws string) *gen {
	g := &gen{
		r:          rand.New(rand.NewPCG(seed, uint64(stream))),
		l:          l,
		ws:         ws,
		prefix:     fmt.Sprintf("s%d.%d-", seed, stream),
		names:      []string{"alpha", "beta", "gamma", "delta"},
		agents:     []string{"claude", "codex", "claude", ""},
		taskStatus: []reducer.TaskStatus{reducer.TaskPending, reducer.TaskReady, reducer.TaskRunning, reducer.TaskBlocked, reducer.TaskDone, reducer.TaskFailed, reducer.TaskStale, "bogus"},
		runStatus:  []reducer.RunStatus{reducer.RunSucceeded, reducer.RunFailed, reducer.RunCancelled, reducer.RunSucceeded, reducer.RunFailed, reducer.RunCancelled, reducer.RunRunning, reducer.RunStale},
	}
	for i := range 3 {
		g.projects = append(g.projects, fmt.Sprintf("P%d-%d", seed, i))
	}
	return g
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// pickWhere picks one of xs for which ok holds, else any of xs, else
// nothing.
func pickWhere[T any](r *rand.Rand, xs []T, ok func(T) bool) (T, bool) {
	var hits []T
	for _, x := range xs {
		if ok(x) {
			hits = append(hits, x)
		}
	}
	if len(hits) > 0 {
		return pick(r, hits), true
	}
	var zero T
	if len(xs) > 0 && r.IntN(2) == 0 {
		return pick(r, xs), true
	}
	return zero, false
}

func (g *gen) newID() string {
	g.fresh++
	return fmt.Sprintf("%s%d", g.prefix, g.fresh)
}

// project picks a project and how to name it: mostly an existing one, by
// ID or name; rarely one that does not exist.
func (g *gen) project() (string, *reducer.Project) {
	if g.r.IntN(25) == 0 {
		return "ghost", nil
	}
	var live []*reducer.Project
	for _, id := range g.projects {
		if p, err := g.l.Project(context.Background(), id); err == nil {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return pick(g.r, g.projects), nil
	}
	p := pick(g.r, live)
	if g.r.IntN(2) == 0 {
		return p.Name, p
	}
	return p.ID, p
}

func (g *gen) task(p *reducer.Project, want ...reducer.TaskStatus) string {
	if p == nil || g.r.IntN(10) == 0 {
		return g.newID()
	}
	t, ok := pickWhere(g.r, p.Tasks(), func(t *reducer.Task) bool { return slices.Contains(want, t.Status) })
	if !ok {
		return g.newID()
	}
	return t.ID
}

func (g *gen) run(p *reducer.Project) string {
	if p == nil || g.r.IntN(10) == 0 {
		return g.newID()
	}
	r, ok := pickWhere(g.r, p.Runs(), func(r *reducer.Run) bool { return r.Status == reducer.RunRunning })
	if !ok {
		return g.newID()
	}
	return r.ID
}

func (g *gen) progress() *string {
	if g.r.IntN(2) == 0 {
		return nil
	}
	g.progN++
	s := fmt.Sprintf("%snote %d", g.prefix, g.progN)
	return &s
}

func (g *gen) command() reducer.Command {
	ref, p := g.project()
	switch n := g.r.IntN(100); {
	case n < 5:
		ws := g.ws
		if g.r.IntN(6) == 0 {
			ws = "relative/ws"
		}
		return reducer.CreateProject{ProjectID: pick(g.r, g.projects), Name: pick(g.r, g.names), Workspace: ws}
	case n < 20:
		var deps []string
		for range g.r.IntN(3) {
			deps = append(deps, g.task(p, reducer.TaskPending, reducer.TaskReady, reducer.TaskRunning, reducer.TaskDone))
		}
		id, title := g.newID(), "task"
		if g.r.IntN(10) == 0 {
			id = g.task(p, reducer.TaskReady)
		}
		if g.r.IntN(12) == 0 {
			title = ""
		}
		return reducer.AddTask{Project: ref, TaskID: id, Title: title, DependsOn: deps, MaxRetries: uint32(g.r.IntN(3))}
	case n < 30:
		return reducer.UpdateTask{Project: ref, TaskID: g.task(p, reducer.TaskPending, reducer.TaskReady, reducer.TaskBlocked, reducer.TaskStale),
			Status: pick(g.r, g.taskStatus), Progress: g.progress()}
	case n < 50:
		run := g.newID()
		if p != nil && len(p.Runs()) > 0 && g.r.IntN(10) == 0 {
			run = pick(g.r, p.Runs()).ID
		}
		return reducer.StartRun{Project: ref, TaskID: g.task(p, reducer.TaskReady, reducer.TaskStale), RunID: run, Agent: pick(g.r, g.agents)}
	case n < 62:
		return reducer.ProgressRun{Project: ref, RunID: g.run(p), Progress: fmt.Sprintf("%sprogress %d", g.prefix, g.r.IntN(1000))}
	case n < 76:
		return reducer.FinishRun{Project: ref, RunID: g.run(p), Status: pick(g.r, g.runStatus)}
	case n < 94:
		hb := reducer.RecordHeartbeat{Project: ref}
		switch g.r.IntN(4) {
		case 0:
			hb.TaskID = g.task(p, reducer.TaskReady, reducer.TaskPending, reducer.TaskRunning, reducer.TaskDone)
		case 1:
			hb.RunID = g.run(p)
		case 2:
			hb.RunID = g.run(p)
			hb.TaskID = g.task(p, reducer.TaskRunning)
		}
		return hb
	default:
		return reducer.MarkStale{Project: ref, Window: 30_000}
	}
}

// testFold: after a random workload (valid and refused commands, some
// from several goroutines at once, compactions and a restart, with a
// cache too small to hold every project), the ledger serves exactly the
// fold of the events it acknowledged, and the database holds exactly
// those events.
func testFold(t *testing.T, h Harness) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t, h)
			ws := t.TempDir()
			// Seven seconds pass at every reading of the clock, so that
			// MarkStale with a window of 30 s finds silent runs.
			var ticks atomic.Int64
			opts := ledger.Options{CacheSize: 2, Clock: func() time.Time { return time.Unix(1_700_000_000+7*ticks.Add(1), 0) }}
			l := e.open(opts)
			g := newGen(seed, 0, l, ws)
			r := rand.New(rand.NewPCG(seed, 99))

			var mu sync.Mutex
			acked := map[uint64]reducer.Event{}
			accepted, refused, compactions := 0, 0, 0
			run := func(l *ledger.Ledger, c reducer.Command) {
				res, err := l.Execute(ctx, c)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					refused++
					assert.True(t, reducer.IsRefusal(err), "command %#v: %v is not a refusal", c, err)
					assert.Empty(t, res.Events)
					return
				}
				accepted++
				for _, ev := range res.Events {
					_, dup := acked[ev.Sequence]
					assert.False(t, dup, "sequence %d acknowledged twice", ev.Sequence)
					acked[ev.Sequence] = ev
				}
			}
			sequential := func(n int) {
				for i := range n {
					run(l, g.command())
					if i%20 == 19 {
						c, err := l.Compact(ctx, pick(r, g.projects), ledger.CompactOptions{Retain: r.IntN(8)})
						if err != nil {
							require.ErrorIs(t, err, reducer.ErrNotFound)
						} else if c.Sequence > 0 {
							compactions++
						}
					}
				}
			}

			sequential(150)
			l = e.restart(l, opts)
			g.l = l
			var wg sync.WaitGroup
			for i := range 4 {
				g := newGen(seed, i+1, l, ws)
				wg.Go(func() {
					for range 40 {
						run(l, g.command())
					}
				})
			}
			wg.Wait()
			sequential(100)

			rows := e.history()
			kinds := map[string]int{}
			for _, row := range rows {
				kinds[row.Kind]++
				if want, ok := acked[row.Sequence]; assert.True(t, ok, "event %d never acknowledged", row.Sequence) {
					assert.Equal(t, want, eventOf(t, row))
				}
			}
			assert.Len(t, rows, len(acked), "the database holds exactly the acknowledged events")
			t.Logf("%d accepted, %d refused, %d compactions, events by kind %v", accepted, refused, compactions, kinds)
			// The generator must reach far enough for the test to mean
			// something.
			require.Greater(t, accepted, 60)
			require.Greater(t, refused, 60)
			require.Positive(t, compactions)
			for _, k := range []string{reducer.KindProjectCreated, reducer.KindTaskAdded, reducer.KindTaskUpdated, reducer.KindRunStarted,
				reducer.KindRunProgress, reducer.KindRunFinished, reducer.KindRunStale, reducer.KindHeartbeat} {
				require.Positive(t, kinds[k], "no %s event: the generator needs tuning", k)
			}

			refs := append(append([]string{"ghost"}, g.projects...), g.names...)
			want := foldEvents(acked)
			assertMatches(t, want, l, refs...)
			assertMatches(t, foldRows(t, rows), l)
			l = e.restart(l, opts)
			assertMatches(t, want, l, refs...)
			assert.Equal(t, rows, e.history(), "a reopen appends nothing")
			assert.Empty(t, problems(e.verify(ledger.VerifyOptions{})))
		})
	}
}
