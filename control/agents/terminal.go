package agents

import (
	"context"
	"os"
	"strconv"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"scv/control/api"
	"scv/control/proc"
)

// defaultTerminalOutput is how much of a terminal's output is kept when
// the agent gives no outputByteLimit.
const defaultTerminalOutput = 1 << 20

// terminals are the commands an agent started with --allow-terminal runs
// through ACP's terminal requests: each in the agent's workspace (or a
// folder inside it), in a process group of its own tagged with the agent's
// handle, so that stopping the agent stops them too.
type terminals struct {
	mu   sync.Mutex
	next int
	all  map[string]*terminal
}

// terminal is one command and what it printed.
type terminal struct {
	ident proc.Ident
	out   *tail // the newest output, up to its limit
	mu    sync.Mutex
	total int // bytes written, to tell truncation
	code  *int
	sig   *string
	done  chan struct{}
}

func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.total += len(p)
	t.mu.Unlock()
	return t.out.Write(p)
}

func (ts *terminals) get(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.all[id]; ok {
		return t, nil
	}
	return nil, refusal("no terminal %q", id)
}

// terminal is the agent's terminal id, for a request (method) about
// session, which must be the agent's.
func (a *agent) terminal(session acp.SessionId, method, id string) (*terminal, error) {
	if err := a.ours(session, method); err != nil {
		return nil, err
	}
	return a.terms.get(id)
}

// closeAll stops every terminal still running.
func (ts *terminals) closeAll() {
	ts.mu.Lock()
	all := ts.all
	ts.all = nil
	ts.mu.Unlock()
	for _, t := range all {
		t.kill()
	}
}

func (t *terminal) kill() {
	select {
	case <-t.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	proc.Tree{Leader: t.ident}.Stop(ctx, time.Second)
	<-t.done
}

// exit is how the terminal's command ended, nil while it runs.
func (t *terminal) exit() (*int, *string, bool) {
	select {
	case <-t.done:
		return t.code, t.sig, true
	default:
		return nil, nil, false
	}
}

// CreateTerminal starts a command for an agent started with
// --allow-terminal; for any other it is refused.
func (c *client) CreateTerminal(_ context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	a := c.a
	if err := a.ours(p.SessionId, acp.ClientMethodTerminalCreate); err != nil {
		return acp.CreateTerminalResponse{}, err
	}
	u := api.AgentUpdate{Kind: "terminal", Text: p.Command, Status: "ok"}
	id, err := a.startTerminal(p)
	if err != nil {
		u.Status, u.Text = "refused", p.Command+": "+asRefusal(err).Message
		a.add(u)
		return acp.CreateTerminalResponse{}, asRefusal(err)
	}
	a.add(u)
	return acp.CreateTerminalResponse{TerminalId: id}, nil
}

func (a *agent) startTerminal(p acp.CreateTerminalRequest) (string, error) {
	if !a.spec.AllowTerminal {
		return "", refusal("terminals are refused: the agent was started without --allow-terminal")
	}
	dir := a.spec.Workspace
	if p.Cwd != nil && *p.Cwd != "" {
		var err error
		if dir, err = a.confine(*p.Cwd); err != nil {
			return "", err
		}
	}
	env := append([]string{}, a.spec.Env...)
	for _, e := range p.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	limit := defaultTerminalOutput
	if p.OutputByteLimit != nil && *p.OutputByteLimit > 0 {
		limit = min(*p.OutputByteLimit, a.m.maxMessage()/2)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	argv := append([]string{lookPath(p.Command, env)}, p.Args...)
	pr, err := proc.Start(argv, dir, env, a.handle, a.spec.Parent, nil, w, w)
	w.Close()
	if err != nil {
		r.Close()
		return "", refusal("%v", err)
	}
	t := &terminal{out: &tail{max: limit}, done: make(chan struct{})}
	t.ident, _ = proc.Identify(pr.Pid)
	t.ident.PID = pr.Pid
	copied := make(chan struct{})
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			t.Write(buf[:n])
			if err != nil {
				break
			}
		}
		r.Close()
		close(copied)
	}()
	go func() {
		st, _ := pr.Wait()
		// The output a child left running still writes is not waited for.
		select {
		case <-copied:
		case <-time.After(time.Second):
		}
		if st != nil {
			if ws, ok := st.Sys().(interface{ Signaled() bool }); ok && ws.Signaled() {
				s := st.String()
				t.sig = &s
			} else {
				code := st.ExitCode()
				t.code = &code
			}
		}
		close(t.done)
	}()
	a.terms.mu.Lock()
	defer a.terms.mu.Unlock()
	if a.terms.all == nil {
		a.terms.all = map[string]*terminal{}
	}
	a.terms.next++
	id := "term-" + strconv.Itoa(a.terms.next)
	a.terms.all[id] = t
	return id, nil
}

// TerminalOutput is what the terminal printed so far (its newest output
// up to the limit) and, once it ended, how.
func (c *client) TerminalOutput(_ context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	t, err := c.a.terminal(p.SessionId, acp.ClientMethodTerminalOutput, p.TerminalId)
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	resp := acp.TerminalOutputResponse{Output: t.out.raw()}
	t.mu.Lock()
	resp.Truncated = t.total > t.out.max
	t.mu.Unlock()
	if code, sig, ok := t.exit(); ok {
		resp.ExitStatus = &acp.TerminalExitStatus{ExitCode: code, Signal: sig}
	}
	return resp, nil
}

// WaitForTerminalExit waits for the terminal's command to end.
func (c *client) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	t, err := c.a.terminal(p.SessionId, acp.ClientMethodTerminalWaitForExit, p.TerminalId)
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return acp.WaitForTerminalExitResponse{}, ctx.Err()
	}
	return acp.WaitForTerminalExitResponse{ExitCode: t.code, Signal: t.sig}, nil
}

// KillTerminal stops the terminal's command; its output stays.
func (c *client) KillTerminal(_ context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	t, err := c.a.terminal(p.SessionId, acp.ClientMethodTerminalKill, p.TerminalId)
	if err != nil {
		return acp.KillTerminalResponse{}, err
	}
	t.kill()
	return acp.KillTerminalResponse{}, nil
}

// ReleaseTerminal stops the terminal's command and forgets it.
func (c *client) ReleaseTerminal(_ context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	ts := &c.a.terms
	t, err := c.a.terminal(p.SessionId, acp.ClientMethodTerminalRelease, p.TerminalId)
	if err != nil {
		return acp.ReleaseTerminalResponse{}, err
	}
	t.kill()
	ts.mu.Lock()
	delete(ts.all, p.TerminalId)
	ts.mu.Unlock()
	return acp.ReleaseTerminalResponse{}, nil
}
