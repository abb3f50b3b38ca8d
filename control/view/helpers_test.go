package view_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// t0 is when the test projects begin.
var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

func at(min int) int64 { return t0.Add(time.Duration(min) * time.Minute).UnixMilli() }

// history builds a project the way the ledger does (Decide, then Evolve
// of each event with the next sequence) and keeps its events as stored
// rows.
type history struct {
	t    testing.TB
	p    *reducer.Project
	rows []ledger.Row
	seq  uint64
}

func (h *history) do(min int, c reducer.Command) {
	h.t.Helper()
	evs, err := reducer.Decide(h.p, reducer.Stamp(c, at(min)))
	require.NoError(h.t, err, "%T", c)
	for _, e := range evs {
		h.seq++
		e.Sequence = h.seq
		e.Hash = []byte{byte(h.seq), 0xab}
		h.p = reducer.Evolve(h.p, e)
		data, err := reducer.EncodeBody(e.Body)
		require.NoError(h.t, err)
		h.rows = append(h.rows, ledger.Row{Sequence: e.Sequence, ProjectID: e.ProjectID, Kind: e.Body.Kind(),
			Timestamp: e.Time / 1000, TimestampMs: e.Time, Data: string(data)})
	}
}

// row appends a stored row the reducer does not make (an approval, a kind
// of a later release, another project's event).
func (h *history) row(min int, project, kind, data string) {
	h.seq++
	h.rows = append(h.rows, ledger.Row{Sequence: h.seq, ProjectID: project, Kind: kind,
		Timestamp: at(min) / 1000, TimestampMs: at(min), Data: data})
}

const pid = "01JPROJECTDIAMOND000000000"

// diamond is a → b, a → c, b+c → d, in the minutes after t0:
//
//   - a1 runs 1–4 and succeeds, with a progress report at 2 and a
//     heartbeat at 3;
//   - b1 runs 5–6 and fails, b2 (its retry) runs 7–9 and succeeds;
//   - c1 runs from 5, beats at 6, and is marked stale at 12 (window 5
//     minutes); c2 runs 13–15 and succeeds;
//   - d1 runs from 16; an approval is asked at 17 and granted at 18.
//
// Between them: an event of another project, one of a kind this build
// does not know, and a heartbeat with data that does not parse.
func diamond(t testing.TB, title string) *history {
	h := &history{t: t}
	h.do(0, reducer.CreateProject{ProjectID: pid, Name: "diamond", Workspace: "/work/diamond"})
	h.do(0, reducer.AddTask{Project: pid, TaskID: "a", Title: "fetch sources"})
	h.do(0, reducer.AddTask{Project: pid, TaskID: "b", Title: title, DependsOn: []string{"a"}, MaxRetries: 1})
	h.do(0, reducer.AddTask{Project: pid, TaskID: "c", Title: "lint", DependsOn: []string{"a"}, MaxRetries: 1})
	h.do(0, reducer.AddTask{Project: pid, TaskID: "d", Title: "package", DependsOn: []string{"b", "c"}})
	h.do(1, reducer.StartRun{Project: pid, TaskID: "a", RunID: "a1", Agent: "codex"})
	h.do(2, reducer.ProgressRun{Project: pid, RunID: "a1", Progress: "half way"})
	h.do(3, reducer.RecordHeartbeat{Project: pid, RunID: "a1"})
	h.row(3, "01JOTHERPROJECT00000000000", reducer.KindHeartbeat, `{"run_id":"a1"}`)
	h.do(4, reducer.FinishRun{Project: pid, RunID: "a1", Status: reducer.RunSucceeded})
	h.do(5, reducer.StartRun{Project: pid, TaskID: "b", RunID: "b1", Agent: "codex"})
	h.do(5, reducer.StartRun{Project: pid, TaskID: "c", RunID: "c1", Agent: "claude"})
	h.do(6, reducer.FinishRun{Project: pid, RunID: "b1", Status: reducer.RunFailed})
	h.do(6, reducer.RecordHeartbeat{Project: pid, RunID: "c1"})
	h.row(6, pid, "task_annotated", `{"task_id":"c","note":"later release"}`)
	h.row(6, pid, reducer.KindHeartbeat, `{"run_id":`)
	h.do(7, reducer.StartRun{Project: pid, TaskID: "b", RunID: "b2", Agent: "codex"})
	h.do(9, reducer.FinishRun{Project: pid, RunID: "b2", Status: reducer.RunSucceeded})
	h.do(12, reducer.MarkStale{Project: pid, Window: (5 * time.Minute).Milliseconds()})
	h.do(13, reducer.StartRun{Project: pid, TaskID: "c", RunID: "c2", Agent: "claude"})
	h.do(15, reducer.FinishRun{Project: pid, RunID: "c2", Status: reducer.RunSucceeded})
	h.do(16, reducer.StartRun{Project: pid, TaskID: "d", RunID: "d1", Agent: "codex"})
	h.row(17, pid, "approval_asked", `{"question_id":"Q1","task_id":"d","outcome":""}`)
	h.row(18, pid, "approval_decided", `{"question_id":"Q1","task_id":"d","outcome":"yes"}`)
	return h
}
