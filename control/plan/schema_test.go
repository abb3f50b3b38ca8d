package plan

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

var update = flag.Bool("update", false, "write docs/plan.schema.json from the reducer's limits")

const schemaFile = "../../docs/plan.schema.json"

// The schema in docs is the one Schema renders from the reducer's
// constants: a limit changed there without the file fails here.
func TestSchemaFileIsUpToDate(t *testing.T) {
	want := Schema()
	if *update {
		require.NoError(t, os.WriteFile(schemaFile, want, 0o644))
	}
	got, err := os.ReadFile(schemaFile)
	require.NoError(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/plan.schema.json is not the schema of the reducer's limits; refresh it with\n\tgo test ./control/plan -run TestSchemaFileIsUpToDate -update\n%s",
			diff.Diff("docs/plan.schema.json", got, "plan.Schema()", want))
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("plan.schema.json", doc))
	s, err := c.Compile("plan.schema.json")
	require.NoError(t, err)
	return s
}

func treeOf(t *testing.T, data []byte) any {
	t.Helper()
	tree, err := parseTree(data)
	require.NoError(t, err)
	return tree
}

func TestSchemaAcceptsTheTestdataPlans(t *testing.T) {
	s := compileSchema(t)
	for _, name := range []string{"testdata/plan.yaml", "testdata/plan.json"} {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		assert.NoError(t, s.Validate(treeOf(t, data)), name)
	}
	var b bytes.Buffer
	require.NoError(t, Write(&b, testdataPlan, JSON))
	assert.NoError(t, s.Validate(treeOf(t, b.Bytes())))
}

// Whatever Parse refuses as not a plan, of what reads as YAML or JSON at
// all, the schema refuses too.
func TestSchemaRefusesWhatParseRefuses(t *testing.T) {
	s := compileSchema(t)
	n := 0
	for _, c := range refusals {
		tree, err := parseTree([]byte(c.file))
		if err != nil {
			continue // not YAML or JSON: no tree to validate
		}
		n++
		_, err = Parse(strings.NewReader(c.file))
		require.Error(t, err, c.name)
		assert.Error(t, s.Validate(tree), c.name)
	}
	assert.Greater(t, n, 20)
}

// The schema's limits are the reducer's: one past each is refused, each
// at its limit is not.
func TestSchemaHasTheReducersLimits(t *testing.T) {
	s := compileSchema(t)
	task := func(field string, v any) any {
		return map[string]any{"version": jsonNumber(1), "tasks": []any{map[string]any{"key": "a", "title": "A", field: v}}}
	}
	list := func(n int, each string) []any {
		l := make([]any, n)
		for i := range l {
			l[i] = fmt.Sprintf("%s%d", each, i)
		}
		return l
	}
	for _, c := range []struct {
		field    string
		ok, over any
	}{
		{"key", strings.Repeat("k", reducer.MaxPlanKeyLen), strings.Repeat("k", reducer.MaxPlanKeyLen+1)},
		{"title", strings.Repeat("é", reducer.MaxNameLen), strings.Repeat("é", reducer.MaxNameLen+1)},
		{"description", strings.Repeat("d", reducer.MaxDescriptionLen), strings.Repeat("d", reducer.MaxDescriptionLen+1)},
		{"acceptance", strings.Repeat("a", reducer.MaxAcceptanceLen), strings.Repeat("a", reducer.MaxAcceptanceLen+1)},
		{"parent", strings.Repeat("p", reducer.MaxPlanKeyLen), strings.Repeat("p", reducer.MaxPlanKeyLen+1)},
		{"priority", jsonNumber(reducer.MaxPriority), jsonNumber(reducer.MaxPriority + 1)},
		{"priority", jsonNumber(reducer.MinPriority), jsonNumber(reducer.MinPriority - 1)},
		{"labels", list(reducer.MaxLabels, "l"), list(reducer.MaxLabels+1, "l")},
		{"labels", []any{strings.Repeat("l", reducer.MaxLabelLen)}, []any{strings.Repeat("l", reducer.MaxLabelLen+1)}},
		{"depends_on", list(reducer.MaxDependsOn, "d"), list(reducer.MaxDependsOn+1, "d")},
		{"depends_on", []any{strings.Repeat("d", reducer.MaxPlanKeyLen)}, []any{strings.Repeat("d", reducer.MaxPlanKeyLen+1)}},
	} {
		assert.NoError(t, s.Validate(task(c.field, c.ok)), c.field)
		assert.Error(t, s.Validate(task(c.field, c.over)), c.field)
	}
	tasks := func(n int) any {
		l := make([]any, n)
		for i := range l {
			l[i] = map[string]any{"key": fmt.Sprint(i), "title": "T"}
		}
		return map[string]any{"version": jsonNumber(1), "tasks": l}
	}
	assert.NoError(t, s.Validate(tasks(reducer.MaxPlanTasks)))
	assert.Error(t, s.Validate(tasks(reducer.MaxPlanTasks+1)))
}

func jsonNumber(n int) json.Number { return json.Number(strconv.Itoa(n)) }
