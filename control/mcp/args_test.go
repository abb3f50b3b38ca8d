package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/mcp"
	"scv/reducer"
)

// inputSchemas is every tool's input schema's properties, by tool.
func inputSchemas(t *testing.T, s *sdk.ClientSession) map[string]map[string]any {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	schemas := map[string]map[string]any{}
	for _, tl := range res.Tools {
		props, _ := tl.InputSchema.(map[string]any)["properties"].(map[string]any)
		schemas[tl.Name] = props
	}
	return schemas
}

// TestMCPArguments: the input schemas carry the daemon's limits and the
// server's own; what the server checks itself (a required argument, one
// a tool does not take, a value of another type, null included, a number
// beyond its bounds, a word not among its words) comes back as a tool
// error that names the argument and what it wants, with reason
// invalid_argument, never repeating the value; nothing reaches the
// ledger.
func TestMCPArguments(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	build := e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}}).Project.TaskID
	run := e.must(api.CmdProjectRunStart{Project: "acme", Task: build, Agent: "a"}).Project.RunID
	s := e.session(mcp.Options{Project: "acme"})
	before := len(e.events("acme"))

	schemas := inputSchemas(t, s)
	prop := func(tool, name string) map[string]any { return schemas[tool][name].(map[string]any) }
	deps := prop("task_add", "depends_on")
	assert.EqualValues(t, reducer.MaxDependsOn, deps["maxItems"])
	assert.EqualValues(t, reducer.MaxRefLen, deps["items"].(map[string]any)["maxLength"])
	for _, c := range []struct {
		tool, arg string
		max       int
	}{
		{"task_add", "title", reducer.MaxNameLen},
		{"task_claim", "agent", reducer.MaxNameLen},
		{"project_status", "project", reducer.MaxRefLen},
		{"task_claim", "task", reducer.MaxRefLen},
		{"run_progress", "run", reducer.MaxRefLen},
		{"run_progress", "progress", reducer.MaxProgressLen},
		{"run_finish", "reason", reducer.MaxReasonLen},
		{"owner_ask", "question", reducer.MaxQuestionLen},
	} {
		assert.EqualValues(t, c.max, prop(c.tool, c.arg)["maxLength"], "%s %s", c.tool, c.arg)
	}
	assert.EqualValues(t, reducer.MaxEventsPage, prop("project_events", "limit")["maximum"])
	assert.EqualValues(t, 600, prop("owner_ask", "wait_seconds")["maximum"])
	assert.Equal(t, []any{"succeeded", "failed", "cancelled"}, prop("run_finish", "status")["enum"])

	long := strings.Repeat("y", 100_000)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"task_add", map[string]any{"title": "t", "depends_on": []any{build, 7}}, "depends_on[1]: want a string"},
		{"task_add", map[string]any{"title": "t", "depends_on": []any{nil}}, "depends_on[0]: want a string"},
		{"task_add", map[string]any{"depends_on": []string{build}}, "title: required"},
		{"task_add", map[string]any{"title": nil}, "title: want a string"},
		{"task_add", map[string]any{"title": "t", "max_retries": -1}, "max_retries: want 0 to 4294967295"},
		{"task_add", map[string]any{"title": "t", "max_retries": 1.5}, "max_retries: want a whole number"},
		{"task_add", map[string]any{"title": "t", long: 1}, strings.Repeat("y", 64) + "…: not an argument of this tool, which takes acceptance, depends_on, description, discovered_from, labels, max_retries, parent, priority, project, title"},
		{"task_claim", map[string]any{}, "task: required"},
		{"project_status", map[string]any{"project": 1}, "project: want a string"},
		{"project_events", map[string]any{"limit": 1001}, "limit: want 0 to 1000"},
		{"project_events", map[string]any{"limit": "ten"}, "limit: want a whole number"},
		{"project_events", map[string]any{"limit": nil}, "limit: want a whole number"},
		{"project_list", map[string]any{"all": "yes"}, "all: want true or false"},
		{"project_list", map[string]any{"all": nil}, "all: want true or false"},
		{"run_progress", map[string]any{"run": nil, "progress": "x"}, "run: want a string"},
		{"run_finish", map[string]any{"run": run, "status": long}, "status: want one of succeeded, failed, cancelled"},
		{"run_finish", map[string]any{"run": run, "status": nil}, "status: want a string"},
		{"owner_ask", map[string]any{"question": "ok?", "wait_seconds": 601}, "wait_seconds: want 0 to 600"},
		{"owner_answer_status", map[string]any{}, "id: required"},
	} {
		assert.Equal(t, c.want+" [invalid_argument]", call(t, s, c.tool, c.args, nil), "%s %v", c.tool, c.args)
	}
	docShows(t, regexp.QuoteMeta("title: required [invalid_argument]"))
	assert.Len(t, e.events("acme"), before, "nothing written")
	assert.Empty(t, e.must(api.CmdConfirmList{}).Questions, "nobody asked")
}

// TestMCPDaemonLimits: an argument past one of the daemon's limits, which
// the input schema advertises, is sent, and the daemon refuses it: the
// tool's error is the daemon's refusal of the same command on the
// socket, its message and its reason, as the CLI prints it; nothing is
// written.
func TestMCPDaemonLimits(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	e.must(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	build := e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}}).Project.TaskID
	s := e.session(mcp.Options{})
	before := len(e.events("acme"))

	name := strings.Repeat("y", reducer.MaxNameLen+100)
	text := strings.Repeat("y", reducer.MaxQuestionLen+1)
	many := make([]string, reducer.MaxDependsOn+1)
	for i := range many {
		many[i] = build
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		cmd  api.Command // what the tool sends
	}{
		{"task_add", map[string]any{"project": "acme", "title": name},
			api.CmdProjectTaskAdd{Project: "acme", Title: name, DependsOn: []string{}}},
		{"task_add", map[string]any{"project": "acme", "title": "t", "depends_on": many},
			api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: many}},
		{"task_add", map[string]any{"project": "acme", "title": "t", "depends_on": []string{build, name}},
			api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: []string{build, name}}},
		{"task_claim", map[string]any{"project": "acme", "task": "build", "agent": name},
			api.CmdProjectRunStart{Project: "acme", Task: "build", Agent: name}},
		{"task_claim", map[string]any{"project": "acme", "task": name},
			api.CmdProjectRunStart{Project: "acme", Task: name, Agent: "test-agent"}},
		{"project_status", map[string]any{"project": name}, api.CmdProjectStatus{Project: name}},
		{"run_heartbeat", map[string]any{"project": "acme", "run": name}, api.CmdProjectHeartbeat{Project: "acme", Run: &name}},
		{"owner_ask", map[string]any{"question": text}, api.CmdConfirmAsk{Question: text}},
	} {
		want := e.refusal(c.cmd)
		assert.Equal(t, want, call(t, s, c.tool, c.args, nil), "%s: the daemon's answer", c.tool)
	}
	msg := call(t, s, "task_add", map[string]any{"project": "acme", "title": strings.Repeat("t", 300)}, nil)
	assert.Equal(t, "invalid argument: title is 300 characters, more than 200 [invalid_argument]", msg)
	docShows(t, regexp.QuoteMeta(msg))
	assert.Len(t, e.events("acme"), before, "nothing written")
	assert.Empty(t, e.must(api.CmdConfirmList{}).Questions, "nobody asked")
}

// TestMCPDocListsTools: docs/mcp.md's table of tools names every tool
// tools/list gives, each with the description it has there; its table of
// limits gives each limit the input schemas carry.
func TestMCPDocListsTools(t *testing.T) {
	doc := mcpDoc(t)
	e := newEnv(t, daemon.Config{})
	s := e.session(mcp.Options{})
	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, res.Tools, 14)
	for _, tl := range res.Tools {
		var row string
		for line := range strings.SplitSeq(doc, "\n") {
			if strings.HasPrefix(line, "| `"+tl.Name+"` |") {
				row = line
			}
		}
		if assert.NotEmpty(t, row, "docs/mcp.md lists %s", tl.Name) {
			// The doc's text may quote field names: compare without backquotes.
			plain := strings.ReplaceAll(row, "`", "")
			first, _, _ := strings.Cut(tl.Description, ":")
			assert.Contains(t, plain, strings.ReplaceAll(first, "`", ""), "%s: the doc says what tools/list says", tl.Name)
		}
	}
	_, limits, ok := strings.Cut(doc, "| argument | limit | checked by |\n|---|---|---|\n")
	require.True(t, ok, "docs/mcp.md has a table of limits")
	limits, _, _ = strings.Cut(limits, "\n\n")
	checked := 0
	for tool, props := range inputSchemas(t, s) {
		for name, p := range props {
			p := p.(map[string]any)
			var want []string
			for _, k := range []string{"maxLength", "maxItems", "maximum"} {
				if n, ok := p[k].(float64); ok && !(k == "maximum" && n > 1e9) { // not a type's own bound
					want = append(want, thousands(int(n)))
				}
			}
			if items, ok := p["items"].(map[string]any); ok {
				if n, ok := items["maxLength"].(float64); ok {
					want = append(want, thousands(int(n)))
				}
			}
			words, _ := p["enum"].([]any)
			for _, w := range words {
				want = append(want, "`"+w.(string)+"`")
			}
			if len(want) == 0 {
				continue
			}
			var row string
			for line := range strings.SplitSeq(limits, "\n") {
				if args, _, _ := strings.Cut(line, " | "); strings.Contains(args, "`"+name+"`") {
					row = line
				}
			}
			if assert.NotEmpty(t, row, "docs/mcp.md gives the limit of %s (%s)", name, tool) {
				_, limit, _ := strings.Cut(row, " | ")
				for _, w := range want {
					assert.Contains(t, limit, w, "%s of %s: %s", name, tool, row)
				}
				checked++
			}
		}
	}
	assert.Greater(t, checked, 20, "the limits of the tools' arguments")
}

// thousands is n as the docs write it: 2,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestMCPDocSession runs docs/mcp.md's worked session: each call as the
// doc gives it, each error as it says, each field it shows in a result
// (but times) and each piece of the report it quotes; IDs are the
// session's own.
func TestMCPDocSession(t *testing.T) {
	doc := mcpDoc(t)
	_, session, ok := strings.Cut(doc, "\n## A session\n")
	require.True(t, ok)
	_, session, _ = strings.Cut(session, "```\n")
	session, _, _ = strings.Cut(session, "```")
	lines := strings.Split(strings.TrimSpace(session), "\n")

	e := newEnv(t, daemon.Config{HeartbeatEvery: 10 * time.Minute, StaleAfter: time.Hour})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	desc, acc := "Build every package with -trimpath.", "go build ./... exits 0"
	build := e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}, MaxRetries: 1,
		Description: &desc, Acceptance: &acc}).Project.TaskID
	e.must(api.CmdProjectTaskAdd{Project: "acme", Title: "test", DependsOn: []string{build}})
	s := connect(t, e.h, "claude-code", mcp.Options{Project: "acme"}, nil)

	// The doc's IDs stand for the session's: the task's in the report it
	// quotes, the run's in task_claim's result.
	ids := map[string]string{}
	id := regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`)
	if m := regexp.MustCompile(`\| ([0-9A-HJKMNP-TV-Z]{26}) \| build \|`).FindStringSubmatch(session); assert.NotNil(t, m) {
		ids[m[1]] = build
	}
	docRun := regexp.MustCompile(`"run_id":"([0-9A-HJKMNP-TV-Z]{26})"`).FindStringSubmatch(session)
	require.NotNil(t, docRun, "the doc claims a run")
	ours := func(s string) string {
		return id.ReplaceAllStringFunc(s, func(id string) string {
			if v, ok := ids[id]; ok {
				return v
			}
			return id
		})
	}
	field := regexp.MustCompile(`"(\w+)":("[^"]*"|-?\d+)`)
	var got any         // the last call's structured result
	var resource string // the last resource read
	var errText string
	calls := 0
	for _, line := range lines {
		line = ours(line)
		switch {
		case strings.HasPrefix(line, "tools/call "):
			name, args, _ := strings.Cut(strings.TrimPrefix(line, "tools/call "), " ")
			var in map[string]any
			require.NoError(t, json.Unmarshal([]byte(args), &in), line)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: in})
			cancel()
			require.NoError(t, err, line)
			got, errText = res.StructuredContent, ""
			if res.IsError {
				errText = res.Content[0].(*sdk.TextContent).Text
			}
			calls++
		case strings.HasPrefix(line, "resources/read "):
			rr, err := s.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: strings.TrimPrefix(line, "resources/read ")})
			require.NoError(t, err, line)
			resource = rr.Contents[0].Text
			calls++
		case strings.HasPrefix(line, "  → isError: "):
			assert.Equal(t, strings.TrimPrefix(line, "  → isError: "), errText)
		case strings.HasPrefix(line, "  → {"):
			require.Empty(t, errText, line)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			if _, ok := ids[docRun[1]]; !ok {
				var claimed struct {
					RunID string `json:"run_id"`
				}
				require.NoError(t, json.Unmarshal(b, &claimed))
				require.NotEmpty(t, claimed.RunID)
				ids[docRun[1]] = claimed.RunID
				line = ours(line)
			}
			for _, f := range field.FindAllStringSubmatch(line, -1) {
				if !strings.HasSuffix(f[1], "_unix_seconds") {
					assert.Contains(t, string(b), f[0], "%s: in %s", line, b)
				}
			}
		case strings.HasPrefix(line, "  → "):
			for piece := range strings.SplitSeq(strings.TrimPrefix(line, "  → "), "…") {
				assert.Contains(t, resource, strings.TrimSpace(piece), line)
			}
		default:
			t.Fatalf("a line of the doc's session this test does not know: %q", line)
		}
	}
	assert.Equal(t, 9, calls, "the session's calls")
}

// Two requests of a session on standard input, as a client writes them
// without waiting for the answers.
const (
	initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	listCall   = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"project_list","arguments":{}}}`
)

// TestMCPStdioEndOfInput: a session whose input ends right after its
// requests (`printf '<initialize>\n<tools/call>\n' | scv mcp`) answers
// every one of them, then Run returns nil; with the last newline or
// without.
func TestMCPStdioEndOfInput(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	for _, input := range []string{initialize + "\n" + listCall + "\n", initialize + "\n" + listCall} {
		var out, log syncBuffer
		require.NoError(t, mcp.Run(context.Background(), e.h, mcp.Options{}, strings.NewReader(input), &out, &log))
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		require.Len(t, lines, 2, "an answer to each request: %s", out.String())
		var answers [2]struct {
			ID     int `json:"id"`
			Result struct {
				ServerInfo        struct{ Name string } `json:"serverInfo"`
				StructuredContent struct {
					Projects []api.ProjectListItem `json:"projects"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		for i, line := range lines {
			require.NoError(t, json.Unmarshal([]byte(line), &answers[i]), line)
		}
		assert.Equal(t, 1, answers[0].ID)
		assert.Equal(t, "scv", answers[0].Result.ServerInfo.Name)
		assert.Equal(t, 2, answers[1].ID)
		require.Len(t, answers[1].Result.StructuredContent.Projects, 1, lines[1])
		assert.Equal(t, "acme", answers[1].Result.StructuredContent.Projects[0].Name)
		assert.Empty(t, log.String())
	}
}

// TestMCPStdioRefusals: on standard input, a JSON-RPC batch (which MCP
// has not had since 2025-06-18) is answered with a JSON-RPC error
// (invalid_request), a line that is not JSON (a message spread over
// several lines is not, nor two messages on one line) with another
// (parse_error), and one that is JSON
// but not a JSON-RPC message with an invalid_request, each with a null
// ID and said on the log; a blank line is passed over; and the session
// lives on: the requests around them are answered.
func TestMCPStdioRefusals(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	input := strings.Join([]string{initialize,
		"[" + listCall + "]",
		"{\"jsonrpc\":\"2.0\",\n\"id\":3,\"method\":\"ping\"}",
		"",
		`{"jsonrpc":"2.0","id":5,"method":"ping"} {"jsonrpc":"2.0","id":6,"method":"ping"}`,
		`{"jsonrpc":"1.0","id":4,"method":"ping"}`,
		listCall}, "\n") + "\n"
	var out, log syncBuffer
	require.NoError(t, mcp.Run(context.Background(), e.h, mcp.Options{}, strings.NewReader(input), &out, &log))

	type answer struct {
		ID     *int            `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *api.Error      `json:"error"`
	}
	var answers []answer
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var a answer
		require.NoError(t, json.Unmarshal([]byte(line), &a), line)
		answers = append(answers, a)
	}
	require.Len(t, answers, 7, out.String())
	var refused []api.Error
	ids := map[int]bool{}
	for _, a := range answers {
		if a.ID == nil {
			require.NotNil(t, a.Error)
			refused = append(refused, *a.Error)
			continue
		}
		require.Nil(t, a.Error, "request %d", *a.ID)
		ids[*a.ID] = true
	}
	assert.Equal(t, map[int]bool{1: true, 2: true}, ids, "the session lives on")
	require.Len(t, refused, 5)
	assert.Equal(t, api.CodeInvalidRequest, refused[0].Code)
	assert.Equal(t, api.ReasonInvalidRequest, refused[0].Data.Reason)
	assert.Contains(t, refused[0].Message, "a JSON-RPC batch: MCP has none since 2025-06-18")
	for _, r := range refused[1:4] {
		assert.Equal(t, api.CodeParseError, r.Code, r.Message)
		assert.Equal(t, api.ReasonParseError, r.Data.Reason)
		assert.Contains(t, r.Message, "not a JSON-RPC message on one line of standard input: not JSON")
	}
	assert.Equal(t, api.CodeInvalidRequest, refused[4].Code, refused[4].Message)
	assert.Contains(t, refused[4].Message, "not a JSON-RPC message on one line of standard input")
	assert.Equal(t, 5, strings.Count(log.String(), "answered with an error"), log.String())
}

// TestMCPStdioCancel: when its context ends, Run returns, though its
// input, which cannot be closed, neither ends nor has a line to read.
func TestMCPStdioCancel(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	inR, inW := io.Pipe()
	defer inW.Close()
	var out, log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- mcp.Run(ctx, e.h, mcp.Options{}, struct{ io.Reader }{inR}, &out, &log)
	}()
	_, err := io.WriteString(inW, initialize+"\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), `"id":1`) }, 30*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
}

// TestMCPOversizedMessage: a message on standard input over 1 MiB is
// answered with a JSON-RPC error (too_large) that says the limit, said on
// the log too, and the session lives on; when its input ends, Run returns
// nil.
func TestMCPOversizedMessage(t *testing.T) {
	e := newEnv(t, daemon.Config{})
	e.must(api.CmdProjectCreate{Name: "acme", Workspace: e.ws})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var log syncBuffer
	ran := make(chan error, 1)
	go func() {
		ran <- mcp.Run(context.Background(), e.h, mcp.Options{Project: "acme"}, inR, outW, &log)
		outW.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil).
		Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)
	before := len(e.events("acme"))

	_, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "task_add",
		Arguments: map[string]any{"title": strings.Repeat("t", 1<<20)}})
	require.Error(t, err)
	assert.Regexp(t, `message too large: \d+ bytes on one line of standard input, more than the 1048576 allowed \[too_large\]`, err.Error())
	assert.Regexp(t, `scv mcp: message too large: \d+ bytes on one line of standard input, more than the 1048576 allowed: answered with an error`, log.String())
	docShows(t, `message too large: \d+ bytes on one line\s+of standard input, more than the 1048576 allowed \[too_large\]`)

	var st struct {
		Project api.ProjectSummary `json:"project"`
	}
	mustCall(t, s, "project_status", nil, &st)
	assert.Equal(t, "acme", st.Project.Name, "the session lives on")
	mustCall(t, s, "task_add", map[string]any{"title": strings.Repeat("t", reducer.MaxNameLen)}, nil)
	assert.Len(t, e.events("acme"), before+1, "only the task that fits")
	require.NoError(t, s.Close())
	select {
	case err := <-ran:
		assert.NoError(t, err, "the end of the input ends the session")
	case <-ctx.Done():
		t.Fatal("Run did not return at the end of its input")
	}
}
