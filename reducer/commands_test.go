package reducer_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"scv/reducer"
)

// TestStamp: Stamp sets the decision time of every command kind, replacing
// any time it carried, and changes nothing else.
func TestStamp(t *testing.T) {
	progress := "p"
	cases := []struct {
		in, want reducer.Command
	}{
		{reducer.CreateProject{ProjectID: "P", Name: "n", Workspace: "/w", Now: 1},
			reducer.CreateProject{ProjectID: "P", Name: "n", Workspace: "/w", Now: 42}},
		{reducer.AddTask{Project: "P", TaskID: "T", Title: "t", DependsOn: []string{"S"}, MaxRetries: 2},
			reducer.AddTask{Project: "P", TaskID: "T", Title: "t", DependsOn: []string{"S"}, MaxRetries: 2, Now: 42}},
		{reducer.UpdateTask{Project: "P", TaskID: "T", Status: reducer.TaskBlocked, Progress: &progress, Now: 7},
			reducer.UpdateTask{Project: "P", TaskID: "T", Status: reducer.TaskBlocked, Progress: &progress, Now: 42}},
		{reducer.StartRun{Project: "P", TaskID: "T", RunID: "R", Agent: "a"},
			reducer.StartRun{Project: "P", TaskID: "T", RunID: "R", Agent: "a", Now: 42}},
		{reducer.ProgressRun{Project: "P", RunID: "R", Progress: "x"},
			reducer.ProgressRun{Project: "P", RunID: "R", Progress: "x", Now: 42}},
		{reducer.FinishRun{Project: "P", RunID: "R", Status: reducer.RunFailed},
			reducer.FinishRun{Project: "P", RunID: "R", Status: reducer.RunFailed, Now: 42}},
		{reducer.RecordHeartbeat{Project: "P", TaskID: "T", RunID: "R"},
			reducer.RecordHeartbeat{Project: "P", TaskID: "T", RunID: "R", Now: 42}},
		{reducer.MarkStale{Project: "P", Window: 300, Now: 1},
			reducer.MarkStale{Project: "P", Window: 300, Now: 42}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%T", tc.in), func(t *testing.T) {
			assert.Equal(t, tc.want, reducer.Stamp(tc.in, 42))
		})
	}
}
