package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"scv/control/api"
	"scv/control/proc"
	"scv/ledger/local"
	"scv/reducer"
)

// spec is what an agent was started with, kept in its row of the local
// store (local.Agent.Spec) so that a restarted daemon starts it again.
type spec struct {
	Command       []string `json:"command"`
	Workspace     string   `json:"workspace"`
	Env           []string `json:"env,omitempty"`
	Project       string   `json:"project,omitempty"` // the project's ID
	Task          string   `json:"task,omitempty"`    // the task's ID
	Ask           bool     `json:"ask,omitempty"`
	AllowTerminal bool     `json:"allow_terminal,omitempty"`
	InitTimeout   uint64   `json:"init_timeout_seconds"`
	Session       string   `json:"session,omitempty"`
	Parent        string   `json:"parent,omitempty"` // the caller's SCV_PARENT
	Chat          string   `json:"chat,omitempty"`
	// MCP is the MCP servers handed to the agent in session/new and
	// session/load (StartAgentWith).
	MCP []MCPServer `json:"mcp,omitempty"`
}

// MCPServer is a stdio MCP server an agent is handed with its session:
// Command (an absolute path) and Args, run by the agent with Env
// (NAME=VALUE) added to its own.
type MCPServer struct {
	Name    string   `json:"name"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []string `json:"env,omitempty"`
}

// mcpServers is ms as ACP names them.
func mcpServers(ms []MCPServer) []acp.McpServer {
	out := []acp.McpServer{}
	for _, m := range ms {
		env := []acp.EnvVariable{}
		for _, kv := range m.Env {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, acp.EnvVariable{Name: k, Value: v})
		}
		out = append(out, acp.McpServer{Stdio: &acp.McpServerStdio{Name: m.Name, Command: m.Command, Args: m.Args, Env: env}})
	}
	return out
}

// Timing of an agent's stop.
const (
	// cancelWait is how long a stop waits for a cancelled turn to end
	// before it stops the process.
	cancelWait = 3 * time.Second
	// exitWait bounds the wait for the process to be reaped once its tree
	// was stopped, and, after a failed handshake, for its exit status.
	exitWait = 10 * time.Second
	// stderrTail is how much of an agent's standard error is kept for
	// the messages that say why it failed.
	stderrTail = 2 << 10
)

// agent is one live agent: its process, the ACP connection to it, its
// session and its turns.
type agent struct {
	m       *Manager
	handle  string
	name    string
	started time.Time
	updates *updateLog
	log     *slog.Logger

	// Set by spawn, then fixed.
	ident  proc.Ident
	stdin  *input
	conn   *acp.ClientSideConnection
	guard  *guard
	stderr *tail
	// stderrDone is closed once the agent's standard error is read to its
	// end (the process, and whatever it left, closed it).
	stderrDone chan struct{}
	exited     chan struct{} // closed once the process is reaped
	terms      terminals

	saveMu sync.Mutex // orders the writes of the agent's row

	// takeMu orders the taking of updates and the opening of the
	// session; early holds the updates that came before it (take).
	takeMu sync.Mutex
	early  []heldUpdate

	mu           sync.Mutex
	spec         spec
	state        api.AgentState
	conversation string
	turn         uint32
	idleSince    time.Time
	jobs         uint32
	loadSession  bool
	stopReason   string
	runID        string
	run          *turnRun
	turnDone     chan struct{}        // closed when the running turn has ended; nil between turns
	ended        chan api.AgentUpdate // receives the running turn's turn_ended (buffered)
	promptSent   <-chan struct{}      // closed once the running turn's session/prompt was written
	turnCtx      context.Context
	endTurn      context.CancelFunc // ends the waits of the running turn (permission questions)
	message      []byte             // the running turn's agent message since its last newline (its tail)
	said         []byte             // the running turn's agent message from its start, up to maxSaid bytes
	progress     string             // what a tool call or the plan said last
	fromMessage  bool               // the turn's progress is its message's, not progress
	exitHow      string             // how the process ended, once exited
	crashed      bool               // it ended without being stopped
	stopping     bool
	why          string      // why it is being stopped
	cutWhy       string      // why the running turn is being cut short (cut)
	loading      bool        // session/load replays the conversation: not news
	cost         sessionCost // the session's cost, as the agent last reported it
	model        string      // the session's model, when the agent named it
	done         chan struct{}
}

func (a *agent) chain() string { return proc.ExtendChain(a.spec.Parent, a.handle) }

func (a *agent) argv0() string { return a.spec.Command[0] }

// spawn starts the process and the ACP connection to it.
func (a *agent) spawn() error {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return err
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{stdinR, stdinW, stdoutR, stdoutW} {
			f.Close()
		}
		return err
	}
	argv := append([]string{lookPath(a.spec.Command[0], a.spec.Env)}, a.spec.Command[1:]...)
	env := a.spec.Env
	if env == nil {
		env = []string{}
	}
	p, err := proc.Start(argv, a.spec.Workspace, env, a.handle, a.spec.Parent, stdinR, stdoutW, stderrW)
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		stderrR.Close()
		return err
	}
	// The process is our child until reaped below, so its PID names it.
	ident, _ := proc.Identify(p.Pid)
	ident.PID = p.Pid
	stderr := &tail{max: stderrTail}
	cl := &client{a: a}
	g := newGuard(stdoutR, a.m.MaxMessage, func(err error) {
		if a.m.private {
			// The violation quotes the line, which may hold what the
			// agent was told.
			a.log.Warn("agent broke the protocol; stopping it")
			go a.stop("it broke the protocol", false)
			return
		}
		a.log.Warn("agent broke the protocol; stopping it", "err", err)
		go a.stop("it "+err.Error(), false)
	}, a.take)
	in := &input{File: stdinW}
	conn := acp.NewClientSideConnection(cl, in, g)
	if a.m.private {
		conn.SetLogger(slog.New(slog.DiscardHandler))
	} else {
		conn.SetLogger(a.log.With("component", "acp"))
	}
	g.start() // the connection's settings are made: it may read
	a.mu.Lock()
	a.ident, a.stdin, a.exited, a.stderr, a.guard, a.conn = ident, in, make(chan struct{}), stderr, g, conn
	a.mu.Unlock()
	stderrDone := make(chan struct{})
	a.stderrDone = stderrDone
	go func() {
		io.Copy(stderr, stderrR)
		stderrR.Close()
		close(stderrDone)
	}()
	go func() {
		st, err := p.Wait()
		how := "it ended"
		switch {
		case err != nil:
			how = err.Error()
		case st != nil:
			how = st.String() // "exit status 3", "signal: killed"
		}
		stdoutR.Close() // the connection ends, even if a child holds the pipe open
		a.mu.Lock()
		a.exitHow = how
		a.crashed = !a.stopping && a.state != api.AgentStarting
		crashed := a.crashed
		a.mu.Unlock()
		close(a.exited)
		a.log.Info("agent process ended", "pid", p.Pid, "how", how)
		if crashed {
			a.add(api.AgentUpdate{Kind: "agent_exited", Text: how})
			a.stop("its process ended ("+how+")", false)
		}
	}()
	a.log.Info("agent process started", "pid", p.Pid, "command", a.spec.Command)
	return nil
}

// handshake initializes the connection and opens the session, or loads
// the one in a.conversation; it returns why not, naming the agent and
// what it did.
func (a *agent) handshake(ctx context.Context) error {
	timeout := time.Duration(a.spec.InitTimeout) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() {
		select {
		case <-a.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	init, err := a.conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs:       acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: a.spec.AllowTerminal,
		},
	})
	if err != nil {
		return a.startError(ctx, "initialize", timeout, err)
	}
	a.mu.Lock()
	a.loadSession = init.AgentCapabilities.LoadSession
	load := a.conversation != ""
	a.mu.Unlock()
	if !load {
		s, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: a.spec.Workspace, McpServers: mcpServers(a.spec.MCP)})
		if err != nil {
			return a.startError(ctx, "session/new", timeout, err)
		}
		if s.SessionId == "" {
			return fmt.Errorf("agent %s (%s) answered session/new without a session ID", a.name, a.argv0())
		}
		a.named(s.Models)
		a.opened(string(s.SessionId))
		return nil
	}
	if !init.AgentCapabilities.LoadSession {
		return fmt.Errorf("agent %s (%s) does not offer session/load, so conversation %s cannot be resumed",
			a.name, a.argv0(), a.conversation)
	}
	a.mu.Lock()
	a.loading = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.loading = false
		a.mu.Unlock()
	}()
	l, err := a.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: acp.SessionId(a.conversation),
		Cwd: a.spec.Workspace, McpServers: mcpServers(a.spec.MCP)})
	if err != nil {
		return a.startError(ctx, "session/load", timeout, err)
	}
	a.named(l.Models)
	return nil
}

// named keeps the session's model, when the answer to session/new or
// session/load names it (`models.currentModelId`).
func (a *agent) named(m *acp.SessionModelState) {
	if m == nil {
		return
	}
	a.mu.Lock()
	a.model = string(m.CurrentModelId)
	a.mu.Unlock()
}

// startError says why step failed: the agent broke the protocol, ended,
// or did not answer in time.
func (a *agent) startError(ctx context.Context, step string, timeout time.Duration, err error) error {
	who := fmt.Sprintf("agent %s (%s)", a.name, a.argv0())
	if v := a.guard.violation(); v != nil {
		return fmt.Errorf("%s is not an ACP agent: it %v", who, v)
	}
	select {
	case <-a.exited:
	case <-time.After(200 * time.Millisecond):
	}
	a.mu.Lock()
	how := a.exitHow
	a.mu.Unlock()
	if how != "" {
		msg := fmt.Sprintf("%s ended (%s) before it answered %s", who, how, step)
		if s := a.stderrText(); s != "" {
			msg += "; its standard error: " + oneLine(s)
		}
		return errors.New(msg)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s did not answer %s within %s", who, step, timeout)
	}
	return fmt.Errorf("%s refused %s: %v", who, step, err)
}

// begin starts the turn PromptAgent counted: text goes out as
// session/prompt, and the answer ends the turn (finishTurn). run records
// it, or is nil. The channel returned receives the turn's turn_ended
// update.
func (a *agent) begin(text string, run *turnRun) <-chan api.AgentUpdate {
	ended := make(chan api.AgentUpdate, 1)
	a.mu.Lock()
	a.ended = ended
	a.state = api.AgentWorking
	a.idleSince = time.Time{}
	a.run = run
	if run != nil {
		a.runID, run.base = run.run, a.cost
	}
	a.message, a.said, a.progress, a.fromMessage, a.cutWhy = a.message[:0], a.said[:0], "", false, ""
	a.turnDone = make(chan struct{})
	a.turnCtx, a.endTurn = context.WithCancel(context.Background())
	a.promptSent = a.stdin.expectPrompt()
	conv, turn := a.conversation, a.turn
	a.mu.Unlock()
	a.add(api.AgentUpdate{Kind: "turn_started", Text: text})
	go func() {
		resp, err := a.conn.Prompt(context.Background(), acp.PromptRequest{
			SessionId: acp.SessionId(conv), Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		a.finishTurn(turn, resp, err)
	}()
	return ended
}

// finishTurn ends the running turn with the agent's answer (or the error
// that came instead), records the run's end, and makes the agent idle.
func (a *agent) finishTurn(turn uint32, resp acp.PromptResponse, err error) {
	a.mu.Lock()
	a.endTurn()
	run, stopping, why, cut := a.run, a.stopping, a.why, a.cutWhy
	a.cutWhy = ""
	a.mu.Unlock()

	if run != nil && err == nil && resp.Usage != nil {
		a.noteAnswerUsage(run, resp.Usage)
	}
	reason := string(resp.StopReason)
	status, failWhy := reducer.RunSucceeded, ""
	switch {
	case err != nil:
		reason, status, failWhy = a.broken(err, stopping, why)
	case resp.StopReason == acp.StopReasonEndTurn:
	case resp.StopReason == acp.StopReasonCancelled:
		status = reducer.RunCancelled
		if cut != "" {
			failWhy = "cancelled: " + cut
		}
	default: // refusal, max_tokens, max_turn_requests, or one this build does not know
		status, failWhy = reducer.RunFailed, "the agent ended its turn: "+reason
	}
	if run != nil {
		if err := run.finish(status, failWhy); errors.Is(err, reducer.ErrRunNotRunning) {
			// The agent ended its run itself (through MCP): its verdict stands.
			a.log.Info("the turn's run had ended already", "run", run.run)
		} else if err != nil {
			a.log.Warn("record the end of a turn", "run", run.run, "err", err)
		}
		args := []any{"turn", turn, "stop_reason", reason, "run", run.run, "run_status", status}
		if u := run.spent(); u != (Usage{}) {
			args = append(args, "usage", u)
		}
		a.log.Info("turn ended", args...)
	} else {
		a.log.Info("turn ended", "turn", turn, "stop_reason", reason) // no run, so no run status
	}
	// One step for readers: the agent idle, and the update that says the
	// turn ended (a client that reads it may prompt again at once).
	a.mu.Lock()
	a.stopReason = reason
	a.run, a.runID = nil, ""
	gone := a.exitHow != "" || a.stopping
	if !gone {
		a.state, a.idleSince = api.AgentIdle, a.m.now()
	}
	done, ended := a.turnDone, a.ended
	a.turnDone, a.ended = nil, nil
	end := api.AgentUpdate{Kind: "turn_ended", Turn: turn, StopReason: reason, Text: failWhy}
	if run != nil {
		end.Status = string(status) // the run's; an agent of no project has none
	}
	a.add(end)
	a.mu.Unlock()
	ended <- end
	if !gone {
		if err := a.save(); err != nil {
			a.log.Error("keep the agent's turn", "err", err)
		}
	}
	close(done)
}

// stderrText is what the agent last wrote on its standard error, read to
// its end when the agent's processes closed it within a second.
func (a *agent) stderrText() string {
	select {
	case <-a.stderrDone:
	case <-time.After(time.Second):
	}
	return a.stderr.String()
}

// broken says how a turn whose prompt failed (err) ended: the agent broke
// the protocol, crashed, or lost its connection, and its run failed; it
// was stopped, and its run was cancelled; or it answered the prompt with
// an error, and its run failed while it lives on.
func (a *agent) broken(err error, stopping bool, why string) (reason string, status reducer.RunStatus, failWhy string) {
	if v := a.guard.violation(); v != nil {
		return "crashed", reducer.RunFailed, "agent stopped: it " + v.Error()
	}
	select {
	case <-a.conn.Done():
	default: // the connection is up: the agent's own answer
		if stopping {
			return string(acp.StopReasonCancelled), reducer.RunCancelled, "cancelled: " + why
		}
		return "error", reducer.RunFailed, "the agent answered the prompt with an error: " + err.Error()
	}
	if !stopping {
		select {
		case <-a.exited:
		case <-time.After(exitWait):
		}
	}
	a.mu.Lock()
	crashed, how, stopping, why := a.crashed, a.exitHow, a.stopping, a.why
	a.mu.Unlock()
	switch {
	case crashed:
		msg := "agent crashed (" + how + ")"
		if s := a.stderrText(); s != "" {
			msg += ": " + oneLine(s)
		}
		return "crashed", reducer.RunFailed, msg
	case stopping:
		return string(acp.StopReasonCancelled), reducer.RunCancelled, "cancelled: " + why
	}
	// Its output closed, and it runs on: it cannot be spoken to.
	go a.stop("its connection closed", false)
	return "crashed", reducer.RunFailed, "agent connection lost: " + err.Error()
}

// cancel asks the agent to end its running turn. The session/cancel goes
// out after the turn's session/prompt, which the turn's goroutine sends:
// an agent ignores a cancel that comes before the prompt it would end.
func (a *agent) cancel() error {
	a.mu.Lock()
	working, conv, end, conn, sent := a.turnDone != nil, a.conversation, a.endTurn, a.conn, a.promptSent
	a.mu.Unlock()
	if !working {
		return api.Errorf(api.ErrInvalidTransition, "agent %s has no turn running", a.name)
	}
	end() // a permission question waiting is answered cancelled
	select {
	case <-sent:
	case <-conn.Done():
	case <-time.After(cancelWait):
	}
	return conn.Cancel(context.Background(), acp.CancelNotification{SessionId: acp.SessionId(conv)})
}

// cut ends the agent's running turn, if one runs, for why: it is
// cancelled and waited for, up to cancelWait in all. A turn reserved by
// a prompt and not yet begun (its run being started) is waited for to
// begin first.
func (a *agent) cut(why string) {
	deadline := time.Now().Add(cancelWait)
	for {
		a.mu.Lock()
		working, done := a.state == api.AgentWorking, a.turnDone
		if done != nil {
			a.cutWhy = why
		}
		a.mu.Unlock()
		switch {
		case !working:
			return
		case done != nil:
			if err := a.cancel(); err != nil {
				a.log.Warn("cancel the turn", "why", why, "err", err)
				return
			}
			select {
			case <-done:
			case <-time.After(time.Until(deadline)):
				a.log.Warn("the cancelled turn did not end in time", "why", why, "waited", cancelWait)
			}
			return
		case !time.Now().Before(deadline):
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the agent: its running turn is cancelled (the run finished
// cancelled), its process tree stopped as a delegation's is, and it is
// forgotten; with keep, its row stays for the next start of the daemon.
// Only the first stop does it; the others wait for it.
func (a *agent) stop(why string, keep bool) {
	a.mu.Lock()
	if a.stopping {
		a.mu.Unlock()
		<-a.done
		return
	}
	a.stopping, a.why = true, why
	a.state = api.AgentStopping
	turnDone := a.turnDone
	a.mu.Unlock()
	if turnDone != nil && a.cancel() == nil {
		select {
		case <-turnDone:
		case <-time.After(cancelWait):
		}
	}
	a.kill()
	a.mu.Lock()
	turnDone = a.turnDone
	a.mu.Unlock()
	if turnDone != nil {
		<-turnDone // the connection closed with the process: the turn ends
	}
	a.terms.closeAll()
	if keep {
		if err := a.save(); err != nil {
			a.log.Error("keep the agent for the next start", "err", err)
		}
	} else if _, err := a.m.Store.DeleteAgent(context.Background(), a.handle); err != nil {
		a.log.Error("forget the agent", "err", err)
	}
	a.mu.Lock()
	a.state = api.AgentStopped
	a.mu.Unlock()
	a.m.forget(a)
	a.log.Info("agent stopped", "why", why, "kept", keep)
	close(a.done)
}

// input is an agent's standard input, which tells when a session/prompt
// has been written: the SDK writes each message whole, in one Write, and
// JSON's quotes inside a string are escaped, so the method's key and
// value together are found only in a request of that method.
type input struct {
	*os.File
	mu     sync.Mutex
	prompt chan struct{} // closed at the next prompt written; nil when none is awaited
}

var promptMethod = []byte(`"method":"` + acp.AgentMethodSessionPrompt + `"`)

// expectPrompt returns a channel closed once the next session/prompt has
// been written.
func (in *input) expectPrompt() <-chan struct{} {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.prompt = make(chan struct{})
	return in.prompt
}

func (in *input) Write(p []byte) (int, error) {
	n, err := in.File.Write(p)
	if bytes.Contains(p, promptMethod) {
		in.mu.Lock()
		if in.prompt != nil {
			close(in.prompt)
			in.prompt = nil
		}
		in.mu.Unlock()
	}
	return n, err
}

// kill closes the agent's input and stops its tree: SIGTERM, then SIGKILL
// after the grace, to every process of its group or tagged with its
// handle.
func (a *agent) kill() {
	a.mu.Lock()
	stdin, exited, leader := a.stdin, a.exited, a.ident
	a.mu.Unlock()
	if stdin != nil {
		stdin.Close()
	}
	grace := a.m.grace()
	ctx, cancel := context.WithTimeout(context.Background(), grace+5*time.Second)
	defer cancel()
	if _, err := (proc.Tree{Handle: a.handle, Leader: leader}).Stop(ctx, grace); err != nil {
		a.log.Error("stop the agent's processes", "err", err)
	}
	if exited != nil {
		select {
		case <-exited:
		case <-time.After(exitWait):
			a.log.Error("agent process not reaped", "pid", leader.PID)
		}
	}
}

// add appends u to the agent's updates, stamped and numbered, of the
// agent's turn now unless it names one (then a.mu may be held).
func (a *agent) add(u api.AgentUpdate) uint64 {
	if u.Turn == 0 {
		a.mu.Lock()
		u.Turn = a.turn
		a.mu.Unlock()
	}
	u.TimeUnixMillis = a.m.now().UnixMilli()
	return a.updates.add(u)
}

// save writes the agent's row as it is now. Saves are one at a time, each
// of the state when it began: the last to end wrote the newest.
func (a *agent) save() error {
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	a.mu.Lock()
	b, err := json.Marshal(a.spec)
	row := local.Agent{Handle: a.handle, Name: a.name, Spec: string(b), Conversation: a.conversation,
		Turn: a.turn, RunID: a.runID, Started: a.started.UnixMilli()}
	a.mu.Unlock()
	if err != nil {
		return err
	}
	return a.m.Store.PutAgent(context.Background(), row)
}

// info is the agent on the wire.
func (a *agent) info() api.AgentInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := api.AgentInfo{
		Name: a.name, Handle: a.handle, State: a.state, Command: a.spec.Command, Workspace: a.spec.Workspace,
		PID: uint32(a.ident.PID), Turn: a.turn, LoadSession: a.loadSession, Ask: a.spec.Ask,
		AllowTerminal: a.spec.AllowTerminal, StartedUnixSeconds: uint64(a.started.Unix()),
		Conversation: nonEmpty(a.conversation), Project: nonEmpty(a.spec.Project), Task: nonEmpty(a.spec.Task),
		Run: nonEmpty(a.runID), StopReason: nonEmpty(a.stopReason),
	}
	i.IdleSinceUnixSeconds = a.idleSinceLocked()
	if a.jobs > 0 {
		jobs := a.jobs
		i.BackgroundJobs = &jobs
	}
	return i
}

func (a *agent) idleSinceLocked() *uint64 {
	if a.state != api.AgentIdle || a.idleSince.IsZero() {
		return nil
	}
	s := uint64(a.idleSince.Unix())
	return &s
}

// delegation is the agent as `delegations` lists it.
func (a *agent) delegation() api.DelegationInfo {
	a.mu.Lock()
	d := api.DelegationInfo{
		Handle: a.handle, Agent: a.name, Session: a.spec.Session, Depth: uint32(len(proc.ParseChain(a.chain()))),
		PID: uint32(a.ident.PID), OwnerPID: uint32(a.m.pid()), Cwd: a.spec.Workspace,
		StartedUnixSeconds: uint64(a.started.Unix()), Conversation: nonEmpty(a.conversation),
		IdleSinceUnixSeconds: a.idleSinceLocked(),
	}
	if a.conversation != "" {
		turn := a.turn
		d.Turn = &turn
	}
	if a.jobs > 0 {
		jobs := a.jobs
		d.BackgroundJobs = &jobs
	}
	a.mu.Unlock()
	d.Processes = uint32((proc.Tree{Handle: a.handle, Leader: a.ident}).Count())
	return d
}

// idle reports whether the agent waits between turns with no background
// job of its own.
func (a *agent) idle() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state == api.AgentIdle && a.jobs == 0
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// lookPath finds a command's file the way the caller's shell would: a
// name with a slash as it is, else in the PATH of env.
func lookPath(name string, env []string) string {
	if strings.Contains(name, "/") {
		return name
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name // proc.Start looks in the daemon's own PATH, and says so if it is not there
}

// caller is ctx naming the agent as the caller of the requests it makes
// of the daemon (its turns' runs): "live agent NAME".
func (a *agent) caller(ctx context.Context) context.Context {
	return api.WithCaller(ctx, "live agent "+a.name)
}
