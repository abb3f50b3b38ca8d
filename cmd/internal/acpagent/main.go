// Command acpagent is a small scripted agent speaking the Agent Client
// Protocol (ACP) on its stdin and stdout. It exists so the daemon's tests
// and the docs' examples can drive a real ACP agent process: the daemon,
// the ACP client, starts it as `acpagent [flags]` with stdin and stdout as
// the JSON-RPC pipes.
//
// A prompt's text is run line by line as a tiny script of `VERB ARGS...`
// lines; any other line is said as it is. `acpagent --help` lists the
// steps, from the table (steps) the script is run by.
//
// Sessions are kept as JSON files in a folder of the user's alone, so a
// second process can load them: --state, else $ACPAGENT_STATE, else
// $XDG_STATE_HOME/acpagent, else ~/.local/state/acpagent. It is made
// 0700, and a folder that is another user's or that others may write in is
// refused.
//
// Flags make it misbehave on purpose: --exit-at-once, --garbage,
// --no-init, --no-load, --stderr. --model names the session's model in
// the answers to session/new and session/load. --steps-only runs a
// prompt's steps and says nothing of its other lines, so that a script
// can hide in a longer prompt (an email's text, in a triage prompt).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// lockedWriter serialises whole-line writes to stdout: the SDK's messages
// and the raw lines the `garbage` and `big` verbs write must not interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// entry is one turn of a session's history.
type entry struct {
	Role string `json:"role"` // "user" or "agent"
	Text string `json:"text"`
}

// session is what DIR/<sessionId>.json holds.
type session struct {
	Cwd     string  `json:"cwd"`
	History []entry `json:"history"`
	// Usage is the last usage_update sent, sent again after session/load.
	Usage *acp.SessionUsageUpdate `json:"usage,omitempty"`
	// MCP is the stdio MCP servers session/new or session/load handed
	// it, as NAME: COMMAND ARGS...
	MCP []string `json:"mcp,omitempty"`
}

// mcpOf is servers as session.MCP keeps them.
func mcpOf(servers []acp.McpServer) []string {
	var out []string
	for _, m := range servers {
		if m.Stdio != nil {
			out = append(out, m.Stdio.Name+": "+strings.Join(append([]string{m.Stdio.Command}, m.Stdio.Args...), " "))
		}
	}
	return out
}

type agent struct {
	state  string
	noLoad bool
	model  string
	out    *lockedWriter
	conn   *acp.AgentSideConnection // set once, before ready is closed
	ready  chan struct{}

	mu      sync.Mutex
	cancels map[acp.SessionId]context.CancelFunc
	// Prompts read from stdin and prompts begun: the SDK runs each
	// request in a goroutine of its own and notifications in order in
	// another, so a session/cancel sent just after its prompt can be
	// handled before the prompt's handler has begun. A cancel that finds
	// no prompt running while one was read and not yet begun is kept for
	// it (early); one that finds none at all came after its turn ended.
	read, begun int
	early       bool
	perms       atomic.Int64
}

// countPrompts passes stdin on line by line, counting the prompts read
// before the SDK sees them.
func (a *agent) countPrompts(in io.Reader) io.Reader {
	pr, pw := io.Pipe()
	marker := []byte(`"method":"` + acp.AgentMethodSessionPrompt + `"`)
	go func() {
		r := bufio.NewReaderSize(in, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if bytes.Contains(line, marker) {
				a.mu.Lock()
				a.read++
				a.mu.Unlock()
			}
			if len(line) > 0 {
				if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

// client is the connection to the client, once main has set it.
func (a *agent) client() *acp.AgentSideConnection {
	<-a.ready
	return a.conn
}

func (a *agent) path(id acp.SessionId) (string, error) {
	s := string(id)
	if s == "" || s != filepath.Base(s) || strings.HasPrefix(s, ".") {
		return "", fmt.Errorf("bad session id %q", s)
	}
	return filepath.Join(a.state, s+".json"), nil
}

func (a *agent) load(id acp.SessionId) (*session, error) {
	p, err := a.path(id)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &s, nil
}

func (a *agent) save(id acp.SessionId, s *session) error {
	p, err := a.path(id)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (a *agent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{LoadSession: !a.noLoad},
		AgentInfo:         &acp.Implementation{Name: "acpagent", Version: "1"},
		AuthMethods:       []acp.AuthMethod{},
	}, nil
}

func (a *agent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return acp.NewSessionResponse{}, err
	}
	id := acp.SessionId("sess-" + hex.EncodeToString(r[:]))
	if err := a.save(id, &session{Cwd: p.Cwd, History: []entry{}, MCP: mcpOf(p.McpServers)}); err != nil {
		return acp.NewSessionResponse{}, err
	}
	return acp.NewSessionResponse{SessionId: id, Models: a.models()}, nil
}

// models is the session's models as the answers to session/new and
// session/load name them: --model, else none.
func (a *agent) models() *acp.SessionModelState {
	if a.model == "" {
		return nil
	}
	return &acp.SessionModelState{CurrentModelId: acp.ModelId(a.model),
		AvailableModels: []acp.ModelInfo{{ModelId: acp.ModelId(a.model), Name: a.model}}}
}

func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if a.noLoad {
		return acp.LoadSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionLoad)
	}
	s, err := a.load(p.SessionId)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s.MCP = mcpOf(p.McpServers)
	if err := a.save(p.SessionId, s); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	for _, e := range s.History {
		u := acp.UpdateAgentMessageText(e.Text)
		if e.Role == "user" {
			u = acp.UpdateUserMessageText(e.Text)
		}
		if err := a.client().SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	if s.Usage != nil {
		u := acp.SessionUpdate{UsageUpdate: s.Usage}
		if err := a.client().SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	return acp.LoadSessionResponse{Models: a.models()}, nil
}

func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cancel, ok := a.cancels[p.SessionId]; ok {
		cancel()
	} else if a.read > a.begun {
		a.early = true
	}
	return nil
}

func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	a.begun++
	if a.early {
		a.early = false
		cancel()
	}
	a.cancels[p.SessionId] = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.cancels, p.SessionId)
		a.mu.Unlock()
	}()
	s, err := a.load(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}

	var text strings.Builder
	for _, b := range p.Prompt {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
		}
	}
	s.History = append(s.History, entry{Role: "user", Text: text.String()})
	t := &turn{agent: a, conn: a.client(), ctx: ctx, io: context.WithoutCancel(ctx), id: p.SessionId, s: s}
	reason := t.run(text.String())
	if err := a.save(p.SessionId, s); err != nil {
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: reason, Usage: t.usage}, nil
}

// turn is one prompt's script being run. Cancelling the prompt (ctx)
// stops the script at the next line or sleep, but the messages and the
// requests to the client use io, which is not cancelled: a permission
// request pending at cancellation gets the client's "cancelled" outcome,
// and what the agent says then still reaches the client.
type turn struct {
	*agent
	conn *acp.AgentSideConnection
	ctx  context.Context
	io   context.Context
	id   acp.SessionId
	s    *session
	// usage is the answer's usage, set by the script's `usage` step.
	usage *acp.Usage
}

func (t *turn) update(u acp.SessionUpdate) {
	_ = t.conn.SessionUpdate(t.io, acp.SessionNotification{SessionId: t.id, Update: u})
}

// say sends an agent message chunk and records it in the history.
func (t *turn) say(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	t.s.History = append(t.s.History, entry{Role: "agent", Text: text})
	t.update(acp.UpdateAgentMessageText(text))
}

// raw writes one whole line to stdout, bypassing the SDK.
func (t *turn) raw(line string) {
	_, _ = t.out.Write([]byte(line + "\n"))
}

// run runs the script and returns the turn's stop reason.
func (t *turn) run(script string) acp.StopReason {
	for line := range strings.Lines(script) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if t.ctx.Err() != nil {
			return acp.StopReasonCancelled
		}
		verb, args, _ := strings.Cut(line, " ")
		if reason, stop := t.step(verb, args, line); stop {
			return reason
		}
	}
	return acp.StopReasonEndTurn
}

// step runs one line; stop says the script ends there, with reason.
func (t *turn) step(verb, args, line string) (reason acp.StopReason, stop bool) {
	for _, s := range steps {
		if s.verb == verb {
			reason = s.run(t, args)
			return reason, reason != ""
		}
	}
	if !stepsOnly {
		t.say("%s", line)
	}
	return "", false
}

// scriptStep is one verb of a prompt's script: run runs it with the rest
// of its line and returns the stop reason that ends the script, or "".
// The parser (step) and --help read the same table.
type scriptStep struct {
	verb, args, help string
	run              func(t *turn, args string) acp.StopReason
}

var steps []scriptStep

func init() { // not an initializer: the steps run steps (as)
	steps = []scriptStep{
		{"say", "TEXT", "send TEXT as an agent message chunk", func(t *turn, args string) acp.StopReason {
			t.say("%s", args)
			return ""
		}},
		{"chunks", "N", "send N message chunks, \"chunk 1 \" to \"chunk N \"", func(t *turn, args string) acp.StopReason {
			n, err := strconv.Atoi(args)
			if err != nil {
				t.say("chunks: %v", err)
			}
			for i := 1; i <= n; i++ {
				t.say("chunk %d ", i)
			}
			return ""
		}},
		{"thought", "TEXT", "send TEXT as a thought chunk", func(t *turn, args string) acp.StopReason {
			t.update(acp.UpdateAgentThoughtText(args))
			return ""
		}},
		{"tool", "ID TITLE", "start a pending tool call", func(t *turn, args string) acp.StopReason {
			id, title, _ := strings.Cut(args, " ")
			t.update(acp.StartToolCall(acp.ToolCallId(id), title,
				acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusPending)))
			return ""
		}},
		{"tooldone", "ID", "complete the tool call ID", func(t *turn, args string) acp.StopReason {
			t.update(acp.UpdateToolCall(acp.ToolCallId(args), acp.WithUpdateStatus(acp.ToolCallStatusCompleted)))
			return ""
		}},
		{"plan", "A;B;...", "send a plan, its first entry in progress", func(t *turn, args string) acp.StopReason {
			var entries []acp.PlanEntry
			for i, item := range strings.Split(args, ";") {
				status := acp.PlanEntryStatusPending
				if i == 0 {
					status = acp.PlanEntryStatusInProgress
				}
				entries = append(entries, acp.PlanEntry{
					Content: strings.TrimSpace(item), Status: status, Priority: acp.PlanEntryPriorityMedium,
				})
			}
			t.update(acp.UpdatePlan(entries...))
			return ""
		}},
		{"permission", "TITLE", "ask the client for permission, and say its answer", func(t *turn, args string) acp.StopReason {
			t.permission(args)
			return ""
		}},
		{"read", "PATH", "read a file through the client, and say it", func(t *turn, args string) acp.StopReason {
			r, err := t.conn.ReadTextFile(t.io, acp.ReadTextFileRequest{SessionId: t.id, Path: args})
			if err != nil {
				t.say("read error: %v", err)
			} else {
				t.say("read: %s", r.Content)
			}
			return ""
		}},
		{"write", "PATH TEXT", "write TEXT to a file through the client", func(t *turn, args string) acp.StopReason {
			path, text, _ := strings.Cut(args, " ")
			_, err := t.conn.WriteTextFile(t.io, acp.WriteTextFileRequest{SessionId: t.id, Path: path, Content: text})
			if err != nil {
				t.say("write error: %v", err)
			} else {
				t.say("write: ok")
			}
			return ""
		}},
		{"terminal", "CMD ARGS...", "run a command in a terminal of the client, and say how it ended", func(t *turn, args string) acp.StopReason {
			t.terminal(command(args))
			return ""
		}},
		{"sleep", "DURATION", "wait (a Go duration: 2s, 500ms); a cancel ends the turn", (*turn).sleep},
		{"silent", "DURATION", "the same as sleep", (*turn).sleep},
		{"exec", "CMD ARGS...", "run a command itself, and say its output", func(t *turn, args string) acp.StopReason {
			name, rest := command(args)
			out, err := exec.CommandContext(t.ctx, name, rest...).CombinedOutput()
			if err != nil {
				t.say("exec error: %v: %s", err, strings.TrimSpace(string(out)))
			} else {
				t.say("exec: %s", strings.TrimSpace(string(out)))
			}
			return ""
		}},
		{"spawn", "CMD ARGS...", "start a command in the background and leave it running", func(t *turn, args string) acp.StopReason {
			name, rest := command(args)
			cmd := exec.Command(name, rest...) // stdin and stdout /dev/null, not our pipes
			if err := cmd.Start(); err != nil {
				t.say("spawn error: %v", err)
				return ""
			}
			go func() { _ = cmd.Wait() }() // reap it if it ends while we run; never kill it
			t.say("spawned %d", cmd.Process.Pid)
			return ""
		}},
		{"as", "SESSION STEP", "run STEP as if about SESSION: its updates and requests name SESSION, not this turn's session", func(t *turn, args string) acp.StopReason {
			session, line, _ := strings.Cut(args, " ")
			other := *t
			other.id = acp.SessionId(session)
			verb, rest, _ := strings.Cut(line, " ")
			reason, _ := other.step(verb, rest, line)
			return reason
		}},
		{"crash", "", "exit with status 3 at once", func(*turn, string) acp.StopReason {
			fmt.Fprintln(os.Stderr, "acpagent: crashing")
			os.Exit(3)
			return ""
		}},
		{"garbage", "", "write a line that is not JSON", func(t *turn, _ string) acp.StopReason {
			t.raw("this is not json")
			return ""
		}},
		{"big", "N", "send a message chunk of N bytes, written by hand", func(t *turn, args string) acp.StopReason {
			n, err := strconv.Atoi(args)
			if err != nil {
				t.say("big: %v", err)
				return ""
			}
			id, _ := json.Marshal(string(t.id))
			t.raw(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + string(id) +
				`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
				strings.Repeat("x", n) + `"}}}}`)
			return ""
		}},
		{"usage_update", "USED SIZE [AMOUNT CURRENCY]", "send a usage_update: USED tokens of a SIZE-token context, the session's cost so far AMOUNT CURRENCY", func(t *turn, args string) acp.StopReason {
			f := strings.Fields(args)
			var n [2]int
			var err error
			if len(f) != 2 && len(f) != 4 {
				err = fmt.Errorf("want USED SIZE [AMOUNT CURRENCY], got %q", args)
			}
			for i := 0; err == nil && i < 2; i++ {
				n[i], err = strconv.Atoi(f[i])
			}
			up := &acp.SessionUsageUpdate{Used: n[0], Size: n[1]}
			if err == nil && len(f) == 4 {
				var amount float64
				amount, err = strconv.ParseFloat(f[2], 64)
				up.Cost = &acp.Cost{Amount: amount, Currency: f[3]}
			}
			if err != nil {
				t.say("usage_update: %v", err)
				return ""
			}
			t.s.Usage = up
			t.update(acp.SessionUpdate{UsageUpdate: up})
			return ""
		}},
		{"usage", "IN OUT [THOUGHT [CACHED_READ [CACHED_WRITE]]]", "answer the prompt with this usage (tokens)", func(t *turn, args string) acp.StopReason {
			f := strings.Fields(args)
			if len(f) < 2 || len(f) > 5 {
				t.say("usage: want IN OUT [THOUGHT [CACHED_READ [CACHED_WRITE]]], got %q", args)
				return ""
			}
			var n [5]int
			for i, s := range f {
				var err error
				if n[i], err = strconv.Atoi(s); err != nil {
					t.say("usage: %v", err)
					return ""
				}
			}
			u := &acp.Usage{InputTokens: n[0], OutputTokens: n[1], TotalTokens: n[0] + n[1] + n[2] + n[3] + n[4]}
			for i, p := range []**int{&u.ThoughtTokens, &u.CachedReadTokens, &u.CachedWriteTokens} {
				if len(f) > 2+i {
					*p = acp.Ptr(n[2+i])
				}
			}
			t.usage = u
			return ""
		}},
		{"stop", "[REASON]", "end the turn with REASON (default end_turn)", func(_ *turn, args string) acp.StopReason {
			if args == "" {
				return acp.StopReasonEndTurn
			}
			return acp.StopReason(args)
		}},
		{"mcp", "", "say the MCP servers the session was handed (NAME: COMMAND ARGS...), or none", func(t *turn, _ string) acp.StopReason {
			if len(t.s.MCP) == 0 {
				t.say("mcp: none")
			}
			for _, m := range t.s.MCP {
				t.say("mcp: %s", m)
			}
			return ""
		}},
		{"refuse", "", "end the turn with refusal", func(*turn, string) acp.StopReason { return acp.StopReasonRefusal }},
	}
}

// sleep waits for the duration args, or until the prompt is cancelled.
func (t *turn) sleep(args string) acp.StopReason {
	d, err := time.ParseDuration(args)
	if err != nil {
		t.say("sleep: %v", err)
		return ""
	}
	select {
	case <-time.After(d):
		return ""
	case <-t.ctx.Done():
		return acp.StopReasonCancelled
	}
}

// command splits `CMD ARGS...` on spaces.
func command(s string) (name string, args []string) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return "", nil
	}
	return f[0], f[1:]
}

func (t *turn) permission(title string) {
	n := t.perms.Add(1)
	r, err := t.conn.RequestPermission(t.io, acp.RequestPermissionRequest{
		SessionId: t.id,
		ToolCall:  acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(fmt.Sprintf("perm-%d", n)), Title: acp.Ptr(title)},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		},
	})
	switch {
	case err != nil:
		t.say("permission: error: %v", err)
	case r.Outcome.Cancelled != nil:
		t.say("permission: cancelled")
	case r.Outcome.Selected != nil && r.Outcome.Selected.OptionId == "allow":
		t.say("permission: allowed")
	case r.Outcome.Selected != nil && r.Outcome.Selected.OptionId == "reject":
		t.say("permission: rejected")
	default:
		t.say("permission: error: unexpected outcome %+v", r.Outcome)
	}
}

func (t *turn) terminal(name string, args []string) {
	req := acp.CreateTerminalRequest{SessionId: t.id, Command: name, Args: args}
	if t.s.Cwd != "" {
		req.Cwd = acp.Ptr(t.s.Cwd)
	}
	term, err := t.conn.CreateTerminal(t.io, req)
	if err != nil {
		t.say("terminal error: %v", err)
		return
	}
	defer func() {
		_, _ = t.conn.ReleaseTerminal(t.io, acp.ReleaseTerminalRequest{SessionId: t.id, TerminalId: term.TerminalId})
	}()
	exit, err := t.conn.WaitForTerminalExit(t.io, acp.WaitForTerminalExitRequest{SessionId: t.id, TerminalId: term.TerminalId})
	if err != nil {
		t.say("terminal error: %v", err)
		return
	}
	out, err := t.conn.TerminalOutput(t.io, acp.TerminalOutputRequest{SessionId: t.id, TerminalId: term.TerminalId})
	if err != nil {
		t.say("terminal error: %v", err)
		return
	}
	code := -1
	if exit.ExitCode != nil {
		code = *exit.ExitCode
	}
	t.say("terminal: exit %d output %s", code, strings.TrimSuffix(out.Output, "\n"))
}

// The remaining methods of acp.Agent do nothing.

func (*agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}
func (*agent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}
func (*agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}
func (*agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, nil
}
func (*agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil
}
func (*agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

func main() {
	flag.StringVar(&stateFlag, "state", "", "folder where sessions are kept (default: $ACPAGENT_STATE, else $XDG_STATE_HOME/acpagent, else ~/.local/state/acpagent)")
	noLoad := flag.Bool("no-load", false, "do not offer session/load")
	exitAtOnce := flag.Bool("exit-at-once", false, "exit with status 2 before reading anything")
	garbage := flag.Bool("garbage", false, "write a line that is not JSON-RPC, then answer nothing")
	noInit := flag.Bool("no-init", false, "read stdin until EOF without answering anything")
	stderrText := flag.String("stderr", "", "write `TEXT` and a newline to stderr at start")
	flag.BoolVar(&stepsOnly, "steps-only", false, "say nothing of a prompt's lines that are no step")
	model := flag.String("model", "", "name the session's model `ID` in the answers to session/new and session/load")
	flag.Usage = usage
	flag.Parse()

	if *stderrText != "" {
		fmt.Fprintln(os.Stderr, *stderrText)
	}
	if *exitAtOnce {
		fmt.Fprintln(os.Stderr, "acpagent: exiting at once")
		os.Exit(2)
	}
	if *garbage {
		fmt.Println("this is not json-rpc")
	}
	if *garbage || *noInit {
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	state, err := stateDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "acpagent:", err)
		os.Exit(1)
	}

	out := &lockedWriter{w: os.Stdout}
	a := &agent{state: state, noLoad: *noLoad, model: *model, out: out, ready: make(chan struct{}),
		cancels: map[acp.SessionId]context.CancelFunc{}}
	asc := acp.NewAgentSideConnection(a, out, a.countPrompts(os.Stdin))
	asc.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	a.conn = asc
	close(a.ready)
	<-asc.Done()
}

var stateFlag string

// stepsOnly: a prompt's lines that are no step are not said (--steps-only),
// so that a script can hide in a longer prompt (an email's text in a
// triage prompt).
var stepsOnly bool

// stateDir is the folder sessions are kept in, made if need be: --state,
// else $ACPAGENT_STATE, else acpagent in the user's state folder
// ($XDG_STATE_HOME, else ~/.local/state). It is the user's alone: made
// 0700, and refused when it is someone else's or others may write in it.
func stateDir() (string, error) {
	dir := stateFlag
	if dir == "" {
		dir = os.Getenv("ACPAGENT_STATE")
	}
	if dir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if !filepath.IsAbs(base) {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no folder for sessions: give --state or set ACPAGENT_STATE (%v)", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(base, "acpagent")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("session folder %s belongs to user %d, not to this one", dir, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("session folder %s may be written by others (mode %v)", dir, fi.Mode().Perm())
	}
	return dir, nil
}

// usage is --help: the flags, the environment, and the script's steps.
func usage() {
	w := flag.CommandLine.Output()
	fmt.Fprintf(w, "usage: acpagent [flags]\n\n"+
		"A scripted ACP agent on stdin and stdout. Each line of a prompt is one step of\n"+
		"its script; a line that is no step is said as it is.\n\nFlags:\n")
	flag.PrintDefaults()
	fmt.Fprintf(w, "\nEnvironment:\n  ACPAGENT_STATE\n    \tthe folder where sessions are kept, when --state is not given\n\nScript steps:\n")
	for _, s := range steps {
		fmt.Fprintf(w, "  %-22s %s\n", strings.TrimSpace(s.verb+" "+s.args), s.help)
	}
}
