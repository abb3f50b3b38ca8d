package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
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

	"scv/control"
	"scv/control/api"
	"scv/control/daemon"
	"scv/reducer"
)

var (
	cliULID  = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)
	cliStamp = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \((just now|\d+s ago)\)`)
	cliAgo   = regexp.MustCompile(`^(just now|\d+s ago)$`)
)

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

// rowOf returns the table row of out that starts with id, split on runs
// of two or more spaces (the table's column gap).
func cliRow(t *testing.T, out, id string) []string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, id+" ") {
			return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		}
	}
	require.Failf(t, "no row", "no row for %s in\n%s", id, out)
	return nil
}

func TestCLILifecycleHuman(t *testing.T) {
	t.Parallel()
	sock := cliDaemon(t)
	ws := t.TempDir()

	out := cliOK(t, sock, "status")
	assert.Regexp(t, `(?m)^version\s+`+regexp.QuoteMeta(version)+`$`, out)
	assert.Regexp(t, `(?m)^pid\s+\d+$`, out)
	assert.Regexp(t, `(?m)^components\s+0$`, out)
	assert.Regexp(t, `(?m)^delegations\s+0 active \(0 idle\), 0 reaped$`, out)

	// Flags after the positional argument.
	out = cliOK(t, sock, "project", "create", "acme", "--workspace", ws)
	assert.Regexp(t, `^project [0-9A-Z]{26} created\n`, out)
	assert.Regexp(t, `(?m)^project\s+acme$`, out)
	assert.Regexp(t, `(?m)^workspace\s+`+regexp.QuoteMeta(ws)+`$`, out)
	assert.Regexp(t, `(?m)^phase\s+discovery$`, out)
	assert.Regexp(t, `(?m)^status\s+active$`, out)
	assert.Regexp(t, `(?m)^progress\s+0/0 tasks done$`, out)
	assert.Regexp(t, `(?m)^created\s+`+cliStamp.String()+`$`, out)
	assert.Regexp(t, `(?m)^heartbeat\s+-$`, out)

	out = cliOK(t, sock, "project", "task", "add", "acme", "design")
	a := cliNewID(t, out, "task", "added")
	assert.Contains(t, out, "\nacme: 0/1 tasks done, phase planning, status active\n")
	// Flags between and after the positional arguments.
	out = cliOK(t, sock, "project", "task", "add", "--max-retries", "2", "acme", "build it", "--depends-on", a)
	b := cliNewID(t, out, "task", "added")

	out = cliOK(t, sock, "project", "tasks", "acme")
	assert.Regexp(t, `(?m)^ID\s+TITLE\s+STATUS\s+RETRIES\s+DEPENDS ON\s+RUN\s+PROGRESS\s+HEARTBEAT$`, out)
	assert.Equal(t, []string{a, "design", "ready", "0/0", "-", "-", "-", "-"}, cliRow(t, out, a))
	assert.Equal(t, []string{b, "build it", "pending", "0/2", "design", "-", "-", "-"}, cliRow(t, out, b), "a dependency by its title")
	assert.True(t, strings.HasSuffix(out, "\n0/2 tasks done\n"), out)

	out = cliOK(t, sock, "project", "run", "start", "acme", a, "--agent", "codex")
	r1 := cliNewID(t, out, "run", "started")
	assert.Contains(t, out, "phase implementation")

	out = cliOK(t, sock, "project", "run", "progress", "acme", r1, "schema\tdrafted")
	assert.True(t, strings.HasPrefix(out, "run "+r1+" progress recorded\n"), out)
	assert.Regexp(t, `(?m)^heartbeat\s+`+cliStamp.String()+`$`, out, "progress counts as a heartbeat")

	out = cliOK(t, sock, "project", "heartbeat", "acme", "--task", a, "--run", r1)
	assert.True(t, strings.HasPrefix(out, "heartbeat recorded for run "+r1+"\n"), out)

	out = cliOK(t, sock, "project", "tasks", "acme")
	row := cliRow(t, out, a)
	assert.Equal(t, []string{a, "design", "running", "0/0", "-", r1, "schema drafted"}, row[:7], "a tab in progress is shown as a space")
	assert.Regexp(t, cliAgo, row[7], "a table's time column says how long ago")

	out = cliOK(t, sock, "project", "run", "finish", "acme", r1, "succeeded")
	assert.True(t, strings.HasPrefix(out, "run "+r1+" finished (succeeded)\n"), out)
	assert.Regexp(t, `(?m)^progress\s+1/2 tasks done$`, out)

	out = cliOK(t, sock, "project", "run", "start", "acme", b, "--agent", "claude")
	r2 := cliNewID(t, out, "run", "started")
	cliOK(t, sock, "project", "run", "finish", "acme", r2, "failed")

	out = cliOK(t, sock, "project", "task", "update", "acme", b, "blocked", "--progress", "waiting on legal")
	assert.True(t, strings.HasPrefix(out, "task "+b+" updated (blocked)\n"), out)

	out = cliOK(t, sock, "project", "status", "acme")
	assert.Regexp(t, `^project\s+acme\n`, out, "status has no headline")
	assert.Regexp(t, `(?m)^status\s+blocked$`, out)
	assert.Regexp(t, `(?m)^phase\s+verification$`, out)

	out = cliOK(t, sock, "project", "report", "acme")
	assert.Regexp(t, `(?m)^progress\s+1/2 tasks done$`, out)
	tasks, rest, found := strings.Cut(out, "\nTasks:\n")
	require.True(t, found, out)
	assert.Contains(t, tasks, "workspace")
	tasks, rest, found = strings.Cut(rest, "\nRuns:\n")
	require.True(t, found, out)
	assert.Equal(t, []string{b, "build it", "blocked", "1/2", "design", "-", "waiting on legal", "-"}, cliRow(t, tasks, b))
	runs, rest, found := strings.Cut(rest, "\nEvidence:\n")
	require.True(t, found, out)
	assert.Regexp(t, `(?m)^ID\s+TASK\s+AGENT\s+STATUS\s+ATTEMPT\s+STARTED\s+UPDATED\s+PROGRESS$`, runs)
	row = cliRow(t, runs, r1)
	assert.Equal(t, []string{r1, "design", "codex", "succeeded", "1"}, row[:5], "a run's task by its title")
	assert.Equal(t, "schema drafted", row[7])
	row = cliRow(t, runs, r2)
	assert.Equal(t, []string{r2, "build it", "claude", "failed", "1"}, row[:5])
	assert.Equal(t, "-", row[7])
	assert.Contains(t, rest, "  1/2 tasks done\n")
	assert.Contains(t, rest, "  2 runs: 0 running, 1 succeeded, 1 failed, 0 cancelled, 0 stale\n")
	assert.Contains(t, rest, "cannot progress: it is blocked on an external condition")
	assert.Regexp(t, `\nreport generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+\n$`, rest)

	out = cliOK(t, sock, "project", "events", "acme")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	assert.Regexp(t, `^SEQ\s+TIME\s+KIND\s+DATA$`, lines[0])
	// created, 2 tasks added, run started, progress, heartbeat, finished,
	// run started, finished, task updated.
	require.Len(t, lines, 1+10, out)
	assert.Regexp(t, `^1\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+\s+project_created\s+\{"name":"acme","workspace":`, lines[1])
	assert.Contains(t, out, `{"run_id":"`+r1+`","progress":"schema\tdrafted"}`, "data is compact JSON, escapes kept")

	out = cliOK(t, sock, "project", "events", "acme", "--after", "9")
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	assert.Regexp(t, `^10\s+\S+ \S+ \S+\s+task_updated\s`, lines[1])

	// Nothing to list: no data on stdout, the note on stderr.
	r := cliRun(t, sock, "project", "events", "acme", "--after", "99")
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "scv: no events after 99\n", r.stderr)
}

func TestCLILifecycleJSON(t *testing.T) {
	t.Parallel()
	sock := cliDaemon(t)
	ws := t.TempDir()

	// call runs a command in --json mode and decodes its one line.
	call := func(args ...string) *api.DaemonStatus {
		t.Helper()
		out := cliOK(t, sock, append([]string{"--json"}, args...)...)
		require.True(t, strings.HasSuffix(out, "\n"), out)
		require.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
		var st api.DaemonStatus
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		assert.Equal(t, version, st.Version)
		assert.Equal(t, uint32(os.Getpid()), st.PID)
		assert.Equal(t, []api.ComponentHealth{}, st.Components)
		return &st
	}

	st := call("status")
	assert.Nil(t, st.Project)
	assert.Equal(t, api.DelegationSummary{Idle: ptr(uint64(0))}, st.Delegations)

	st = call("project", "create", "acme", "--workspace", ws)
	require.NotNil(t, st.Project)
	assert.Equal(t, api.KindCreated, st.Project.Kind)
	assert.Equal(t, "acme", st.Project.Project.Name)
	assert.Equal(t, ws, st.Project.Project.Workspace)
	assert.Equal(t, reducer.PhaseDiscovery, st.Project.Project.Phase)
	pid := st.Project.Project.ID

	st = call("project", "task", "add", pid, "build", "--max-retries", "1")
	assert.Equal(t, api.KindTaskAdded, st.Project.Kind)
	task := st.Project.TaskID
	assert.Regexp(t, cliULID, task)
	assert.Equal(t, uint64(1), st.Project.Project.TaskCount)

	st = call("project", "run", "start", "acme", task, "--agent", "codex")
	assert.Equal(t, api.KindRunStarted, st.Project.Kind)
	runID := st.Project.RunID
	assert.Regexp(t, cliULID, runID)

	st = call("project", "run", "progress", "acme", runID, "half way")
	assert.Equal(t, api.KindUpdated, st.Project.Kind)
	require.NotNil(t, st.Project.Project.LastHeartbeatUnixSeconds)

	st = call("project", "heartbeat", "acme")
	assert.Equal(t, api.KindUpdated, st.Project.Kind)

	// --json works after the command as well.
	out := cliOK(t, sock, "project", "tasks", "acme", "--json")
	var tasks api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(out), &tasks))
	require.Equal(t, api.KindTasks, tasks.Project.Kind)
	require.Len(t, tasks.Project.Tasks, 1)
	got := tasks.Project.Tasks[0]
	assert.Equal(t, reducer.TaskRunning, got.Status)
	assert.Equal(t, uint32(1), got.MaxRetries)
	assert.Equal(t, []string{}, got.DependsOn)
	require.NotNil(t, got.RunID)
	assert.Equal(t, runID, *got.RunID)
	require.NotNil(t, got.Progress)
	assert.Equal(t, "half way", *got.Progress)

	st = call("project", "run", "finish", "acme", runID, "cancelled")
	assert.Equal(t, reducer.ProjectActive, st.Project.Project.Status)
	st = call("project", "task", "update", "acme", task, "done")
	assert.Equal(t, reducer.ProjectCompleted, st.Project.Project.Status)
	assert.Equal(t, uint64(1), st.Project.Project.CompletedTasks)

	st = call("project", "status", "acme")
	assert.Equal(t, api.KindStatus, st.Project.Kind)
	assert.Equal(t, pid, st.Project.Project.ID)

	st = call("project", "report", "acme")
	require.Equal(t, api.KindReport, st.Project.Kind)
	require.Len(t, st.Project.Report.Runs, 1)
	assert.Equal(t, reducer.RunCancelled, st.Project.Report.Runs[0].Status)
	assert.Contains(t, st.Project.Report.Evidence, "1/1 tasks done")

	st = call("project", "events", "acme", "--after", "2")
	require.Equal(t, api.KindEvents, st.Project.Kind)
	require.NotEmpty(t, st.Project.Events)
	assert.Equal(t, uint64(3), st.Project.Events[0].Sequence)
	assert.Equal(t, "run_started", st.Project.Events[0].Kind)

	// The bytes are the daemon's own: the same command through the
	// client library gives the same result.
	cl, err := control.Dial(context.Background(), sock)
	require.NoError(t, err)
	defer cl.Close()
	raw, err := cl.CallRaw(context.Background(), api.CmdProjectTasks{Project: "acme"})
	require.NoError(t, err)
	assert.Equal(t, string(raw)+"\n", cliOK(t, sock, "--json", "project", "tasks", "acme"))
}

func TestCLIDependsOnForms(t *testing.T) {
	t.Parallel()
	sock := cliDaemon(t)
	cliOK(t, sock, "project", "create", "p", "--workspace", t.TempDir())
	add := func(args ...string) string {
		t.Helper()
		return cliNewID(t, cliOK(t, sock, append([]string{"project", "task", "add", "p"}, args...)...), "task", "added")
	}
	a, b, c := add("a"), add("b"), add("c")
	repeated := add("repeated", "--depends-on", a, "--depends-on", b, "--depends-on", c)
	comma := add("comma", "--depends-on", a+","+b+", "+c)
	mixed := add("--depends-on", a+","+b, "mixed", "--depends-on="+c)
	none := add("none")

	out := cliOK(t, sock, "--json", "project", "tasks", "p")
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	deps := map[string][]string{}
	for _, task := range st.Project.Tasks {
		deps[task.ID] = task.DependsOn
	}
	all := []string{a, b, c}
	assert.Equal(t, all, deps[repeated])
	assert.Equal(t, all, deps[comma])
	assert.Equal(t, all, deps[mixed])
	assert.Equal(t, []string{}, deps[none])

	human := cliOK(t, sock, "project", "tasks", "p")
	assert.Equal(t, "a, b, c", cliRow(t, human, repeated)[4], "by title")
	assert.Equal(t, "pending", cliRow(t, human, comma)[2])
}

func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	// No daemon listens here: a usage error must come before any dial,
	// which would fail with exit code 3.
	sock := filepath.Join(cliShortDir(t), "none.sock")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"missing the command; one of:", "project", "Run 'scv --help' for usage."}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate" for "scv"`}},
		{[]string{"projct"}, []string{`unknown command "projct" for "scv"`, "Did you mean this?\n\tproject"}},
		{[]string{"--bogus", "status"}, []string{"unknown flag: --bogus", "Run 'scv --help' for usage."}},
		{[]string{"status", "--bogus"}, []string{"unknown flag: --bogus", "Run 'scv status --help' for usage."}},
		{[]string{"-json", "status"}, []string{"unknown shorthand flag: 'j' in -json"}},
		{[]string{"daemon", "extra"}, []string{`scv daemon: unexpected argument "extra"`}},
		{[]string{"status", "extra"}, []string{`scv status: unexpected argument "extra"`}},
		{[]string{"project"}, []string{"scv project: missing the command; one of: archive, create, events, graph, heartbeat, list, release, report, run, status, task, tasks, timeline"}},
		{[]string{"project", "task"}, []string{"scv project task: missing the command; one of: add, retry, update"}},
		{[]string{"project", "run", "bogus"}, []string{`unknown command "bogus" for "scv project run"`, "exec, finish, progress, start"}},
		{[]string{"project", "run", "strat"}, []string{"Did you mean this?\n\tstart"}},
		{[]string{"project", "create"}, []string{"scv project create: missing NAME", "Run 'scv project create --help' for usage."}},
		{[]string{"project", "status"}, []string{"scv project status: missing PROJECT"}},
		{[]string{"project", "tasks", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"project", "events", "p", "--after", "-1"}, []string{`invalid argument "-1" for "--after" flag`}},
		{[]string{"project", "events", "p", "--after", "x"}, []string{`invalid argument "x" for "--after" flag`}},
		{[]string{"project", "task", "add", "p"}, []string{"missing TITLE", "Run 'scv project task add --help' for usage."}},
		{[]string{"project", "task", "add", "p", "t", "--max-retries", "-2"}, []string{`invalid argument "-2" for "--max-retries" flag`}},
		{[]string{"project", "task", "add", "p", "t", "--max-retries", "4294967296"}, []string{"--max-retries 4294967296 is too large (at most 4294967295)"}},
		{[]string{"project", "task", "add", "p", "t", "--depends-on"}, []string{"flag needs an argument: --depends-on"}},
		{[]string{"project", "task", "update", "p", "t"}, []string{"missing STATUS"}},
		{[]string{"project", "task", "update", "p", "t", "blokced"}, []string{"unknown variant `blokced`", "`blocked`", "`done`", "Run 'scv project task update --help' for usage."}},
		{[]string{"project", "run", "start", "p", "t"}, []string{"--agent NAME is required", "Run 'scv project run start --help' for usage."}},
		{[]string{"project", "run", "start", "p", "t", "--agent", ""}, []string{"--agent NAME is required"}},
		{[]string{"project", "run", "progress", "p", "r"}, []string{"missing TEXT"}},
		{[]string{"project", "run", "finish", "p", "r", "sucess"}, []string{"unknown variant `sucess`, expected one of `succeeded`, `failed`, `cancelled`", "Run 'scv project run finish --help' for usage."}},
		{[]string{"project", "run", "finish", "p", "r", "stale"}, []string{"a run finishes `succeeded`, `failed` or `cancelled`, not `stale`"}},
		{[]string{"project", "run", "exec", "p", "t"}, []string{"missing the command: give it after --"}},
		{[]string{"project", "run", "exec", "p", "--", "true"}, []string{"missing TASK before --"}},
		{[]string{"project", "heartbeat", "p", "--beat"}, []string{"unknown flag: --beat"}},
		{[]string{"project", "status", "p", "--db", "x.db"}, []string{"--db goes with --at SEQ"}},
		{[]string{"delegate", "sh"}, []string{"missing the command: give it after --"}},
		{[]string{"delegations", "kill"}, []string{"give one HANDLE, or --orphans"}},
		{[]string{"chat", "owner"}, []string{`chat "owner": want <channel>:<account>, such as local:owner`}},
		{[]string{"channel", "logout", "local:"}, []string{`chat "local:": account is empty`}},
		{[]string{"confirm", "answer", "Q", "maybe"}, []string{`ANSWER "maybe": want yes or no`}},
		{[]string{"confirm", "ask", "q?", "--timeout", "0s"}, []string{"--timeout must be positive"}},
		{[]string{"channel", "set", "local:owner"}, []string{"give one of --enable and --disable"}},
		{[]string{"project", "list", "--status", "finished"}, []string{"--status: unknown variant `finished`, expected one of `active`, `blocked`, `waiting_approval`, `completed`, `failed`, `archived`"}},
		{[]string{"project", "list", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"project", "task", "retry", "p"}, []string{"missing TASK"}},
		{[]string{"project", "task", "retry", "p", "t", "--max-retries", "4294967296"}, []string{"--max-retries 4294967296 is too large"}},
		{[]string{"project", "release"}, []string{"missing PROJECT"}},
		{[]string{"project", "archive", "p", "q"}, []string{`unexpected argument "q"`}},
		{[]string{"project", "graph", "p", "--format", "png"}, []string{`--format "png": want one of text, svg, dot`}},
		{[]string{"project", "timeline", "p", "--format", "dot"}, []string{`--format "dot": want one of text, svg`}},
		{[]string{"project", "timeline", "p", "--stale-after", "0s"}, []string{"--stale-after must be positive"}},
		{[]string{"project", "report", "p", "--html"}, []string{"--html writes a file: give -o FILE (or -o - for stdout)"}},
		{[]string{"project", "report", "p", "-o", "x.html"}, []string{"-o goes with --html"}},
		{[]string{"project", "report", "p", "--db", "x.db"}, []string{"--db goes with --at SEQ or --html"}},
		{[]string{"confirm", "ask", "q?", "--task", "t"}, []string{"--task goes with --project P"}},
		{[]string{"daemon", "--http", "0.0.0.0:8080"}, []string{"the web UI listens on a loopback address only"}},
		{[]string{"ui", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"ledger"}, []string{"scv ledger: missing the command; one of: compact, copy, export, lease, verify"}},
		{[]string{"ledger", "verify", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"ledger", "verify", "--head", "nothex"}, []string{"want PROJECT_ID=32-byte hex hash"}},
		{[]string{"ledger", "copy", "--from", "x"}, []string{"give both --from and --to"}},
		{[]string{"completion", "tcsh"}, []string{`unknown command "tcsh" for "scv completion"`, "Did you mean this?\n\tbash"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cliRun(t, sock, tc.args...)
			assert.Equal(t, 2, r.code, r.stderr)
			assert.Empty(t, r.stdout)
			assert.True(t, strings.HasPrefix(r.stderr, "scv: "), r.stderr)
			for _, w := range tc.want {
				assert.Contains(t, r.stderr, w)
			}

			// Under --json: one JSON object on stderr, reason usage.
			r = cliRun(t, sock, append([]string{"--json"}, tc.args...)...)
			assert.Equal(t, 2, r.code, r.stderr)
			assert.Empty(t, r.stdout)
			var f failure
			require.NoError(t, json.Unmarshal([]byte(r.stderr), &f), r.stderr)
			assert.Equal(t, failure{Exit: 2, Reason: "usage", Message: f.Message}, f)
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
		})
	}
}

func TestCLIHelp(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(cliShortDir(t), "none.sock")
	r := cliRun(t, sock, "project", "task", "add", "-h")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Usage:\n  scv project task add PROJECT TITLE [flags]\n")
	assert.Contains(t, r.stdout, "--max-retries N")
	assert.Contains(t, r.stdout, "Examples:\n")
	assert.Empty(t, r.stderr)

	r = cliRun(t, sock, "project", "run", "--help")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Usage:\n  scv project run COMMAND ...\n")
	assert.Regexp(t, `(?m)^  exec\s+Run a command as a supervised run of a task$`, r.stdout)
	assert.NotContains(t, r.stdout, "task add")

	r = cliRun(t, sock, "project", "task", "update", "--help")
	assert.Equal(t, 0, r.code, r.stderr)
	for _, w := range []string{"blocked", "ready", "done", "failed"} {
		assert.Regexp(t, `(?m)^  `+w+`\s`, r.stdout, "the status words are listed")
	}

	r = cliRun(t, sock, "daemon", "--help")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Regexp(t, `--heartbeat-every interval\s+journal at most one heartbeat per run per interval \(0: every one; default: a tenth of --stale-after\)\n`, r.stdout)
	assert.NotContains(t, r.stdout, "-1ns")
	assert.Contains(t, r.stdout, "--retain K")

	r = cliRun(t, sock, "ledger", "compact", "--help")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "(default 1000)")

	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "project", "run"}} {
		r = cliRun(t, sock, args...)
		assert.Equal(t, 0, r.code, "%v", args)
		assert.Contains(t, r.stdout, "Usage:", "%v", args)
		assert.Empty(t, r.stderr, "%v", args)
	}
}

func TestCLIDaemonError(t *testing.T) {
	t.Parallel()
	sock := cliDaemon(t)
	r := cliRun(t, sock, "project", "status", "nope")
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	assert.Regexp(t, `^scv: .*"nope".* \[not_found\]\n$`, r.stderr)

	// Under --json the error is one JSON object on stderr.
	r = cliRun(t, sock, "--json", "project", "tasks", "nope")
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	var f failure
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &f), r.stderr)
	assert.Equal(t, 1, f.Exit)
	assert.Equal(t, api.CodeNotFound, f.Code)
	assert.Equal(t, "not_found", f.Reason)
	assert.Contains(t, f.Message, `"nope"`)

	cliOK(t, sock, "project", "create", "p", "--workspace", t.TempDir())
	r = cliRun(t, sock, "project", "task", "add", "p", "t", "--depends-on", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "[not_found]")

	r = cliRun(t, sock, "project", "create", "p", "--workspace", t.TempDir())
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "[conflict]")
}

func TestCLIUnreachable(t *testing.T) {
	t.Parallel()
	dir := cliShortDir(t)

	// No socket file at all.
	missing := filepath.Join(dir, "missing.sock")
	r := cliRun(t, missing, "status")
	assert.Equal(t, 3, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "scv: cannot reach the daemon at "+missing+": is `scv daemon` running?\n", r.stderr)
	r = cliRun(t, missing, "status", "--json")
	assert.Equal(t, 3, r.code)
	assert.JSONEq(t, `{"exit":3,"code":-32005,"reason":"unreachable","message":"cannot reach the daemon at `+missing+`: is `+"`scv daemon`"+` running?"}`, r.stderr)

	// A socket file that a dead daemon left behind.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	require.NoError(t, err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	r = cliRun(t, stale, "project", "tasks", "p")
	assert.Equal(t, 3, r.code)
	assert.Equal(t, "scv: cannot reach the daemon at "+stale+": is `scv daemon` running?\n", r.stderr)
}

// TestCLISocketEnv checks that SCV_SOCKET is the default of --socket, and
// that --socket wins over it.
func TestCLISocketEnv(t *testing.T) {
	sock := cliDaemon(t)
	missing := filepath.Join(cliShortDir(t), "missing.sock")
	t.Setenv("SCV_SOCKET", sock)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"status"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "delegations")

	stdout.Reset()
	assert.Equal(t, 3, run([]string{"--socket", missing, "status"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "cannot reach the daemon at "+missing+":")
}

// TestCLIWorkspaceDefault checks that create sends the current directory,
// and a relative --workspace resolved against it: the daemon's own
// directory means nothing to the caller.
func TestCLIWorkspaceDefault(t *testing.T) {
	sock := cliDaemon(t)
	ws := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
	t.Chdir(ws)

	out := cliOK(t, sock, "--json", "project", "create", "here")
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, ws, st.Project.Project.Workspace)

	out = cliOK(t, sock, "--json", "project", "create", "--workspace", "sub", "there")
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, filepath.Join(ws, "sub"), st.Project.Project.Workspace)
}

// TestFlagsAnywhere: flags before, between and after the positional
// arguments; after -- everything is positional, so a TITLE may start
// with a dash.
func TestFlagsAnywhere(t *testing.T) {
	t.Parallel()
	sock := cliDaemon(t)
	cliOK(t, sock, "project", "create", "p", "--workspace", t.TempDir())
	a := cliNewID(t, cliOK(t, sock, "project", "task", "add", "p", "a"), "task", "added")
	b := cliNewID(t, cliOK(t, sock, "project", "task", "add", "p", "b"), "task", "added")
	for _, tc := range []struct {
		args    []string
		title   string
		deps    []string
		retries uint32
	}{
		{[]string{"p", "T"}, "T", []string{}, 0},
		{[]string{"p", "T", "--depends-on", a, "--depends-on", b, "--max-retries", "2"}, "T", []string{a, b}, 2},
		{[]string{"--max-retries=1", "p", "--depends-on", a + "," + b, "T"}, "T", []string{a, b}, 1},
		{[]string{"p", "--", "-T"}, "-T", []string{}, 0},
		{[]string{"--depends-on", " " + a + " , ," + b + " ", "p", "T"}, "T", []string{a, b}, 0},
	} {
		var st api.DaemonStatus
		require.NoError(t, json.Unmarshal([]byte(cliOK(t, sock, append([]string{"--json", "project", "task", "add"}, tc.args...)...)), &st))
		var tasks api.DaemonStatus
		require.NoError(t, json.Unmarshal([]byte(cliOK(t, sock, "--json", "project", "tasks", "p")), &tasks))
		got := tasks.Project.Tasks[len(tasks.Project.Tasks)-1]
		assert.Equal(t, st.Project.TaskID, got.ID, "%v", tc.args)
		assert.Equal(t, tc.title, got.Title, "%v", tc.args)
		assert.Equal(t, tc.deps, got.DependsOn, "%v", tc.args)
		assert.Equal(t, tc.retries, got.MaxRetries, "%v", tc.args)
	}
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

func TestClean(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "a b c", clean("a\tb\nc", 0))
	assert.Equal(t, "abcd…", clean("abcdefgh", 5))
	assert.Equal(t, "héllo", clean("héllo", 5))
	assert.Equal(t, "-", orDash(nil))
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
