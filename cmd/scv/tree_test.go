package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/daemon"
)

// commandPaths is every command of the tree, as the words after `scv`
// (the root is the empty path), without cobra's hidden ones.
func commandPaths(t *testing.T) (groups, leaves [][]string) {
	t.Helper()
	root := newRootCmd(&client{now: time.Now}, nil)
	walk(root, func(cmd *cobra.Command) {
		if cmd.Hidden {
			return
		}
		var path []string
		for p := cmd; p.HasParent(); p = p.Parent() {
			path = append([]string{p.Name()}, path...)
		}
		if cmd.Annotations[groupAnnotation] != "" {
			groups = append(groups, path)
		} else {
			leaves = append(leaves, path)
		}
	})
	return groups, leaves
}

// TestCommandTreeHelp walks the whole command tree: every command and
// group answers --help (and -h) on stdout with exit 0, showing its usage
// and flags; every command but cobra's own has examples; a group without
// a command, or with an unknown one, and any command with an unknown
// flag, is a usage error: exit 2, nothing on stdout.
func TestCommandTreeHelp(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(cliShortDir(t), "none.sock")
	groups, leaves := commandPaths(t)
	require.Greater(t, len(leaves), 30)
	cobras := [][]string{{"help"}, {"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"}, {"completion", "powershell"}}
	for _, path := range append(slices.Clone(groups), leaves...) {
		name := "scv " + strings.Join(path, " ")
		for _, h := range []string{"--help", "-h"} {
			r := cliRun(t, sock, append(slices.Clone(path), h)...)
			assert.Equal(t, 0, r.code, "%s %s: %s", name, h, r.stderr)
			assert.Empty(t, r.stderr, "%s %s", name, h)
			assert.Contains(t, r.stdout, "Usage:\n", "%s %s", name, h)
			assert.Contains(t, r.stdout, "--socket PATH", "%s %s: the global flags", name, h)
			assert.NotRegexp(t, `(?m)^\s+-[a-z]{2,}`, r.stdout, "%s: flags are shown with two dashes", name)
		}
		r := cliRun(t, sock, append(slices.Clone(path), "--help")...)
		if !slices.ContainsFunc(cobras, func(c []string) bool { return slices.Equal(c, path) }) && len(path) > 0 {
			assert.Contains(t, r.stdout, "\nExamples:\n", "%s has examples", name)
		}
		if r := cliRun(t, sock, append(slices.Clone(path), "--no-such-flag")...); true {
			assert.Equal(t, 2, r.code, "%s --no-such-flag: %s", name, r.stderr)
			assert.Empty(t, r.stdout, name)
			assert.Contains(t, r.stderr, "unknown flag: --no-such-flag", name)
		}
	}
	for _, path := range groups {
		name := "scv " + strings.Join(path, " ")
		r := cliRun(t, sock, path...)
		assert.Equal(t, 2, r.code, "%s alone: %s", name, r.stderr)
		assert.Empty(t, r.stdout, name)
		assert.Contains(t, r.stderr, "missing the command", name)
		r = cliRun(t, sock, append(slices.Clone(path), "no-such-command")...)
		assert.Equal(t, 2, r.code, "%s no-such-command: %s", name, r.stderr)
		assert.Contains(t, r.stderr, `unknown command "no-such-command"`, name)
	}
}

// TestCommandTreeJSON runs every command of the tree that prints, with
// --json, against a real daemon in-process: stdout is JSON, one value a
// line; a command that fails says so as one JSON object on stderr. Every
// leaf of the tree is either run here or listed with the reason it
// prints no JSON, so that a new command cannot skip --json unnoticed.
func TestCommandTreeJSON(t *testing.T) {
	d := inDaemon(t, daemon.Config{HTTP: "127.0.0.1:0"})
	sock, db := d.Config().Socket, d.Config().DB
	ws := t.TempDir()
	t.Chdir(ws)
	var st struct {
		Project struct {
			TaskID string `json:"task_id"`
			RunID  string `json:"run_id"`
		} `json:"project"`
		Confirm struct {
			ID string `json:"id"`
		} `json:"confirm"`
	}
	jsonOf := func(args ...string) {
		t.Helper()
		require.NoError(t, json.Unmarshal([]byte(cliOK(t, sock, append([]string{"--json"}, args...)...)), &st))
	}
	cliOK(t, sock, "channel", "set", "local:owner", "--enable")
	cliOK(t, sock, "channel", "set", "wechat:main", "--disable")
	jsonOf("project", "create", "acme")
	jsonOf("project", "task", "add", "acme", "build")
	build := st.Project.TaskID
	jsonOf("project", "task", "add", "acme", "test")
	test := st.Project.TaskID
	jsonOf("project", "run", "start", "acme", build, "--agent", "codex")
	run := st.Project.RunID
	jsonOf("confirm", "ask", "ship it?")
	question := st.Confirm.ID
	jsonOf("confirm", "ask", "and this one?")
	other := st.Confirm.ID
	planFile, beadsFile, passFile := filepath.Join(ws, "plan.yaml"), filepath.Join(ws, "issues.jsonl"), filepath.Join(ws, "mail.pass")
	require.NoError(t, os.WriteFile(passFile, []byte("hunter2\n"), 0o600))
	require.NoError(t, os.WriteFile(planFile, []byte("version: 1\ntasks:\n  - {key: docs, title: docs, priority: 0}\n"), 0o644))
	require.NoError(t, os.WriteFile(beadsFile, []byte(`{"id":"bd-1","title":"from beads","status":"open","priority":1,"issue_type":"task","assignee":"ana"}`+"\n"), 0o644))

	type invocation struct {
		args []string
		code int // the exit code expected
	}
	runs := []invocation{
		{[]string{"status"}, 0},
		{[]string{"ui"}, 0},
		{[]string{"version"}, 0},
		{[]string{"reload"}, 0},
		{[]string{"channels"}, 0},
		{[]string{"channel", "list"}, 0},
		{[]string{"channel", "login", "wechat:main", "--imap", "imaps://mail.example.com", "--user", "me", "--password-file", passFile}, 1}, // only email takes a login
		{[]string{"channel", "set", "wechat:other", "--disable"}, 0},
		{[]string{"channel", "logout", "wechat:other"}, 0},
		{[]string{"project", "create", "other"}, 0},
		{[]string{"project", "status", "acme"}, 0},
		{[]string{"project", "status", "acme", "--at", "3", "--db", db}, 0},
		{[]string{"project", "tasks", "acme"}, 0},
		{[]string{"project", "report", "acme"}, 0},
		{[]string{"project", "events", "acme"}, 0},
		{[]string{"project", "heartbeat", "acme", "--run", run}, 0},
		{[]string{"project", "task", "add", "acme", "lint"}, 0},
		{[]string{"project", "plan", "apply", "acme", planFile}, 0},
		{[]string{"project", "plan", "import-beads", "acme", beadsFile}, 0},
		{[]string{"project", "plan", "export", "acme"}, 0},
		{[]string{"project", "ready", "acme"}, 0},
		{[]string{"project", "budget", "acme"}, 0},
		{[]string{"project", "task", "edit", "acme", "docs", "--priority", "1", "--label", "doc"}, 0},
		{[]string{"project", "task", "show", "acme", "docs"}, 0},
		{[]string{"project", "task", "next", "acme", "--agent", "codex", "--label", "doc"}, 0},
		{[]string{"project", "task", "next", "acme", "--agent", "codex", "--label", "doc"}, exitNothingReady},
		{[]string{"project", "task", "update", "acme", test, "blocked", "--progress", "waiting"}, 0},
		{[]string{"project", "run", "progress", "acme", run, "half way"}, 0},
		{[]string{"project", "run", "finish", "acme", run, "succeeded"}, 0},
		{[]string{"project", "run", "start", "acme", build, "--agent", "codex"}, 1}, // done: refused
		{[]string{"project", "list"}, 0},
		{[]string{"project", "list", "--all", "--status", "active"}, 0},
		{[]string{"project", "task", "update", "acme", "lint", "failed"}, 0},
		{[]string{"project", "task", "retry", "acme", "lint", "--max-retries", "1"}, 0},
		{[]string{"project", "task", "retry", "acme", "lint"}, 1}, // ready: refused
		{[]string{"project", "release", "acme"}, 1},               // not every task done: refused
		{[]string{"project", "task", "add", "other", "only"}, 0},
		{[]string{"project", "task", "update", "other", "only", "done"}, 0},
		{[]string{"project", "release", "other"}, 0},
		{[]string{"project", "archive", "other"}, 0},
		{[]string{"project", "budget", "acme", "--tokens", "1000", "--cost", "2.5USD"}, 0},
		{[]string{"project", "budget", "acme"}, 0},
		{[]string{"project", "budget", "acme", "--clear"}, 0},
		{[]string{"project", "graph", "acme", "--db", db}, 0},
		{[]string{"project", "graph", "acme", "--format", "svg", "--at", "3", "--db", db}, 0},
		{[]string{"project", "graph", "acme", "--format", "dot", "--db", db, "-o", filepath.Join(ws, "acme.dot")}, 0},
		{[]string{"project", "graph", "nope", "--db", db}, 1},
		{[]string{"project", "timeline", "acme", "--db", db}, 0},
		{[]string{"project", "timeline", "acme", "--format", "svg", "--db", db, "-o", filepath.Join(ws, "acme.svg")}, 0},
		{[]string{"project", "report", "acme", "--html", "-o", filepath.Join(ws, "acme.html"), "--db", db}, 0},
		{[]string{"project", "report", "acme", "--html", "-o", "-", "--at", "3", "--db", db}, 0},
		{[]string{"confirm", "ask", "lint it all?", "--project", "acme", "--task", "lint"}, 0},
		{[]string{"project", "status", "nope"}, 1},
		{[]string{"project", "tasks", "acme", "--at", "999999", "--db", db}, 1}, // past the head
		{[]string{"delegations"}, 0},
		{[]string{"delegations", "kill", "--orphans"}, 0},
		{[]string{"delegations", "update", "--background-jobs", "0", "--handle", "nope"}, 1},
		{[]string{"agent", "list"}, 0},
		{[]string{"agent", "start", "--", "true"}, 1},                           // speaks no ACP: refused
		{[]string{"project", "work", "acme", "--agents", "1", "--", "true"}, 1}, // speaks no ACP: refused
		{[]string{"project", "work", "acme", "--status"}, 1},                    // no work since the daemon started
		{[]string{"agent", "prompt", "nope", "hi"}, 1},
		{[]string{"agent", "cancel", "nope"}, 1},
		{[]string{"agent", "stop", "nope"}, 1},
		{[]string{"confirm", "status", question}, 8},
		{[]string{"confirm", "list"}, 0},
		{[]string{"confirm", "answer", question, "yes"}, 0},
		{[]string{"confirm", "status", question}, 0},
		{[]string{"confirm", "answer", other, "no"}, 0},
		{[]string{"confirm", "status", other}, 1},
		{[]string{"confirm", "ask", "quick?", "--timeout", "1s", "--wait"}, 5},
		{[]string{"chat"}, 0}, // standard input is empty: it ends at once
		{[]string{"ledger", "compact", "acme", "--retain", "2"}, 0},
		{[]string{"ledger", "verify", "--db", db}, 0},
		{[]string{"ledger", "export", "acme", "--db", db, "-o", filepath.Join(ws, "acme.jsonl")}, 0},
		{[]string{"ledger", "export", "acme", "--db", db}, 0}, // the bundle, JSON Lines, on stdout
		{[]string{"ledger", "verify", "--bundle", filepath.Join(ws, "acme.jsonl")}, 0},
		{[]string{"ledger", "copy", "--from", db, "--to", filepath.Join(ws, "copy.db")}, 0},
		{[]string{"ledger", "lease", "--db", db}, 0},          // a SQLite ledger has no leases: []
		{[]string{"restart-when-idle", "--max-wait", "0"}, 3}, // unavailable: an in-process daemon has no binary to restart into
	}
	noJSON := map[string]string{
		"daemon":                "runs the daemon; with --json it logs JSON lines to stderr (TestDaemonSignal)",
		"delegate":              "the command's own output passes through",
		"project run exec":      "the command's own output passes through",
		"mcp":                   "speaks MCP (JSON-RPC) on its standard input and output (TestMCP)",
		"help":                  "help is for people",
		"completion bash":       "a shell script",
		"completion zsh":        "a shell script",
		"completion fish":       "a shell script",
		"completion powershell": "a shell script",
	}
	covered := map[string]bool{}
	for _, inv := range runs {
		name := strings.Join(inv.args, " ")
		r := cliRun(t, sock, append([]string{"--json"}, inv.args...)...)
		assert.Equal(t, inv.code, r.code, "%s: %s", name, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.stdout == "" {
			lines = nil
		}
		for _, l := range lines {
			assert.True(t, json.Valid([]byte(l)), "%s: stdout line is not JSON: %q", name, l)
		}
		if r.code != 0 && r.stderr != "" {
			var f failure
			assert.NoError(t, json.Unmarshal([]byte(r.stderr), &f), "%s: stderr %q", name, r.stderr)
			assert.Equal(t, r.code, f.Exit, name)
			assert.NotEmpty(t, f.Reason, name)
			assert.NotEmpty(t, f.Message, name)
		} else {
			assert.Empty(t, r.stderr, "%s: nothing but JSON on stderr", name)
		}
		if r.code == 0 || len(lines) > 0 || r.stderr != "" {
			// The leaf the words name.
			root := newRootCmd(&client{now: time.Now}, nil)
			cmd, _, err := root.Find(inv.args)
			require.NoError(t, err)
			covered[strings.TrimPrefix(cmd.CommandPath(), "scv ")] = true
		}
	}
	// No sweeper has taken a lease on this SQLite ledger: an empty list
	// is still a JSON value.
	assert.Equal(t, "[]\n", cliOK(t, sock, "--json", "ledger", "lease", "--db", db))
	_, leaves := commandPaths(t)
	for _, path := range leaves {
		name := strings.Join(path, " ")
		if _, ok := noJSON[name]; !ok {
			assert.True(t, covered[name], "scv %s is neither run with --json here nor listed in noJSON", name)
		}
	}
}
