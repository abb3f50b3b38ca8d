package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromTasks(t *testing.T) {
	listed := []Listed{
		{ID: "01A", Task: Task{Key: "storage", Title: "Store the ledger", Priority: ptr(1)}},
		{ID: "01B", Task: Task{Title: "Write the schema", Parent: "01A", Labels: []string{"db"}}},
		{ID: "01C", Task: Task{Title: "Write the queries", Parent: "01A", DependsOn: []string{"01B", "01Z"}}},
	}
	f := FromTasks(listed)
	assert.Equal(t, &File{Version: 1, Tasks: []Task{
		{Key: "storage", Title: "Store the ledger", Priority: ptr(1)},
		// A task without a key of its own is named by its ID.
		{Key: "01B", Title: "Write the schema", Parent: "storage", Labels: []string{"db"}},
		{Key: "01C", Title: "Write the queries", Parent: "storage", DependsOn: []string{"01B", "01Z"}},
	}}, f)
	// The caller's tasks are not changed.
	assert.Equal(t, "", listed[1].Key)
	assert.Equal(t, []string{"01B", "01Z"}, listed[2].DependsOn)
	// The same tasks give the same file.
	assert.Equal(t, f, FromTasks(listed))
	assert.Equal(t, &File{Version: 1}, FromTasks(nil))
}
