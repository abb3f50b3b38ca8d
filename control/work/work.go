// Package work is the daemon's loop that joins the plan and the live
// agents: a project's work keeps N live agents (control/agents) on its
// ready tasks, each idle agent given the next ready task by the ledger's
// atomic claim (project_task_next) as one turn, whose run is the claimed
// run, until nothing is ready and nothing runs (docs/work.md).
package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"text/template"
	"time"

	"scv/control/agents"
	"scv/control/api"
	"scv/ledger/local"
	"scv/reducer"
)

// Agents starts and prompts the work's agents (*agents.Manager).
type Agents interface {
	StartAgentWith(ctx context.Context, c api.CmdAgentStart, mcp []agents.MCPServer) (api.AgentInfo, api.DelegationInfo, error)
	StopAgent(ctx context.Context, agent string) (api.AgentInfo, error)
	CancelTurn(ctx context.Context, agent string) (api.AgentInfo, error)
	PromptRun(ctx context.Context, agent, text, project, task, run string) (api.AgentInfo, <-chan api.AgentUpdate, error)
	ListAgents() []api.AgentInfo
	// Held says why no turn may begin now (a restart is about to go), or "".
	Held() string
}

// Metrics counts the work's turns (*metrics.Recorder).
type Metrics interface {
	TurnStarted()
	TurnEnded(status string)
}

// Projects reads the project ledger (*ledger.Ledger).
type Projects interface {
	Project(ctx context.Context, ref string) (*reducer.Project, error)
}

// Limits of a work's agents' restarts.
const (
	// MaxRestarts is how many times a slot's agent is started again
	// after a crash within RestartWindow; one more crash stops the slot.
	MaxRestarts = 3
	// RestartWindow is the window MaxRestarts counts in.
	RestartWindow = 10 * time.Minute
	// DefaultRecheck is how often a work with nothing to claim looks at
	// the ledger again (an approval decided, a run of another ended).
	DefaultRecheck = time.Second
	// keptLog is how many entries of its log a work keeps.
	keptLog = 10000
)

// Manager runs the projects' work, one work per project at a time. As a
// daemon service, Stop ends every work and stops its agents. Set the
// fields, then Start.
type Manager struct {
	// Store keeps each work's settings while it runs, so that a restarted
	// daemon resumes it (nil: works end with the daemon).
	Store    local.Works
	Agents   Agents
	Handler  api.Handler // the daemon's way in (control.Service): the claims and the runs' ends
	Projects Projects
	Clock    func() time.Time
	Logger   *slog.Logger
	// Recheck is how often a waiting work looks at the ledger again (0:
	// DefaultRecheck).
	Recheck time.Duration
	// Metrics counts the turns (*metrics.Recorder; nil: nothing).
	Metrics Metrics
	// Restarting says why no task is taken now although turns may still
	// begin: a restart is scheduled, and waits for the turns under way
	// (restart_when_idle); "" or nil: none. The work claims nothing until
	// the restart is done (the next daemon resumes it) or dropped.
	Restarting func() string
	// Scv is the scv binary and Socket the daemon's socket: each agent is
	// handed `scv mcp --project P` as an MCP server in session/new, the
	// ledger's tools (none when Scv is "").
	Scv, Socket string

	mu      sync.Mutex
	works   map[string]*work // by project ID: running, or the last that ended
	running bool
	ctx     context.Context
	cancel  context.CancelFunc
	loops   sync.WaitGroup
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

// Start lets works start, and resumes the works of the store: each
// takes its agents back as the live agents' manager resumes them (or
// starts them anew), and goes on.
func (m *Manager) Start(ctx context.Context) error {
	var rows []local.Work
	if m.Store != nil {
		var err error
		if rows, err = m.Store.Works(ctx); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running = true
	m.works = map[string]*work{}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, row := range rows {
		w, err := m.resume(ctx, row)
		if err != nil {
			m.logger().Error("work dropped: it cannot be resumed", "project", row.Project, "err", err)
			if _, err := m.Store.DeleteWork(ctx, row.Project); err != nil {
				m.logger().Error("forget the work", "project", row.Project, "err", err)
			}
			continue
		}
		m.works[w.project] = w
		m.loops.Add(1)
		go func() {
			defer m.loops.Done()
			var wg sync.WaitGroup
			for _, s := range w.slots {
				wg.Go(func() { w.attach(m.ctx, s) })
			}
			wg.Wait()
			w.loop(m.ctx)
		}()
	}
	return nil
}

// resume is the work of row, its slots to be attached.
func (m *Manager) resume(ctx context.Context, row local.Work) (*work, error) {
	var c api.CmdProjectWork
	if err := json.Unmarshal([]byte(row.Spec), &c); err != nil {
		return nil, err
	}
	tmpl, err := parseTemplate(c.PromptTemplate)
	if err != nil {
		return nil, err
	}
	p, err := m.Projects.Project(ctx, row.Project)
	if err != nil {
		return nil, err
	}
	w := m.newWork(c, tmpl, p, time.UnixMilli(row.Started))
	for i := 1; i <= int(c.Agents); i++ {
		w.slots = append(w.slots, &slot{name: slotName(p, i), state: "starting"})
	}
	w.log.Info("work resumed", "agents", c.Agents)
	return w, nil
}

// attach takes s's agent back once the live agents' manager has resumed
// it, or starts it anew when it was not kept or could not be resumed.
func (w *work) attach(ctx context.Context, s *slot) {
	for ctx.Err() == nil {
		state, found := "", false
		for _, a := range w.m.Agents.ListAgents() {
			if a.Name == s.name {
				state, found = string(a.State), true
			}
		}
		switch {
		case found && state == string(api.AgentIdle):
			w.mu.Lock()
			s.starts++
			s.state = "idle"
			w.addLocked(api.WorkEntry{Kind: "agent_started", Agent: s.name, Text: "resumed after the daemon's restart"})
			w.mu.Unlock()
			return
		case found && state != string(api.AgentStopped):
			time.Sleep(50 * time.Millisecond) // being resumed, or stopped
			continue
		}
		if err := w.startAgent(w.ctx, s); err != nil {
			w.mu.Lock()
			s.state, s.why = "stopped", "its agent could not be started again after the daemon's restart: "+err.Error()
			w.addLocked(api.WorkEntry{Kind: "slot_stopped", Agent: s.name, Text: s.why})
			w.mu.Unlock()
		}
		return
	}
}

// newWork is a running work of c on p, with no slots yet.
func (m *Manager) newWork(c api.CmdProjectWork, tmpl *template.Template, p *reducer.Project, started time.Time) *work {
	w := &work{m: m, c: c, tmpl: tmpl, project: p.ID, name: p.Name, started: started,
		log:  m.logger().With("work", p.Name),
		wake: make(chan struct{}, 1), state: api.WorkRunning, news: make(chan struct{}), done: make(chan struct{})}
	w.ctx = api.WithCaller(context.Background(), "work of project "+p.Name)
	return w
}

// slotName names the i-th agent of p's work.
func slotName(p *reducer.Project, i int) string { return p.Name + "-" + strconv.Itoa(i) }

// Stop ends every work: its turns are cancelled and its agents stopped.
func (m *Manager) Stop() {
	m.mu.Lock()
	if !m.running {
		m.mu.Unlock()
		return
	}
	m.running = false
	m.cancel()
	m.mu.Unlock()
	m.loops.Wait()
}

// work is one project's work.
type work struct {
	m       *Manager
	c       api.CmdProjectWork
	tmpl    *template.Template
	project string // its ID
	name    string
	started time.Time
	log     *slog.Logger
	ctx     context.Context // names the work as its requests' caller
	wake    chan struct{}
	awaits  sync.WaitGroup // the turns' awaits

	mu      sync.Mutex
	state   api.WorkState
	ended   time.Time
	why     string // why it stopped taking tasks, or ended
	waiting string
	closing bool // end has begun: no agent is started again
	turns   api.WorkTurns
	slots   []*slot
	entries []api.WorkEntry
	seq     uint64
	news    chan struct{} // closed and made anew at each change
	done    chan struct{}
}

// slot is one of the work's agents.
type slot struct {
	name     string
	state    string // starting, idle, working, stopped
	task     string
	run      string
	turns    uint64
	starts   uint64
	restarts []time.Time // within RestartWindow
	why      string
}

// StartWork checks c, starts its agents, and starts the work; anything
// refused leaves nothing running.
func (m *Manager) StartWork(ctx context.Context, c api.CmdProjectWork) (api.WorkInfo, error) {
	if c.Agents < 1 || c.Agents > api.MaxWorkAgents {
		return api.WorkInfo{}, api.Errorf(api.ErrInvalidArgument, "agents: want 1 to %d, got %d", api.MaxWorkAgents, c.Agents)
	}
	if len(c.Command) == 0 || c.Command[0] == "" {
		return api.WorkInfo{}, api.Errorf(api.ErrInvalidArgument, "command: give the agents' command")
	}
	if c.MaxTurns != nil && *c.MaxTurns == 0 {
		return api.WorkInfo{}, api.Errorf(api.ErrInvalidArgument, "max_turns: want at least 1")
	}
	if err := reducer.ValidLabels("labels", c.Labels); err != nil {
		return api.WorkInfo{}, err
	}
	tmpl, err := parseTemplate(c.PromptTemplate)
	if err != nil {
		return api.WorkInfo{}, err
	}
	p, err := m.Projects.Project(ctx, c.Project)
	if err != nil {
		return api.WorkInfo{}, err
	}
	if p.Workspace == "" {
		return api.WorkInfo{}, api.Errorf(api.ErrInvalidArgument, "project %s has no workspace for its agents to work in", p.Name)
	}
	w := m.newWork(c, tmpl, p, m.now())
	m.mu.Lock()
	if !m.running {
		m.mu.Unlock()
		return api.WorkInfo{}, api.Errorf(api.ErrUnavailable, "the daemon is not running work (it is stopping)")
	}
	if old := m.works[p.ID]; old != nil && old.live() {
		m.mu.Unlock()
		return api.WorkInfo{}, api.Errorf(api.ErrConflict, "project %s has work running already (%s, started %s): stop it first (scv project work %s --stop)",
			p.Name, plural(int(old.c.Agents), "agent"), old.started.UTC().Format(time.DateTime), p.Name)
	}
	m.works[p.ID] = w
	m.loops.Add(1)
	loopCtx := m.ctx
	m.mu.Unlock()

	fail := func(err error) (api.WorkInfo, error) {
		w.stopAgents()
		m.mu.Lock()
		delete(m.works, p.ID)
		m.mu.Unlock()
		m.loops.Done()
		return api.WorkInfo{}, err
	}
	for i := 1; i <= int(c.Agents); i++ {
		s := &slot{name: slotName(p, i), state: "starting"}
		w.slots = append(w.slots, s)
		if err := w.startAgent(ctx, s); err != nil {
			return fail(err)
		}
	}
	if m.Store != nil {
		spec, err := json.Marshal(c)
		if err == nil {
			err = m.Store.PutWork(ctx, local.Work{Project: p.ID, Spec: string(spec), Started: w.started.UnixMilli()})
		}
		if err != nil {
			return fail(err)
		}
	}
	w.log.Info("work started", "agents", c.Agents, "command", c.Command, "labels", c.Labels)
	go func() {
		defer m.loops.Done()
		w.loop(loopCtx)
	}()
	return w.info(ctx, 0), nil
}

// startAgent starts slot s's agent as agent_start starts one.
func (w *work) startAgent(ctx context.Context, s *slot) error {
	var mcp []agents.MCPServer
	if w.m.Scv != "" {
		mcp = []agents.MCPServer{{Name: "scv", Command: w.m.Scv, Args: []string{"mcp", "--project", w.project},
			Env: []string{"SCV_SOCKET=" + w.m.Socket}}}
	}
	_, _, err := w.m.Agents.StartAgentWith(ctx, api.CmdAgentStart{Name: s.name, Command: w.c.Command, Env: w.c.Env,
		Workspace: w.workspace(ctx), Ask: w.c.Ask, AllowTerminal: w.c.AllowTerminal}, mcp)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		return err
	}
	s.starts++
	s.state = "idle"
	w.addLocked(api.WorkEntry{Kind: "agent_started", Agent: s.name, Text: "start " + strconv.FormatUint(s.starts, 10)})
	return nil
}

// workspace is the project's workspace now.
func (w *work) workspace(ctx context.Context) string {
	p, err := w.m.Projects.Project(ctx, w.project)
	if err != nil {
		return ""
	}
	return p.Workspace
}

// live reports whether the work has not ended.
func (w *work) live() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state != api.WorkEnded
}

// addLocked appends e to the work's log and wakes its readers.
func (w *work) addLocked(e api.WorkEntry) {
	w.seq++
	e.Seq, e.TimeUnixMillis = w.seq, w.m.now().UnixMilli()
	if len(w.entries) == keptLog {
		w.entries = w.entries[1:]
	}
	w.entries = append(w.entries, e)
	w.changedLocked()
}

func (w *work) changedLocked() {
	close(w.news)
	w.news = make(chan struct{})
}

func (w *work) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// loop gives each idle agent a task until the work is over.
func (w *work) loop(ctx context.Context) {
	every := w.m.Recheck
	if every <= 0 {
		every = DefaultRecheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if ctx.Err() != nil {
			w.pause()
			return
		}
		w.fill()
		if why, over := w.over(); over {
			w.end(why)
			return
		}
		select {
		case <-w.wake:
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// taking reports whether the work takes another task now.
func (w *work) takingLocked() bool {
	if w.state != api.WorkRunning {
		return false
	}
	if w.c.MaxTurns != nil && w.turns.Started >= *w.c.MaxTurns {
		w.stopTakingLocked(fmt.Sprintf("its %s are taken (--max-turns)", plural(int(*w.c.MaxTurns), "turn")))
		return false
	}
	return true
}

// stopTakingLocked makes the work take no more tasks, for why.
func (w *work) stopTakingLocked(why string) {
	if w.state != api.WorkRunning {
		return
	}
	w.state, w.why = api.WorkStopping, why
	w.addLocked(api.WorkEntry{Kind: "stopping", Text: why})
	w.log.Info("work takes no more tasks", "why", why)
}

// fill claims a task for each idle agent, while tasks are ready.
func (w *work) fill() {
	for {
		w.mu.Lock()
		var s *slot
		if w.takingLocked() {
			for _, c := range w.slots {
				if c.state == "idle" {
					s = c
					break
				}
			}
		}
		w.mu.Unlock()
		if s == nil || !w.claim(s) {
			return
		}
	}
}

// held says why no task may be taken now, or "": the daemon holds turns
// back for a restart, or a restart is scheduled and waits for the turns
// under way.
func (m *Manager) held() string {
	if why := m.Agents.Held(); why != "" {
		return why
	}
	if m.Restarting != nil {
		return m.Restarting()
	}
	return ""
}

// claim gives s the next ready task as a turn; it reports whether one
// was taken. While a restart is scheduled or the daemon holds turns back
// for one, nothing is claimed: the work waits, and the next daemon
// resumes it.
func (w *work) claim(s *slot) bool {
	if why := w.m.held(); why != "" {
		w.mu.Lock()
		w.waiting = "no turn may begin: " + why
		w.mu.Unlock()
		return false
	}
	st, err := w.m.Handler.Handle(w.ctx, api.CmdProjectTaskNext{Project: w.project, Agent: s.name, Labels: w.c.Labels})
	switch {
	case errors.Is(err, reducer.ErrNothingReady):
		w.mu.Lock()
		w.waiting = err.Error()
		w.mu.Unlock()
		return false
	case errors.Is(err, reducer.ErrBudgetReached):
		w.mu.Lock()
		w.stopTakingLocked(err.Error())
		w.mu.Unlock()
		return false
	case err != nil:
		w.mu.Lock()
		w.stopTakingLocked("the ledger refused the next claim: " + err.Error())
		w.mu.Unlock()
		return false
	}
	run, task := st.Project.RunID, st.Task.ID
	p, err := w.m.Projects.Project(w.ctx, w.project)
	var text string
	if err == nil {
		t, ok := p.Task(task)
		if !ok {
			err = fmt.Errorf("task %s is gone", task)
		} else {
			text, err = render(w.tmpl, promptOf(p, t, run, s.name))
		}
	}
	if err == nil {
		var ended <-chan api.AgentUpdate
		_, ended, err = w.m.Agents.PromptRun(w.ctx, s.name, text, w.project, task, run)
		if err == nil {
			w.mu.Lock()
			s.state, s.task, s.run = "working", task, run
			w.turns.Started++
			w.waiting = ""
			w.addLocked(api.WorkEntry{Kind: "turn_started", Agent: s.name, Task: task, TaskTitle: st.Task.Title, Run: run})
			w.mu.Unlock()
			w.log.Info("turn started", "agent", s.name, "task", task, "run", run)
			if w.m.Metrics != nil {
				w.m.Metrics.TurnStarted()
			}
			w.awaits.Go(func() { w.await(s, task, st.Task.Title, run, ended) })
			return true
		}
	}
	// The claimed run never became a turn: it ends cancelled (no retry
	// spent), and the agent is looked at.
	w.log.Warn("a claimed task's turn could not begin", "agent", s.name, "run", run, "err", err)
	if _, ferr := w.m.Handler.Handle(w.ctx, api.CmdProjectRunProgress{Project: w.project, Run: run,
		Progress: reducer.ClipProgress("the work could not begin its turn: " + err.Error())}); ferr != nil {
		w.log.Warn("record why the turn did not begin", "run", run, "err", ferr)
	}
	if _, ferr := w.m.Handler.Handle(w.ctx, api.CmdProjectRunFinish{Project: w.project, Run: run, Status: reducer.RunCancelled}); ferr != nil {
		w.log.Warn("cancel the run of a turn that did not begin", "run", run, "err", ferr)
	}
	if errors.Is(err, reducer.ErrUnavailable) { // the daemon restarts: no turn begins
		w.mu.Lock()
		w.waiting = err.Error()
		w.mu.Unlock()
		return false
	}
	w.mu.Lock()
	s.state = "starting"
	w.mu.Unlock()
	go w.revive(s, err.Error())
	return true
}

// await waits for the turn on run to end, and records how.
func (w *work) await(s *slot, task, title, run string, ended <-chan api.AgentUpdate) {
	u := <-ended
	status := reducer.RunStatus(u.Status)
	if p, err := w.m.Projects.Project(w.ctx, w.project); err == nil {
		if r, ok := p.Run(run); ok {
			status = r.Status // the agent's own verdict, if it finished the run through MCP
		}
	}
	crashed := u.StopReason == "crashed" || !w.alive(s.name)
	w.mu.Lock()
	switch status {
	case reducer.RunSucceeded:
		w.turns.Succeeded++
	case reducer.RunCancelled:
		w.turns.Cancelled++
	default:
		w.turns.Failed++
	}
	s.turns++
	s.task, s.run = "", ""
	w.addLocked(api.WorkEntry{Kind: "turn_ended", Agent: s.name, Task: task, TaskTitle: title, Run: run,
		StopReason: u.StopReason, Status: string(status), Text: u.Text})
	s.state = "idle"
	if crashed {
		s.state = "starting"
	}
	w.mu.Unlock()
	w.log.Info("turn ended", "agent", s.name, "task", task, "run", run, "stop_reason", u.StopReason, "run_status", status)
	if w.m.Metrics != nil {
		w.m.Metrics.TurnEnded(string(status))
	}
	if crashed {
		w.revive(s, u.Text)
	}
	w.kick()
}

// alive reports whether the agent named name is live and not stopping.
func (w *work) alive(name string) bool {
	for _, a := range w.m.Agents.ListAgents() {
		if a.Name == name {
			return a.State == api.AgentIdle || a.State == api.AgentWorking
		}
	}
	return false
}

// revive starts s's agent again after it ended (why), at most
// MaxRestarts times within RestartWindow; then the slot stops.
func (w *work) revive(s *slot, why string) {
	defer w.kick()
	if w.alive(s.name) {
		w.mu.Lock()
		s.state = "idle"
		w.mu.Unlock()
		return
	}
	now := w.m.now()
	w.mu.Lock()
	if !w.closing {
		w.addLocked(api.WorkEntry{Kind: "agent_crashed", Agent: s.name, Text: why})
	}
	s.restarts = slices.DeleteFunc(s.restarts, func(t time.Time) bool { return now.Sub(t) >= RestartWindow })
	if len(s.restarts) >= MaxRestarts || w.closing {
		s.state = "stopped"
		s.why = fmt.Sprintf("its agent ended %d times within %s: %s", MaxRestarts+1, RestartWindow, why)
		if w.closing {
			s.why = "the work ended"
		}
		w.addLocked(api.WorkEntry{Kind: "slot_stopped", Agent: s.name, Text: s.why})
		w.mu.Unlock()
		w.log.Warn("a slot of the work stops", "agent", s.name, "why", s.why)
		return
	}
	s.restarts = append(s.restarts, now)
	w.mu.Unlock()
	_, _ = w.m.Agents.StopAgent(w.ctx, s.name) // whatever is left of it (closing: never here)
	if err := w.startAgent(w.ctx, s); err != nil {
		w.mu.Lock()
		s.state, s.why = "stopped", "its agent could not be started again: "+err.Error()
		w.addLocked(api.WorkEntry{Kind: "slot_stopped", Agent: s.name, Text: s.why})
		w.mu.Unlock()
		w.log.Warn("a slot of the work stops", "agent", s.name, "why", s.why)
	}
}

// over reports whether the work is over, and why: no turn runs and none
// can be taken.
func (w *work) over() (string, bool) {
	w.mu.Lock()
	busy, open := 0, 0
	for _, s := range w.slots {
		switch s.state {
		case "working", "starting":
			busy++
		case "idle":
			open++
		}
	}
	state, why, waiting := w.state, w.why, w.waiting
	w.mu.Unlock()
	switch {
	case busy > 0:
		return "", false
	case open == 0:
		return "every agent of the work has stopped", true
	case state != api.WorkRunning:
		return why, true
	}
	// Running, every agent idle: something is waited for, or nothing is
	// left to take.
	if w.m.held() != "" {
		return "", false // the daemon restarts: the next one resumes the work
	}
	p, err := w.m.Projects.Project(w.ctx, w.project)
	if err != nil {
		return "", false
	}
	if wait := waitingFor(p); wait != "" {
		w.mu.Lock()
		if w.waiting != wait {
			w.waiting = wait
			w.addLocked(api.WorkEntry{Kind: "waiting", Text: wait})
		}
		w.mu.Unlock()
		return "", false
	}
	if waiting == "" {
		waiting = "nothing is ready"
	}
	return waiting, true
}

// waitingFor says what in p may yet become ready without the work: a
// task waiting for the owner's approval, a task running elsewhere.
func waitingFor(p *reducer.Project) string {
	for _, t := range p.Tasks() {
		switch {
		case t.Epic() || t.Status.Final():
		case t.Approval != "":
			return fmt.Sprintf("task %s (%s) waits for the owner's approval", t.ID, t.Title)
		case t.Status == reducer.TaskRunning:
			return fmt.Sprintf("task %s (%s) is running elsewhere (run %s)", t.ID, t.Title, t.RunID)
		}
	}
	return ""
}

// pause ends the work in this daemon, which is stopping. A work the
// store keeps is resumed by the next daemon: its agents are left to the
// live agents' manager, which stops them (their turns cancelled) and
// keeps them for the next start; else the work ends.
func (w *work) pause() {
	if w.m.Store == nil {
		w.end("the daemon is stopping")
		return
	}
	w.mu.Lock()
	w.closing = true
	w.state, w.ended, w.why = api.WorkEnded, w.m.now(), "the daemon is stopping; the next one resumes the work"
	w.addLocked(api.WorkEntry{Kind: "ended", Text: w.why})
	close(w.done)
	w.mu.Unlock()
	w.log.Info("work paused: the daemon is stopping")
}

// end ends the work: its agents are stopped, and the store forgets it.
func (w *work) end(why string) {
	w.mu.Lock()
	if w.state == api.WorkRunning || why == "the daemon is stopping" {
		w.why = why
	}
	w.closing = true
	w.mu.Unlock()
	w.stopAgents()
	w.awaits.Wait()
	if w.m.Store != nil {
		if _, err := w.m.Store.DeleteWork(context.Background(), w.project); err != nil {
			w.log.Error("forget the work", "err", err)
		}
	}
	w.mu.Lock()
	w.state, w.ended = api.WorkEnded, w.m.now()
	for _, s := range w.slots {
		if s.state != "stopped" {
			s.state = "stopped"
		}
	}
	w.addLocked(api.WorkEntry{Kind: "ended", Text: w.why})
	close(w.done)
	w.mu.Unlock()
	w.log.Info("work ended", "why", w.why)
}

// stopAgents stops every agent of the work (its turns cancelled).
func (w *work) stopAgents() {
	var wg sync.WaitGroup
	for _, s := range w.slots {
		wg.Go(func() {
			if _, err := w.m.Agents.StopAgent(context.Background(), s.name); err != nil && !errors.Is(err, reducer.ErrNotFound) {
				w.log.Warn("stop an agent of the work", "agent", s.name, "err", err)
			}
		})
	}
	wg.Wait()
}

// find is the work of project ref (running, or the last that ended).
func (m *Manager) find(ctx context.Context, ref string) (*work, error) {
	p, err := m.Projects.Project(ctx, ref)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := m.works[p.ID]; w != nil {
		return w, nil
	}
	return nil, api.Errorf(api.ErrNotFound, "project %s has no work since the daemon started (start it: scv project work %s --agents N -- CMD)", p.Name, p.Name)
}

// WorkStatus is the project's work, its log after c.After, waiting up to
// c.WaitSeconds for an entry.
func (m *Manager) WorkStatus(ctx context.Context, c api.CmdProjectWorkStatus) (api.WorkInfo, error) {
	w, err := m.find(ctx, c.Project)
	if err != nil {
		return api.WorkInfo{}, err
	}
	after := uint64(0)
	if c.After != nil {
		after = *c.After
	}
	if c.WaitSeconds != nil && *c.WaitSeconds > 0 {
		wait := time.Duration(min(*c.WaitSeconds, api.MaxListWait)) * time.Second
		w.mu.Lock()
		news, fresh := w.news, w.seq > after
		w.mu.Unlock()
		if !fresh {
			t := time.NewTimer(wait)
			select {
			case <-news:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	return w.info(ctx, after), nil
}

// StopWork makes the project's work take no more tasks; with c.Now its
// running turns are cancelled.
func (m *Manager) StopWork(ctx context.Context, c api.CmdProjectWorkStop) (api.WorkInfo, error) {
	w, err := m.find(ctx, c.Project)
	if err != nil {
		return api.WorkInfo{}, err
	}
	w.mu.Lock()
	if w.state == api.WorkEnded {
		w.mu.Unlock()
		return api.WorkInfo{}, api.Errorf(api.ErrInvalidTransition, "the work of project %s has ended already", w.name)
	}
	w.stopTakingLocked("stopped by request")
	var working []string
	if c.Now {
		for _, s := range w.slots {
			if s.state == "working" {
				working = append(working, s.name)
			}
		}
	}
	w.mu.Unlock()
	for _, name := range working {
		if _, err := m.Agents.CancelTurn(ctx, name); err != nil {
			w.log.Warn("cancel a turn of the work", "agent", name, "err", err)
		}
	}
	w.kick()
	return w.info(ctx, 0), nil
}

// info is the work on the wire, its log after after.
func (w *work) info(ctx context.Context, after uint64) api.WorkInfo {
	w.mu.Lock()
	i := api.WorkInfo{Project: w.project, ProjectName: w.name, State: w.state, Agents: w.c.Agents, Command: w.c.Command,
		Labels: w.c.Labels, MaxTurns: w.c.MaxTurns, StartedUnixMillis: w.started.UnixMilli(), Why: w.why,
		Turns: w.turns, Slots: make([]api.WorkSlot, 0, len(w.slots)), Log: []api.WorkEntry{}, Next: w.seq}
	if w.state == api.WorkRunning {
		i.Waiting = w.waiting
	}
	end := w.m.now()
	if !w.ended.IsZero() {
		ms := w.ended.UnixMilli()
		i.EndedUnixMillis, end = &ms, w.ended
	}
	for _, s := range w.slots {
		i.Slots = append(i.Slots, api.WorkSlot{Agent: s.name, State: s.state, Task: nonEmpty(s.task), Run: nonEmpty(s.run),
			Turns: s.turns, Starts: s.starts, Why: s.why})
	}
	for _, e := range w.entries {
		if e.Seq > after {
			i.Log = append(i.Log, e)
		}
	}
	names := map[string]bool{}
	for _, s := range w.slots {
		names[s.name] = true
	}
	started := w.started.UnixMilli()
	w.mu.Unlock()
	i.Summary.Seconds = uint64(max(end.Sub(w.started), 0) / time.Second)
	if p, err := w.m.Projects.Project(ctx, w.project); err == nil {
		i.Summary = summaryOf(p, names, started, i.Summary.Seconds)
	}
	return i
}

// summaryOf is p's tasks done, failed and left, the runs of the agents
// named in names since started (Unix ms), and p's spend.
func summaryOf(p *reducer.Project, names map[string]bool, started int64, seconds uint64) api.WorkSummary {
	out := api.WorkSummary{Seconds: seconds, Cost: []string{}}
	for _, t := range p.Tasks() {
		switch {
		case t.Epic():
		case t.Status == reducer.TaskDone:
			out.TasksDone++
		case t.Status == reducer.TaskFailed:
			out.TasksFailed++
		default:
			out.TasksLeft++
		}
	}
	for _, r := range p.Runs() {
		if names[r.Agent] && r.Started >= started {
			out.Runs++
		}
	}
	spend := p.Spend()
	out.Tokens = spend.Tokens.Total()
	for _, c := range spend.Cost {
		out.Cost = append(out.Cost, c.Amount+" "+c.Currency)
	}
	return out
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
