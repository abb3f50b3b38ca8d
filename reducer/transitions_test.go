package reducer_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// transitionCase is one transition or refusal of SPEC section 3. The base
// project is created, setup is applied, then cmd is decided at cmdNow.
type transitionCase struct {
	name    string
	setup   []reducer.Command
	cmd     reducer.Command
	wantErr error          // the refusal; nil when cmd is accepted
	want    string         // render of the base project after the events, when accepted
	events  []reducer.Body // the bodies Decide returns, when set
	check   func(t *testing.T, s *world)
	skip    string // a finding that needs a decision; see the report
}

const (
	pending   = reducer.TaskPending
	ready     = reducer.TaskReady
	running   = reducer.TaskRunning
	blocked   = reducer.TaskBlocked
	done      = reducer.TaskDone
	failed    = reducer.TaskFailed
	stale     = reducer.TaskStale
	succeeded = reducer.RunSucceeded
	runFailed = reducer.RunFailed
	cancelled = reducer.RunCancelled
)

func createNamed(name string) reducer.CreateProject {
	return reducer.CreateProject{ProjectID: "P2", Name: name, Workspace: "/work/other"}
}

func addTitled(title string) reducer.AddTask {
	return reducer.AddTask{Project: projID, TaskID: "t", Title: title}
}

// projectNamed checks that project P2 exists under exactly name.
func projectNamed(name string) func(t *testing.T, s *world) {
	return func(t *testing.T, s *world) {
		p, ok := s.project("P2")
		require.True(t, ok)
		assert.Equal(t, name, p.Name)
	}
}

// taskTitled checks that task t of the base project has exactly title.
func taskTitled(title string) func(t *testing.T, s *world) {
	return func(t *testing.T, s *world) {
		p, _ := s.project(projID)
		tk, ok := p.Task("t")
		require.True(t, ok)
		assert.Equal(t, title, tk.Title)
	}
}

// taskProgress checks the progress text of task id.
func taskProgress(id, want string) func(t *testing.T, s *world) {
	return func(t *testing.T, s *world) {
		p, _ := s.project(projID)
		tk, ok := p.Task(id)
		require.True(t, ok)
		require.NotNil(t, tk.Progress)
		assert.Equal(t, want, *tk.Progress)
	}
}

// heartbeats checks LastHeartbeat of the base project, task "a" and run
// "r1" (0 where none is expected), and the run's Updated.
func heartbeats(project, task, run, runUpdated int64) func(t *testing.T, s *world) {
	return func(t *testing.T, s *world) {
		p, _ := s.project(projID)
		assert.Equal(t, project, p.LastHeartbeat, "project LastHeartbeat")
		tk, ok := p.Task("a")
		require.True(t, ok)
		assert.Equal(t, task, tk.LastHeartbeat, "task LastHeartbeat")
		r, ok := p.Run("r1")
		require.True(t, ok)
		assert.Equal(t, run, r.LastHeartbeat, "run LastHeartbeat")
		assert.Equal(t, runUpdated, r.Updated, "run Updated")
	}
}

// Setup time of the step that starts r1 in taskIn(running): the base
// project is created at setupStart+10, "a" added at +20, r1 started at +30.
const r1Started = setupStart + 30

var (
	name200   = strings.Repeat("n", 200)
	name201   = strings.Repeat("n", 201)
	accent200 = strings.Repeat("é", 200) // 400 bytes
	accent201 = strings.Repeat("é", 201) // 402 bytes
	cjk200    = strings.Repeat("日", 200) // 600 bytes
	emoji200  = strings.Repeat("🙂", 200) // 800 bytes
)

func transitionCases() []transitionCase {
	return []transitionCase{
		// Task added.
		{name: "add/no dependencies: ready", cmd: add("a", 0), want: "a:ready",
			events: []reducer.Body{reducer.TaskAdded{TaskID: "a", Title: "task a", DependsOn: []string{}, MaxRetries: 0}}},
		{name: "add/dependency not done: pending", setup: cmds(add("a", 0)), cmd: add("b", 0, "a"), want: "a:ready b:pending"},
		{name: "add/every dependency done: ready", setup: cmds(add("a", 0), upd("a", done)), cmd: add("b", 0, "a"), want: "a:done b:ready"},
		{name: "add/one of two dependencies done: pending", setup: cmds(add("a", 0), add("b", 0), upd("a", done)),
			cmd: add("c", 0, "a", "b"), want: "a:done b:ready c:pending"},
		{name: "add/dependency failed: pending", setup: cmds(add("a", 0), upd("a", failed)), cmd: add("b", 0, "a"), want: "a:failed b:pending"},
		{name: "add/project referred to by ID", cmd: reducer.AddTask{Project: projID, TaskID: "a", Title: "x"}, want: "a:ready"},
		{name: "add/max_retries is recorded", cmd: add("a", 7), want: "a:ready", check: func(t *testing.T, s *world) {
			p, _ := s.project(projID)
			tk, _ := p.Task("a")
			assert.Equal(t, uint32(7), tk.MaxRetries)
			assert.Zero(t, tk.Retries)
			assert.Zero(t, tk.Attempts)
		}},
		{name: "add/refused: depends_on unknown ID", setup: cmds(add("a", 0)), cmd: add("b", 0, "a", "ghost"), wantErr: reducer.ErrNotFound},
		{name: "add/refused: depends_on itself", cmd: add("a", 0, "a"), wantErr: reducer.ErrNotFound},
		{name: "add/refused: depends_on a task of another project",
			setup: cmds(createNamed("other"), reducer.AddTask{Project: "other", TaskID: "x", Title: "x"}),
			cmd:   add("b", 0, "x"), wantErr: reducer.ErrNotFound},
		{name: "add/refused: depends_on names a task twice", setup: cmds(add("a", 0)), cmd: add("b", 0, "a", "a"), wantErr: reducer.ErrInvalidArgument},
		{name: "add/refused: duplicate task ID", setup: cmds(add("a", 0)), cmd: add("a", 0), wantErr: reducer.ErrConflict},
		{name: "add/refused: unknown project", cmd: reducer.AddTask{Project: "ghost", TaskID: "a", Title: "x"}, wantErr: reducer.ErrNotFound},

		// Pending becomes ready when its last dependency is done.
		{name: "unblock/last dependency's run succeeds", setup: cmds(add("a", 0), add("b", 0, "a"), start("a", "r1")),
			cmd: finish("r1", succeeded), want: "a:done b:ready | r1:succeeded#1"},
		{name: "unblock/last dependency updated done", setup: cmds(add("a", 0), add("b", 0, "a")),
			cmd: upd("a", done), want: "a:done b:ready"},
		{name: "unblock/two dependencies, first done: stays pending", setup: cmds(add("a", 0), add("b", 0), add("c", 0, "a", "b")),
			cmd: upd("a", done), want: "a:done b:ready c:pending"},
		{name: "unblock/two dependencies, second done by its run: ready",
			setup: cmds(add("a", 0), add("b", 0), add("c", 0, "a", "b"), upd("a", done), start("b", "r1")),
			cmd:   finish("r1", succeeded), want: "a:done b:done c:ready | r1:succeeded#1"},
		{name: "unblock/every dependant at once", setup: cmds(add("a", 0), add("b", 0, "a"), add("c", 0, "a")),
			cmd: upd("a", done), want: "a:done b:ready c:ready"},
		{name: "unblock/a blocked dependant stays blocked", setup: cmds(add("a", 0), add("b", 0, "a"), upd("b", blocked)),
			cmd: upd("a", done), want: "a:done b:blocked"},
		{name: "unblock/dependency failed: dependant stays pending", setup: cmds(add("a", 0), add("b", 0, "a")),
			cmd: upd("a", failed), want: "a:failed b:pending"},
		{name: "unblock/dependency's run fails for good: dependant stays pending", setup: cmds(add("a", 0), add("b", 0, "a"), start("a", "r1")),
			cmd: finish("r1", runFailed), want: "a:failed/1 b:pending | r1:failed#1"},

		// Run start.
		{name: "start/from ready: running, attempt 1", setup: taskIn(ready), cmd: start("a", "r1"), want: "a:running@r1 | r1:running#1",
			events: []reducer.Body{reducer.RunStarted{RunID: "r1", TaskID: "a", Agent: "agent"}},
			check: func(t *testing.T, s *world) {
				p, _ := s.project(projID)
				r, ok := p.Run("r1")
				require.True(t, ok)
				assert.Equal(t, "agent", r.Agent)
				assert.Equal(t, "a", r.TaskID)
				assert.Equal(t, cmdNow, r.Started)
				assert.Equal(t, cmdNow, r.Updated)
				assert.Zero(t, r.LastHeartbeat)
				assert.Nil(t, r.Progress)
			}},
		{name: "start/from stale: running, attempt 2", setup: taskIn(stale), cmd: start("a", "r2"), want: "a:running@r2/1 | r1:stale#1 r2:running#2"},
		{name: "start/refused from pending", setup: taskIn(pending), cmd: start("a", "r1"), wantErr: reducer.ErrInvalidTransition},
		{name: "start/refused from running", setup: taskIn(running), cmd: start("a", "r2"), wantErr: reducer.ErrInvalidTransition},
		{name: "start/refused from blocked", setup: taskIn(blocked), cmd: start("a", "r1"), wantErr: reducer.ErrInvalidTransition},
		{name: "start/refused from done", setup: taskIn(done), cmd: start("a", "r1"), wantErr: reducer.ErrInvalidTransition},
		{name: "start/refused from failed", setup: taskIn(failed), cmd: start("a", "r1"), wantErr: reducer.ErrInvalidTransition},
		{name: "start/refused: unknown task", setup: taskIn(ready), cmd: start("ghost", "r1"), wantErr: reducer.ErrNotFound},
		{name: "start/refused: unknown project", setup: taskIn(ready),
			cmd: reducer.StartRun{Project: "ghost", TaskID: "a", RunID: "r1", Agent: "agent"}, wantErr: reducer.ErrNotFound},
		{name: "start/refused: run ID already used", setup: cmds(add("a", 0), add("b", 0), start("a", "r1")),
			cmd: start("b", "r1"), wantErr: reducer.ErrConflict},
		{name: "start/refused: empty agent", setup: taskIn(ready),
			cmd: reducer.StartRun{Project: projID, TaskID: "a", RunID: "r1"}, wantErr: reducer.ErrInvalidArgument},

		// Attempt numbering.
		{name: "attempt/counts every run of the task and only of that task",
			setup: cmds(add("a", 2), add("b", 0), start("a", "r1"), finish("r1", runFailed), start("b", "r2"),
				start("a", "r3"), finish("r3", cancelled)),
			cmd:  start("a", "r4"),
			want: "a:running@r4/1 b:running@r2 | r1:failed#1 r2:running#1 r3:cancelled#2 r4:running#3"},

		// Run finished.
		{name: "finish/succeeded: done", setup: taskIn(running), cmd: finish("r1", succeeded), want: "a:done | r1:succeeded#1",
			events: []reducer.Body{reducer.RunFinished{RunID: "r1", Status: succeeded}},
			check: func(t *testing.T, s *world) {
				p, _ := s.project(projID)
				r, _ := p.Run("r1")
				assert.Equal(t, cmdNow, r.Updated)
				assert.Equal(t, r1Started, r.Started)
			}},
		{name: "finish/failed, max_retries 0: first failure is final", setup: cmds(add("a", 0), start("a", "r1")),
			cmd: finish("r1", runFailed), want: "a:failed/1 | r1:failed#1"},
		{name: "finish/failed, max_retries 2, first failure: ready", setup: cmds(add("a", 2), start("a", "r1")),
			cmd: finish("r1", runFailed), want: "a:ready/1 | r1:failed#1"},
		{name: "finish/failed, max_retries 2, second failure: ready",
			setup: cmds(add("a", 2), start("a", "r1"), finish("r1", runFailed), start("a", "r2")),
			cmd:   finish("r2", runFailed), want: "a:ready/2 | r1:failed#1 r2:failed#2"},
		{name: "finish/failed, max_retries 2, third failure is final",
			setup: cmds(add("a", 2), start("a", "r1"), finish("r1", runFailed), start("a", "r2"), finish("r2", runFailed), start("a", "r3")),
			cmd:   finish("r3", runFailed), want: "a:failed/3 | r1:failed#1 r2:failed#2 r3:failed#3"},
		{name: "finish/cancelled: ready, no retry spent", setup: cmds(add("a", 0), start("a", "r1")),
			cmd: finish("r1", cancelled), want: "a:ready | r1:cancelled#1"},
		{name: "finish/max_retries 0: a cancellation before the failure spends nothing",
			setup: cmds(add("a", 0), start("a", "r1"), finish("r1", cancelled), start("a", "r2")),
			cmd:   finish("r2", runFailed), want: "a:failed/1 | r1:cancelled#1 r2:failed#2"},
		{name: "finish/max_retries 2: cancellations between failures spend nothing",
			setup: cmds(add("a", 2), start("a", "r1"), finish("r1", runFailed), start("a", "r2"), finish("r2", cancelled),
				start("a", "r3"), finish("r3", runFailed), start("a", "r4"), finish("r4", cancelled), start("a", "r5")),
			cmd:  finish("r5", runFailed),
			want: "a:failed/3 | r1:failed#1 r2:cancelled#2 r3:failed#3 r4:cancelled#4 r5:failed#5"},
		{name: "finish/refused: status running", setup: taskIn(running), cmd: finish("r1", reducer.RunRunning), wantErr: reducer.ErrInvalidArgument},
		{name: "finish/refused: status stale", setup: taskIn(running), cmd: finish("r1", reducer.RunStale), wantErr: reducer.ErrInvalidArgument},
		{name: "finish/refused: unknown status", setup: taskIn(running), cmd: finish("r1", "bogus"), wantErr: reducer.ErrInvalidArgument},
		{name: "finish/refused: unknown run", setup: taskIn(running), cmd: finish("ghost", succeeded), wantErr: reducer.ErrNotFound},
		{name: "finish/refused: unknown project", setup: taskIn(running),
			cmd: reducer.FinishRun{Project: "ghost", RunID: "r1", Status: succeeded}, wantErr: reducer.ErrNotFound},

		// No heartbeat for the stale window.
		{name: "stale/max_retries 0: task failed", setup: cmds(add("a", 0), start("a", "r1")),
			cmd: markStale(), want: "a:failed/1 | r1:stale#1", events: []reducer.Body{reducer.RunStaleMarked{RunID: "r1"}}},
		{name: "stale/max_retries 1: task stale", setup: cmds(add("a", 1), start("a", "r1")),
			cmd: markStale(), want: "a:stale/1 | r1:stale#1",
			check: func(t *testing.T, s *world) {
				p, _ := s.project(projID)
				r, _ := p.Run("r1")
				assert.Equal(t, cmdNow, r.Updated)
			}},
		{name: "stale/max_retries 2: stale, failure, stale is final",
			setup: cmds(add("a", 2), start("a", "r1"), markStale(), start("a", "r2"), finish("r2", runFailed), start("a", "r3")),
			cmd:   markStale(), want: "a:failed/3 | r1:stale#1 r2:failed#2 r3:stale#3"},
		{name: "stale/only the silent run is marked",
			setup: cmds(add("a", 1), add("b", 1), start("a", "r1"), start("b", "r2"), reducer.RecordHeartbeat{Project: projID, RunID: "r2", Now: cmdNow - 10}),
			cmd:   reducer.MarkStale{Project: projID, Window: 60}, want: "a:stale/1 b:running@r2 | r1:stale#1 r2:running#1",
			events: []reducer.Body{reducer.RunStaleMarked{RunID: "r1"}}},
		{name: "stale/every silent run is marked, in start order", setup: cmds(add("a", 1), add("b", 1), start("a", "r1"), start("b", "r2")),
			cmd: markStale(), want: "a:stale/1 b:stale/1 | r1:stale#1 r2:stale#1",
			events: []reducer.Body{reducer.RunStaleMarked{RunID: "r1"}, reducer.RunStaleMarked{RunID: "r2"}}},
		{name: "stale/nothing silent: no events", setup: cmds(add("a", 0), reducer.StartRun{Project: projID, TaskID: "a", RunID: "r1", Agent: "agent", Now: cmdNow - 10}),
			cmd: reducer.MarkStale{Project: projID, Window: 60}, want: "a:running@r1 | r1:running#1", events: []reducer.Body{}},
		{name: "stale/refused: unknown project", cmd: reducer.MarkStale{Project: "ghost", Window: 5}, wantErr: reducer.ErrNotFound},

		// project_task_update: to blocked.
		{name: "update/blocked from pending", setup: taskIn(pending), cmd: upd("a", blocked), want: "z:ready a:blocked"},
		{name: "update/blocked from ready, with progress", setup: taskIn(ready), cmd: updP("a", blocked, "waiting for keys"),
			want: "a:blocked", check: taskProgress("a", "waiting for keys")},
		{name: "update/blocked from stale", setup: taskIn(stale), cmd: upd("a", blocked), want: "a:blocked/1 | r1:stale#1"},
		// to ready.
		{name: "update/ready from blocked, dependencies done: ready", setup: cmds(add("z", 0), add("a", 0, "z"), upd("z", done), upd("a", blocked)),
			cmd: upd("a", ready), want: "z:done a:ready", events: []reducer.Body{reducer.TaskUpdated{TaskID: "a", Status: ready}}},
		{name: "update/ready from blocked, no dependencies: ready", setup: taskIn(blocked), cmd: upd("a", ready), want: "a:ready"},
		{name: "update/ready from blocked, dependency not done: lands on pending", setup: cmds(add("z", 0), add("a", 0, "z"), upd("a", blocked)),
			cmd: upd("a", ready), want: "z:ready a:pending", events: []reducer.Body{reducer.TaskUpdated{TaskID: "a", Status: pending}}},
		{name: "update/landed on pending, then its dependency is done: ready",
			setup: cmds(add("z", 0), add("a", 0, "z"), upd("a", blocked), upd("a", ready)),
			cmd:   upd("z", done), want: "z:done a:ready"},
		// to done.
		{name: "update/done from pending", setup: taskIn(pending), cmd: upd("a", done), want: "z:ready a:done"},
		{name: "update/done from ready", setup: taskIn(ready), cmd: upd("a", done), want: "a:done"},
		{name: "update/done from blocked", setup: taskIn(blocked), cmd: upd("a", done), want: "a:done"},
		{name: "update/done from stale", setup: taskIn(stale), cmd: upd("a", done), want: "a:done/1 | r1:stale#1"},
		// to failed.
		{name: "update/failed from pending", setup: taskIn(pending), cmd: upd("a", failed), want: "z:ready a:failed"},
		{name: "update/failed from ready", setup: taskIn(ready), cmd: upd("a", failed), want: "a:failed"},
		{name: "update/failed from blocked", setup: taskIn(blocked), cmd: upd("a", failed), want: "a:failed"},
		{name: "update/failed from stale", setup: taskIn(stale), cmd: upd("a", failed), want: "a:failed/1 | r1:stale#1"},
		// the same status: only progress changes.
		{name: "update/same status pending: only progress", setup: taskIn(pending), cmd: updP("a", pending, "p"),
			want: "z:ready a:pending", check: taskProgress("a", "p")},
		{name: "update/same status ready: only progress", setup: taskIn(ready), cmd: updP("a", ready, "p"),
			want: "a:ready", check: taskProgress("a", "p")},
		{name: "update/same status blocked: only progress", setup: taskIn(blocked), cmd: updP("a", blocked, "p"),
			want: "a:blocked", check: taskProgress("a", "p")},
		{name: "update/same status stale: only progress", setup: taskIn(stale), cmd: updP("a", stale, "p"),
			want: "a:stale/1 | r1:stale#1", check: taskProgress("a", "p")},
		{name: "update/same status without progress keeps the old progress", setup: cmds(add("a", 0), updP("a", ready, "old")),
			cmd: upd("a", ready), want: "a:ready", check: taskProgress("a", "old")},
		{name: "update/refused: same status running (a running task changes only through its run)", setup: taskIn(running),
			cmd: updP("a", running, "p"), wantErr: reducer.ErrInvalidTransition},
		// refused: running and stale are never requested.
		{name: "update/refused: running requested from pending", setup: taskIn(pending), cmd: upd("a", running), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: running requested from ready", setup: taskIn(ready), cmd: upd("a", running), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: running requested from blocked", setup: taskIn(blocked), cmd: upd("a", running), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: running requested from stale", setup: taskIn(stale), cmd: upd("a", running), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: stale requested from pending", setup: taskIn(pending), cmd: upd("a", stale), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: stale requested from ready", setup: taskIn(ready), cmd: upd("a", stale), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: stale requested from blocked", setup: taskIn(blocked), cmd: upd("a", stale), wantErr: reducer.ErrInvalidTransition},
		// refused: a running task changes only through its run.
		{name: "update/refused: running task to pending", setup: taskIn(running), cmd: upd("a", pending), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: running task to ready", setup: taskIn(running), cmd: upd("a", ready), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: running task to blocked", setup: taskIn(running), cmd: upd("a", blocked), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: running task to done", setup: taskIn(running), cmd: upd("a", done), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: running task to failed", setup: taskIn(running), cmd: upd("a", failed), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: running task to stale", setup: taskIn(running), cmd: upd("a", stale), wantErr: reducer.ErrInvalidTransition},
		// refused: done and failed are final.
		{name: "update/refused: done task to pending", setup: taskIn(done), cmd: upd("a", pending), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: done task to ready", setup: taskIn(done), cmd: upd("a", ready), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: done task to running", setup: taskIn(done), cmd: upd("a", running), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: done task to blocked", setup: taskIn(done), cmd: upd("a", blocked), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: done task to done", setup: taskIn(done), cmd: updP("a", done, "p"), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: done task to failed", setup: taskIn(done), cmd: upd("a", failed), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: done task to stale", setup: taskIn(done), cmd: upd("a", stale), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: done by its run, to failed", setup: cmds(add("a", 0), start("a", "r1"), finish("r1", succeeded)),
			cmd: upd("a", failed), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: failed task to pending", setup: taskIn(failed), cmd: upd("a", pending), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: failed task to ready", setup: taskIn(failed), cmd: upd("a", ready), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: failed task to running", setup: taskIn(failed), cmd: upd("a", running), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: failed task to blocked", setup: taskIn(failed), cmd: upd("a", blocked), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: failed task to done", setup: taskIn(failed), cmd: upd("a", done), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: failed task to failed", setup: taskIn(failed), cmd: updP("a", failed, "p"), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: failed task to stale", setup: taskIn(failed), cmd: upd("a", stale), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: failed by retries, to ready", setup: cmds(add("a", 0), start("a", "r1"), finish("r1", runFailed)),
			cmd: upd("a", ready), wantErr: reducer.ErrInvalidTransition},
		// refused: moves the table does not list.
		{name: "update/refused: ready from pending", setup: taskIn(pending), cmd: upd("a", ready), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: ready from stale", setup: taskIn(stale), cmd: upd("a", ready), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: pending from ready", setup: taskIn(ready), cmd: upd("a", pending), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: pending from blocked", setup: taskIn(blocked), cmd: upd("a", pending), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: pending from stale", setup: taskIn(stale), cmd: upd("a", pending), wantErr: reducer.ErrInvalidTransition},
		{name: "update/refused: unknown status is an invalid argument", setup: taskIn(ready), cmd: upd("a", "bogus"), wantErr: reducer.ErrInvalidArgument},
		{name: "update/refused: unknown task", setup: taskIn(ready), cmd: upd("ghost", done), wantErr: reducer.ErrNotFound},
		{name: "update/refused: unknown project", setup: taskIn(ready),
			cmd: reducer.UpdateTask{Project: "ghost", TaskID: "a", Status: done}, wantErr: reducer.ErrNotFound},

		// Fenced writes from a run that is not running.
		{name: "fence/progress from succeeded run", setup: runIn(succeeded), cmd: progress("r1", "x"), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/progress from failed run", setup: runIn(runFailed), cmd: progress("r1", "x"), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/progress from cancelled run", setup: runIn(cancelled), cmd: progress("r1", "x"), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/progress from stale run", setup: runIn(reducer.RunStale), cmd: progress("r1", "x"), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/heartbeat from succeeded run", setup: runIn(succeeded), cmd: beat("a", "r1"), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/heartbeat from failed run", setup: runIn(runFailed), cmd: beat("a", "r1"), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/heartbeat from cancelled run", setup: runIn(cancelled), cmd: beat("", "r1"), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/heartbeat from stale run", setup: runIn(reducer.RunStale), cmd: beat("a", "r1"), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/finish from succeeded run", setup: runIn(succeeded), cmd: finish("r1", runFailed), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/finish from failed run", setup: runIn(runFailed), cmd: finish("r1", succeeded), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/finish from cancelled run", setup: runIn(cancelled), cmd: finish("r1", succeeded), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/finish from stale run", setup: runIn(reducer.RunStale), cmd: finish("r1", succeeded), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/stale run's finish while its task's next run runs", setup: append(runIn(reducer.RunStale), start("a", "r2")),
			cmd: finish("r1", succeeded), wantErr: reducer.ErrRunNotRunning},
		{name: "fence/stale run's progress while its task's next run runs", setup: append(runIn(reducer.RunStale), start("a", "r2")),
			cmd: progress("r1", "zombie"), wantErr: reducer.ErrRunNotRunning},

		// Progress and heartbeats.
		{name: "progress/updates run and task, and counts as a heartbeat", setup: taskIn(running), cmd: progress("r1", "half way"),
			want: "a:running@r1 | r1:running#1", events: []reducer.Body{reducer.RunProgress{RunID: "r1", Progress: "half way"}},
			check: func(t *testing.T, s *world) {
				heartbeats(cmdNow, cmdNow, cmdNow, cmdNow)(t, s)
				taskProgress("a", "half way")(t, s)
				p, _ := s.project(projID)
				r, _ := p.Run("r1")
				require.NotNil(t, r.Progress)
				assert.Equal(t, "half way", *r.Progress)
			}},
		{name: "progress/refused: unknown run", setup: taskIn(running), cmd: progress("ghost", "x"), wantErr: reducer.ErrNotFound},
		{name: "progress/refused: unknown project", setup: taskIn(running),
			cmd: reducer.ProgressRun{Project: "ghost", RunID: "r1", Progress: "x"}, wantErr: reducer.ErrNotFound},
		{name: "heartbeat/run and task: run, task and project", setup: taskIn(running), cmd: beat("a", "r1"),
			want: "a:running@r1 | r1:running#1", events: []reducer.Body{reducer.Heartbeat{TaskID: "a", RunID: "r1"}},
			check: heartbeats(cmdNow, cmdNow, cmdNow, cmdNow)},
		{name: "heartbeat/run only: its task is filled in", setup: taskIn(running), cmd: beat("", "r1"),
			want: "a:running@r1 | r1:running#1", events: []reducer.Body{reducer.Heartbeat{TaskID: "a", RunID: "r1"}},
			check: heartbeats(cmdNow, cmdNow, cmdNow, cmdNow)},
		{name: "heartbeat/task only: task and project, not the run", setup: taskIn(running), cmd: beat("a", ""),
			want: "a:running@r1 | r1:running#1", events: []reducer.Body{reducer.Heartbeat{TaskID: "a"}},
			check: heartbeats(cmdNow, cmdNow, 0, r1Started)},
		{name: "heartbeat/project only: the project alone", setup: taskIn(running), cmd: beat("", ""),
			want: "a:running@r1 | r1:running#1", events: []reducer.Body{reducer.Heartbeat{}},
			check: heartbeats(cmdNow, 0, 0, r1Started)},
		{name: "heartbeat/task only on a ready task", setup: taskIn(ready), cmd: beat("a", ""), want: "a:ready",
			check: func(t *testing.T, s *world) {
				p, _ := s.project(projID)
				tk, _ := p.Task("a")
				assert.Equal(t, cmdNow, tk.LastHeartbeat)
				assert.Equal(t, cmdNow, p.LastHeartbeat)
			}},
		{name: "heartbeat/refused: task and run do not match", setup: cmds(add("a", 0), add("b", 0), start("a", "r1")),
			cmd: beat("b", "r1"), wantErr: reducer.ErrInvalidArgument},
		{name: "heartbeat/refused: unknown run", setup: taskIn(running), cmd: beat("", "ghost"), wantErr: reducer.ErrNotFound},
		{name: "heartbeat/refused: unknown task", setup: taskIn(running), cmd: beat("ghost", ""), wantErr: reducer.ErrNotFound},
		{name: "heartbeat/refused: unknown project", setup: taskIn(running),
			cmd: reducer.RecordHeartbeat{Project: "ghost"}, wantErr: reducer.ErrNotFound},
		{name: "heartbeat/refused: task only, on a final task", setup: taskIn(done), cmd: beat("a", ""), wantErr: reducer.ErrInvalidTransition},

		// Projects.
		{name: "project/created, found by ID and by name", cmd: createNamed("other"),
			events: []reducer.Body{reducer.ProjectCreated{Name: "other", Workspace: "/work/other"}},
			check: func(t *testing.T, s *world) {
				byID, ok := s.project("P2")
				require.True(t, ok)
				byName, ok := s.project("other")
				require.True(t, ok)
				assert.Same(t, byID, byName)
				assert.Equal(t, "/work/other", byID.Workspace)
				assert.Equal(t, cmdNow, byID.Created)
				assert.Equal(t, cmdNow, byID.Updated)
				assert.Zero(t, byID.LastHeartbeat)
				assert.Empty(t, byID.Tasks())
				assert.Empty(t, byID.Runs())
			}},
		{name: "project/refused: duplicate name", cmd: createNamed(projName), wantErr: reducer.ErrConflict},
		{name: "project/refused: duplicate ID", cmd: reducer.CreateProject{ProjectID: projID, Name: "other", Workspace: "/work/other"},
			wantErr: reducer.ErrConflict},
		{name: "project/refused: name equal to another project's ID", cmd: createNamed(projID), wantErr: reducer.ErrConflict},
		{name: "project/refused: relative workspace", cmd: reducer.CreateProject{ProjectID: "P2", Name: "other", Workspace: "work/other"},
			wantErr: reducer.ErrInvalidArgument},
		{name: "project/refused: unclean workspace", cmd: reducer.CreateProject{ProjectID: "P2", Name: "other", Workspace: "/work/../other"},
			wantErr: reducer.ErrInvalidArgument},

		// Name and title validation: 1 to 200 characters, valid UTF-8, no
		// control characters.
		{name: "name/200 characters", cmd: createNamed(name200), check: projectNamed(name200)},
		{name: "name/200 two-byte characters", cmd: createNamed(accent200), check: projectNamed(accent200)},
		{name: "name/200 three-byte characters", cmd: createNamed(cjk200), check: projectNamed(cjk200)},
		{name: "name/200 four-byte characters", cmd: createNamed(emoji200), check: projectNamed(emoji200)},
		{name: "name/inner spaces and punctuation", cmd: createNamed("a b-c_d.e"), check: projectNamed("a b-c_d.e")},
		{name: "name/refused: empty", cmd: createNamed(""), wantErr: reducer.ErrInvalidArgument},
		{name: "name/refused: 201 characters", cmd: createNamed(name201), wantErr: reducer.ErrInvalidArgument},
		{name: "name/refused: 201 two-byte characters", cmd: createNamed(accent201), wantErr: reducer.ErrInvalidArgument},
		{name: "name/refused: newline", cmd: createNamed("a\nb"), wantErr: reducer.ErrInvalidArgument},
		{name: "name/refused: NUL", cmd: createNamed("a\x00b"), wantErr: reducer.ErrInvalidArgument},
		{name: "name/refused: DEL", cmd: createNamed("a\x7fb"), wantErr: reducer.ErrInvalidArgument},
		{name: "name/refused: C1 control", cmd: createNamed("a\u0085b"), wantErr: reducer.ErrInvalidArgument},
		{name: "name/refused: invalid UTF-8", cmd: createNamed("a\xffb"), wantErr: reducer.ErrInvalidArgument},
		{name: "title/200 characters", cmd: addTitled(name200), check: taskTitled(name200)},
		{name: "title/200 two-byte characters", cmd: addTitled(accent200), check: taskTitled(accent200)},
		{name: "title/200 four-byte characters", cmd: addTitled(emoji200), check: taskTitled(emoji200)},
		{name: "title/refused: empty", cmd: addTitled(""), wantErr: reducer.ErrInvalidArgument},
		{name: "title/refused: 201 characters", cmd: addTitled(name201), wantErr: reducer.ErrInvalidArgument},
		{name: "title/refused: 201 two-byte characters", cmd: addTitled(accent201), wantErr: reducer.ErrInvalidArgument},
		{name: "title/refused: tab", cmd: addTitled("a\tb"), wantErr: reducer.ErrInvalidArgument},
		{name: "title/refused: escape", cmd: addTitled("a\x1b[31mb"), wantErr: reducer.ErrInvalidArgument},
		{name: "title/refused: invalid UTF-8", cmd: addTitled("\xc3"), wantErr: reducer.ErrInvalidArgument},

		// Tasks named by title (SPEC section 5 and issue: a unique title works as the ID does).
		{name: "title ref/update by a unique title", setup: cmds(add("a", 0)), cmd: upd("task a", blocked), want: "a:blocked",
			events: []reducer.Body{reducer.TaskUpdated{TaskID: "a", Status: blocked}}},
		{name: "title ref/start by a unique title", setup: cmds(add("a", 0)), cmd: start("task a", "r1"), want: "a:running@r1 | r1:running#1"},
		{name: "title ref/depends_on by title is stored as the ID", setup: cmds(add("a", 0)), cmd: add("b", 0, "task a"),
			events: []reducer.Body{reducer.TaskAdded{TaskID: "b", Title: "task b", DependsOn: []string{"a"}}}},
		{name: "title ref/heartbeat by title is journaled with the ID", setup: cmds(add("a", 0)), cmd: beat("task a", ""),
			events: []reducer.Body{reducer.Heartbeat{TaskID: "a"}}},
		{name: "title ref/refused: an ambiguous title names its tasks",
			setup: cmds(reducer.AddTask{Project: projID, TaskID: "a", Title: "same"}, reducer.AddTask{Project: projID, TaskID: "b", Title: "same"}),
			cmd:   upd("same", blocked), wantErr: reducer.ErrInvalidArgument},
		{name: "title ref/an ID wins over another task's title",
			setup: cmds(reducer.AddTask{Project: projID, TaskID: "a", Title: "b"}, reducer.AddTask{Project: projID, TaskID: "b", Title: "x"}),
			cmd:   upd("b", blocked), want: "a:ready b:blocked"},

		// The owner's retry.
		{name: "retry/a failed task is ready again, budget reset, attempts kept",
			setup: cmds(add("a", 0), start("a", "r1"), finish("r1", runFailed)), cmd: retry("a", nil), want: "a:ready | r1:failed#1",
			check: func(t *testing.T, s *world) {
				p, _ := s.project(projID)
				tk, _ := p.Task("a")
				assert.Zero(t, tk.Retries)
				assert.Equal(t, uint32(1), tk.Attempts)
				assert.Equal(t, reducer.ProjectActive, p.Status(), "no failed task left")
			}},
		{name: "retry/with a new budget", setup: cmds(add("a", 0), upd("a", failed)), cmd: retry("a", ptrU32(3)),
			events: []reducer.Body{reducer.TaskRetried{TaskID: "a", MaxRetries: ptrU32(3), By: "owner"}},
			check: func(t *testing.T, s *world) {
				p, _ := s.project(projID)
				tk, _ := p.Task("a")
				assert.Equal(t, uint32(3), tk.MaxRetries)
			}},
		{name: "retry/pending while a dependency is not done", setup: cmds(add("z", 0), add("a", 0, "z"), upd("a", failed)),
			cmd: retry("a", nil), want: "z:ready a:pending"},
		{name: "retry/by title", setup: cmds(add("a", 0), upd("a", failed)), cmd: retry("task a", nil), want: "a:ready"},
		{name: "retry/refused: not failed", setup: cmds(add("a", 0)), cmd: retry("a", nil), wantErr: reducer.ErrInvalidTransition},
		{name: "retry/refused: done", setup: cmds(add("a", 0), upd("a", done)), cmd: retry("a", nil), wantErr: reducer.ErrInvalidTransition},
		{name: "retry/refused: unknown task", cmd: retry("ghost", nil), wantErr: reducer.ErrNotFound},

		// Approvals.
		{name: "approval/asked: the project waits, the task is gated", setup: cmds(add("a", 0)), cmd: ask("q1", "a"),
			events: []reducer.Body{reducer.ApprovalAsked{QuestionID: "q1", TaskID: "a", Question: "ship a?", Deadline: cmdNow + 60_000, By: "agent"}},
			check: func(t *testing.T, s *world) {
				p, _ := s.project(projID)
				assert.Equal(t, reducer.ProjectWaitingApproval, p.Status())
				tk, _ := p.Task("a")
				assert.Equal(t, "q1", tk.Approval)
				assert.Equal(t, 1, p.PendingApprovals())
			}},
		{name: "approval/a project-wide question", cmd: ask("q1", ""), check: func(t *testing.T, s *world) {
			p, _ := s.project(projID)
			assert.Equal(t, reducer.ProjectWaitingApproval, p.Status())
		}},
		{name: "approval/refused: a gated task starts no run", setup: cmds(add("a", 0), ask("q1", "a")), cmd: start("a", "r1"),
			wantErr: reducer.ErrInvalidTransition},
		{name: "approval/yes lifts the gate", setup: cmds(add("a", 0), ask("q1", "a")), cmd: decide("q1", reducer.ApprovalYes),
			want: "a:ready", check: func(t *testing.T, s *world) {
				p, _ := s.project(projID)
				assert.Equal(t, reducer.ProjectActive, p.Status())
				tk, _ := p.Task("a")
				assert.Empty(t, tk.Approval)
				a, _ := p.Approval("q1")
				assert.Equal(t, reducer.ApprovalYes, a.Outcome)
				assert.Equal(t, "owner", a.DecidedBy)
				assert.Equal(t, cmdNow, a.Decided)
			}},
		{name: "approval/no leaves the task blocked with the refusal", setup: cmds(add("a", 0), ask("q1", "a")),
			cmd: decide("q1", reducer.ApprovalNo), want: "a:blocked", check: taskProgress("a", `approval no (owner): "ship a?"`)},
		{name: "approval/expired leaves the task blocked", setup: cmds(add("a", 0), ask("q1", "a")),
			cmd: decide("q1", reducer.ApprovalExpired), want: "a:blocked"},
		{name: "approval/failed leaves the task gated off, blocked", setup: cmds(add("a", 0), ask("q1", "a")),
			cmd: decide("q1", reducer.ApprovalFailed), want: "a:blocked"},
		{name: "approval/refused: decided twice", setup: cmds(add("a", 0), ask("q1", "a"), decide("q1", reducer.ApprovalYes)),
			cmd: decide("q1", reducer.ApprovalNo), wantErr: reducer.ErrConflict},
		{name: "approval/overdue: the sweeper expires it past deadline and grace",
			setup: cmds(add("a", 0), add("b", 0), askBy("q1", "a", cmdNow-3000), askBy("q2", "b", cmdNow-1001)),
			cmd:   reducer.ExpireApprovals{Project: projID, Grace: 1000}, want: "a:blocked b:blocked",
			events: []reducer.Body{
				reducer.ApprovalDecided{QuestionID: "q1", Outcome: reducer.ApprovalExpired, By: reducer.ExpiredBy},
				reducer.ApprovalDecided{QuestionID: "q2", Outcome: reducer.ApprovalExpired, By: reducer.ExpiredBy},
			},
			check: phaseStatus(reducer.PhasePlanning, reducer.ProjectBlocked)},
		{name: "approval/overdue: within the grace, nothing", setup: cmds(add("a", 0), askBy("q1", "a", cmdNow-1000)),
			cmd: reducer.ExpireApprovals{Project: projID, Grace: 1000}, want: "a:ready", events: []reducer.Body{},
			check: phaseStatus(reducer.PhasePlanning, reducer.ProjectWaitingApproval)},
		{name: "approval/overdue: a decided one is left as it is", setup: cmds(add("a", 0), askBy("q1", "a", cmdNow-3000), decide("q1", reducer.ApprovalYes)),
			cmd: reducer.ExpireApprovals{Project: projID}, want: "a:ready", events: []reducer.Body{}},
		{name: "approval/refused: an unknown question", cmd: decide("q9", reducer.ApprovalYes), wantErr: reducer.ErrNotFound},
		{name: "approval/refused: decided pending", setup: cmds(ask("q1", "")), cmd: decide("q1", reducer.ApprovalPending),
			wantErr: reducer.ErrInvalidArgument},
		{name: "approval/refused: asked twice", setup: cmds(ask("q1", "")), cmd: ask("q1", ""), wantErr: reducer.ErrConflict},
		{name: "approval/refused: a second gate on one task", setup: cmds(add("a", 0), ask("q1", "a")), cmd: ask("q2", "a"),
			wantErr: reducer.ErrConflict},
		{name: "approval/refused: a running task", setup: taskIn(running), cmd: ask("q1", "a"), wantErr: reducer.ErrInvalidTransition},
		{name: "approval/refused: a done task", setup: taskIn(done), cmd: ask("q1", "a"), wantErr: reducer.ErrInvalidTransition},
		{name: "approval/refused: a deadline in the past",
			cmd: reducer.AskApproval{Project: projID, QuestionID: "q1", Question: "x", Deadline: cmdNow}, wantErr: reducer.ErrInvalidArgument},
		{name: "approval/refused: an empty question",
			cmd: reducer.AskApproval{Project: projID, QuestionID: "q1", Deadline: cmdNow + 1}, wantErr: reducer.ErrInvalidArgument},

		// Release and archive.
		{name: "release/every task done: production", setup: cmds(add("a", 0), upd("a", done)), cmd: release(),
			check: phaseStatus(reducer.PhaseProduction, reducer.ProjectCompleted)},
		{name: "release/new work ends production", setup: cmds(add("a", 0), upd("a", done), release()), cmd: add("b", 0),
			check: phaseStatus(reducer.PhasePlanning, reducer.ProjectActive)},
		{name: "release/refused: a task not done", setup: cmds(add("a", 0), add("b", 0), upd("a", done)), cmd: release(),
			wantErr: reducer.ErrInvalidTransition},
		{name: "release/refused: no tasks", cmd: release(), wantErr: reducer.ErrInvalidTransition},
		{name: "release/refused: twice", setup: cmds(add("a", 0), upd("a", done), release()), cmd: release(), wantErr: reducer.ErrInvalidTransition},
		{name: "archive/archived, reporting", setup: cmds(add("a", 0), upd("a", failed)), cmd: archive(),
			check: phaseStatus(reducer.PhaseReporting, reducer.ProjectArchived)},
		{name: "archive/refused: a run is running", setup: taskIn(running), cmd: archive(), wantErr: reducer.ErrInvalidTransition},
		{name: "archive/refused: an approval is pending", setup: cmds(ask("q1", "")), cmd: archive(), wantErr: reducer.ErrInvalidTransition},
		{name: "archive/refused: twice", setup: cmds(archive()), cmd: archive(), wantErr: reducer.ErrInvalidTransition},
		{name: "archive/refused: a task added after", setup: cmds(archive()), cmd: add("a", 0), wantErr: reducer.ErrInvalidTransition},
		{name: "archive/refused: a heartbeat after", setup: cmds(archive()), cmd: beat("", ""), wantErr: reducer.ErrInvalidTransition},
		{name: "archive/refused: a retry after", setup: cmds(add("a", 0), upd("a", failed), archive()), cmd: retry("a", nil),
			wantErr: reducer.ErrInvalidTransition},
		{name: "archive/the sweeper still looks, and marks nothing", setup: cmds(archive()), cmd: markStale(), events: []reducer.Body{}},
	}
}

func ptrU32(v uint32) *uint32 { return &v }

func retry(task string, maxRetries *uint32) reducer.RetryTask {
	return reducer.RetryTask{Project: projID, TaskID: task, MaxRetries: maxRetries, By: "owner"}
}

// ask asks question id about task ("" for the project), a minute from
// the decision.
func ask(id, task string) reducer.AskApproval {
	return reducer.AskApproval{Project: projID, QuestionID: id, TaskID: task, Question: "ship a?", Deadline: cmdNow + 60_000, By: "agent"}
}

// askBy asks question id about task with the given deadline.
func askBy(id, task string, deadline int64) reducer.AskApproval {
	a := ask(id, task)
	a.Deadline = deadline
	return a
}

func decide(id string, outcome reducer.ApprovalOutcome) reducer.DecideApproval {
	return reducer.DecideApproval{Project: projID, QuestionID: id, Outcome: outcome, By: "owner"}
}

func release() reducer.ReleaseProject { return reducer.ReleaseProject{Project: projID, By: "owner"} }
func archive() reducer.ArchiveProject { return reducer.ArchiveProject{Project: projID, By: "owner"} }

// phaseStatus checks the base project's derived phase and status.
func phaseStatus(ph reducer.Phase, st reducer.ProjectStatus) func(t *testing.T, s *world) {
	return func(t *testing.T, s *world) {
		p, _ := s.project(projID)
		assert.Equal(t, ph, p.Phase(), "phase")
		assert.Equal(t, st, p.Status(), "status")
	}
}

func TestTransitions(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range transitionCases() {
		require.False(t, seen[tc.name], "duplicate case name %q", tc.name)
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			l := newLedger(t)
			l.do(baseProject)
			l.do(tc.setup...)
			require.Less(t, l.now, cmdNow, "setup runs past cmdNow")

			before, ptrs := dumpState(l.s), pointers(l.s)
			cmd := withNow(tc.cmd, cmdNow)
			evs, err := l.s.decide(cmd)
			assert.Equal(t, before, dumpState(l.s), "Decide changed the state")
			assert.Equal(t, ptrs, pointers(l.s), "Decide replaced a project")

			if tc.wantErr != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, tc.wantErr)
				assert.Empty(t, evs)
				return
			}
			require.NoError(t, err)
			require.True(t, tc.want != "" || tc.events != nil || tc.check != nil, "an accepted case must assert something")
			if tc.events != nil {
				assert.Equal(t, tc.events, bodies(evs))
			} else {
				assert.NotEmpty(t, evs)
			}
			for _, e := range evs {
				assert.Equal(t, cmdNow, e.Time, "event time is the command's")
				assert.Zero(t, e.Sequence, "Decide leaves Sequence to the ledger")
			}
			l.evolve(evs...)
			for _, e := range evs {
				p, ok := l.s.project(e.ProjectID)
				require.True(t, ok, "event for unknown project %s", e.ProjectID)
				assert.Equal(t, cmdNow, p.Updated)
				assert.Equal(t, l.seq, p.LastSequence)
			}
			if tc.want != "" {
				assert.Equal(t, tc.want, render(l.project()))
			}
			if tc.check != nil {
				tc.check(t, l.s)
			}
		})
	}
}
