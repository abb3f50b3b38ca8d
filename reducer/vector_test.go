package reducer

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkVector compares v with its model element by element, through Get,
// Slice and All.
func checkVector(t *testing.T, what string, v vector[int], model []int) {
	t.Helper()
	require.Equal(t, len(model), v.Len(), "%s: Len", what)
	if len(model) == 0 {
		require.Empty(t, v.Slice(), "%s: Slice", what)
	} else {
		require.Equal(t, model, v.Slice(), "%s: Slice", what)
	}
	for i, x := range model {
		if v.Get(i) != x {
			require.Equal(t, x, v.Get(i), "%s: Get(%d)", what, i)
		}
	}
}

// TestVectorVersionsNeverChange runs random Sets and Appends from random
// versions, some with no edit token and some as one fold with a token of
// their own, across the sizes where the trie grows a level (32, 1,024,
// 32,768). Every version kept (the end of each fold, and each version made
// without a token) must still hold what it held when it was made.
func TestVectorVersionsNeverChange(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	type version struct {
		v     vector[int]
		model []int
	}
	kept := []version{{}}
	next := 0
	for round := range 160 {
		// Mostly grow the largest version, to reach three levels.
		base := kept[len(kept)-1]
		if r.IntN(3) == 0 {
			base = kept[r.IntN(len(kept))]
		}
		var e *edit
		if round%2 == 0 {
			e = new(edit)
		}
		cur := version{base.v, slices.Clone(base.model)}
		for range r.IntN(700) {
			if len(cur.model) == 0 || r.IntN(3) > 0 {
				next++
				cur.v, cur.model = cur.v.Append(next, e), append(cur.model, next)
			} else {
				next++
				i := r.IntN(len(cur.model))
				cur.v, cur.model[i] = cur.v.Set(i, next, e), next
			}
			if e == nil && r.IntN(50) == 0 {
				kept = append(kept, version{cur.v, slices.Clone(cur.model)})
			}
		}
		kept = append(kept, version{cur.v, slices.Clone(cur.model)})
		checkVector(t, "the base after a fold from it", base.v, base.model)
	}
	largest := 0
	for _, k := range kept {
		checkVector(t, "kept version", k.v, k.model)
		largest = max(largest, k.v.Len())
	}
	require.Greater(t, largest, 32*32, "the trie reached three levels")
}

// TestVectorFoldChangesOnlyItsOwnNodes: a fold's Sets change in place what
// the fold copied, and nothing of the version it started from, at every
// level boundary.
func TestVectorFoldChangesOnlyItsOwnNodes(t *testing.T) {
	for _, n := range []int{1, 31, 32, 33, 1023, 1024, 1025, 32768, 32769} {
		model := make([]int, n)
		for i := range model {
			model[i] = i
		}
		v := vectorOf(model)
		checkVector(t, "built", v, model)

		e := new(edit)
		w := v
		for i := 0; i < n; i += max(1, n/97) {
			w = w.Set(i, -i-1, e)
		}
		w = w.Append(-1, e)
		checkVector(t, "the version the fold started from", v, model)
		for i := 0; i < n; i += max(1, n/97) {
			require.Equal(t, -i-1, w.Get(i))
		}
		require.Equal(t, n+1, w.Len())
		require.Equal(t, -1, w.Get(n))

		// The same Sets without a token leave w alone too.
		u := w.Set(0, 42, nil)
		require.Equal(t, -1, w.Get(0))
		require.Equal(t, 42, u.Get(0))
	}
}

// TestVectorFoldCopiesAPathOnce: the point of a fold, counted in nodes
// allocated. Without a token, every Set copies its path; with one, the
// second Set under the same branch copies nothing.
func TestVectorFoldCopiesAPathOnce(t *testing.T) {
	xs := make([]int, 40_000)
	v := vectorOf(xs)
	e := new(edit)
	w := v.Set(100, 1, e)
	allocs := testing.AllocsPerRun(100, func() { w = w.Set(101, 2, e) })
	require.Zero(t, allocs, "a Set on a path the fold owns allocates nothing")
	allocs = testing.AllocsPerRun(100, func() { w = w.Set(101, 2, nil) })
	require.Equal(t, float64(4), allocs, "a Set without a token copies the path: 3 branches and a leaf")
}

func TestVectorIndexOutOfRange(t *testing.T) {
	var v vector[int]
	require.Panics(t, func() { v.Get(0) })
	require.Panics(t, func() { v.Set(0, 1, nil) })
	v = v.Append(1, nil)
	require.Panics(t, func() { v.Get(1) })
	require.Panics(t, func() { v.Get(-1) })
}
