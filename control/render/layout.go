package render

import (
	"cmp"
	"slices"
)

// Graph is the layered layout of a project's tasks. Coordinates are whole
// pixels (SVG user units), y growing downwards; dependencies are above
// their dependants.
type Graph struct {
	// Nodes holds one node per task, in the order of Project.Tasks.
	Nodes []Node
	// Layers lists, for each layer from the top, the indices into Nodes of
	// its tasks, left to right.
	Layers [][]int
	// Edges holds one edge per kept dependency, by dependant in task order,
	// then in DependsOn order.
	Edges []Edge
	// Width and Height of the drawing, margins included.
	Width, Height int
	// Crossings counts the pairs of edge segments that cross between
	// adjacent layers (long edges drawn straight, see Edge, not counted).
	Crossings int
}

// Node is one task's box.
type Node struct {
	Task Task
	// Layer is the length of the longest dependency chain below the task
	// (0: no dependencies); Order its index in Graph.Layers[Layer].
	Layer, Order int
	// X, Y is the box's top-left corner; W, H its size.
	X, Y, W, H int
}

// Edge is one dependency, drawn from the dependency (From, an index into
// Graph.Nodes) to the dependant (To).
type Edge struct {
	From, To int
	// Points runs from the bottom centre of From to the top centre of To.
	// An edge spanning several layers goes through a slot in each layer it
	// crosses (two points per layer: the slot's top and bottom), unless the
	// graph's budget of such slots ran out; then it has only its two ends.
	Points []Point
}

// Point is a position in pixels.
type Point struct{ X, Y int }

// Sizes of the layout, in pixels.
const (
	NodeWidth  = 200
	NodeHeight = 48
	nodeGap    = 24 // between two boxes of a layer
	slotWidth  = 12 // the width a long edge takes in a layer it crosses
	slotGap    = 12 // between a slot and its neighbour
	layerGap   = 56 // between two layers
	margin     = 20

	orderRounds = 4 // barycenter rounds, each a sweep down then up
	placeRounds = 4 // coordinate rounds, each a pass down then up
)

// slotBudget is how many slots long edges may take in all, so that a
// pathological graph (a long chain, each task also depending on the first)
// stays linear in size: shortest edges get their slots first.
func slotBudget(tasks int) int { return 8*tasks + 1024 }

// Layout computes the layered layout of p's tasks (see the package doc for
// the algorithm). The same tasks always give the same Graph.
func Layout(p Project) Graph {
	ix := indexTasks(p.Tasks)
	n := len(p.Tasks)
	g := Graph{Nodes: make([]Node, n)}
	if n == 0 {
		g.Width, g.Height = 2*margin, 2*margin
		return g
	}

	for i, t := range p.Tasks {
		g.Nodes[i] = Node{Task: t, W: NodeWidth, H: NodeHeight}
		for _, d := range ix.deps[i] {
			g.Edges = append(g.Edges, Edge{From: d, To: i})
		}
	}
	lg, slots := newLayered(n, ix, g.Edges)
	layers := len(lg.order)
	for v := range g.Nodes {
		g.Nodes[v].Layer = lg.layer[v]
	}

	g.Crossings = lg.orderLayers()
	lg.place()

	// Shift everything right of the left margin.
	left := lg.x[0] - lg.width[0]/2
	right := left
	for v := range lg.x {
		left = min(left, lg.x[v]-lg.width[v]/2)
		right = max(right, lg.x[v]+lg.width[v]/2)
	}
	shift := margin - left
	g.Width = right - left + 2*margin
	g.Height = 2*margin + layers*NodeHeight + (layers-1)*layerGap
	top := func(l int) int { return margin + l*(NodeHeight+layerGap) }

	g.Layers = make([][]int, layers)
	for l, vs := range lg.order {
		for _, v := range vs {
			if v < n {
				g.Nodes[v].Order = len(g.Layers[l])
				g.Layers[l] = append(g.Layers[l], v)
			}
		}
	}
	for v := range g.Nodes {
		g.Nodes[v].X = lg.x[v] + shift - NodeWidth/2
		g.Nodes[v].Y = top(g.Nodes[v].Layer)
	}
	for e := range g.Edges {
		from, to := g.Edges[e].From, g.Edges[e].To
		pts := make([]Point, 0, 2+2*len(slots[e]))
		pts = append(pts, Point{lg.x[from] + shift, top(lg.layer[from]) + NodeHeight})
		for _, s := range slots[e] {
			x := lg.x[s] + shift
			pts = append(pts, Point{x, top(lg.layer[s])}, Point{x, top(lg.layer[s]) + NodeHeight})
		}
		pts = append(pts, Point{lg.x[to] + shift, top(lg.layer[to])})
		g.Edges[e].Points = pts
	}
	return g
}

// newLayered builds the working graph of n tasks: each task in its layer
// (longest-path layering), in task order within it; each edge spanning
// several layers routed through one slot per layer it crosses (slots[e],
// top down), shortest edges first while slotBudget lasts. The positions
// are set, the coordinates not yet.
func newLayered(n int, ix taskIndex, edges []Edge) (*layered, [][]int) {
	lg := &layered{tasks: n}
	layers := 0
	for i := range n {
		l := 0
		for _, d := range ix.deps[i] {
			l = max(l, lg.layer[d]+1)
		}
		lg.add(l, NodeWidth)
		layers = max(layers, l+1)
	}
	lg.order = make([][]int, layers)
	for v := range n {
		lg.order[lg.layer[v]] = append(lg.order[lg.layer[v]], v)
	}

	slots := make([][]int, len(edges))
	byspan := make([]int, len(edges))
	for e := range byspan {
		byspan[e] = e
	}
	span := func(e int) int { return lg.layer[edges[e].To] - lg.layer[edges[e].From] }
	slices.SortStableFunc(byspan, func(a, b int) int { return cmp.Compare(span(a), span(b)) })
	budget := slotBudget(n)
	for _, e := range byspan {
		from, to := edges[e].From, edges[e].To
		need := span(e) - 1
		if need == 0 {
			lg.link(from, to)
			continue
		}
		if need > budget {
			continue
		}
		budget -= need
		prev := from
		for l := lg.layer[from] + 1; l < lg.layer[to]; l++ {
			s := lg.add(l, slotWidth)
			lg.order[l] = append(lg.order[l], s)
			lg.link(prev, s)
			slots[e] = append(slots[e], s)
			prev = s
		}
		lg.link(prev, to)
	}
	lg.sortNeighbours()
	lg.setPositions()
	return lg, slots
}

// layered is the working graph of the layout: the tasks (vertices 0 to
// n-1) and the slots of long edges (n and up), each in one layer, with
// edges only between adjacent layers.
type layered struct {
	tasks    int // vertices below this are tasks, the others slots
	layer    []int
	width    []int
	up, down [][]int // neighbours in the layer above and below
	order    [][]int // per layer, its vertices left to right
	pos      []int   // each vertex's index in its layer's order
	x        []int   // each vertex's centre
}

func (lg *layered) add(layer, width int) int {
	lg.layer = append(lg.layer, layer)
	lg.width = append(lg.width, width)
	lg.up = append(lg.up, nil)
	lg.down = append(lg.down, nil)
	return len(lg.layer) - 1
}

func (lg *layered) isSlot(v int) bool { return v >= lg.tasks }

func (lg *layered) link(upper, lower int) {
	lg.down[upper] = append(lg.down[upper], lower)
	lg.up[lower] = append(lg.up[lower], upper)
}

// sortNeighbours puts every adjacency list in vertex order, so that the
// order of the work below never depends on the order edges were routed.
func (lg *layered) sortNeighbours() {
	for v := range lg.up {
		slices.Sort(lg.up[v])
		slices.Sort(lg.down[v])
	}
}

func (lg *layered) setPositions() {
	if lg.pos == nil {
		lg.pos = make([]int, len(lg.layer))
	}
	for _, vs := range lg.order {
		for i, v := range vs {
			lg.pos[v] = i
		}
	}
}

// orderLayers runs the barycenter sweeps and keeps the order with the
// fewest crossings (the first one met among equals, the initial order
// included). It returns that count.
func (lg *layered) orderLayers() int {
	best := lg.crossings()
	if best == 0 {
		return 0
	}
	saved := cloneOrder(lg.order)
	for range orderRounds {
		for _, down := range []bool{true, false} {
			lg.sweep(down)
			if c := lg.crossings(); c < best {
				best = c
				copyOrder(saved, lg.order)
			}
			if best == 0 {
				break
			}
		}
		if best == 0 {
			break
		}
	}
	copyOrder(lg.order, saved)
	lg.setPositions()
	return best
}

// sweep reorders every layer by the barycenter of its vertices'
// neighbours in the layer before it: going down, the layer above.
func (lg *layered) sweep(down bool) {
	if down {
		for l := 1; l < len(lg.order); l++ {
			lg.reorder(l, lg.up)
		}
		return
	}
	for l := len(lg.order) - 2; l >= 0; l-- {
		lg.reorder(l, lg.down)
	}
}

// reorder sorts layer l by barycenter: the mean position of each vertex's
// neighbours in nb. Vertices without neighbours there keep their place;
// ties keep the current order. The means are compared as fractions, in
// integers, so the result does not depend on floating point.
func (lg *layered) reorder(l int, nb [][]int) {
	vs := lg.order[l]
	type bary struct{ v, sum, cnt int }
	var moving []bary
	for _, v := range vs {
		if len(nb[v]) == 0 {
			continue
		}
		b := bary{v: v, cnt: len(nb[v])}
		for _, u := range nb[v] {
			b.sum += lg.pos[u]
		}
		moving = append(moving, b)
	}
	slices.SortFunc(moving, func(a, b bary) int {
		if c := cmp.Compare(a.sum*b.cnt, b.sum*a.cnt); c != 0 {
			return c
		}
		return cmp.Compare(lg.pos[a.v], lg.pos[b.v])
	})
	next := 0
	for i, v := range vs {
		if len(nb[v]) == 0 {
			continue
		}
		vs[i] = moving[next].v
		next++
	}
	for i, v := range vs {
		lg.pos[v] = i
	}
}

// crossings counts the crossing pairs of edges between adjacent layers,
// by counting inversions with a Fenwick tree (Barth, Jünger and Mutzel).
func (lg *layered) crossings() int {
	total := 0
	var seq, tree []int
	for l := 0; l+1 < len(lg.order); l++ {
		seq = seq[:0]
		for _, u := range lg.order[l] {
			start := len(seq)
			for _, v := range lg.down[u] {
				seq = append(seq, lg.pos[v])
			}
			slices.Sort(seq[start:])
		}
		size := len(lg.order[l+1])
		tree = slices.Grow(tree[:0], size+1)[:size+1]
		clear(tree)
		for seen, p := range seq {
			// Earlier entries greater than p cross this edge.
			le := 0
			for i := p + 1; i > 0; i -= i & -i {
				le += tree[i]
			}
			total += seen - le
			for i := p + 1; i <= size; i += i & -i {
				tree[i]++
			}
		}
	}
	return total
}

// place sets the x of every vertex: each layer packed left to right, then
// rounds of passes in which each layer, in turn, moves its vertices as
// close as its order and spacing allow to the mean x of their neighbours
// in the layer just placed.
func (lg *layered) place() {
	lg.x = make([]int, len(lg.layer))
	for _, vs := range lg.order {
		c := lg.offsets(vs)
		for i, v := range vs {
			lg.x[v] = c[i] - c[len(c)-1]/2
		}
	}
	var want []int
	pass := func(l int, nb [][]int) {
		vs := lg.order[l]
		want = want[:0]
		for _, v := range vs {
			if len(nb[v]) == 0 {
				want = append(want, lg.x[v])
				continue
			}
			sum := 0
			for _, u := range nb[v] {
				sum += lg.x[u]
			}
			want = append(want, floorDiv(sum, len(nb[v])))
		}
		lg.fit(vs, want)
	}
	for range placeRounds {
		for l := 1; l < len(lg.order); l++ {
			pass(l, lg.up)
		}
		for l := len(lg.order) - 2; l >= 0; l-- {
			pass(l, lg.down)
		}
	}
}

// offsets returns, for the vertices of one layer in order, the centre of
// each when packed as tightly as the spacing allows from 0.
func (lg *layered) offsets(vs []int) []int {
	c := make([]int, len(vs))
	for i := 1; i < len(vs); i++ {
		a, b := vs[i-1], vs[i]
		gap := nodeGap
		if lg.isSlot(a) || lg.isSlot(b) {
			gap = slotGap
		}
		c[i] = c[i-1] + (lg.width[a]+lg.width[b])/2 + gap
	}
	return c
}

// fit sets the centres of one layer's vertices to the positions closest to
// want (least squares, slots weighing twice a task so long edges run
// straight) that keep their order and spacing: with c the packed offsets,
// x[i] - c[i] must not decrease, which the pool-adjacent-violators
// algorithm solves exactly in one pass.
func (lg *layered) fit(vs, want []int) {
	c := lg.offsets(vs)
	type block struct{ sum, weight, first int }
	blocks := make([]block, 0, len(vs))
	for i, v := range vs {
		w := 1
		if lg.isSlot(v) {
			w = 2
		}
		b := block{sum: w * (want[i] - c[i]), weight: w, first: i}
		for len(blocks) > 0 {
			last := blocks[len(blocks)-1]
			if last.sum*b.weight <= b.sum*last.weight {
				break
			}
			b = block{sum: last.sum + b.sum, weight: last.weight + b.weight, first: last.first}
			blocks = blocks[:len(blocks)-1]
		}
		blocks = append(blocks, b)
	}
	for k, b := range blocks {
		end := len(vs)
		if k+1 < len(blocks) {
			end = blocks[k+1].first
		}
		base := floorDiv(b.sum, b.weight)
		for i := b.first; i < end; i++ {
			lg.x[vs[i]] = base + c[i]
		}
	}
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func cloneOrder(o [][]int) [][]int {
	c := make([][]int, len(o))
	for l := range o {
		c[l] = slices.Clone(o[l])
	}
	return c
}

func copyOrder(dst, src [][]int) {
	for l := range src {
		copy(dst[l], src[l])
	}
}
