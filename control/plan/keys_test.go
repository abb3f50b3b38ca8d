package plan

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAssignKeys(t *testing.T) {
	tasks := []Task{
		{Title: "Write the schema"},
		{Title: "Write the  schema!"},              // the same slug: "-2"
		{Key: "write-the-schema-3", Title: "Mine"}, // an author's key is kept, and taken
		{Title: "write the schema"},                // "-3" is taken: "-4"
		{Title: "Écrire le schéma, v2"},            // letters of any script
		{Title: "🎉 !!"},                            // nothing left: "task"
		{Title: strings.Repeat("word ", 20)},       // cut to 40 characters, no dash at the end
	}
	AssignKeys(tasks)
	var keys []string
	for _, t := range tasks {
		keys = append(keys, t.Key)
	}
	assert.Equal(t, []string{
		"write-the-schema", "write-the-schema-2", "write-the-schema-3", "write-the-schema-4",
		"écrire-le-schéma-v2", "task", "word-word-word-word-word-word-word-word",
	}, keys)
}

func TestFromTasks(t *testing.T) {
	listed := []Listed{
		{ID: "01A", Task: Task{Key: "storage", Title: "Store the ledger", Priority: ptr(1)}},
		{ID: "01B", Task: Task{Title: "Write the schema", Parent: "01A", Labels: []string{"db"}}},
		{ID: "01C", Task: Task{Title: "Write the queries", Parent: "01A", DependsOn: []string{"01B", "01Z"}}},
	}
	f := FromTasks(listed)
	assert.Equal(t, &File{Version: 1, Tasks: []Task{
		{Key: "storage", Title: "Store the ledger", Priority: ptr(1)},
		{Key: "write-the-schema", Title: "Write the schema", Parent: "storage", Labels: []string{"db"}},
		{Key: "write-the-queries", Title: "Write the queries", Parent: "storage", DependsOn: []string{"write-the-schema", "01Z"}},
	}}, f)
	// The caller's tasks are not changed.
	assert.Equal(t, "", listed[1].Key)
	assert.Equal(t, []string{"01B", "01Z"}, listed[2].DependsOn)
	// The same tasks give the same file.
	assert.Equal(t, f, FromTasks(listed))
	assert.Equal(t, &File{Version: 1}, FromTasks(nil))
}
