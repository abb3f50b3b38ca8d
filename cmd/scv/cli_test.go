package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/rpc"
	"scv/reducer"
)

// cliULID is an ID as the daemon makes them.
var cliULID = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)

// cliShortDir is a temporary folder with a path short enough for a socket
// (sun_path holds 108 bytes; t.TempDir() can be longer).
func cliShortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "scv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cliDaemon runs a daemon in-process on a real socket and a real
// SQLite file, and returns the socket path.
func cliDaemon(t *testing.T) string {
	t.Helper()
	return inDaemon(t, daemon.Config{}).Config().Socket
}

// inDaemon opens a daemon with cfg in-process, its database, socket and
// settings file in temporary folders unless cfg names them, and serves it
// until the test ends (or until stop, which it returns too).
func inDaemon(t *testing.T, cfg daemon.Config) *daemon.Daemon {
	t.Helper()
	d, _ := inDaemonStop(t, cfg)
	return d
}

func inDaemonStop(t *testing.T, cfg daemon.Config) (*daemon.Daemon, func()) {
	t.Helper()
	if cfg.DB == "" {
		cfg.DB = filepath.Join(t.TempDir(), "l.db")
	}
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(cliShortDir(t), "d.sock")
	}
	if cfg.ConfigPath == "" {
		cfg.ConfigPath = filepath.Join(t.TempDir(), "channels.json")
	}
	if cfg.Version == "" {
		cfg.Version = version
	}
	d := daemon.New(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, d.Open(ctx))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			assert.NoError(t, d.Close())
			assert.NoError(t, <-served)
		})
	}
	t.Cleanup(stop)
	return d, stop
}

// ptr is a pointer to v.
func ptr[T any](v T) *T { return &v }

type cliResult struct {
	code           int
	stdout, stderr string
}

// scv runs one command line of the binary against the daemon at sock.
func cliRun(t *testing.T, sock string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"--socket", sock}, args...), &stdout, &stderr)
	return cliResult{code, stdout.String(), stderr.String()}
}

// ok runs a command line that must succeed, and returns its stdout.
func cliOK(t *testing.T, sock string, args ...string) string {
	t.Helper()
	r := cliRun(t, sock, args...)
	require.Equal(t, 0, r.code, "scv %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	assert.Empty(t, r.stderr)
	return r.stdout
}

// newID returns the ID in the first line of a task add or run start:
// `task <ID> added`, `run <ID> started`.
func cliNewID(t *testing.T, out, what, verb string) string {
	t.Helper()
	first, _, _ := strings.Cut(out, "\n")
	f := strings.Fields(first)
	require.Len(t, f, 3, "first line %q", first)
	assert.Equal(t, what, f[0])
	assert.Equal(t, verb, f[2])
	require.Regexp(t, cliULID, f[1])
	return f[1]
}

// TestJSONIsTheDaemonsReply: under --json a command prints the daemon's
// bytes as they came: the same command through the client library gives
// the same line. (json-output.txtar shows the replies.)
func TestJSONIsTheDaemonsReply(t *testing.T) {
	t.Parallel()
	sock := cliDaemon(t)
	cliOK(t, sock, "project", "create", "acme", "--workspace", t.TempDir())
	cliOK(t, sock, "project", "task", "add", "acme", "build")
	cl, err := rpc.Dial(context.Background(), sock)
	require.NoError(t, err)
	defer cl.Close()
	raw, err := cl.CallRaw(context.Background(), api.CmdProjectTasks{Project: "acme"})
	require.NoError(t, err)
	assert.Equal(t, string(raw)+"\n", cliOK(t, sock, "--json", "project", "tasks", "acme"))
}

func TestAge(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                               "just now",
		500 * time.Millisecond:          "just now",
		42 * time.Second:                "42s ago",
		3*time.Minute + 59*time.Second:  "3m ago",
		2 * time.Hour:                   "2h ago",
		2*time.Hour + 5*time.Minute:     "2h5m ago",
		4*24*time.Hour + 3*time.Hour:    "4d ago",
		-10 * time.Second:               "in 10s",
		-(90 * time.Minute):             "in 1h30m",
		59*time.Minute + 59*time.Second: "59m ago",
	} {
		assert.Equal(t, want, age(d), d)
	}
}

func TestDash(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "-", orDash(nil))
	assert.Equal(t, "-", dash(""))
}

// TestPrintReport renders a fixed reply (the seed's report example) at a
// fixed time, so every age is known: blocks show the time with its zone
// and its age, table columns the age alone.
func TestPrintReport(t *testing.T) {
	t.Parallel()
	const reply = `{"version":"0.1.0","pid":4242,"components":[],"delegations":{"active":0,"idle":0,"reaped":0},"project":{"kind":"report","report":{"project":{"id":"01J0PROJ","name":"acme","workspace":"/home/me/acme","phase":"implementation","status":"active","created_unix_seconds":1764400000,"updated_unix_seconds":1764400100,"task_count":2,"completed_tasks":1,"last_heartbeat_unix_seconds":null},"tasks":[{"id":"01J0TASK","title":"build","status":"running","depends_on":[],"retries":0,"max_retries":2,"run_id":"01J0RUN","progress":null,"last_heartbeat_unix_seconds":1764400090}],"runs":[{"id":"01J0RUN","task_id":"01J0TASK","agent":"codex","status":"running","attempt":1,"started_unix_seconds":1764400050,"updated_unix_seconds":1764400090,"progress":"tests pass"}],"generated_unix_seconds":1764400200,"evidence":["1/2 tasks done"]}}}`
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(reply), &st))
	now := time.Unix(1764400200, 0)
	at := func(u int64) string { return time.Unix(u, 0).Format(timeLayout) }

	var out bytes.Buffer
	require.NoError(t, printReportReply(&printer{w: &out, now: now}, &st))
	want := "" +
		"project    acme\n" +
		"id         01J0PROJ\n" +
		"workspace  /home/me/acme\n" +
		"phase      implementation\n" +
		"status     active\n" +
		"progress   1/2 tasks done\n" +
		"created    " + at(1764400000) + " (3m ago)\n" +
		"updated    " + at(1764400100) + " (1m ago)\n" +
		"heartbeat  -\n" +
		"\nTasks:\n" +
		"ID        TITLE  STATUS   RETRIES  DEPENDS ON  RUN      PROGRESS  HEARTBEAT\n" +
		"01J0TASK  build  running  0/2      -           01J0RUN  -         1m ago\n" +
		"\nRuns:\n" +
		"ID       TASK   AGENT  STATUS   ATTEMPT  STARTED  UPDATED  PROGRESS\n" +
		"01J0RUN  build  codex  running  1        2m ago   1m ago   tests pass\n" +
		"\nEvidence:\n" +
		"  1/2 tasks done\n" +
		"\nreport generated " + at(1764400200) + "\n"
	assert.Equal(t, want, out.String())
	assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+$`, at(1764400000), "times carry their zone")
}

// TestTableWidth: a table wider than the width is cut in its free-text
// columns (with …), never wrapped, and no line is wider than the width;
// without a width nothing is cut.
func TestTableWidth(t *testing.T) {
	t.Parallel()
	tasks := []api.ProjectTask{{
		ID: "01M8KF5HZMR2V8G5FA1F7A82HB", Title: strings.Repeat("a very long title ", 6), Status: reducer.TaskRunning,
		DependsOn: []string{"01M8KF5HYJ2DXGJ2HQ3HH93JQJ", "01M8KF5J0PP2NA8S5K35ED2TYA"}, RunID: ptr("01M8KF5J2AHEJ2C6P21WKYJZ9B"),
		Progress: ptr(strings.Repeat("compiling the world ", 5)),
	}}
	for _, width := range []int{60, 80, 100, 120} {
		var out bytes.Buffer
		require.NoError(t, printTasks(&printer{w: &out, width: width, now: time.Now()}, tasks))
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		require.Len(t, lines, 2, "one line a row, never wrapped: %q", out.String())
		for _, l := range lines {
			assert.LessOrEqual(t, utf8.RuneCountInString(l), width, "%q", l)
		}
		assert.True(t, strings.HasPrefix(lines[1], "01M8KF5HZMR2V8G5FA1F7A82HB  a very long"), lines[1])
		assert.Contains(t, lines[1], "…")
	}
	var out bytes.Buffer
	require.NoError(t, printTasks(&printer{w: &out, now: time.Now()}, tasks))
	assert.Contains(t, out.String(), tasks[0].Title+" ", "no width: nothing is cut")
	assert.Contains(t, out.String(), *tasks[0].Progress)
}

// TestColor: status words are coloured when the printer is, and only the
// word: the padding is outside the colour, so columns line up.
func TestColor(t *testing.T) {
	tasks := []api.ProjectTask{
		{ID: "A", Title: "build", Status: reducer.TaskDone, DependsOn: []string{}},
		{ID: "B", Title: "test", Status: reducer.TaskFailed, DependsOn: []string{}},
	}
	var out bytes.Buffer
	require.NoError(t, printTasks(&printer{w: &out, color: true, now: time.Now()}, tasks))
	assert.Contains(t, out.String(), "\x1b[32mdone\x1b[0m    0/0")
	assert.Contains(t, out.String(), "\x1b[31mfailed\x1b[0m  0/0")
	out.Reset()
	require.NoError(t, printTasks(&printer{w: &out, now: time.Now()}, tasks))
	assert.NotContains(t, out.String(), "\x1b[")
	assert.False(t, colorFor(&out, false), "not a terminal: no colour")
	t.Setenv("NO_COLOR", "1")
	assert.False(t, colorFor(os.Stdout, false))
}

// TestTaskNamesUnknown: a dependency the table does not know (which a
// daemon never sends; task-names.txtar shows the rest of the rule) is
// shown as its ID.
func TestTaskNamesUnknown(t *testing.T) {
	t.Parallel()
	tasks := []api.ProjectTask{
		{ID: "A", Title: "build", Status: reducer.TaskDone, DependsOn: []string{}},
		{ID: "E", Title: "ship", Status: reducer.TaskPending, DependsOn: []string{"A", "GONE"}},
	}
	var out bytes.Buffer
	require.NoError(t, printTasks(&printer{w: &out, now: time.Now()}, tasks))
	assert.Regexp(t, `(?m)^E +ship +pending +0/0 +build, GONE +- `, out.String())
}

// TestTaskNamesKeys: a title that is another task's plan key would name
// that task on a command line, so it is shown as the task's ID.
func TestTaskNamesKeys(t *testing.T) {
	t.Parallel()
	names := taskNames([]api.ProjectTask{
		{ID: "A", Title: "build", Key: "compile"},
		{ID: "B", Title: "compile"},
		{ID: "C", Title: "ship"},
	})
	assert.Equal(t, "build", names.of("A"))
	assert.Equal(t, "B", names.of("B"))
	assert.Equal(t, "ship", names.of("C"))
}

// TestTasksPlanColumns: PRIORITY shows once a task's priority is not the
// default, EPIC once the project has epics: a child's epic by title, an
// epic's children done of all, and an epic inside another.
func TestTasksPlanColumns(t *testing.T) {
	one := func(n int) *int { return &n }
	tasks := []api.ProjectTask{
		{ID: "01J0A", Title: "app", Status: reducer.TaskRunning, Children: 2},
		{ID: "01J0B", Title: "store", Status: reducer.TaskRunning, Parent: "01J0A", Children: 2, Priority: one(1)},
		{ID: "01J0C", Title: "schema", Status: reducer.TaskDone, Parent: "01J0B", Priority: one(0)},
		{ID: "01J0D", Title: "queries", Status: reducer.TaskRunning, Parent: "01J0B"},
		{ID: "01J0E", Title: "docs", Status: reducer.TaskDone, Parent: "01J0A", Priority: one(4)},
		{ID: "01J0F", Title: "lint", Status: reducer.TaskReady},
	}
	var out bytes.Buffer
	require.NoError(t, printTasks(&printer{w: &out, now: time.Unix(0, 0)}, tasks))
	lines := strings.Split(out.String(), "\n")
	require.Len(t, lines, 8, out.String())
	assert.Regexp(t, `^ID +TITLE +STATUS +PRIORITY +EPIC +RETRIES `, lines[0])
	for i, cells := range [][]string{
		{"01J0A", "app", "running", "2", "epic 1/2"},
		{"01J0B", "store", "running", "1", "epic 1/2, in app"},
		{"01J0C", "schema", "done", "0", "store"},
		{"01J0D", "queries", "running", "2", "store"},
		{"01J0E", "docs", "done", "4", "app"},
		{"01J0F", "lint", "ready", "2", "-"},
	} {
		assert.Regexp(t, "^"+strings.Join(cells, " +")+" +0/0 ", lines[i+1])
	}

	// Without priorities or epics, the table is as it always was.
	out.Reset()
	require.NoError(t, printTasks(&printer{w: &out, now: time.Unix(0, 0)}, tasks[5:]))
	assert.Regexp(t, `^ID +TITLE +STATUS +RETRIES `, out.String())
}
