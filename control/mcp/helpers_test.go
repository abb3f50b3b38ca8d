package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/mcp"
)

// These tests serve the MCP server to the SDK's client, over its
// in-memory transport (or real standard input and output, or HTTP),
// against a real daemon started in process on a SQLite file and a
// socket; the server's tools reach the daemon through its own Service,
// as the daemon's /mcp does, and the tests check the ledger over the
// socket.

// env is a daemon, and what the tests send it.
type env struct {
	t    *testing.T
	d    *daemon.Daemon
	h    api.Handler // the daemon's Service
	sock string
	ws   string // an existing directory: a project's workspace
}

// newEnv starts a daemon with cfg, its files in a folder of the test's.
func newEnv(t *testing.T, cfg daemon.Config) *env {
	t.Helper()
	// t.TempDir() can be too long for sun_path (108 bytes): keep it short.
	dir, err := os.MkdirTemp("", "scvmcp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{t: t, sock: filepath.Join(dir, "d.sock"), ws: filepath.Join(dir, "ws")}
	require.NoError(t, os.Mkdir(e.ws, 0o755))
	cfg.DB, cfg.Socket, cfg.ConfigPath = filepath.Join(dir, "l.db"), e.sock, filepath.Join(dir, "channels.json")
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	e.d = daemon.New(cfg)
	require.NoError(t, e.d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- e.d.Serve() }()
	t.Cleanup(func() {
		assert.NoError(t, e.d.Close())
		assert.NoError(t, <-served)
	})
	e.h = e.d.Server().Service
	return e
}

// socket sends cmd on the daemon's socket, on a connection of its own,
// and returns the reply or the daemon's refusal.
func (e *env) socket(cmd api.Command) (*api.DaemonStatus, *api.Error) {
	e.t.Helper()
	params, err := api.EncodeCommand(cmd)
	require.NoError(e.t, err)
	conn, err := net.Dial("unix", e.sock)
	require.NoError(e.t, err)
	defer conn.Close()
	require.NoError(e.t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":%s}`+"\n", params)
	require.NoError(e.t, err)
	r := bufio.NewReaderSize(conn, 1<<20)
	line, err := r.ReadBytes('\n')
	require.NoError(e.t, err)
	var reply struct {
		Result *api.DaemonStatus `json:"result"`
		Error  *api.Error        `json:"error"`
	}
	require.NoError(e.t, json.Unmarshal(line, &reply))
	return reply.Result, reply.Error
}

// must is cmd's reply over the socket, which must not be a refusal.
func (e *env) must(cmd api.Command) *api.DaemonStatus {
	e.t.Helper()
	st, refusal := e.socket(cmd)
	require.Nil(e.t, refusal, "%s", cmd.Action())
	return st
}

// refusal is the daemon's refusal of cmd on the socket, as a tool's
// error text and as the CLI prints it: the message, its reason in
// brackets.
func (e *env) refusal(cmd api.Command) string {
	e.t.Helper()
	_, r := e.socket(cmd)
	require.NotNil(e.t, r, "the daemon refuses %s", cmd.Action())
	return r.Message + " [" + r.Data.Reason + "]"
}

// events is the kinds of project's events, in order.
func (e *env) events(project string) []string {
	e.t.Helper()
	var kinds []string
	after := uint64(0)
	for _, ev := range e.must(api.CmdProjectEvents{Project: project, After: &after}).Project.Events {
		kinds = append(kinds, ev.Kind)
	}
	return kinds
}

// task is task id of project, over the socket.
func (e *env) task(project, id string) api.ProjectTask {
	e.t.Helper()
	for _, tk := range e.must(api.CmdProjectTasks{Project: project}).Project.Tasks {
		if tk.ID == id {
			return tk
		}
	}
	e.t.Fatalf("task %s not found", id)
	return api.ProjectTask{}
}

// session connects a client named test-agent to a server with opts.
func (e *env) session(opts mcp.Options) *sdk.ClientSession {
	e.t.Helper()
	return connect(e.t, e.h, "test-agent", opts, nil)
}

// connect serves a server with opts, its tools reaching h, to a client
// named name over the SDK's in-memory transport; updated receives the
// URIs of resource update notifications.
func connect(t *testing.T, h api.Handler, name string, opts mcp.Options, updated chan<- string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := mcp.NewServer(h, opts).Connect(ctx, st, nil)
	require.NoError(t, err)
	copts := &sdk.ClientOptions{}
	if updated != nil {
		copts.ResourceUpdatedHandler = func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		}
	}
	s, err := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, copts).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		s.Close()
		ss.Wait()
	})
	return s
}

// call calls a tool and decodes its structured result into out (nil: not
// decoded); it returns the result's error text, "" when it succeeded.
func call(t *testing.T, s *sdk.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s: a protocol error", name)
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		require.NotEmpty(t, b.String(), "%s: an error says why", name)
		return b.String()
	}
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	require.NoError(t, outputSchema(t, s, name).Validate(&v), "%s: the result %s fits the tool's output schema", name, b)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), "%s: %s", name, b)
	}
	return ""
}

// outputSchemas are the output schemas of each session's tools, as the
// session lists them, resolved.
var outputSchemas sync.Map // *sdk.ClientSession → map[string]*jsonschema.Resolved

// outputSchema is tool name's output schema as session s lists it: the
// server does not check its results against it on each call, so every
// test's results are checked here.
func outputSchema(t *testing.T, s *sdk.ClientSession, name string) *jsonschema.Resolved {
	t.Helper()
	if m, ok := outputSchemas.Load(s); ok {
		if r, ok := m.(map[string]*jsonschema.Resolved)[name]; ok {
			return r
		}
	}
	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	m := map[string]*jsonschema.Resolved{}
	for _, tl := range res.Tools {
		b, err := json.Marshal(tl.OutputSchema)
		require.NoError(t, err)
		var schema jsonschema.Schema
		require.NoError(t, json.Unmarshal(b, &schema), "%s's output schema", tl.Name)
		m[tl.Name], err = schema.Resolve(nil)
		require.NoError(t, err, "%s's output schema", tl.Name)
	}
	outputSchemas.Store(s, m)
	require.Contains(t, m, name, "the session lists the tool")
	return m[name]
}

// mustCall is call of a tool that must succeed.
func mustCall(t *testing.T, s *sdk.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	msg := call(t, s, name, args, out)
	require.Empty(t, msg, "%s refused", name)
}

// toolNames is the names of the session's tools.
func toolNames(t *testing.T, s *sdk.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// mcpDoc is docs/mcp.md.
func mcpDoc(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/mcp.md")
	require.NoError(t, err)
	return string(doc)
}

// docShows checks that docs/mcp.md has a match of the regular
// expression re: it shows what it says as it is.
func docShows(t *testing.T, re string) {
	t.Helper()
	assert.True(t, regexp.MustCompile(re).MatchString(mcpDoc(t)), "docs/mcp.md shows %s", re)
}

// syncBuffer is a buffer that a server writes while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// httptestServer serves h on a loopback port of its own for the test,
// and returns its URL.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// ulid is the form of the ledger's IDs.
const ulid = `^[0-9A-HJKMNP-TV-Z]{26}$`
