package control_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"scv/control/api"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// q is s as a JSON string literal (control characters escaped as \u00XX).
func q(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestReliabilityValidation sends hostile workspaces, names, titles,
// agents and handles. Each refused one gets its documented error and
// appends nothing; the few that are accepted on purpose (spaces around a
// name, bidi and other format characters, `..` that lands on an existing
// folder, a symlink to a folder) are accepted and stored as
// docs/protocol.md says.
func TestReliabilityValidation(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	task := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 0}).TaskID

	// The file system's hostile shapes.
	file := filepath.Join(d.dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	dangling := filepath.Join(d.dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(d.dir, "nowhere"), dangling))
	symFile := filepath.Join(d.dir, "symfile")
	require.NoError(t, os.Symlink(file, symFile))
	symDir := filepath.Join(d.dir, "symdir")
	require.NoError(t, os.Symlink(d.workspace, symDir))
	loop := filepath.Join(d.dir, "loop")
	require.NoError(t, os.Symlink(loop, loop))
	missing := filepath.Join(d.dir, "missing")

	create := func(name, ws string) string {
		return `{"action":"project_create","name":` + name + `,"workspace":` + ws + `}`
	}
	n := 0
	ws := func(w string) string { n++; return create(q(fmt.Sprintf("w%d", n)), w) }
	name := func(lit string) string { return create(lit, q(d.workspace)) }
	title := func(lit string) string {
		return `{"action":"project_task_add","project":"acme","title":` + lit + `,"depends_on":[],"max_retries":0}`
	}
	agent := func(lit string) string {
		return `{"action":"project_run_start","project":"acme","task":` + q(task) + `,"agent":` + lit + `}`
	}
	register := func(handle, agent, cwd string) string {
		return `{"action":"delegation_register","handle":` + handle + `,"agent":` + agent +
			`,"parent":` + handle + `,"pid":1,"owner_pid":1,"cwd":` + cwd + `}`
	}
	const arg, params, parse = "invalid_argument", "invalid_params", "parse_error"

	refused := []struct {
		name, params string
		code         int
		reason       string
	}{
		// Workspaces: an absolute path to an existing directory.
		{"workspace relative", ws(q("acme")), -32602, arg},
		{"workspace ./relative", ws(q("./acme")), -32602, arg},
		{"workspace ../relative", ws(q("../tmp")), -32602, arg},
		{"workspace empty", ws(q("")), -32602, arg},
		{"workspace only spaces", ws(q("   ")), -32602, arg},
		{"workspace ~ (not expanded)", ws(q("~")), -32602, arg},
		{"workspace ~/x", ws(q("~/acme")), -32602, arg},
		{"workspace leading space", ws(q(" " + d.workspace)), -32602, arg},
		{"workspace trailing space", ws(q(d.workspace + " ")), -32602, arg},
		{"workspace file URL", ws(q("file://" + d.workspace)), -32602, arg},
		{"workspace Windows drive", ws(q(`C:\acme`)), -32602, arg},
		{"workspace UNC path", ws(q(`\\server\share`)), -32602, arg},
		{"workspace NUL at the end", ws(q(d.workspace + "\x00")), -32602, arg},
		{"workspace NUL inside", ws(q(d.workspace + "\x00/x")), -32602, arg},
		{"workspace control characters", ws(q(d.workspace + "\x1b[31m")), -32602, arg},
		{"workspace newline", ws(q(d.workspace + "\nx")), -32602, arg},
		{"existing folder with an escape in its name", ws(q(mkdirAll(t, d.workspace, "\x1b[31mred"))), -32602, arg},
		{"existing folder with a newline in its name", ws(q(mkdirAll(t, d.workspace, "two\nlines"))), -32602, arg},
		{"workspace a regular file", ws(q(file)), -32602, arg},
		{"workspace below a file", ws(q(file + "/x")), -32602, arg},
		{"workspace dangling symlink", ws(q(dangling)), -32602, arg},
		{"workspace symlink to a file", ws(q(symFile)), -32602, arg},
		{"workspace symlink loop", ws(q(loop)), -32602, arg},
		{"workspace missing folder", ws(q(missing)), -32602, arg},
		{"workspace .. escaping to a missing folder", ws(q(d.workspace + "/../../../nonexistent-scv")), -32602, arg},
		{"workspace 5,000 bytes", ws(q("/" + strings.Repeat("a", 4999))), -32602, arg},
		{"workspace 5,000 bytes of segments", ws(q(strings.Repeat("/abcd", 1000))), -32602, arg},
		{"workspace lone surrogate", ws(`"/tmp/\udc80"`), -32602, params},
		{"workspace not a string", ws(`["/tmp"]`), -32602, params},
		{"workspace raw invalid UTF-8", ws("\"/tmp/\xff\""), -32700, parse},
		// Project names: 1 to 200 characters, not only white space, no
		// control characters.
		{"name empty", name(q("")), -32602, arg},
		{"name only spaces", name(q("   ")), -32602, arg},
		{"name only other white space", name(q("\u00a0\u3000")), -32602, arg},
		{"name 201 characters", name(q(strings.Repeat("a", 201))), -32602, arg},
		{"name 201 two-byte characters", name(q(strings.Repeat("é", 201))), -32602, arg},
		{"name 201 four-byte characters", name(q(strings.Repeat("😀", 201))), -32602, arg},
		{"name 5,000 bytes", name(q(strings.Repeat("x", 5000))), -32602, arg},
		{"name NUL", name(q("\x00")), -32602, arg},
		{"name NUL inside", name(q("ac\x00me")), -32602, arg},
		{"name newline", name(q("ac\nme")), -32602, arg},
		{"name carriage return", name(q("acme\r")), -32602, arg},
		{"name tab", name(q("\tacme")), -32602, arg},
		{"name ANSI escape", name(q("\x1b[2Jacme")), -32602, arg},
		{"name DEL", name(q("acme\x7f")), -32602, arg},
		{"name C1 NEL", name(q("acme\u0085")), -32602, arg},
		{"name C1 CSI", name(q("\u009b31macme")), -32602, arg},
		{"name path traversal and a NUL", name(q("../../etc/passwd\x00")), -32602, arg},
		{"name lone surrogate", name(`"acme\ud83d"`), -32602, params},
		{"name a number", name(`42`), -32602, params},
		{"name null", name(`null`), -32602, params},
		{"name raw invalid UTF-8", name("\"ac\xc3\x28me\""), -32700, parse},
		// Task titles, as names.
		{"title empty", title(q("")), -32602, arg},
		{"title only spaces", title(q(" ")), -32602, arg},
		{"title 201 characters", title(q(strings.Repeat("t", 201))), -32602, arg},
		{"title newline", title(q("build\nrm -rf /")), -32602, arg},
		{"title ANSI escape", title(q("\x1b]0;pwned\x07")), -32602, arg},
		{"title lone surrogate", title(`"\udfff"`), -32602, params},
		// Run agents, as names.
		{"agent empty", agent(q("")), -32602, arg},
		{"agent 201 characters", agent(q(strings.Repeat("g", 201))), -32602, arg},
		{"agent NUL", agent(q("codex\x00")), -32602, arg},
		{"agent CRLF", agent(q("codex\r\n")), -32602, arg},
		// Delegation handles, agents and folders.
		{"handle traversal", register(q("../../etc/passwd"), q("codex"), q(d.workspace)), -32602, arg},
		{"handle empty", register(q(""), q("codex"), q(d.workspace)), -32602, arg},
		{"handle NUL", register(q("h\x00"), q("codex"), q(d.workspace)), -32602, arg},
		{"handle 65 characters", register(q(strings.Repeat("h", 65)), q("codex"), q(d.workspace)), -32602, arg},
		{"handle with a space", register(q("h 1"), q("codex"), q(d.workspace)), -32602, arg},
		{"delegation agent escape", register(q("h1"), q("\x1b[2J"), q(d.workspace)), -32602, arg},
		{"delegation cwd relative", register(q("h1"), q("codex"), q("acme")), -32602, arg},
		// A project reference is an ID or a name, never a path.
		{"project reference traversal", `{"action":"project_tasks","project":"../acme"}`, -32001, "not_found"},
		{"project reference with NUL", `{"action":"project_status","project":"acme\u0000"}`, -32001, "not_found"},
	}
	require.GreaterOrEqual(t, len(refused), 30)

	before := lastSequence(t, d)
	rc := d.raw(t)
	for i, tc := range refused {
		id := fmt.Sprint(i + 1)
		r := rc.roundTrip(request(id, tc.params))
		wantID := id
		if tc.code == -32700 {
			wantID = "null" // the line never parsed
		}
		assertError(t, r, wantID, tc.code, tc.reason)
		assert.Equal(t, before, lastSequence(t, d), "%s: nothing appended", tc.name)
	}
	dels, err := c.Call(testCtx(t), api.CmdDelegations{All: true})
	require.NoError(t, err)
	assert.Empty(t, dels.Delegations.Entries, "no delegation registered")
	projects := 0
	for _, p := range []string{"w1", "w5", "w17", "acme\x00"} {
		if _, err := c.Call(testCtx(t), api.CmdProjectStatus{Project: p}); err == nil {
			projects++
		}
	}
	assert.Zero(t, projects, "no refused project exists")

	// Accepted on purpose. A workspace is cleaned lexically (filepath.Clean)
	// before it is checked, so what is stored is what was checked; any
	// existing folder may be a workspace, so `..` escapes nothing. A
	// symlink to a folder is kept as given, not resolved.
	accepted := []struct {
		name, ws, project string
		stored            string // the workspace as stored
	}{
		{"spaces around", d.workspace, "  acme two  ", d.workspace},
		{"bidi override (format, not control)", d.workspace, "\u202egnp.exe", d.workspace},
		{"zero-width space", d.workspace, "ac\u200bme", d.workspace},
		{"line separator U+2028", d.workspace, "ac\u2028me", d.workspace},
		{"200 characters", d.workspace, strings.Repeat("a", 200), d.workspace},
		{"200 two-byte characters (400 bytes)", d.workspace, strings.Repeat("é", 200), d.workspace},
		{"200 four-byte characters (800 bytes)", d.workspace, strings.Repeat("😀", 200), d.workspace},
		{"`..` back into the folder", d.workspace + "/../acme", "dotdot", d.workspace},
		{"`..` above the root", "/../../.." + d.workspace, "above-root", d.workspace},
		{"trailing slash and double slashes", "/" + d.workspace + "//./", "slashes", d.workspace},
		{"symlink to a folder", symDir, "symdir", symDir},
	}
	for _, tc := range accepted {
		seq := lastSequence(t, d)
		p := call(t, c, api.CmdProjectCreate{Name: tc.project, Workspace: tc.ws})
		require.NotNil(t, p.Project, tc.name)
		assert.Equal(t, tc.project, p.Project.Name, "%s: name stored as given", tc.name)
		assert.Equal(t, tc.stored, p.Project.Workspace, "%s: workspace stored", tc.name)
		assert.Equal(t, seq+1, lastSequence(t, d), "%s: one event appended", tc.name)
	}

	t.Logf("RELIABILITY: validation: %d hostile workspaces, names, titles, agents, handles and references refused with their documented code, last sequence unchanged at %d; %d deliberate edge cases accepted and stored as documented (spaces around a name, bidi/format characters, 200 characters of any width, `..` cleaned, symlinked folder kept)",
		len(refused), before, len(accepted))
}

// mkdirAll makes the folder name in dir and returns its path: a workspace
// that exists, so that only its name can be refused.
func mkdirAll(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(p, 0o755))
	return p
}
