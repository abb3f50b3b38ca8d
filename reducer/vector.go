package reducer

// vector is a persistent vector, the collection that holds a project's
// tasks, runs and approvals in order: a trie of 32-way nodes indexed by
// the bits of an element's position (Bagwell's and Hickey's design, as in
// Clojure). Get is O(log32 n); Set and Append return a new vector that
// shares every node but the path to the element they change, so a version
// a reader holds is never changed.
//
// Copying that path, a few 32-slot nodes, is what one event costs a
// project, and most of what it allocates. A Fold runs many events with one
// edit token: a node stamped with the token being used was copied by that
// fold, is reachable from no version anyone else holds, and is changed in
// place, so a path is copied once per fold instead of once per event
// (Clojure's transients). A nil token copies always.
type vector[T any] struct {
	root  *vnode[T] // nil while empty
	size  int
	shift uint // bits of the index below the root: 0 when the root is a leaf
}

// edit is the token that owns the nodes one fold copied. It has a field so
// that every new(edit) is a distinct pointer.
type edit struct{ _ byte }

const (
	vbits  = 5
	vwidth = 1 << vbits
	vmask  = vwidth - 1
)

// vnode is a branch (kids) or a leaf (vals), one allocation with its slots.
type vnode[T any] struct {
	edit *edit
	kids []*vnode[T]
	vals []T
}

type vbranch[T any] struct {
	vnode[T]
	slots [vwidth]*vnode[T]
}

type vleaf[T any] struct {
	vnode[T]
	slots [vwidth]T
}

func newVnode[T any](leaf bool, e *edit) *vnode[T] {
	if leaf {
		l := &vleaf[T]{}
		l.edit, l.vals = e, l.slots[:]
		return &l.vnode
	}
	b := &vbranch[T]{}
	b.edit, b.kids = e, b.slots[:]
	return &b.vnode
}

// own returns n to change under e: n itself when e stamped it, else a copy
// stamped e (a new node when n is nil).
func (n *vnode[T]) own(leaf bool, e *edit) *vnode[T] {
	if n != nil && e != nil && n.edit == e {
		return n
	}
	m := newVnode[T](leaf, e)
	if n != nil {
		copy(m.kids, n.kids)
		copy(m.vals, n.vals)
	}
	return m
}

// Len is the number of elements.
func (v vector[T]) Len() int { return v.size }

// Get returns element i, which must be below Len.
func (v vector[T]) Get(i int) T {
	if i < 0 || i >= v.size {
		panic("reducer: vector index out of range")
	}
	n := v.root
	for s := v.shift; s > 0; s -= vbits {
		n = n.kids[(i>>s)&vmask]
	}
	return n.vals[i&vmask]
}

// Set returns v with element i, which must be below Len, replaced by x.
func (v vector[T]) Set(i int, x T, e *edit) vector[T] {
	if i < 0 || i >= v.size {
		panic("reducer: vector index out of range")
	}
	v.root = v.root.put(v.shift, i, x, e)
	return v
}

// Append returns v with x added at the end.
func (v vector[T]) Append(x T, e *edit) vector[T] {
	if v.root != nil && v.size == vwidth<<v.shift {
		// Full: the old root becomes the first child of a new one.
		r := newVnode[T](false, e)
		r.kids[0] = v.root
		v.root, v.shift = r, v.shift+vbits
	}
	v.root = v.root.put(v.shift, v.size, x, e)
	v.size++
	return v
}

// put sets slot i of the subtree n, whose indices have shift bits below
// its own, copying what e does not own.
func (n *vnode[T]) put(shift uint, i int, x T, e *edit) *vnode[T] {
	m := n.own(shift == 0, e)
	if shift == 0 {
		m.vals[i&vmask] = x
		return m
	}
	j := (i >> shift) & vmask
	m.kids[j] = m.kids[j].put(shift-vbits, i, x, e)
	return m
}

// All calls f with each element in order.
func (v vector[T]) All(f func(T)) {
	if v.root != nil {
		v.root.each(v.shift, &v.size, f)
	}
}

func (n *vnode[T]) each(shift uint, left *int, f func(T)) {
	if shift == 0 {
		for _, x := range n.vals[:min(*left, vwidth)] {
			f(x)
		}
		*left -= min(*left, vwidth)
		return
	}
	for _, k := range n.kids {
		if k == nil || *left == 0 {
			return
		}
		k.each(shift-vbits, left, f)
	}
}

// Slice copies the elements out, in order.
func (v vector[T]) Slice() []T {
	out := make([]T, 0, v.size)
	v.All(func(x T) { out = append(out, x) })
	return out
}

// vectorOf is a vector of xs, built in place under an edit token of its
// own.
func vectorOf[T any](xs []T) vector[T] {
	var v vector[T]
	e := new(edit)
	for _, x := range xs {
		v = v.Append(x, e)
	}
	return v
}
