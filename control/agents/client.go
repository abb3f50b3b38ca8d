package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"scv/control/api"
)

// client is the daemon's side of one agent's connection: what the agent
// may ask of it, answered by the agent's policy.
type client struct{ a *agent }

// maxMessageTail bounds the text of a turn's agent message kept for its
// progress: what follows its last newline, up to this many bytes.
const maxMessageTail = 1 << 10

// SessionUpdate takes an update the SDK decoded. The guard takes them as
// they are read (take), so it is called only for one that reached the
// SDK otherwise.
func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	raw, err := json.Marshal(n.Update)
	if err != nil {
		return err
	}
	return c.a.take(string(n.SessionId), raw)
}

// take takes one of the agent's updates (a session/update's sessionId and
// `update`, as they came): into the agent's updates, and into the progress
// of the turn's run. An update of a kind this build does not know is kept
// as it came; one of a kind it knows that does not decode is refused. An
// update about a session the daemon did not open for the agent is dropped,
// with a warning; one that comes before the answer to session/new has
// named the agent's session waits for it (opened).
func (a *agent) take(session string, raw json.RawMessage) error {
	a.takeMu.Lock()
	defer a.takeMu.Unlock()
	a.mu.Lock()
	loading, conv := a.loading, a.conversation
	a.mu.Unlock()
	h, err := updateOf(raw)
	if err != nil && !loading {
		return err
	}
	h.session = session
	switch {
	case loading:
		// session/load replays what was said before: not news, but for
		// the session's cost, the base of the next turn's.
		if err == nil && h.usage != nil && h.usage.Cost != nil && session == conv {
			a.mu.Lock()
			a.cost = costOf(h.usage.Cost)
			a.mu.Unlock()
		}
	case conv == "":
		a.early = append(a.early, h)
	default:
		a.keep(h, conv)
	}
	return nil
}

// heldUpdate is an update taken and not yet kept: the session it is
// about, the progress it makes, and the usage it reports.
type heldUpdate struct {
	session  string
	u        api.AgentUpdate
	progress string
	usage    *acp.SessionUsageUpdate
}

// opened makes conv the agent's session, new (so its cost so far is
// zero), and keeps the updates about it that came before.
func (a *agent) opened(conv string) {
	a.takeMu.Lock()
	defer a.takeMu.Unlock()
	a.mu.Lock()
	a.conversation = conv
	a.cost = sessionCost{known: true}
	a.mu.Unlock()
	for _, h := range a.early {
		a.keep(h, conv)
	}
	a.early = nil
}

// keep keeps h if it is about conv, the agent's session. takeMu is held.
func (a *agent) keep(h heldUpdate, conv string) {
	if h.session != conv {
		a.log.Warn("agent sent an update about a session the daemon did not open; dropped",
			"session", h.session, "kind", h.u.Kind)
		return
	}
	switch {
	case h.u.Kind == "agent_message_chunk":
		a.mu.Lock()
		a.noteMessage(h.u.Text)
		a.mu.Unlock()
	case h.progress != "":
		a.noteProgress(h.progress)
	case h.usage != nil:
		a.noteUsage(h.usage)
	}
	a.add(h.u)
	a.mu.Lock()
	run := a.run
	a.mu.Unlock()
	if run != nil {
		run.changed()
	}
}

// ours refuses a request of the agent about a session the daemon did not
// open for it, with a warning.
func (a *agent) ours(session acp.SessionId, method string) error {
	a.mu.Lock()
	conv := a.conversation
	a.mu.Unlock()
	if conv != "" && string(session) == conv {
		return nil
	}
	a.log.Warn("agent asked about a session the daemon did not open; refused", "session", session, "method", method)
	return refusal("session %q is not this agent's", session)
}

// updateOf is the update raw as the agent's updates keep it, the
// progress it makes the turn's (an agent message's is its text), and the
// usage it reports (a usage_update's).
func updateOf(raw json.RawMessage) (heldUpdate, error) {
	var up acp.SessionUpdate
	err := json.Unmarshal(raw, &up)
	u, progress := api.AgentUpdate{Update: raw}, ""
	switch {
	case up.AgentMessageChunk != nil:
		u.Kind, u.Text = "agent_message_chunk", textOf(up.AgentMessageChunk.Content)
	case up.AgentThoughtChunk != nil:
		u.Kind, u.Text = "agent_thought_chunk", textOf(up.AgentThoughtChunk.Content)
	case up.UserMessageChunk != nil:
		u.Kind, u.Text = "user_message_chunk", textOf(up.UserMessageChunk.Content)
	case up.ToolCall != nil:
		u.Kind, u.ToolCallID, u.Title, u.Status = "tool_call", string(up.ToolCall.ToolCallId), up.ToolCall.Title, string(up.ToolCall.Status)
		progress = "tool: " + u.Title
	case up.ToolCallUpdate != nil:
		u.Kind, u.ToolCallID = "tool_call_update", string(up.ToolCallUpdate.ToolCallId)
		if t := up.ToolCallUpdate.Title; t != nil {
			u.Title = *t
		}
		if s := up.ToolCallUpdate.Status; s != nil {
			u.Status = string(*s)
		}
	case up.Plan != nil:
		u.Kind = "plan"
		var steps []string
		done := 0
		for _, e := range up.Plan.Entries {
			steps = append(steps, fmt.Sprintf("[%s] %s", e.Status, e.Content))
			if e.Status == acp.PlanEntryStatusCompleted {
				done++
			}
			if e.Status == acp.PlanEntryStatusInProgress && progress == "" {
				progress = "plan: " + e.Content
			}
		}
		u.Text = strings.Join(steps, "\n")
		if progress == "" && len(up.Plan.Entries) > 0 {
			progress = fmt.Sprintf("plan: %d/%d done", done, len(up.Plan.Entries))
		}
	case up.UsageUpdate != nil:
		u.Kind = "usage_update"
	default:
		var tag struct {
			Kind string `json:"sessionUpdate"`
		}
		if json.Unmarshal(raw, &tag) != nil || tag.Kind == "" {
			return heldUpdate{u: u}, errors.New("an update with no sessionUpdate")
		}
		if err != nil && known[tag.Kind] {
			return heldUpdate{u: u}, fmt.Errorf("%s: %v", tag.Kind, err)
		}
		u.Kind = tag.Kind
	}
	return heldUpdate{u: u, progress: progress, usage: up.UsageUpdate}, nil
}

// known is the kinds of update the SDK decodes.
var known = map[string]bool{
	"user_message_chunk": true, "agent_message_chunk": true, "agent_thought_chunk": true, "tool_call": true,
	"tool_call_update": true, "plan": true, "available_commands_update": true, "current_mode_update": true,
	"config_option_update": true, "session_info_update": true, "usage_update": true,
}

// noteMessage adds a chunk of the agent's message to the turn's progress:
// its last line, kept up to maxMessageTail bytes; and to what the turn
// said, kept up to maxSaid bytes from its start (a private agent's
// answer). a.mu is held.
func (a *agent) noteMessage(text string) {
	if room := maxSaid - len(a.said); room > 0 {
		a.said = append(a.said, text[:min(len(text), room)]...)
	}
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		a.message = a.message[:0]
		text = text[i+1:]
	}
	a.message = append(a.message, text...)
	if len(a.message) > 2*maxMessageTail {
		a.message = append(a.message[:0], a.message[len(a.message)-maxMessageTail:]...)
	}
	a.fromMessage = true
}

// noteProgress makes text the turn's progress.
func (a *agent) noteProgress(text string) {
	a.mu.Lock()
	a.progress, a.fromMessage = text, false
	a.mu.Unlock()
}

// progressText is the running turn's progress: the last line of the
// agent's message, or what a tool call or the plan said last.
func (a *agent) progressText() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fromMessage {
		m := a.message
		if len(m) > maxMessageTail {
			m = m[len(m)-maxMessageTail:]
		}
		return string(m)
	}
	return a.progress
}

// textOf is a content block's text, or what it is when it is not text.
func textOf(b acp.ContentBlock) string {
	switch {
	case b.Text != nil:
		return b.Text.Text
	case b.Image != nil:
		return "[image]"
	case b.Audio != nil:
		return "[audio]"
	case b.ResourceLink != nil:
		return "[resource " + b.ResourceLink.Uri + "]"
	case b.Resource != nil:
		return "[resource]"
	}
	return ""
}

// questionPoll is how often a permission question is looked at while the
// owner has not answered.
const questionPoll = 200 * time.Millisecond

// RequestPermission answers by the agent's policy: with --ask the owner
// decides (a confirm_ask question, whose answer picks the agent's allow or
// reject option); without it, the request is refused.
func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	a := c.a
	if err := a.ours(p.SessionId, acp.ClientMethodSessionRequestPermission); err != nil {
		return acp.RequestPermissionResponse{}, err
	}
	title := string(p.ToolCall.ToolCallId)
	if p.ToolCall.Title != nil && *p.ToolCall.Title != "" {
		title = *p.ToolCall.Title
	}
	u := api.AgentUpdate{Kind: "permission", Title: title, ToolCallID: string(p.ToolCall.ToolCallId)}
	refuse := func(why string) (acp.RequestPermissionResponse, error) {
		u.Status, u.Text = "refused", why
		a.add(u)
		return pick(p.Options, acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways), nil
	}
	if !a.spec.Ask || a.m.Questions == nil {
		return refuse("the agent was started without --ask")
	}
	a.mu.Lock()
	turnCtx, turn := a.turnCtx, a.turn
	a.mu.Unlock()
	if turnCtx == nil {
		return refuse("no turn is running")
	}
	chain := a.chain()
	info, err := a.m.Questions.Ask(ctx, api.CmdConfirmAsk{
		Question: fmt.Sprintf("Agent %s (turn %d) asks for permission: %s. Allow it?", a.name, turn, title),
		Parent:   &chain,
	})
	if err != nil {
		return refuse("the owner could not be asked: " + err.Error())
	}
	u.Status, u.Text = "asked", "question "+info.ID
	a.add(u)
	t := time.NewTicker(questionPoll)
	defer t.Stop()
	for info.State == api.ConfirmPending {
		select {
		case <-ctx.Done():
			return cancelled(), nil
		case <-turnCtx.Done():
			return cancelled(), nil
		case <-t.C:
		}
		if info, err = a.m.Questions.Status(context.WithoutCancel(ctx), info.ID); err != nil {
			return refuse("the owner's answer was lost: " + err.Error())
		}
	}
	if info.State == api.ConfirmYes {
		u.Status, u.Text = "allowed", "the owner answered yes"
		a.add(u)
		return pick(p.Options, acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways), nil
	}
	u.Status, u.Text = "rejected", "the owner's answer: "+string(info.State)
	a.add(u)
	return pick(p.Options, acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways), nil
}

// pick selects the first option of the first kind offered, in the order
// of kinds; an agent that offers none of them gets cancelled.
func pick(options []acp.PermissionOption, kinds ...acp.PermissionOptionKind) acp.RequestPermissionResponse {
	for _, k := range kinds {
		for _, o := range options {
			if o.Kind == k {
				return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
					Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}
			}
		}
	}
	return cancelled()
}

func cancelled() acp.RequestPermissionResponse {
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}
}

// refusal is the error an agent's request is refused with.
func refusal(format string, args ...any) *acp.RequestError {
	return &acp.RequestError{Code: -32602, Message: fmt.Sprintf(format, args...)}
}

// ReadTextFile reads a file of the agent's workspace, and nothing outside
// it.
func (c *client) ReadTextFile(_ context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	a := c.a
	if err := a.ours(p.SessionId, acp.ClientMethodFsReadTextFile); err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	path, err := a.confine(p.Path)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(path); err == nil && fi.Size() > int64(a.m.maxMessage()/2) {
			err = refusal("%s is %d bytes, more than the %d an agent may read at once", p.Path, fi.Size(), a.m.maxMessage()/2)
		}
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(path)
	}
	a.fileUpdate("read", p.Path, err)
	if err != nil {
		return acp.ReadTextFileResponse{}, asRefusal(err)
	}
	content := string(b)
	if p.Line != nil || p.Limit != nil {
		lines := strings.Split(content, "\n")
		start := 0
		if p.Line != nil && *p.Line > 1 {
			start = min(*p.Line-1, len(lines))
		}
		end := len(lines)
		if p.Limit != nil && *p.Limit >= 0 {
			end = min(start+*p.Limit, end)
		}
		content = strings.Join(lines[start:end], "\n")
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

// WriteTextFile writes a file of the agent's workspace (making its
// folders), and nothing outside it.
func (c *client) WriteTextFile(_ context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	a := c.a
	if err := a.ours(p.SessionId, acp.ClientMethodFsWriteTextFile); err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	path, err := a.confine(p.Path)
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = os.WriteFile(path, []byte(p.Content), 0o644)
		}
	}
	a.fileUpdate("write", p.Path, err)
	if err != nil {
		return acp.WriteTextFileResponse{}, asRefusal(err)
	}
	return acp.WriteTextFileResponse{}, nil
}

func (a *agent) fileUpdate(op, path string, err error) {
	u := api.AgentUpdate{Kind: "file", Title: op, Text: path, Status: "ok"}
	if err != nil {
		u.Status = "refused"
		u.Text = path + ": " + asRefusal(err).Message
	}
	a.add(u)
}

func asRefusal(err error) *acp.RequestError {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re
	}
	return refusal("%v", err)
}

// confine resolves path, which must be absolute, and refuses it unless
// it is inside the agent's workspace once every symbolic link is
// followed (of the path itself, or of its nearest folder that exists, for
// a file to be made): the workspace rule of projects.
func (a *agent) confine(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", refusal("path %q is not absolute", path)
	}
	ws, err := filepath.EvalSymlinks(a.spec.Workspace)
	if err != nil {
		return "", refusal("the agent's workspace %s: %v", a.spec.Workspace, err)
	}
	clean := filepath.Clean(path)
	resolved, rest := clean, ""
	for {
		r, err := filepath.EvalSymlinks(resolved)
		if err == nil {
			resolved = filepath.Join(r, rest)
			break
		}
		if !errors.Is(err, os.ErrNotExist) || resolved == "/" {
			return "", refusal("%s: %v", path, err)
		}
		rest = filepath.Join(filepath.Base(resolved), rest)
		resolved = filepath.Dir(resolved)
	}
	if resolved != ws && !strings.HasPrefix(resolved, ws+string(filepath.Separator)) {
		return "", refusal("%s is outside the agent's workspace %s", path, a.spec.Workspace)
	}
	return resolved, nil
}
