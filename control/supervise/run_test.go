package supervise_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/supervise"
	"scv/reducer"
)

// project creates the project acme, in the daemon's work folder, and
// returns its ID.
func (td *daemon) project() string {
	td.t.Helper()
	return td.call(api.CmdProjectCreate{Name: "acme", Workspace: td.work}).Project.Project.ID
}

// task adds a task (max_retries 0) to acme and returns its ID.
func (td *daemon) task(title string) string {
	td.t.Helper()
	return td.call(api.CmdProjectTaskAdd{Project: "acme", Title: title}).Project.TaskID
}

// run is a supervised run of task in the daemon's work folder.
func (td *daemon) run(task, script string) supervise.Run {
	return supervise.Run{Delegation: td.delegation(script), Project: "acme", Task: task}
}

// report is a task of acme and its runs.
func (td *daemon) report(task string) (api.ProjectTask, []api.ProjectRun) {
	td.t.Helper()
	r := td.call(api.CmdProjectReport{Project: "acme"}).Project.Report
	var tk api.ProjectTask
	for _, x := range r.Tasks {
		if x.ID == task {
			tk = x
		}
	}
	var runs []api.ProjectRun
	for _, x := range r.Runs {
		if x.TaskID == task {
			runs = append(runs, x)
		}
	}
	return tk, runs
}

// events counts acme's events of kind.
func (td *daemon) events(kind string) int {
	td.t.Helper()
	n := 0
	for _, e := range td.call(api.CmdProjectEvents{Project: "acme"}).Project.Events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// output is a file for a command's output, read back once it has run.
func output(t *testing.T) (*os.File, func() string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, func() string {
		b, err := os.ReadFile(f.Name())
		require.NoError(t, err)
		return string(b)
	}
}

// TestRunSucceeded: a command that exits 0 is a run succeeded and its
// task done. Its output is passed through; its progress lines are
// recorded, the last one the run's progress; heartbeats are sent while it
// lives; it sees its project, task and run.
func TestRunSucceeded(t *testing.T) {
	td := startDaemon(t)
	project, task := td.project(), td.task("build")
	open := gate(t, td.work)
	r := td.run(task, `echo "progress: compiling $SCV_TASK"
echo plain
echo "$SCV_PROJECT $SCV_RUN" > ids
read _ < gate
echo "progress: linked"`)
	r.Agent, r.HeartbeatEvery = "codex", 10*time.Millisecond
	out, read := output(t)
	r.Stdout = out
	var notes bytes.Buffer
	r.Notes = &notes
	running := goRun(context.Background(), r.Run)
	ids := readFile(t, td.work, "ids")
	require.Eventually(t, func() bool { return td.events(reducer.KindHeartbeat) >= 2 }, ioTimeout, 10*time.Millisecond,
		"heartbeats while the command lives")
	open()
	ws, err := running.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 0, supervise.ExitCode(ws, err))

	assert.Equal(t, "progress: compiling "+task+"\nplain\nprogress: linked\n", read(), "output passed through")
	tk, runs := td.report(task)
	assert.Equal(t, reducer.TaskDone, tk.Status)
	require.Len(t, runs, 1)
	run := runs[0]
	assert.Equal(t, project+" "+run.ID, ids)
	assert.Equal(t, reducer.RunSucceeded, run.Status)
	assert.Equal(t, "codex", run.Agent)
	require.NotNil(t, run.Progress)
	assert.Equal(t, "linked", *run.Progress)
	assert.Equal(t, 2, td.events(reducer.KindRunProgress))
	assert.Equal(t, []string{"scv: run " + run.ID + " of task " + task + " started", "scv: run " + run.ID + " succeeded"}, lines(notes.String()))
	assert.Empty(t, td.delegations())
	noChildren(t)
}

// TestRunFailed: a command that exits non-zero is a run failed, and with
// max_retries 0 its task fails.
func TestRunFailed(t *testing.T) {
	td := startDaemon(t)
	td.project()
	task := td.task("lint")
	ws, err := td.run(task, "exit 3").Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, supervise.ExitCode(ws, err))
	tk, runs := td.report(task)
	assert.Equal(t, reducer.TaskFailed, tk.Status)
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunFailed, runs[0].Status)
	noChildren(t)
}

// TestRunCancelled: a command stopped by SIGINT (or SIGTERM) given to Run
// is a run cancelled: no retry spent, the task ready again.
func TestRunCancelled(t *testing.T) {
	td := startDaemon(t)
	td.project()
	task := td.task("deploy")
	r := td.run(task, "echo $$ > leader.pid; exec sleep 60")
	sigs := make(chan os.Signal, 1)
	r.Signals = sigs
	running := goRun(context.Background(), r.Run)
	readPID(t, td.work, "leader.pid")
	sigs <- syscall.SIGINT
	ws, err := running.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 128+int(syscall.SIGINT), supervise.ExitCode(ws, err))
	tk, runs := td.report(task)
	assert.Equal(t, reducer.TaskReady, tk.Status)
	assert.Zero(t, tk.Retries)
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunCancelled, runs[0].Status)
	noChildren(t)
}

// TestRunSignalNotCancel: a signal other than SIGINT and SIGTERM is sent
// on, and the run it ends is failed, not cancelled.
func TestRunSignalNotCancel(t *testing.T) {
	td := startDaemon(t)
	td.project()
	task := td.task("watch")
	r := td.run(task, "echo $$ > leader.pid; exec sleep 60")
	sigs := make(chan os.Signal, 1)
	r.Signals = sigs
	running := goRun(context.Background(), r.Run)
	readPID(t, td.work, "leader.pid")
	sigs <- syscall.SIGHUP
	ws, err := running.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 128+int(syscall.SIGHUP), supervise.ExitCode(ws, err))
	_, runs := td.report(task)
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunFailed, runs[0].Status)
	noChildren(t)
}

// TestRunNotStarted: a run the daemon refuses to start, or whose command
// is not found, runs nothing and records nothing.
func TestRunNotStarted(t *testing.T) {
	td := startDaemon(t)
	td.project()
	task := td.task("build")

	r := td.run("no-such-task", "echo ran > ran")
	ws, err := r.Run(context.Background())
	require.Error(t, err)
	assert.Equal(t, api.ReasonNotFound, api.ErrorOf(err).Data.Reason)
	assert.Contains(t, err.Error(), "start a run of task no-such-task")
	assert.Equal(t, supervise.ExitFailed, supervise.ExitCode(ws, err))
	assert.NoFileExists(t, filepath.Join(td.work, "ran"))
	assert.Zero(t, td.sent("delegation_register"))

	starts := td.sent("project_run_start")
	r = td.run(task, "")
	r.Command = []string{"no-such-command-here"}
	ws, err = r.Run(context.Background())
	var notFound *exec.Error
	require.ErrorAs(t, err, &notFound)
	assert.Equal(t, supervise.ExitNotFound, supervise.ExitCode(ws, err))
	assert.Equal(t, starts, td.sent("project_run_start"), "no run started")
	tk, runs := td.report(task)
	assert.Equal(t, reducer.TaskReady, tk.Status)
	assert.Empty(t, runs)
}

// TestRunRefusedReportsSaid: a progress or finish the daemon refuses (the
// run was finished meanwhile by someone else) is said in Notes, and the
// command goes on to its end.
func TestRunRefusedReportsSaid(t *testing.T) {
	td := startDaemon(t)
	td.project()
	task := td.task("build")
	open := gate(t, td.work)
	r := td.run(task, `echo "$SCV_RUN" > run.id
read _ < gate
echo "progress: late"
echo after`)
	out, read := output(t)
	r.Stdout = out
	var notes bytes.Buffer
	r.Notes = &notes
	running := goRun(context.Background(), r.Run)
	run := readFile(t, td.work, "run.id")
	td.call(api.CmdProjectRunFinish{Project: "acme", Run: run, Status: reducer.RunCancelled})
	open()
	ws, err := running.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 0, supervise.ExitCode(ws, err))
	assert.Equal(t, "progress: late\nafter\n", read())
	said := lines(notes.String())
	require.Len(t, said, 3, "%q", said)
	assert.True(t, strings.HasPrefix(said[1], "scv: project_run_progress: "), said[1])
	assert.True(t, strings.HasPrefix(said[2], "scv: finish run "+run+" as succeeded: "), said[2])
	_, runs := td.report(task)
	require.Len(t, runs, 1)
	assert.Equal(t, reducer.RunCancelled, runs[0].Status, "as it was finished")
	noChildren(t)
}
