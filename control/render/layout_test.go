package render

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shapes of random graphs for the property tests: size, most
// dependencies per task, how far back they reach.
var layoutShapes = []struct{ n, deps, window int }{
	{1, 0, 1}, {2, 1, 1}, {10, 2, 3}, {60, 3, 10}, {200, 3, 30}, {400, 5, 400},
}

func forRandomGraphs(t *testing.T, f func(t *testing.T, p Project)) {
	for _, sh := range layoutShapes {
		for seed := range uint64(6) {
			p := randomProject(seed, sh.n, sh.deps, sh.window)
			t.Run(fmt.Sprintf("n%d-deps%d-window%d-seed%d", sh.n, sh.deps, sh.window, seed), func(t *testing.T) { f(t, p) })
		}
	}
}

// longestPath is each task's layer computed from its definition.
func longestPath(p Project) []int {
	ix := indexTasks(p.Tasks)
	layer := make([]int, len(p.Tasks))
	for i := range p.Tasks {
		for _, d := range ix.deps[i] {
			layer[i] = max(layer[i], layer[d]+1)
		}
	}
	return layer
}

func TestLayoutLayers(t *testing.T) {
	forRandomGraphs(t, func(t *testing.T, p Project) {
		g := Layout(p)
		require.Len(t, g.Nodes, len(p.Tasks))
		want := longestPath(p)

		seen := make([]int, len(p.Tasks))
		for l, layer := range g.Layers {
			assert.NotEmpty(t, layer, "layer %d", l)
			for k, v := range layer {
				seen[v]++
				assert.Equal(t, l, g.Nodes[v].Layer, "task %d is listed in layer %d", v, l)
				assert.Equal(t, k, g.Nodes[v].Order, "task %d", v)
			}
		}
		for v, n := range seen {
			assert.Equal(t, 1, n, "task %d appears %d times in the layers", v, n)
			assert.Equal(t, want[v], g.Nodes[v].Layer, "task %d: layer is not its longest dependency chain", v)
			assert.Equal(t, p.Tasks[v].ID, g.Nodes[v].Task.ID)
		}

		ix := indexTasks(p.Tasks)
		edges := 0
		for i := range p.Tasks {
			edges += len(ix.deps[i])
		}
		require.Len(t, g.Edges, edges)
		for _, e := range g.Edges {
			assert.Less(t, g.Nodes[e.From].Layer, g.Nodes[e.To].Layer, "edge %s -> %s", p.Tasks[e.From].ID, p.Tasks[e.To].ID)
			assert.Contains(t, p.Tasks[e.To].DependsOn, p.Tasks[e.From].ID)
		}
	})
}

func TestLayoutGeometry(t *testing.T) {
	forRandomGraphs(t, func(t *testing.T, p Project) {
		g := Layout(p)
		for _, layer := range g.Layers {
			for k, v := range layer {
				n := g.Nodes[v]
				assert.GreaterOrEqual(t, n.X, 0)
				assert.LessOrEqual(t, n.X+n.W, g.Width)
				assert.GreaterOrEqual(t, n.Y, 0)
				assert.LessOrEqual(t, n.Y+n.H, g.Height)
				if k > 0 {
					prev := g.Nodes[layer[k-1]]
					assert.GreaterOrEqual(t, n.X, prev.X+prev.W+nodeGap, "boxes of layer %d overlap or are out of order", n.Layer)
				}
			}
		}
		for _, e := range g.Edges {
			from, to := g.Nodes[e.From], g.Nodes[e.To]
			require.GreaterOrEqual(t, len(e.Points), 2)
			assert.Equal(t, Point{from.X + from.W/2, from.Y + from.H}, e.Points[0], "edge leaves the bottom centre of its dependency")
			assert.Equal(t, Point{to.X + to.W/2, to.Y}, e.Points[len(e.Points)-1], "edge enters the top centre of its dependant")
			for k := 1; k < len(e.Points); k++ {
				assert.Greater(t, e.Points[k].Y, e.Points[k-1].Y, "edge goes down")
			}
			if len(e.Points) > 2 {
				assert.Len(t, e.Points, 2*(to.Layer-from.Layer), "a routed edge has two points per layer it crosses")
			}
		}
	})
}

// TestLayoutCrossingsCounted counts the crossings again from the drawn
// geometry, pair by pair: two edge segments between the same two layers
// cross when their ends are in opposite order.
func TestLayoutCrossingsCounted(t *testing.T) {
	forRandomGraphs(t, func(t *testing.T, p Project) {
		g := Layout(p)
		type seg struct{ top, a, b int }
		var segs []seg
		for _, e := range g.Edges {
			if len(e.Points) == 2 && g.Nodes[e.To].Layer-g.Nodes[e.From].Layer > 1 {
				continue // drawn straight, not counted
			}
			for k := 0; k+1 < len(e.Points); k += 2 {
				segs = append(segs, seg{e.Points[k].Y, e.Points[k].X, e.Points[k+1].X})
			}
		}
		crossings := 0
		for i := range segs {
			for j := i + 1; j < len(segs); j++ {
				s, u := segs[i], segs[j]
				if s.top == u.top && (s.a-u.a)*(s.b-u.b) < 0 {
					crossings++
				}
			}
		}
		assert.Equal(t, crossings, g.Crossings)
	})
}

// TestLayoutBarycenter: the sweeps never leave more crossings than the
// order the tasks came in, and untangle what a barycenter can.
func TestLayoutBarycenter(t *testing.T) {
	forRandomGraphs(t, func(t *testing.T, p Project) {
		ix := indexTasks(p.Tasks)
		var edges []Edge
		for i := range p.Tasks {
			for _, d := range ix.deps[i] {
				edges = append(edges, Edge{From: d, To: i})
			}
		}
		lg, _ := newLayered(len(p.Tasks), ix, edges)
		assert.LessOrEqual(t, Layout(p).Crossings, lg.crossings())
	})

	// a and b on top, c under b and d under a, in the order added: one
	// crossing, none once ordered.
	twisted := Project{Tasks: []Task{
		{ID: "a"}, {ID: "b"},
		{ID: "c", DependsOn: []string{"b"}}, {ID: "d", DependsOn: []string{"a"}},
	}}
	g := Layout(twisted)
	assert.Equal(t, 0, g.Crossings)
	assert.Equal(t, g.Nodes[0].X < g.Nodes[1].X, g.Nodes[3].X < g.Nodes[2].X, "the children are in their parents' order")

	// Siblings (equal barycenters) keep the order they were added in:
	// three roots, sixty children dealt to them in turn.
	fan := Project{Tasks: []Task{{ID: "r0"}, {ID: "r1"}, {ID: "r2"}}}
	want := make([][]int, 3)
	for i := 3; i < 63; i++ {
		fan.Tasks = append(fan.Tasks, Task{ID: fmt.Sprint(i), DependsOn: []string{fmt.Sprint("r", i%3)}})
		want[i%3] = append(want[i%3], i)
	}
	assert.Equal(t, slices.Concat(want...), Layout(fan).Layers[1])
}

// TestLayoutKeepsBestOrder: the order kept is the one with the fewest
// crossings among the initial order and the order after each sweep, not
// merely the last one.
func TestLayoutKeepsBestOrder(t *testing.T) {
	nonMonotone := 0
	forRandomGraphs(t, func(t *testing.T, p Project) {
		ix := indexTasks(p.Tasks)
		var edges []Edge
		for i := range p.Tasks {
			for _, d := range ix.deps[i] {
				edges = append(edges, Edge{From: d, To: i})
			}
		}
		lg, _ := newLayered(len(p.Tasks), ix, edges)
		seen := []int{lg.crossings()}
		for range orderRounds {
			for _, down := range []bool{true, false} {
				if slices.Min(seen) > 0 {
					lg.sweep(down)
					seen = append(seen, lg.crossings())
				}
			}
		}
		if seen[len(seen)-1] != slices.Min(seen) {
			nonMonotone++
		}
		assert.Equal(t, slices.Min(seen), Layout(p).Crossings, "crossings after each sweep: %v", seen)
	})
	assert.Positive(t, nonMonotone, "no generated graph has a sweep that makes things worse; the test proves nothing")
}

func TestLayoutDeterministic(t *testing.T) {
	forRandomGraphs(t, func(t *testing.T, p Project) {
		a := Layout(p)
		Layout(randomProject(99, 50, 3, 5)) // nothing of another layout may leak into the next
		assert.Equal(t, a, Layout(p))
	})
}

func TestLayoutIgnoresBadDependencies(t *testing.T) {
	p := Project{Tasks: []Task{
		{ID: "a", DependsOn: []string{"a", "b", "nope"}}, // itself, a later task, an unknown one
		{ID: "b", DependsOn: []string{"a", "a"}},         // twice
	}}
	g := Layout(p)
	assert.Equal(t, []Edge{{From: 0, To: 1, Points: g.Edges[0].Points}}, g.Edges)
	assert.Equal(t, [][]int{{0}, {1}}, g.Layers)
}

func TestLayoutEmpty(t *testing.T) {
	g := Layout(Project{})
	assert.Empty(t, g.Nodes)
	assert.Empty(t, g.Layers)
	assert.Positive(t, g.Width)
}

// TestLayoutSlotBudget: a long chain where every task also depends on the
// first would need a slot per layer per edge (quadratic); past the budget
// the longest edges are drawn straight, so the layout stays linear.
func TestLayoutSlotBudget(t *testing.T) {
	const n = 1500
	p := Project{}
	for i := range n {
		task := Task{ID: fmt.Sprint(i)}
		if i > 0 {
			task.DependsOn = []string{fmt.Sprint(i - 1), "0"}
		}
		p.Tasks = append(p.Tasks, task)
	}
	g := Layout(p)
	slots, straight := 0, 0
	for _, e := range g.Edges {
		slots += (len(e.Points) - 2) / 2
		if len(e.Points) == 2 && g.Nodes[e.To].Layer-g.Nodes[e.From].Layer > 1 {
			straight++
		}
	}
	assert.LessOrEqual(t, slots, slotBudget(n))
	assert.Positive(t, straight)
	assert.Len(t, g.Layers, n)
}

func BenchmarkLayout(b *testing.B) {
	for _, n := range []int{200, 1000, 5000} {
		p := randomProject(1, n, 3, 40)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				Layout(p)
			}
		})
	}
}
