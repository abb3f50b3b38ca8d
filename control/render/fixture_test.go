package render

import "time"

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func beats(mins ...int) []time.Time {
	var ts []time.Time
	for _, m := range mins {
		ts = append(ts, at(m))
	}
	return ts
}

// diamond is the project of the goldens: a → b, a → c, b+c → d.
//
//   - a "fetch sources": one run, succeeded (10:00–10:08).
//   - b "build": a failed attempt (10:09–10:15), a retry marker, then a
//     run that succeeded (10:16–10:30).
//   - c "lint": a run whose heartbeats stop at 10:12 and that is marked
//     stale at 10:20 (a gap, then a stale marker), then a run that
//     succeeded (10:21–10:27).
//   - d "package": running since 10:31 (Now is 11:00), an approval asked
//     at 10:40 and granted at 10:45, and a silence from 10:35 to 10:46.
//
// GapAfter is 5 minutes. The critical path is a1, b1, b2, d1.
func diamond() Project {
	return Project{
		ID:   "p-diamond",
		Name: "diamond",
		Tasks: []Task{
			{ID: "a", Title: "fetch sources", Status: TaskDone, Attempts: 1},
			{ID: "b", Title: "build", Status: TaskDone, DependsOn: []string{"a"}, Attempts: 2, Retries: 1, MaxRetries: 2},
			{ID: "c", Title: "lint the whole tree with every linter we have", Status: TaskDone, DependsOn: []string{"a"}, Attempts: 2, Retries: 1, MaxRetries: 1},
			{ID: "d", Title: "package", Status: TaskRunning, DependsOn: []string{"b", "c"}, Attempts: 1},
		},
		Runs: []Run{
			{ID: "a1", TaskID: "a", Agent: "codex", Status: RunSucceeded, Attempt: 1, Start: at(0), End: at(8), Beats: beats(2, 4, 6)},
			{ID: "b1", TaskID: "b", Agent: "codex", Status: RunFailed, Attempt: 1, Start: at(9), End: at(15), Beats: beats(11, 13)},
			{ID: "c1", TaskID: "c", Agent: "claude", Status: RunStale, Attempt: 1, Start: at(9), End: at(20), Beats: beats(10, 12)},
			{ID: "b2", TaskID: "b", Agent: "codex", Status: RunSucceeded, Attempt: 2, Start: at(16), End: at(30), Beats: beats(18, 22, 26, 29)},
			{ID: "c2", TaskID: "c", Agent: "claude", Status: RunSucceeded, Attempt: 2, Start: at(21), End: at(27), Beats: beats(23, 25)},
			{ID: "d1", TaskID: "d", Agent: "codex", Status: RunRunning, Attempt: 1, Start: at(31), Beats: beats(33, 35, 46, 50, 55, 58)},
		},
		Markers: []Marker{
			{TaskID: "b", RunID: "b1", At: at(15), Kind: MarkerRetry, Label: "retry 1 of 2"},
			{TaskID: "c", RunID: "c1", At: at(20), Kind: MarkerStale, Label: "no heartbeat for 8m"},
			{TaskID: "d", RunID: "d1", At: at(40), Kind: MarkerApprovalAsked, Label: "publish to the registry?"},
			{TaskID: "d", RunID: "d1", At: at(45), Kind: MarkerApprovalYes, Label: "owner: yes"},
		},
		Now:      at(60),
		GapAfter: 5 * time.Minute,
	}
}
