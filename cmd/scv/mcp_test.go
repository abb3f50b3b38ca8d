package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
)

// These tests run `scv mcp` as an agent starts it: a real process that
// speaks MCP on its standard input and output, one JSON-RPC message a
// line, against a real daemon on a real socket. The server itself is
// control/mcp's, tested there.

// initRequest is an MCP client's first request.
const initRequest = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test-agent","version":"1"}}}`

// toolCall is the request, of ID id, that calls tool with args.
func toolCall(t *testing.T, id int, tool string, args map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	require.NoError(t, err)
	return string(b)
}

// mcpAnswer is the answer to a request of an MCP session.
type mcpAnswer struct {
	ID     int `json:"id"`
	Result struct {
		IsError           bool `json:"isError"`
		Content           []struct{ Text string }
		StructuredContent json.RawMessage `json:"structuredContent"`
	} `json:"result"`
	Error *api.Error `json:"error"`
}

// text is the answer's tool error text, "" if the tool succeeded.
func (a mcpAnswer) text() string {
	if !a.Result.IsError || len(a.Result.Content) == 0 {
		return ""
	}
	return a.Result.Content[0].Text
}

// mcpPipe runs `bin --socket sock mcp ARGS` with input on its standard
// input, which then ends, and returns its answers, by ID, and its exit
// code.
func mcpPipe(t *testing.T, bin, sock, input string, args ...string) (map[int]mcpAnswer, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--socket", sock, "mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "SCV_PARENT=", "SCV_DELEGATION=")
	cmd.Stdin = strings.NewReader(input)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else {
		require.NoError(t, err)
	}
	answers := map[int]mcpAnswer{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var a mcpAnswer
		require.NoError(t, json.Unmarshal([]byte(line), &a), line)
		answers[a.ID] = a
	}
	assert.Empty(t, stderr.String())
	return answers, code
}

// TestMCPCommand: `printf '<initialize>\n<tools/call>…\n' | scv mcp`
// answers every request it read, then exits 0; --project confines the
// session (another project: forbidden), and the daemon's refusal of a
// title past its limit is the one `scv project task add` prints, message
// and reason; --run without --project is a usage error; with no daemon,
// a tool call fails at once, naming the socket.
func TestMCPCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := shortDir(t)
	bin := buildScv(t, dir, "mcp-test")
	sock := inDaemon(t, daemon.Config{}).Config().Socket
	cliOK(t, sock, "project", "create", "acme", "--workspace", t.TempDir())
	cliOK(t, sock, "project", "create", "other", "--workspace", t.TempDir())
	title := strings.Repeat("t", 300)

	input := strings.Join([]string{initRequest,
		toolCall(t, 2, "project_status", nil),
		toolCall(t, 3, "task_add", map[string]any{"title": title}),
		toolCall(t, 4, "project_status", map[string]any{"project": "other"}),
	}, "\n") + "\n"
	answers, code := mcpPipe(t, bin, sock, input, "--project", "acme")
	assert.Equal(t, 0, code, "the end of its input ends the session")
	require.Len(t, answers, 4, "an answer to every request read")
	var st struct {
		Project api.ProjectSummary `json:"project"`
	}
	require.NoError(t, json.Unmarshal(answers[2].Result.StructuredContent, &st))
	assert.Equal(t, "acme", st.Project.Name, "the session's project")

	r := cliRun(t, sock, "--json", "project", "task", "add", "acme", title)
	require.Equal(t, exitRefused, r.code)
	var f failure
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &f), r.stderr)
	assert.Equal(t, api.ReasonInvalidArgument, f.Reason)
	assert.Equal(t, f.Message+" ["+f.Reason+"]", answers[3].text(), "the CLI's refusal")
	assert.Equal(t, `project "other" is outside this session, which is confined to project acme [forbidden]`, answers[4].text())
	assert.Len(t, inDaemonTasks(t, sock, "acme"), 0, "nothing written")

	r = cliRun(t, sock, "mcp", "--run", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--run needs --project")

	missing := filepath.Join(dir, "none.sock")
	answers, code = mcpPipe(t, bin, missing, initRequest+"\n"+toolCall(t, 2, "project_list", nil)+"\n")
	assert.Equal(t, 0, code)
	assert.Equal(t, "cannot reach the daemon at "+missing+": is `scv daemon` running? [unavailable]", answers[2].text())
}

// inDaemonTasks is project's tasks, over the socket.
func inDaemonTasks(t *testing.T, sock, project string) []api.ProjectTask {
	t.Helper()
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, sock, "--json", "project", "tasks", project)), &st))
	return st.Project.Tasks
}

// mcpSession is `scv mcp` running, spoken to a request at a time.
type mcpSession struct {
	t       *testing.T
	in      io.WriteCloser
	answers chan mcpAnswer
	id      int
}

// startMCP starts `bin --socket sock mcp ARGS` and initializes its
// session.
func startMCP(t *testing.T, bin, sock string, args ...string) *mcpSession {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--socket", sock, "mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "SCV_PARENT=", "SCV_DELEGATION=")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	s := &mcpSession{t: t, in: in, answers: make(chan mcpAnswer, 16), id: 1}
	go func() {
		defer close(s.answers)
		r := bufio.NewScanner(out)
		r.Buffer(nil, 1<<22)
		for r.Scan() {
			var a mcpAnswer
			if json.Unmarshal(r.Bytes(), &a) == nil && a.ID != 0 {
				s.answers <- a
			}
		}
	}()
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	s.send(initRequest)
	s.answer(1)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *mcpSession) send(line string) {
	s.t.Helper()
	_, err := fmt.Fprintln(s.in, line)
	require.NoError(s.t, err)
}

// answer is the answer to request id.
func (s *mcpSession) answer(id int) mcpAnswer {
	s.t.Helper()
	select {
	case a, ok := <-s.answers:
		require.True(s.t, ok, "scv mcp ended")
		require.Equal(s.t, id, a.ID)
		require.Nil(s.t, a.Error, "request %d", id)
		return a
	case <-time.After(30 * time.Second):
		s.t.Fatalf("no answer to request %d", id)
		return mcpAnswer{}
	}
}

// call calls a tool that must succeed and decodes its result into out
// (nil: not decoded).
func (s *mcpSession) call(tool string, args map[string]any, out any) {
	s.t.Helper()
	s.id++
	s.send(toolCall(s.t, s.id, tool, args))
	a := s.answer(s.id)
	require.Empty(s.t, a.text(), "%s refused", tool)
	if out != nil {
		require.NoError(s.t, json.Unmarshal(a.Result.StructuredContent, out))
	}
}
