package plan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

func ptr(n int) *int { return &n }

// testdataPlan is testdata/plan.yaml and testdata/plan.json.
var testdataPlan = &File{Version: 1, Tasks: []Task{
	{
		Key:         "storage",
		Title:       "Store the ledger",
		Description: "Everything the daemon keeps, in SQLite.\n\n- events\n- snapshots\n",
		Priority:    ptr(1),
		Labels:      []string{"db"},
	},
	{
		Key:         "schema",
		Title:       "Write the schema",
		Description: "The tables of events and snapshots.",
		Acceptance:  "the migration tests pass",
		Priority:    ptr(0),
		Labels:      []string{"db", "sql"},
		Parent:      "storage",
	},
	{Key: "queries", Title: "Write the queries", Parent: "storage", DependsOn: []string{"schema"}},
}}

func parseFile(t *testing.T, path string) (*File, error) {
	t.Helper()
	r, err := os.Open(path)
	require.NoError(t, err)
	defer r.Close()
	return Parse(r)
}

func TestParseYAMLAndJSONGiveTheSamePlan(t *testing.T) {
	y, err := parseFile(t, "testdata/plan.yaml")
	require.NoError(t, err)
	j, err := parseFile(t, "testdata/plan.json")
	require.NoError(t, err)
	assert.Equal(t, testdataPlan, y)
	assert.Equal(t, testdataPlan, j)
}

func TestItems(t *testing.T) {
	items := testdataPlan.Items()
	require.Len(t, items, 3)
	assert.Equal(t, reducer.PlanItem{
		Key: "schema", Title: "Write the schema", Description: "The tables of events and snapshots.",
		Acceptance: "the migration tests pass", Priority: ptr(0), Labels: []string{"db", "sql"}, Parent: "storage",
	}, items[1])
	assert.Equal(t, reducer.PlanItem{Key: "queries", Title: "Write the queries", Parent: "storage", DependsOn: []string{"schema"}}, items[2])
}

// awkward are texts that YAML reads as something else unless quoted,
// or that a block scalar cannot hold as they are.
var awkward = []string{
	"yes", "no", "true", "null", "~", "123", "1.5", "0x1F", "2026-03-02", "", " ", "-", "- item", "? q", ": x",
	"# not a comment", "key: value", "a # b", "[a, b]", "{a: b}", "*alias", "&anchor", "!tag", "|", ">", "@at", "`tick`",
	"'single'", `"double"`, `back\slash`, "percent %", " leading", "trailing ", "tab\there", "\ttab first",
	"line one\nline two", "ends with newline\n", "ends with two\n\n", "\nstarts with newline", "  indented\nnot",
	"trailing space \nnext", "crlf\r\nline", "émoji 🎉 and 漢字", "\u2028separator", "<b>&amp;</b>",
	strings.Repeat("a long line ", 50), strings.Repeat("a long line ", 50) + "\n" + strings.Repeat("and another ", 50),
}

func TestWriteThenParseGivesTheSameFile(t *testing.T) {
	files := map[string]*File{
		"testdata": testdataPlan,
		"empty":    {Version: 1},
		"minimal":  {Version: 1, Tasks: []Task{{Key: "a", Title: "A"}}},
	}
	var tricky File
	tricky.Version = 1
	for i, s := range awkward {
		tricky.Tasks = append(tricky.Tasks, Task{
			Key: fmt.Sprintf("k%d", i) + strings.TrimSpace(s), Title: "t" + s, Description: s, Acceptance: s,
			Priority: ptr(i % 5), Labels: []string{s, "x" + s}, Parent: s, DependsOn: []string{s},
		})
	}
	files["awkward"] = &tricky
	for name, f := range files {
		for _, format := range []Format{YAML, JSON, ""} {
			t.Run(name+"/"+string(format), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "plan")
				w, err := os.Create(path)
				require.NoError(t, err)
				require.NoError(t, Write(w, f, format))
				require.NoError(t, w.Close())
				got, err := parseFile(t, path)
				require.NoError(t, err)
				assert.Equal(t, f, got)
			})
		}
	}
}

// An empty plan is written with its list of tasks (TestTheDocsExample
// has a plan of three).
func TestWriteAnEmptyPlan(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Write(&b, &File{Version: 1}, YAML))
	assert.Equal(t, "version: 1\ntasks: []\n", b.String())
	b.Reset()
	require.NoError(t, Write(&b, &File{Version: 1}, JSON))
	assert.Equal(t, "{\n  \"version\": 1,\n  \"tasks\": []\n}\n", b.String())
}

func TestWriteRefusesAnUnknownFormat(t *testing.T) {
	var b bytes.Buffer
	assert.ErrorContains(t, Write(&b, testdataPlan, "toml"), `unknown format "toml"`)
	assert.Zero(t, b.Len())
}

// refusals are files Parse refuses, and what its error says. The schema
// refuses each too (TestSchemaRefusesWhatParseRefuses).
var refusals = []struct {
	name, file string
	want       []string
}{
	{"empty", "", []string{"empty file"}},
	{"a string", "hello", []string{"not a plan: want an object with version and tasks, got a string"}},
	{"a list", "- a\n- b\n", []string{"not a plan", "got a list"}},
	{"JSON list", "[1]", []string{"not a plan", "got a list"}},
	{"YAML syntax", "version: 1\ntasks: [a\n", []string{"yaml: line"}},
	{"JSON syntax", "{\"version\": 1,\n  \"tasks\": [}\n", []string{"JSON line 2, column 13", "invalid character '}'"}},
	{"JSON cut short", `{"version": 1, "tasks": [`, []string{"JSON line 1", "unexpected EOF"}},
	{"JSON two values", `{"version": 1, "tasks": []} {}`, []string{"more than one JSON value"}},
	{"YAML two documents", "version: 1\ntasks: []\n---\nversion: 1\n", []string{"more than one YAML document"}},
	{"JSON field twice", "{\"version\": 1,\n\"version\": 1, \"tasks\": []}", []string{`JSON line 2`, `field "version" given twice`}},
	{"YAML field twice", "version: 1\ntasks:\n  - key: a\n    title: A\n    title: B\n", []string{`YAML line 5: field "title" given twice`}},
	{"anchor", "version: 1\ntasks:\n  - &t {key: a, title: A}\n  - *t\n", []string{"YAML line 3: anchors and aliases"}},
	{"no version", "tasks: []\n", []string{"version is missing (want 1)"}},
	{"version 2", "version: 2\ntasks: []\n", []string{"version: want 1, got 2"}},
	{"version text", "version: one\ntasks: []\n", []string{"version: want 1, got a string"}},
	{"no tasks", "version: 1\n", []string{"tasks is missing"}},
	{"tasks not a list", "version: 1\ntasks: {}\n", []string{"tasks: want a list, got an object"}},
	{"unknown top field", "version: 1\ntasks: []\nowner: me\n", []string{`unknown field "owner"`}},
	{"task not an object", "version: 1\ntasks: [a]\n", []string{"tasks[0]: want an object, got a string"}},
	{"unknown task field", "version: 1\ntasks:\n  - {key: a, title: A}\n  - {key: b, title: B, prio: 1}\n", []string{`tasks[1] (key "b"): unknown field "prio"`}},
	{"no key", "version: 1\ntasks:\n  - title: A\n", []string{"tasks[0]: key is missing"}},
	{"no title", "version: 1\ntasks:\n  - key: a\n", []string{`tasks[0] (key "a"): title is missing`}},
	{"key a number", "version: 1\ntasks:\n  - {key: 12, title: A}\n", []string{"tasks[0]: key: want a string, got a number"}},
	{"title null", "version: 1\ntasks:\n  - key: a\n    title:\n", []string{`tasks[0] (key "a"): title: want a string, got null`}},
	{"title a boolean", "version: 1\ntasks:\n  - {key: a, title: true}\n", []string{"title: want a string, got a boolean"}},
	{"description a list", "version: 1\ntasks:\n  - {key: a, title: A, description: [x]}\n", []string{"description: want a string, got a list"}},
	{"acceptance an object", "version: 1\ntasks:\n  - {key: a, title: A, acceptance: {x: 1}}\n", []string{"acceptance: want a string, got an object"}},
	{"parent a number", `{"version": 1, "tasks": [{"key": "a", "title": "A", "parent": 3}]}`, []string{`tasks[0] (key "a"): parent: want a string, got a number`}},
	{"priority a word", "version: 1\ntasks:\n  - {key: a, title: A, priority: high}\n", []string{`tasks[0] (key "a"): priority: want an integer, got a string`}},
	{"priority a fraction", "version: 1\ntasks:\n  - {key: a, title: A, priority: 1.5}\n", []string{"priority: want an integer, got 1.5"}},
	{"priority huge", `{"version": 1, "tasks": [{"key": "a", "title": "A", "priority": 1e300}]}`, []string{"priority: 1e300 is out of range"}},
	{"labels a string", "version: 1\ntasks:\n  - {key: a, title: A, labels: db}\n", []string{"labels: want a list of strings, got a string"}},
	{"a label a number", "version: 1\ntasks:\n  - {key: a, title: A, labels: [db, 3]}\n", []string{`tasks[0] (key "a"): labels[1]: want a string, got a number`}},
	{"depends_on an object", `{"version": 1, "tasks": [{"key": "a", "title": "A", "depends_on": {"b": 1}}]}`, []string{"depends_on: want a list of strings, got an object"}},
	{"depends_on null entry", "version: 1\ntasks:\n  - {key: a, title: A, depends_on: [~]}\n", []string{"depends_on[0]: want a string, got null"}},
	{"too many tasks", "version: 1\ntasks:\n" + strings.Repeat("  - {key: a, title: A}\n", reducer.MaxPlanTasks+1), []string{fmt.Sprintf("tasks has %d entries, more than %d", reducer.MaxPlanTasks+1, reducer.MaxPlanTasks)}},
}

func TestParseRefusesWhatIsNotAPlan(t *testing.T) {
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "plan")
			require.NoError(t, os.WriteFile(path, []byte(c.file), 0o600))
			f, err := parseFile(t, path)
			require.Error(t, err)
			assert.Nil(t, f)
			assert.ErrorIs(t, err, reducer.ErrInvalidArgument)
			assert.True(t, strings.HasPrefix(err.Error(), "invalid argument: plan: "), err.Error())
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Parse leaves to the reducer what a plan means: a duplicate key, an
// unknown parent, a cycle, a text over its limit, a priority out of
// range all parse, and reach ApplyPlan as they are.
func TestParseLeavesTheRulesToTheReducer(t *testing.T) {
	long := strings.Repeat("x", reducer.MaxNameLen+1)
	f, err := Parse(strings.NewReader(`version: 1
tasks:
  - {key: a, title: A, depends_on: [b], priority: 9}
  - {key: a, title: ` + long + `, parent: nowhere}
  - {key: b, title: B, depends_on: [a]}
`))
	require.NoError(t, err)
	items := f.Items()
	require.Len(t, items, 3)
	assert.Equal(t, 9, *items[0].Priority)
	assert.Equal(t, long, items[1].Title)
	assert.Equal(t, "nowhere", items[1].Parent)
}

func TestYAMLTypesThatAreText(t *testing.T) {
	f, err := Parse(strings.NewReader("version: 1\ntasks:\n  - {key: 2026-03-02, title: yes, labels: [on, off]}\n"))
	require.NoError(t, err)
	assert.Equal(t, []Task{{Key: "2026-03-02", Title: "yes", Labels: []string{"on", "off"}}}, f.Tasks)
}

func TestAByteOrderMark(t *testing.T) {
	for _, file := range []string{"\ufeff{\"version\": 1, \"tasks\": []}", "\ufeffversion: 1\ntasks: []\n"} {
		f, err := Parse(strings.NewReader(file))
		require.NoError(t, err)
		assert.Equal(t, &File{Version: 1}, f)
	}
	// After the mark, JSON is read as JSON: its errors say so.
	_, err := Parse(strings.NewReader("\ufeff{\"version\": 1,}"))
	assert.ErrorContains(t, err, "JSON line 1")
}

func TestJSONTextsAsJSONWritesThem(t *testing.T) {
	// A surrogate pair, as Python's json.dumps writes an emoji.
	f, err := Parse(strings.NewReader(`{"version": 1.0, "tasks": [{"key": "a", "title": "party \ud83c\udf89", "priority": 1.0}]}`))
	require.NoError(t, err)
	assert.Equal(t, []Task{{Key: "a", Title: "party 🎉", Priority: ptr(1)}}, f.Tasks)
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/plan.yaml", "testdata/plan.json"} {
		data, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, c := range refusals[:len(refusals)-1] {
		f.Add([]byte(c.file))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, format := range []Format{YAML, JSON} {
			var b bytes.Buffer
			require.NoError(t, Write(&b, p, format))
			again, err := Parse(&b)
			require.NoError(t, err, b.String())
			require.Equal(t, p, again)
		}
	})
}

// The example of docs/plan.md is testdata's plan, as Write writes it.
func TestTheDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/plan.md")
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(doc), "\n## Plan files\n")
	require.True(t, ok, "docs/plan.md has a section Plan files")
	_, block, ok := strings.Cut(sec, "\n```yaml\n")
	require.True(t, ok, "the section has a YAML example")
	example, _, ok := strings.Cut(block, "\n```\n")
	require.True(t, ok)
	f, err := Parse(strings.NewReader(example))
	require.NoError(t, err)
	assert.Equal(t, testdataPlan, f)
	var b bytes.Buffer
	require.NoError(t, Write(&b, f, YAML))
	assert.Equal(t, example+"\n", b.String())
}
