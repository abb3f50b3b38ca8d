package control

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// TestAppendStatusEveryField: for every exported field of DaemonStatus, at
// every depth, appendStatus writes what marshal writes, with the field set
// and in each of its zero and empty forms (nil, empty, a pointer to zero),
// in a reply where nothing else is set and in one where everything else
// is, for every kind of ProjectResponse. A field appendStatus forgets, or
// writes where encoding/json omits it, fails here by its path.
func TestAppendStatusEveryField(t *testing.T) {
	kinds := responseKinds(t)
	root := reflect.TypeFor[api.DaemonStatus]()
	paths := fieldPaths(root, nil, "")
	require.Greater(t, len(paths), 100, "the walk found too few fields")
	failed := map[string]bool{}
	cases := 0
	check := func(name, form string, st reflect.Value) bool {
		cases++
		s := st.Addr().Interface().(*api.DaemonStatus)
		want, werr := marshal(s)
		got, gerr := appendStatus(nil, s)
		if (werr != nil && gerr != nil) || (werr == nil && gerr == nil && string(got) == string(want)) {
			return true
		}
		where := firstDifference(got, want)
		if !failed[where] {
			failed[where] = true
			t.Errorf("%s (case: %s %s)\n appendStatus: %s (%v)\n      marshal: %s (%v)", where, name, form, got, gerr, want, werr)
		}
		return false
	}
	// Each field alone first, so that a field appendStatus gets wrong is
	// named by its own case; then each field's forms among all the others
	// set, when all set is right.
	for _, alone := range []bool{true, false} {
		for _, kind := range kinds {
			f := filler{kind: reflect.ValueOf(kind)}
			if !alone && !check("every field", fmt.Sprintf("set, kind %q", kind), f.full(root)) {
				continue
			}
			for _, p := range paths {
				if p.typ == f.kind.Type() {
					continue // the kind is the case's, not a field to vary
				}
				for _, v := range f.variants(p.typ) {
					st, others := f.zero(root), "alone"
					if !alone {
						st, others = f.full(root), "among every other field set"
					}
					f.at(st, p.steps).Set(v.value)
					check(p.name, fmt.Sprintf("%s, %s, kind %q", v.name, others, kind), st)
				}
			}
		}
	}
	t.Logf("%d fields, %d kinds, %d cases", len(paths), len(kinds), cases)
}

// firstDifference names where the JSON got first differs from want: the
// path of the field ("project.project.completed_tasks") and how.
func firstDifference(got, want []byte) string {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
		return "not both JSON"
	}
	if d := jsonDiff(g, w, "reply"); d != "" {
		return d
	}
	return "same values, different bytes (field order or escaping)"
}

func jsonDiff(g, w any, path string) string {
	switch w := w.(type) {
	case map[string]any:
		g, ok := g.(map[string]any)
		if !ok {
			return path + ": appendStatus writes no object"
		}
		keys := slices.Sorted(maps.Keys(w))
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; !ok {
				return path + "." + k + ": appendStatus writes it, marshal does not"
			}
		}
		for _, k := range keys {
			if _, ok := g[k]; !ok {
				return path + "." + k + ": appendStatus leaves it out"
			}
			if d := jsonDiff(g[k], w[k], path+"."+k); d != "" {
				return d
			}
		}
	case []any:
		g, ok := g.([]any)
		if !ok || len(g) != len(w) {
			return path + ": appendStatus writes another list"
		}
		for i := range w {
			if d := jsonDiff(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	default:
		if !reflect.DeepEqual(g, w) {
			return fmt.Sprintf("%s: appendStatus writes %v, marshal %v", path, g, w)
		}
	}
	return ""
}

// responseKinds is every ResponseKind constant of control/api, read from
// its source so that a new kind is tested without a list to keep.
func responseKinds(t *testing.T) []api.ResponseKind {
	f, err := parser.ParseFile(token.NewFileSet(), "api/wire.go", nil, 0)
	require.NoError(t, err)
	var kinds []api.ResponseKind
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ResponseKind" {
				continue
			}
			for _, v := range vs.Values {
				k, err := strconv.Unquote(v.(*ast.BasicLit).Value)
				require.NoError(t, err)
				kinds = append(kinds, api.ResponseKind(k))
			}
		}
	}
	require.Len(t, kinds, 8, "the kinds of control/api/wire.go")
	return kinds
}

// fieldPath is one field reached from DaemonStatus: its name, its type,
// and the indices of the struct fields on the way. Pointers and slices
// between them are passed through (the first element).
type fieldPath struct {
	name  string
	typ   reflect.Type
	steps []int
}

// fieldPaths lists every exported field of the struct type t and, below
// each field that holds structs (through pointers and slices), its fields.
func fieldPaths(t reflect.Type, steps []int, prefix string) []fieldPath {
	var out []fieldPath
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		p := fieldPath{name: prefix + sf.Name, typ: sf.Type, steps: append(steps[:len(steps):len(steps)], i)}
		out = append(out, p)
		inner, name := sf.Type, p.name
		for inner.Kind() == reflect.Pointer || (inner.Kind() == reflect.Slice && inner.Elem().Kind() != reflect.Uint8) {
			if inner.Kind() == reflect.Slice {
				name += "[0]"
			}
			inner = inner.Elem()
		}
		if inner.Kind() == reflect.Struct {
			out = append(out, fieldPaths(inner, p.steps, name+".")...)
		}
	}
	return out
}

// filler makes values of the wire's types: zero ones, full ones (every
// field at every depth not its zero value), and each field's variants.
// Every ProjectResponse it makes has the case's kind.
type filler struct{ kind reflect.Value }

type variant struct {
	name  string
	value reflect.Value
}

// variants is the forms a field of type t is tried in: its zero value,
// the empty and pointer-to-zero forms omitempty and null treat apart, and
// set.
func (f filler) variants(t reflect.Type) []variant {
	vs := []variant{{"zero", reflect.Zero(t)}}
	switch t.Kind() {
	case reflect.Slice:
		vs = append(vs, variant{"empty", reflect.MakeSlice(t, 0, 0)})
	case reflect.Map:
		vs = append(vs, variant{"empty", reflect.MakeMap(t)})
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(f.zero(t.Elem()))
		vs = append(vs, variant{"pointing at zero", p})
		for _, e := range f.variants(t.Elem())[1:] {
			if e.name != "set" {
				p := reflect.New(t.Elem())
				p.Elem().Set(e.value)
				vs = append(vs, variant{"pointing at " + e.name, p})
			}
		}
	}
	return append(vs, variant{"set", f.full(t)})
}

// zero is t's zero value, with the case's kind in any ProjectResponse it
// holds by value.
func (f filler) zero(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			if ft := t.Field(i).Type; t.Field(i).IsExported() && (ft == f.kind.Type() || ft.Kind() == reflect.Struct) {
				v.Field(i).Set(f.zero(ft))
			}
		}
	}
	if t == f.kind.Type() {
		v.Set(f.kind)
	}
	return v
}

// full is a value of t with every field, at every depth, set.
func (f filler) full(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch {
	case t == f.kind.Type():
		v.Set(f.kind)
	case t == reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(`{"k":[1,"x\"y"]}`))
	case t.Kind() == reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		v.Elem().Set(f.full(t.Elem()))
	case t.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(t, 2, 2))
		for i := range 2 {
			v.Index(i).Set(f.full(t.Elem()))
		}
	case t.Kind() == reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(f.full(t.Key()), f.full(t.Elem()))
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(f.full(t.Field(i).Type))
			}
		}
	case t.Kind() == reflect.String:
		v.SetString("q\"b\\s\n\x01<é>\u2028")
	case t.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.CanUint():
		v.SetUint(math.MaxUint64 >> (64 - t.Bits()))
	case v.CanInt():
		v.SetInt(math.MinInt64 >> (64 - t.Bits()))
	case v.CanFloat():
		v.SetFloat(1.5)
	default:
		panic("filler: no value for " + t.String())
	}
	return v
}

// at is the field the steps reach from the struct v, allocating what is
// nil or empty on the way.
func (f filler) at(v reflect.Value, steps []int) reflect.Value {
	for i, s := range steps {
		v = v.Field(s)
		if i == len(steps)-1 {
			return v
		}
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice {
			if v.Kind() == reflect.Pointer {
				if v.IsNil() {
					v.Set(reflect.New(v.Type().Elem()))
					v.Elem().Set(f.zero(v.Type().Elem()))
				}
				v = v.Elem()
				continue
			}
			if v.Len() == 0 {
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
				v.Index(0).Set(f.zero(v.Type().Elem()))
			}
			v = v.Index(0)
		}
	}
	return v
}
