package render_test

import (
	"fmt"
	"os"
	"time"

	"scv/control/render"
)

func exampleProject() render.Project {
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	min := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	return render.Project{
		ID: "01JQ", Name: "release",
		Tasks: []render.Task{
			{ID: "build", Title: "build", Status: render.TaskDone, Attempts: 2, Retries: 1, MaxRetries: 2},
			{ID: "docs", Title: "docs", Status: render.TaskDone, Attempts: 1},
			{ID: "ship", Title: "ship", Status: render.TaskRunning, DependsOn: []string{"build", "docs"}, Attempts: 1},
		},
		Runs: []render.Run{
			{ID: "r1", TaskID: "build", Status: render.RunFailed, Start: min(0), End: min(10)},
			{ID: "r2", TaskID: "docs", Status: render.RunSucceeded, Start: min(0), End: min(15)},
			{ID: "r3", TaskID: "build", Status: render.RunSucceeded, Start: min(11), End: min(30)},
			{ID: "r4", TaskID: "ship", Status: render.RunRunning, Start: min(31)},
		},
		Now: min(40),
	}
}

func ExampleGraphText() {
	_ = render.GraphText(os.Stdout, exampleProject(), render.TextOptions{Width: 60, ASCII: true})
	// Output:
	// release (01JQ): 3 tasks in 2 layers, 2 dependencies; 1
	// running, 2 done
	// -- layer 1 -------------------------------------------------
	//  #1 [+] build  2 att, 1/2 retries
	//  #2 [+] docs   1 att
	// -- layer 2 -------------------------------------------------
	//  #3 [>] ship   1 att               <- #1 build, #2 docs
	// legend: . pending  o ready  > running  # blocked  + done
	//         x failed  ~ stale
}

func ExampleCriticalPath() {
	// build failed once and was retried; it finished after docs, so it
	// decided when ship could start.
	fmt.Println(render.CriticalPath(exampleProject()))
	// Output: [r1 r3 r4]
}
