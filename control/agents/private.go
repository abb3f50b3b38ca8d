package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/oklog/ulid/v2"

	"scv/control/api"
	"scv/ledger/local"
	"scv/reducer"
)

// maxSaid bounds what a turn keeps of the agent's message from its start:
// a private agent's answer.
const maxSaid = 16 << 10

// Private is a live agent the daemon keeps to itself, such as an email
// account's triage agent (control/mail, docs/mail.md): started as
// StartAgent starts one (its process, ACP, its policy: no permission,
// files of its workspace only, no terminal) and prompted as PromptAgent
// prompts one, but listed nowhere, kept in no store, never resumed after
// a restart; and nothing of what it is told or says is logged or readable
// by a request. Each prompt is a session of its own, so that no prompt
// sees another. Its methods are for one goroutine at a time.
type Private struct {
	m     *Manager
	a     *agent
	sink  *usageSink
	turns int
}

// PrivateSpec is what a private agent is started with.
type PrivateSpec struct {
	// Name names it in the log (the characters of an agent's name).
	Name      string
	Command   []string
	Workspace string
	Env       []string
	// InitTimeout bounds its start (0: api.DefaultAgentInitTimeout).
	InitTimeout time.Duration
	Logger      *slog.Logger
	// Grace is how long its processes have between SIGTERM and SIGKILL
	// when it is stopped (0: the default).
	Grace time.Duration
}

// Turn is a private agent's answer to one prompt.
type Turn struct {
	// Text is the agent's message, at most its first 16 KiB.
	Text string
	// Tokens is what the turn spent, as the agent reported it (the
	// answer's `usage`).
	Tokens reducer.Tokens
	// Status is how the turn ended: succeeded (end_turn), cancelled, or
	// failed (any other stop reason, or the agent crashed).
	Status reducer.RunStatus
}

// StartPrivate starts a private agent and opens its session. An agent
// that does not start or speak ACP is refused, naming what it did, with
// nothing left running.
func StartPrivate(ctx context.Context, s PrivateSpec) (*Private, error) {
	sink := &usageSink{used: map[string]reducer.Tokens{}}
	m := &Manager{Store: discard{}, Handler: sink, Logger: s.Logger, Grace: s.Grace,
		Every: time.Hour, Beat: time.Hour, private: true, running: true, agents: map[string]*agent{}}
	c := api.CmdAgentStart{Name: s.Name, Command: s.Command, Workspace: s.Workspace, Env: s.Env}
	if s.InitTimeout > 0 {
		c.InitTimeoutSeconds = new(uint64(max(s.InitTimeout/time.Second, 1)))
	}
	info, _, err := m.StartAgent(ctx, c)
	if err != nil {
		return nil, err
	}
	a := m.agent(info.Handle)
	if a == nil {
		return nil, fmt.Errorf("agent %s ended as it started", info.Name)
	}
	return &Private{m: m, a: a, sink: sink}, nil
}

// Alive reports whether the agent still runs (it may have crashed between
// prompts).
func (p *Private) Alive() bool { return p.m.agent(p.a.handle) != nil }

// Prompt sends text as a turn of a new session and waits for the answer.
// When ctx ends first, the agent is stopped and ctx's error returned. An
// agent that has ended, or that refuses a new session, is an error: start
// another.
func (p *Private) Prompt(ctx context.Context, text string) (Turn, error) {
	a := p.a
	if !p.Alive() {
		return Turn{}, errors.New("the agent has ended")
	}
	if p.turns > 0 {
		s, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: a.spec.Workspace, McpServers: []acp.McpServer{}})
		switch {
		case err != nil:
			return Turn{}, errors.New("the agent refused a new session")
		case s.SessionId == "":
			return Turn{}, errors.New("the agent answered session/new without a session ID")
		}
		a.named(s.Models)
		a.opened(string(s.SessionId))
	}
	p.turns++
	run := ulid.Make().String()
	_, ended, err := p.m.PromptRun(ctx, a.handle, text, "private", "private", run)
	if err != nil {
		return Turn{}, err
	}
	var end api.AgentUpdate
	select {
	case end = <-ended:
	case <-ctx.Done():
		p.Stop()
		return Turn{}, ctx.Err()
	}
	a.mu.Lock()
	said := string(a.said)
	a.mu.Unlock()
	return Turn{Text: said, Tokens: p.sink.take(run), Status: reducer.RunStatus(end.Status)}, nil
}

// Stop stops the agent and waits for its processes.
func (p *Private) Stop() { p.a.stop("stopped by its owner", false) }

// usageSink is a private agent's Handler: its turns' runs are recorded
// nowhere, but for the tokens each run's end reports.
type usageSink struct {
	mu   sync.Mutex
	used map[string]reducer.Tokens
}

func (s *usageSink) Handle(_ context.Context, cmd api.Command) (*api.DaemonStatus, error) {
	if f, ok := cmd.(api.CmdProjectRunFinish); ok && f.Usage != nil {
		s.mu.Lock()
		s.used[f.Run] = f.Usage.Tokens
		s.mu.Unlock()
	}
	return &api.DaemonStatus{}, nil
}

// take is the tokens run's end reported, forgotten.
func (s *usageSink) take(run string) reducer.Tokens {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.used[run]
	delete(s.used, run)
	return t
}

// discard is a private agent's store: it keeps nothing.
type discard struct{}

func (discard) PutAgent(context.Context, local.Agent) error       { return nil }
func (discard) DeleteAgent(context.Context, string) (bool, error) { return true, nil }
func (discard) Agents(context.Context) ([]local.Agent, error)     { return nil, nil }
