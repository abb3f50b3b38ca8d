package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"scv/control/api"
	"scv/control/workspace"
	"scv/ledger/local"
	"scv/reducer"
)

// Projects is what live agents read of the project ledger
// (*ledger.Ledger): the project and task an agent works on.
type Projects interface {
	Project(ctx context.Context, ref string) (*reducer.Project, error)
}

// Questions asks the owner (*confirm.Manager): an agent started with
// --ask has its permission requests decided there.
type Questions interface {
	Ask(ctx context.Context, c api.CmdConfirmAsk) (api.ConfirmInfo, error)
	Status(ctx context.Context, id string) (api.ConfirmInfo, error)
}

// Defaults of the manager's settings.
const (
	// DefaultBeat is how often a turn's run gets a heartbeat while the
	// agent is silent, when neither Beat nor Every is set.
	DefaultBeat = 30 * time.Second
	// maxInitTimeout bounds agent_start's init_timeout_seconds.
	maxInitTimeout = 600
	// keptEnded is how many ended agents keep their updates readable, so
	// that a client following a turn reads how it ended.
	keptEnded = 32
	// maxName is the longest agent name.
	maxName = 64
)

// Manager runs the daemon's live agents: it starts them, speaks ACP to
// them, records their turns as runs, and keeps a row of each in the
// local store so that a restarted daemon starts them again and loads
// their conversations. As a daemon service, Start resumes the agents of
// the store and Stop stops every agent, keeping its row. Set the fields,
// then Start.
type Manager struct {
	Store local.Agents
	// Handler is the daemon's way in (control.Service): a turn's run is
	// started, reported on and finished through it, as any client's,
	// with the agent as its caller (api.WithCaller).
	Handler   api.Handler
	Projects  Projects
	Questions Questions // nil: permission requests are refused
	Clock     func() time.Time
	Logger    *slog.Logger
	// Grace is how long an agent's processes have between SIGTERM and
	// SIGKILL when it is stopped.
	Grace time.Duration
	// Every is the coalescing interval of a turn's progress and
	// heartbeats (the daemon's --heartbeat-every); Beat how often a
	// silent turn's run gets a heartbeat (0: Every, else DefaultBeat).
	Every time.Duration
	Beat  time.Duration
	// PID is the daemon's, the owner of every live agent (0: the
	// process's own).
	PID int
	// MaxMessage is the longest line an agent may write (0:
	// DefaultMaxMessage).
	MaxMessage int

	// held, while a restart is about to go, says why no turn may begin
	// (Hold).
	held atomic.Pointer[string]
	// private: the manager of one private agent (StartPrivate).
	private bool

	mu       sync.Mutex
	agents   map[string]*agent // by handle
	ended    []*agent          // the newest that ended, oldest first
	running  bool
	starting sync.WaitGroup // starts and resumes under way
}

func (m *Manager) now() time.Time {
	if m.Clock != nil {
		return m.Clock()
	}
	return time.Now()
}

func (m *Manager) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (m *Manager) grace() time.Duration {
	if m.Grace > 0 {
		return m.Grace
	}
	return 2 * time.Second
}

func (m *Manager) beat() time.Duration {
	switch {
	case m.Beat > 0:
		return m.Beat
	case m.Every > 0:
		return m.Every
	}
	return DefaultBeat
}

func (m *Manager) pid() int {
	if m.PID > 0 {
		return m.PID
	}
	return os.Getpid()
}

func (m *Manager) maxMessage() int {
	if m.MaxMessage > 0 {
		return m.MaxMessage
	}
	return DefaultMaxMessage
}

// Start resumes every agent of the store: each is started again and its
// conversation loaded (session/load), or ended where it cannot be. It
// does not wait for them: an agent being resumed is listed `starting`.
func (m *Manager) Start(ctx context.Context) error {
	rows, err := m.Store.Agents(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.running = true
	if m.agents == nil {
		m.agents = map[string]*agent{}
	}
	var resumed []*agent
	for _, row := range rows {
		var sp spec
		if err := json.Unmarshal([]byte(row.Spec), &sp); err != nil || len(sp.Command) == 0 {
			m.logger().Error("live agent dropped: its row cannot be read", "handle", row.Handle, "err", err)
			go m.Store.DeleteAgent(context.WithoutCancel(ctx), row.Handle)
			continue
		}
		a := m.newAgent(row.Handle, row.Name, sp, time.UnixMilli(row.Started))
		a.conversation, a.turn, a.runID = row.Conversation, row.Turn, row.RunID
		m.agents[a.handle] = a
		resumed = append(resumed, a)
	}
	m.starting.Add(len(resumed))
	m.mu.Unlock()
	for _, a := range resumed {
		go func() {
			defer m.starting.Done()
			m.resume(a)
		}()
	}
	return nil
}

// Stop stops every agent, cancelling its turn (the run is finished
// cancelled), and keeps its row: the daemon's next start resumes it.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.running = false
	var all []*agent
	for _, a := range m.agents {
		all = append(all, a)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range all {
		wg.Go(func() { a.stop("the daemon is stopping", true) })
	}
	wg.Wait()
	m.starting.Wait()
}

func (m *Manager) newAgent(handle, name string, sp spec, started time.Time) *agent {
	return &agent{m: m, handle: handle, name: name, spec: sp, started: started, state: api.AgentStarting,
		updates: newUpdateLog(), done: make(chan struct{}),
		log: m.logger().With("agent", name, "handle", handle)}
}

// resume starts a kept agent again and loads its conversation. A turn
// that was under way when the daemon ended (its run is still running)
// failed; an agent that cannot load its conversation has ended.
func (m *Manager) resume(a *agent) {
	ctx := context.Background()
	a.mu.Lock()
	left, project, turn := a.runID, a.spec.Project, a.turn
	a.runID = ""
	a.mu.Unlock()
	if left != "" {
		why := "the daemon ended in the middle of turn " + strconv.Itoa(int(turn))
		if err := endRun(a.caller(ctx), m.Handler, project, left, reducer.RunFailed, why); err != nil && !errors.Is(err, reducer.ErrRunNotRunning) {
			a.log.Warn("fail the turn the daemon left", "run", left, "err", err)
		}
	}
	// What is left of the agent's processes, if the daemon that ran it
	// did not stop them, goes first.
	a.kill()
	err := a.spawn()
	if err == nil {
		err = a.handshake(ctx)
	}
	a.mu.Lock()
	stopping := a.stopping
	if err == nil && !stopping {
		a.state, a.idleSince = api.AgentIdle, m.now()
	}
	a.mu.Unlock()
	switch {
	case stopping:
		return // stopped meanwhile; the stop kept or dropped its row
	case err != nil:
		a.log.Warn("live agent ended: it could not be resumed after the restart", "err", err)
		a.add(api.AgentUpdate{Kind: "agent_exited", Text: "not resumed: " + err.Error()})
		a.stop("it could not be resumed: "+err.Error(), false)
		return
	}
	if err := a.save(); err != nil {
		a.log.Error("keep the resumed agent", "err", err)
	}
	info := a.info()
	a.log.Info("live agent resumed", "conversation", *info.Conversation, "turn", info.Turn)
}

// forget removes a stopped agent, keeping its updates readable for a
// while.
func (m *Manager) forget(a *agent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.agents, a.handle)
	if len(m.ended) == keptEnded {
		m.ended = m.ended[1:]
	}
	m.ended = append(m.ended, a)
}

// find is the live agent ref names (its name or handle).
func (m *Manager) find(ref string) (*agent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.agents[ref]; ok {
		return a, nil
	}
	for _, a := range m.agents {
		if a.name == ref {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%w: live agent %q", api.ErrNotFound, ref)
}

// StartAgent starts c's command as a live agent and opens its session. It
// waits for the agent's answers (up to the init timeout); an agent that
// does not speak ACP is refused, naming what it did, with nothing left
// running.
func (m *Manager) StartAgent(ctx context.Context, c api.CmdAgentStart) (api.AgentInfo, api.DelegationInfo, error) {
	return m.StartAgentWith(ctx, c, nil)
}

// StartAgentWith is StartAgent, the agent handed the MCP servers mcp in
// session/new (and in session/load after a restart).
func (m *Manager) StartAgentWith(ctx context.Context, c api.CmdAgentStart, mcp []MCPServer) (api.AgentInfo, api.DelegationInfo, error) {
	sp, err := m.check(ctx, c)
	if err != nil {
		return api.AgentInfo{}, api.DelegationInfo{}, err
	}
	sp.MCP = mcp
	m.mu.Lock()
	if !m.running {
		m.mu.Unlock()
		return api.AgentInfo{}, api.DelegationInfo{}, api.Errorf(api.ErrUnavailable, "the daemon is not running its agents (it is stopping)")
	}
	name, err := m.nameLocked(c.Name, sp.Command[0])
	if err != nil {
		m.mu.Unlock()
		return api.AgentInfo{}, api.DelegationInfo{}, err
	}
	a := m.newAgent(ulid.Make().String(), name, sp, m.now())
	m.agents[a.handle] = a
	m.starting.Add(1)
	m.mu.Unlock()
	defer m.starting.Done()

	fail := func(err error) (api.AgentInfo, api.DelegationInfo, error) {
		a.stop("it could not start", false)
		a.log.Warn("live agent refused", "err", err)
		return api.AgentInfo{}, api.DelegationInfo{}, err
	}
	if err := a.spawn(); err != nil {
		return fail(api.Errorf(api.ErrInvalidArgument, "agent %s: start %s: %v", name, sp.Command[0], err))
	}
	if err := a.handshake(context.WithoutCancel(ctx)); err != nil {
		return fail(api.Errorf(api.ErrInvalidArgument, "%v; nothing of it is left running", err))
	}
	a.mu.Lock()
	if a.stopping {
		a.mu.Unlock()
		return api.AgentInfo{}, api.DelegationInfo{}, api.Errorf(api.ErrUnavailable, "agent %s was stopped while it started", name)
	}
	a.state, a.idleSince = api.AgentIdle, m.now()
	a.mu.Unlock()
	if err := a.save(); err != nil {
		a.stop("it could not be kept: "+err.Error(), false)
		return api.AgentInfo{}, api.DelegationInfo{}, err
	}
	info := a.info()
	a.log.Info("live agent started", "conversation", *info.Conversation, "load_session", info.LoadSession)
	return info, a.delegation(), nil
}

// check turns c into a spec, refusing what cannot work before anything
// starts.
func (m *Manager) check(ctx context.Context, c api.CmdAgentStart) (spec, error) {
	sp := spec{Command: c.Command, Env: c.Env, Ask: c.Ask, AllowTerminal: c.AllowTerminal,
		InitTimeout: api.DefaultAgentInitTimeout, Session: c.Session, Parent: c.Parent, Chat: c.Chat}
	if len(c.Command) == 0 || c.Command[0] == "" {
		return sp, api.Errorf(api.ErrInvalidArgument, "command: give the agent's command")
	}
	if c.InitTimeoutSeconds != nil {
		if *c.InitTimeoutSeconds == 0 || *c.InitTimeoutSeconds > maxInitTimeout {
			return sp, api.Errorf(api.ErrInvalidArgument, "init_timeout_seconds: want 1 to %d", maxInitTimeout)
		}
		sp.InitTimeout = *c.InitTimeoutSeconds
	}
	if (c.Project == nil) != (c.Task == nil) {
		return sp, api.Errorf(api.ErrInvalidArgument, "give a project and a task, or neither: the agent's turns are runs of the task")
	}
	if len(c.Session) > 200 || len(c.Parent) > 4096 {
		return sp, api.Errorf(api.ErrInvalidArgument, "session or parent too long")
	}
	if c.Chat != "" {
		if _, _, err := api.ParseChat(c.Chat); err != nil {
			return sp, err
		}
	}
	ws := c.Workspace
	if c.Project != nil {
		p, err := m.Projects.Project(ctx, *c.Project)
		if err != nil {
			return sp, err
		}
		t, err := p.ResolveTask(*c.Task)
		if err != nil {
			return sp, err
		}
		sp.Project, sp.Task = p.ID, t.ID
		if ws == "" {
			ws = p.Workspace
		}
	}
	if ws == "" {
		return sp, api.Errorf(api.ErrInvalidArgument, "workspace: give the agent's workspace, or a project whose workspace it works in")
	}
	ws, err := workspace.Check(ws)
	if err != nil {
		return sp, err
	}
	sp.Workspace = ws
	return sp, nil
}

// nameLocked is the agent's name: want, which must be free, or the
// command's file name, made free with a number.
func (m *Manager) nameLocked(want, command string) (string, error) {
	taken := func(n string) bool {
		for _, a := range m.agents {
			if a.name == n || a.handle == n {
				return true
			}
		}
		return false
	}
	if want != "" {
		if !validName(want) {
			return "", api.Errorf(api.ErrInvalidArgument, "name %q: want 1 to %d characters of [0-9A-Za-z._-], not starting with - or .", want, maxName)
		}
		if taken(want) {
			return "", api.Errorf(api.ErrConflict, "a live agent is named %s already; stop it or choose another --name", want)
		}
		return want, nil
	}
	base := strings.Map(func(r rune) rune {
		if r < 0x80 && validName(string(r)) || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, filepath.Base(command))
	base = strings.TrimLeft(base, "-.")
	if len(base) > maxName-4 {
		base = base[:maxName-4]
	}
	if base == "" {
		base = "agent"
	}
	name := base
	for i := 2; taken(name); i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	return name, nil
}

func validName(s string) bool {
	if s == "" || len(s) > maxName || s[0] == '-' || s[0] == '.' {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// ListAgents is every live agent, oldest first.
func (m *Manager) ListAgents() []api.AgentInfo {
	out := []api.AgentInfo{}
	for _, a := range m.live() {
		out = append(out, a.info())
	}
	return out
}

// counts is how many agents are live, and how many of them idle with no
// background job: on every reply's path, so it neither copies nor sorts.
func (m *Manager) counts() (live, idle uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.agents {
		live++
		if a.idle() {
			idle++
		}
	}
	return live, idle
}

// live is every live agent, oldest first.
func (m *Manager) live() []*agent {
	m.mu.Lock()
	all := make([]*agent, 0, len(m.agents))
	for _, a := range m.agents {
		all = append(all, a)
	}
	m.mu.Unlock()
	slices.SortFunc(all, func(a, b *agent) int {
		if c := a.started.Compare(b.started); c != 0 {
			return c
		}
		return strings.Compare(a.handle, b.handle)
	})
	return all
}

// StopAgent stops the agent ref names and forgets it.
func (m *Manager) StopAgent(ctx context.Context, ref string) (api.AgentInfo, error) {
	a, err := m.find(ref)
	if err != nil {
		return api.AgentInfo{}, err
	}
	a.stop("stopped by request", false)
	return a.info(), nil
}

// PromptAgent sends c.Text as the agent's next turn and returns at once:
// the agent working, and where the turn's updates start. A turn of an
// agent of a project is a run of its task, started first: if the ledger
// refuses it (the task is done, say), nothing is sent.
func (m *Manager) PromptAgent(ctx context.Context, c api.CmdAgentPrompt) (api.AgentInfo, api.AgentUpdates, error) {
	info, u, _, err := m.prompt(ctx, c, claim{})
	return info, u, err
}

// claim is a run started before its turn: the atomic claim of a task
// (reducer.NextTask) that the turn works on.
type claim struct{ project, task, run string }

// PromptRun sends text as the agent's next turn, a turn whose run the
// caller has started already (project_task_next claimed its task): the
// turn is that run, its end the run's end, as PromptAgent's are. ended
// receives the turn's turn_ended update. If the turn cannot begin, the
// run is left as it was, for the caller to end.
func (m *Manager) PromptRun(ctx context.Context, agent, text, project, task, run string) (api.AgentInfo, <-chan api.AgentUpdate, error) {
	info, _, ended, err := m.prompt(ctx, api.CmdAgentPrompt{Agent: agent, Text: text}, claim{project, task, run})
	return info, ended, err
}

func (m *Manager) prompt(ctx context.Context, c api.CmdAgentPrompt, cl claim) (api.AgentInfo, api.AgentUpdates, <-chan api.AgentUpdate, error) {
	a, err := m.find(c.Agent)
	if err != nil {
		return api.AgentInfo{}, api.AgentUpdates{}, nil, err
	}
	if strings.TrimSpace(c.Text) == "" {
		return api.AgentInfo{}, api.AgentUpdates{}, nil, api.Errorf(api.ErrInvalidArgument, "text: the prompt is empty")
	}
	a.mu.Lock()
	switch a.state {
	case api.AgentWorking:
		a.mu.Unlock()
		return api.AgentInfo{}, api.AgentUpdates{}, nil, api.Errorf(api.ErrConflict,
			"agent %s is in turn %d: wait for it to end, or cancel it (scv agent cancel %s)", a.name, a.turn, a.name)
	case api.AgentIdle:
	default:
		st := a.state
		a.mu.Unlock()
		return api.AgentInfo{}, api.AgentUpdates{}, nil, api.Errorf(api.ErrConflict, "agent %s is %s", a.name, st)
	}
	// Reserved: the turn is counted and a second prompt refused, until
	// it begins or is refused.
	a.state = api.AgentWorking
	a.turn++
	project, task := a.spec.Project, a.spec.Task
	a.mu.Unlock()
	idle := func(err error) (api.AgentInfo, api.AgentUpdates, <-chan api.AgentUpdate, error) {
		a.mu.Lock()
		a.state = api.AgentIdle
		a.turn--
		a.mu.Unlock()
		return api.AgentInfo{}, api.AgentUpdates{}, nil, err
	}
	if why := m.held.Load(); why != nil {
		return idle(api.Errorf(api.ErrUnavailable, "agent %s takes no prompt now: %s", a.name, *why))
	}
	if c.Task != nil {
		if project == "" {
			return idle(api.Errorf(api.ErrInvalidArgument, "task: agent %s has no project (start it with --project and --task)", a.name))
		}
		p, err := m.Projects.Project(ctx, project)
		if err != nil {
			return idle(err)
		}
		t, err := p.ResolveTask(*c.Task)
		if err != nil {
			return idle(err)
		}
		task = t.ID
	}
	var run *turnRun
	switch {
	case cl.run != "":
		project, task = cl.project, cl.task
		run = m.newTurnRun(a.caller(ctx), project, cl.run, a.progressText)
	case project != "":
		st, err := m.Handler.Handle(a.caller(ctx), api.CmdProjectRunStart{Project: project, Task: task, Agent: a.name})
		if err != nil {
			return idle(err)
		}
		run = m.newTurnRun(a.caller(ctx), project, st.Project.RunID, a.progressText)
	}
	a.mu.Lock()
	a.spec.Project, a.spec.Task = project, task
	a.mu.Unlock()
	next := a.updates.seq()
	ended := a.begin(c.Text, run)
	if err := a.save(); err != nil {
		a.log.Error("keep the agent's turn", "err", err)
	}
	info := a.info()
	return info, api.AgentUpdates{Agent: a.name, Turn: info.Turn, Working: true, Next: next, Updates: []api.AgentUpdate{}}, ended, nil
}

// CancelTurn asks the agent to end its running turn.
func (m *Manager) CancelTurn(ctx context.Context, ref string) (api.AgentInfo, error) {
	a, err := m.find(ref)
	if err != nil {
		return api.AgentInfo{}, err
	}
	if err := a.cancel(); err != nil {
		return api.AgentInfo{}, err
	}
	return a.info(), nil
}

// AgentUpdates is a page of an agent's updates (also of one that ended
// lately), waiting up to c.WaitSeconds for one.
func (m *Manager) AgentUpdates(ctx context.Context, c api.CmdAgentUpdates) (api.AgentUpdates, error) {
	a, err := m.find(c.Agent)
	if err != nil {
		m.mu.Lock()
		for i := len(m.ended) - 1; i >= 0; i-- {
			if e := m.ended[i]; e.name == c.Agent || e.handle == c.Agent {
				a, err = e, nil
				break
			}
		}
		m.mu.Unlock()
		if err != nil {
			return api.AgentUpdates{}, err
		}
	}
	var wait time.Duration
	if c.WaitSeconds != nil {
		wait = time.Duration(min(*c.WaitSeconds, api.MaxListWait)) * time.Second
	}
	after := uint64(0)
	if c.After != nil {
		after = *c.After
	}
	return m.page(a, after, ctx, wait), nil
}

func (m *Manager) page(a *agent, after uint64, ctx context.Context, wait time.Duration) api.AgentUpdates {
	if ctx == nil {
		ctx = context.Background()
	}
	if wait > 0 {
		a.updates.page(ctx, after, wait) // until there is news, or the wait is over
	}
	// The page and whether a turn runs, read as one: a turn's end and its
	// turn_ended update are one step (finishTurn).
	a.mu.Lock()
	defer a.mu.Unlock()
	ups, next, dropped := a.updates.page(ctx, after, 0)
	return api.AgentUpdates{Agent: a.name, Turn: a.turn, Working: a.turnDone != nil, Next: next, Updates: ups, Dropped: dropped}
}

// agent is the live agent with handle, or nil.
func (m *Manager) agent(handle string) *agent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.agents[handle]
}

// ChatOf is the chat that started the work of the innermost live agent
// of the SCV_PARENT chain parent that has one, or "".
func (m *Manager) ChatOf(parent string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	chain := strings.Split(parent, ",")
	for i := len(chain) - 1; i >= 0; i-- {
		if a, ok := m.agents[chain[i]]; ok && a.spec.Chat != "" {
			return a.spec.Chat
		}
	}
	return ""
}

// Hold lets no turn begin until Release (a prompt is refused unavailable,
// saying why) and returns the turns still under way, for a restart about
// to go (restart.Restarter.Hold). With end, it first ends them: each is
// cancelled (session/cancel), its run finished cancelled with why, and
// waited for, up to cancelWait.
func (m *Manager) Hold(why string, end bool) []string {
	m.held.Store(&why)
	agents := m.live()
	if end {
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Go(func() { a.cut(why) })
		}
		wg.Wait()
	}
	var busy []string
	for _, a := range agents {
		a.mu.Lock()
		if a.state == api.AgentWorking {
			busy = append(busy, fmt.Sprintf("agent %s (turn %d)", a.name, a.turn))
		}
		a.mu.Unlock()
	}
	return busy
}

// Held says why no turn may begin now (a restart is about to go), or "".
func (m *Manager) Held() string {
	if why := m.held.Load(); why != nil {
		return *why
	}
	return ""
}

// Release lets turns begin again.
func (m *Manager) Release() { m.held.Store(nil) }

// Busy says what of the live agents a restart waits for: turns under way,
// and agents with background jobs.
func (m *Manager) Busy() []string {
	var out []string
	for _, a := range m.live() {
		a.mu.Lock()
		switch {
		case a.state == api.AgentWorking:
			out = append(out, fmt.Sprintf("agent %s (turn %d)", a.name, a.turn))
		case a.jobs > 0:
			out = append(out, fmt.Sprintf("agent %s (%d background jobs)", a.name, a.jobs))
		}
		a.mu.Unlock()
	}
	return out
}
