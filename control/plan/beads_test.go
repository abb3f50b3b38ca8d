package plan

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

func TestFromBeads(t *testing.T) {
	r, err := os.Open("testdata/beads/issues.jsonl")
	require.NoError(t, err)
	defer r.Close()
	f, notes, err := FromBeads(r)
	require.NoError(t, err)
	assert.Equal(t, &File{Version: 1, Tasks: []Task{
		{
			Key:         "demo-7xk",
			Title:       "Offline sync",
			Description: "Let the client work without a network and catch up when it is back.\n\n## Design\n\nA queue of writes on disk, replayed in order.",
			Acceptance:  "A client offline for an hour loses no write.",
			Priority:    ptr(1),
			Labels:      []string{"sync"},
		},
		{
			Key:         "demo-7xk.1",
			Title:       "Queue writes while offline",
			Description: "Append each write to a queue file when the server is out of reach.",
			Acceptance:  "The queue survives a restart of the client.",
			Priority:    ptr(1),
			Labels:      []string{"client", "sync"},
			Parent:      "demo-7xk",
		},
		{
			Key:         "demo-7xk.2",
			Title:       "Replay the queue on reconnect",
			Description: "Send the queued writes in order once the server answers.\n\n## Notes\n\nStop at the first refusal and keep the rest.",
			Priority:    ptr(2),
			Labels:      []string{"feature"},
			Parent:      "demo-7xk",
			DependsOn:   []string{"demo-7xk.1"},
		},
		{
			Key:         "demo-q2m",
			Title:       "Duplicate writes after a reconnect",
			Description: "A write sent just before the network dropped is sent again on replay.",
			Acceptance:  "Each write reaches the server once.",
			Priority:    ptr(0),
			Labels:      []string{"sync", "bug"},
		},
		{Key: "demo-r8d", Title: "Bump the client's dependencies", Priority: ptr(4), Labels: []string{"chore"}},
	}}, f)
	assert.Equal(t, []string{
		"line 7: a memory, not imported",
		"demo-7xk.1: not carried: assignee; comments (1)",
		"demo-7xk.2: not carried: status in_progress",
		"demo-7xk.3: closed, not imported",
		"demo-q2m: not carried: discovered-from demo-7xk.2; blocks demo-7xk.3 (closed); related demo-7xk.1",
		"demo-r8d: not carried: status deferred; defer_until",
	}, notes)

	// What it makes is a plan: it round-trips, and the schema takes it.
	path := t.TempDir() + "/plan.yaml"
	w, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, Write(w, f, YAML))
	require.NoError(t, w.Close())
	again, err := parseFile(t, path)
	require.NoError(t, err)
	assert.Equal(t, f, again)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NoError(t, compileSchema(t).Validate(treeOf(t, data)))
}

func TestFromBeadsRefusesWhatIsNotBeads(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"not JSON", "{\"id\":\"a\",\"title\":\"A\"}\nid: b\n", "beads line 2: invalid character"},
		{"a field of the wrong type", `{"id":"a","title":"A","priority":"high"}`, "beads line 1: json: cannot unmarshal string"},
		{"no id", "\n" + `{"title":"A"}`, "beads line 2: an issue without an id"},
		{"too many", strings.Repeat(`{"id":"a","title":"A"}`+"\n", reducer.MaxPlanTasks+1), "more than 1000 open issues"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, notes, err := FromBeads(strings.NewReader(c.file))
			assert.ErrorIs(t, err, reducer.ErrInvalidArgument)
			assert.ErrorContains(t, err, c.want)
			assert.Nil(t, f)
			assert.Nil(t, notes)
		})
	}
}

func TestFromBeadsOfAnOlderExport(t *testing.T) {
	// Before bd 1.0 a line had no _type, and deleted issues stayed as
	// tombstones.
	f, notes, err := FromBeads(strings.NewReader(`{"id":"bd-1","title":"One","status":"open","priority":2,"issue_type":"task"}
{"id":"bd-2","title":"Two","status":"tombstone","priority":2,"issue_type":"task"}`))
	require.NoError(t, err)
	assert.Equal(t, []Task{{Key: "bd-1", Title: "One", Priority: ptr(2)}}, f.Tasks)
	assert.Equal(t, []string{"bd-2: tombstone, not imported"}, notes)
}
