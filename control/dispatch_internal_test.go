package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite"
)

// The fuzz seeds of FuzzDecodeCommand, FuzzParseLine and FuzzDispatch. They
// are exported from this internal test file so that the external test
// package (fuzz_test.go) uses the same lists; they exist only in the test
// binary.

// SeedCommandParams holds one valid params object for each action (the
// seed's twenty and the extensions), in the order of api.Commands();
// TestSeedCommandParamsCoverActions keeps it complete.
var SeedCommandParams = []string{
	`{"action":"status"}`,
	`{"action":"reload"}`,
	`{"action":"channel_set","channel":"local","account":"owner","enabled":true,"workspace":null,"remote_tools":"none","senders":"owner","purpose":"chat"}`,
	`{"action":"channel_logout","channel":"local","account":"owner"}`,
	`{"action":"delegations","all":true}`,
	`{"action":"delegation_kill","handle":"01M8KP3V7Q2Z4N6X8B0C1D2E3F","orphans":false}`,
	`{"action":"restart_when_idle","version":"2.0.0","commit":"abc","parent":"A,B","max_wait_seconds":600}`,
	`{"action":"confirm_ask","question":"deploy?","parent":"A","timeout_seconds":60}`,
	`{"action":"confirm_status","id":"01M8KE1H8NNPNK7QV6PJBNDHYE"}`,
	`{"action":"project_create","name":"fuzz","workspace":"/tmp"}`,
	`{"action":"project_status","project":"fuzz"}`,
	`{"action":"project_events","project":"fuzz","after":0}`,
	`{"action":"project_tasks","project":"fuzz"}`,
	`{"action":"project_report","project":"fuzz"}`,
	`{"action":"project_task_add","project":"fuzz","title":"build","depends_on":[],"max_retries":2}`,
	`{"action":"project_task_update","project":"fuzz","task":"01M8KE1K7EYVYF5T08TDSQ8XN8","status":"blocked","progress":"waiting"}`,
	`{"action":"project_run_start","project":"fuzz","task":"01M8KE1K7EYVYF5T08TDSQ8XN8","agent":"codex"}`,
	`{"action":"project_run_progress","project":"fuzz","run":"01M8KE1N6HY1NCMPF2AZDSHSDM","progress":"tests pass"}`,
	`{"action":"project_run_finish","project":"fuzz","run":"01M8KE1N6HY1NCMPF2AZDSHSDM","status":"succeeded"}`,
	`{"action":"project_heartbeat","project":"fuzz","task":null,"run":null}`,
	`{"action":"ledger_compact","project":"fuzz","retain":1,"drop":false}`,
	`{"action":"delegation_register","handle":"h1","agent":"codex","session":"s-1","parent":"h1","pid":1,"owner_pid":1,"cwd":"/tmp","chat":"local:owner"}`,
	`{"action":"delegation_done","handle":"h1"}`,
	`{"action":"confirm_list","chat":"local:owner","after":0,"wait_seconds":0}`,
	`{"action":"confirm_answer","id":"01M8KE1H8NNPNK7QV6PJBNDHYE","answer":"yes"}`,
	`{"action":"project_list","all":true}`,
	`{"action":"project_task_retry","project":"acme","task":"build","max_retries":2}`,
	`{"action":"project_release","project":"acme"}`,
	`{"action":"project_archive","project":"acme"}`,
	`{"action":"agent_start","name":"gemini","command":["gemini","--experimental-acp"],"workspace":"/tmp","env":["HOME=/tmp"],"project":"acme","task":"build","ask":true,"allow_terminal":false,"init_timeout_seconds":10,"session":"s-1","parent":"A","chat":"local:owner"}`,
	`{"action":"agent_list"}`,
	`{"action":"agent_stop","agent":"gemini"}`,
	`{"action":"agent_prompt","agent":"gemini","text":"build it","task":"build"}`,
	`{"action":"agent_cancel","agent":"gemini"}`,
	`{"action":"agent_updates","agent":"gemini","after":0,"wait_seconds":0}`,
	`{"action":"delegation_update","handle":"h1","background_jobs":2}`,
	`{"action":"project_task_edit","project":"acme","task":"build","priority":1,"labels":["go"],"parent":""}`,
	`{"action":"project_task_show","project":"acme","task":"build"}`,
	`{"action":"project_ready","project":"acme","labels":["go"]}`,
	`{"action":"project_task_next","project":"acme","agent":"codex"}`,
	`{"action":"project_plan_apply","project":"acme","tasks":[{"key":"a","title":"A","priority":0,"depends_on":["b"]},{"key":"b","title":"B"}]}`,
	`{"action":"project_budget","project":"acme","tokens":100000,"cost":"5USD"}`,
	`{"action":"project_work","project":"acme","agents":2,"command":["acpagent"],"env":["HOME=/tmp"],"labels":["go"],"max_turns":10,"prompt_template":"{{.Task.Title}}","ask":false,"allow_terminal":false}`,
	`{"action":"project_work_status","project":"acme","after":0,"wait_seconds":0}`,
	`{"action":"project_work_stop","project":"acme","now":true}`,
	`{"action":"channel_login","channel":"email","account":"work","imap":"imaps://mail.example.com","user":"me","password":"pw","mail_chat":"local:mail"}`,
}

// SeedMalformedParams are params objects the strict decoder refuses.
var SeedMalformedParams = []string{
	``,
	` `,
	`{}`,
	`null`,
	`[]`,
	`["status"]`,
	`"status"`,
	`{"action":"status","action":"status"}`,
	`{"action":"project_create","name":"a","name":"b","workspace":"/tmp"}`,
	`{"Action":"status"}`,
	`{"action":"STATUS"}`,
	`{"action":"Project_Create","name":"a","workspace":"/tmp"}`,
	`{"action":"project_create","name":"` + "\xff\xfe" + `","workspace":"/tmp"}`,
	`{"action":"project_create","name":"\ud800","workspace":"/tmp"}`,
	`{"action":"status"} x`,
	`{"action":"status"}{"action":"status"}`,
	`{"action":"status"`,
	`{"action":"project_task_add","project":"fuzz","title":"t","depends_on":[],"max_retries":18446744073709551616}`,
	`{"action":"project_task_add","project":"fuzz","title":"t","depends_on":[],"max_retries":4294967296}`,
	`{"action":"project_task_add","project":"fuzz","title":"t","depends_on":[],"max_retries":-1}`,
	`{"action":"project_task_add","project":"fuzz","title":"t","depends_on":[],"max_retries":-0}`,
	`{"action":"project_task_add","project":"fuzz","title":"t","depends_on":[],"max_retries":1.5}`,
	`{"action":"project_task_add","project":"fuzz","title":"t","depends_on":[],"max_retries":1e3}`,
	`{"action":"project_task_add","project":"fuzz","title":"t","depends_on":"x","max_retries":0}`,
	`{"action":"project_task_add","project":"fuzz","title":"t","max_retries":0}`,
	`{"action":"project_events","project":"fuzz","after":18446744073709551616}`,
	`{"action":"project_events","project":"fuzz","after":-0}`,
	`{"action":"status","x":1e400}`,
	`{"action":"status","x":-1e400}`,
	`{"action":"project_task_update","project":"fuzz","task":"t","status":"paused","progress":null}`,
	`{"action":"project_run_finish","project":"fuzz","run":"r","status":"Succeeded"}`,
	`{"action":"project_create","name":null,"workspace":"/tmp"}`,
	`{"action":"status","x":` + strings.Repeat("[", 10000) + `}`,
	`{"action":"status","x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	strings.Repeat("[", 10000),
}

// SeedHostileParams decode, but their values are refused by validation
// (-32602 invalid_argument) or name nothing that exists.
var SeedHostileParams = []string{
	`{"action":"project_create","name":"` + strings.Repeat("n", 70000) + `","workspace":"/tmp"}`,
	`{"action":"project_create","name":"` + strings.Repeat("n", 201) + `","workspace":"/tmp"}`,
	`{"action":"project_create","name":"","workspace":"/tmp"}`,
	`{"action":"project_create","name":"a\u0000b","workspace":"/tmp"}`,
	`{"action":"project_create","name":"\u001b[2J","workspace":"/tmp"}`,
	`{"action":"project_create","name":"rel","workspace":"tmp"}`,
	`{"action":"project_create","name":"dots","workspace":"/tmp/../../.."}`,
	`{"action":"project_create","name":"nul","workspace":"/tmp\u0000"}`,
	`{"action":"project_task_add","project":"../fuzz","title":"t","depends_on":[],"max_retries":0}`,
	`{"action":"project_run_finish","project":"fuzz","run":"r","status":"running"}`,
}

// SeedMalformedLines are whole request lines the envelope check refuses,
// and notifications, which get no reply.
var SeedMalformedLines = []string{
	``,
	`not json`,
	"\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":{"action":"status"}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":{"action":"status"}}]`,
	`{"jsonrpc":"1.0","id":1,"method":"daemon.control","params":{"action":"status"}}`,
	`{"jsonrpc":"\u0032.0","id":1,"method":"daemon.control","params":{"action":"status"}}`,
	`{"jsonrpc":2.0,"id":1,"method":"daemon.control","params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","id":1,"params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"daemon.other","params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"Daemon.Control","params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"daemon.control"}`,
	`{"jsonrpc":"2.0","id":{},"method":"daemon.control","params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"daemon.control","params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","id":1e400,"method":"daemon.control","params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","id":"\ud800","method":"daemon.control","params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":{"action":"status"}}` + "\r",
	`{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":{"action":"status"}} trailing`,
	`{"jsonrpc":"2.0","method":"daemon.control","params":{"action":"status"}}`,
	`{"jsonrpc":"2.0","method":"daemon.control","params":{"action":"drop_database"}}`,
	`{"jsonrpc":"2.0","method":"daemon.other"}`,
	`{"jsonrpc":"2.0","method":"\ud800","params":{"action":"status"}}`,
}

// TestSeedCommandParamsCoverActions: the seeds hold a valid example of
// every action, each accepted by the decoder.
func TestSeedCommandParamsCoverActions(t *testing.T) {
	require.Len(t, SeedCommandParams, len(api.Commands()))
	for i, p := range SeedCommandParams {
		cmd, err := DecodeCommand([]byte(p))
		require.NoError(t, err, p)
		require.Equal(t, api.Commands()[i].Action(), cmd.Action(), "seed %d", i)
	}
	for _, p := range SeedMalformedParams {
		_, err := DecodeCommand([]byte(p))
		require.Error(t, err, "%.200s", p)
	}
}

// envelope is the first JSON value of a line, as encoding/json reads it:
// an independent reading of what parseRequest decides.
type envelope struct {
	object  bool
	dupKey  bool
	members map[string]json.RawMessage
}

func readEnvelope(line []byte) (envelope, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		return envelope{}, err
	}
	env := envelope{members: map[string]json.RawMessage{}}
	dec = json.NewDecoder(bytes.NewReader(first))
	tok, err := dec.Token()
	if err != nil {
		return envelope{}, err
	}
	if tok != json.Delim('{') {
		return env, nil
	}
	env.object = true
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return envelope{}, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return envelope{}, err
		}
		k := key.(string)
		switch k {
		case "jsonrpc", "id", "method", "params":
			if _, dup := env.members[k]; dup {
				env.dupKey = true
			}
		}
		env.members[k] = v
	}
	return env, nil
}

// str is raw as a JSON string, if it is one without lone surrogates.
func str(raw json.RawMessage) (string, bool) {
	var s string
	// json.Unmarshal takes null into a string without complaint: a JSON
	// string must start with a quote.
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '"' {
		return "", false
	}
	if json.Unmarshal(raw, &s) != nil || checkSurrogates(raw) != nil {
		return "", false
	}
	return s, true
}

// FuzzDispatch feeds a request line to a real Server and Service on a real
// ledger, through handleLine, and checks: no panic; a line that is not a
// valid request gets a protocol error (-32700, -32600, -32601, -32602
// invalid_params), except a notification, which gets no reply; a valid
// request gets a result or an application error, with its id; nothing is
// appended for a refused line or an error reply (the ledger's last
// sequence, read from the file, does not move); an accepted command
// survives EncodeCommand then DecodeCommand unchanged; a reply encodes to
// one JSON line.
func FuzzDispatch(f *testing.F) {
	for _, p := range slices.Concat(SeedCommandParams, SeedMalformedParams, SeedHostileParams) {
		f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":` + p + `}`))
		f.Add([]byte(`{"jsonrpc":"2.0","method":"daemon.control","params":` + p + `}`))
	}
	for _, l := range SeedMalformedLines {
		f.Add([]byte(l))
	}

	srv, lastSeq := fuzzServer(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, line []byte) {
		before := lastSeq(t)
		r := srv.handleLine(ctx, line)
		after := lastSeq(t)
		k := classifyLine(t, line)
		checkDispatched(t, line, k, r)
		if !k.valid || (r != nil && r.Error != nil) {
			require.Equal(t, before, after, "nothing appended for %q (reply %+v)", line, r)
		}
	})
}

// fuzzServer is a Server and Service on a real ledger, in a folder of its
// own, and a function that reads the ledger's last sequence from the file.
func fuzzServer(f *testing.F) (*Server, func(t *testing.T) uint64) {
	dir, err := os.MkdirTemp("", "scvfuzz")
	require.NoError(f, err)
	f.Cleanup(func() { os.RemoveAll(dir) })
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), sqlite.Options{})
	require.NoError(f, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(f, err)
	f.Cleanup(func() { l.Close() })
	lastSeq := func(t *testing.T) uint64 {
		var seq uint64
		require.NoError(t, db.Read(ctx, func(r driver.Reader) (err error) {
			seq, _, err = r.LastSequence(ctx)
			return err
		}))
		return seq
	}
	// No delegations, channels, questions or restarter: their actions
	// answer unimplemented, and a fuzzed line can stop no process.
	return &Server{Service: &Service{Ledger: l, Version: "fuzz", PID: 1}}, lastSeq
}

// lineKind is what a request line (or a batch's element) is, read
// independently with encoding/json.
type lineKind struct {
	notification bool        // gets no reply
	valid        bool        // a request the daemon must run
	cmd          api.Command // its command
	id           json.RawMessage
	perr         error // encoding/json's error reading it
}

func classifyLine(t *testing.T, line []byte) (k lineKind) {
	env, perr := readEnvelope(line)
	k.perr = perr
	if utf8.Valid(line) && perr == nil && env.object && !env.dupKey {
		m := env.members
		k.id = m["id"]
		idOK := true
		if k.id != nil {
			var v any
			d := json.NewDecoder(bytes.NewReader(k.id))
			d.UseNumber()
			require.NoError(t, d.Decode(&v))
			switch v.(type) {
			case string, json.Number, nil:
			default:
				idOK = false
			}
		}
		version, vok := str(m["jsonrpc"])
		method, mok := str(m["method"])
		k.notification = k.id == nil && vok && version == "2.0" && mok
		if idOK && vok && version == "2.0" && mok && method == Method && json.Valid(line) && m["params"] != nil {
			c, err := DecodeCommand(m["params"])
			k.valid, k.cmd = err == nil, c
		}
	}
	return k
}

// checkDispatched checks r, the reply to line of kind k (see FuzzDispatch).
func checkDispatched(t *testing.T, line []byte, k lineKind, r *reply) {
	if k.notification {
		require.Nil(t, r, "a notification gets no reply: %q", line)
	} else {
		require.NotNil(t, r, "every request gets a reply: %q", line)
		require.True(t, (r.Result == nil) != (r.Error == nil), "one of result and error: %+v", r)
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		require.NoError(t, writeReply(w, r))
		out := buf.Bytes()
		require.Equal(t, 1, bytes.Count(out, []byte("\n")), "one line: %q", out)
		require.True(t, json.Valid(out), "the reply is JSON: %q", out)
	}
	if k.valid {
		if r != nil {
			require.Equal(t, string(k.id), string(r.ID), "the id is echoed")
			if r.Error != nil {
				require.NotContains(t, []int{api.CodeParseError, api.CodeInvalidRequest, api.CodeMethodNotFound}, r.Error.Code, "a valid request %q: %+v", line, r.Error)
				require.NotEqual(t, api.ReasonInvalidParams, r.Error.Data.Reason, "a valid request %q: %+v", line, r.Error)
			}
		}
		enc, err := api.EncodeCommand(k.cmd)
		require.NoError(t, err)
		again, err := DecodeCommand(enc)
		require.NoError(t, err, "re-decode %s", enc)
		require.Equal(t, k.cmd, again, "decode, encode, decode of %q", line)
	} else if r != nil {
		require.NotNil(t, r.Error, "a line that is not a valid request is refused: %q", line)
		switch r.Error.Code {
		case api.CodeParseError, api.CodeInvalidRequest, api.CodeMethodNotFound:
		case api.CodeInvalidParams:
			require.Equal(t, api.ReasonInvalidParams, r.Error.Data.Reason, "%q", line)
		default:
			require.Failf(t, "not a protocol error", "%q: %+v", line, r.Error)
		}
		if !utf8.Valid(line) || errors.Is(k.perr, io.ErrUnexpectedEOF) {
			require.Equal(t, api.CodeParseError, r.Error.Code, "%q", line)
		}
	}
}

// BenchmarkParseRequest is the decoding of the commonest request line, a
// run's progress, as the server reads it off the socket.
func BenchmarkParseRequest(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12345,"method":"daemon.control","params":{"action":"project_run_progress","project":"01JDB3M5Q8W2X7Y9Z0A1B2C3D4","run":"01JDB3M5Q8W2X7Y9Z0A1B2C3D5","progress":"step 678"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, e := parseRequest(line); e != nil {
			b.Fatal(e)
		}
	}
}

// handleLine answers one request line as a connection answers one it
// does not submit; nil means no reply (a notification).
func (s *Server) handleLine(ctx context.Context, line []byte) *reply {
	req, id, e := parseRequest(line)
	return s.handleRequest(ctx, req, id, e)
}
