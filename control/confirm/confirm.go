package confirm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"scv/control/api"
	"scv/control/startstop"
	"scv/ledger"
	"scv/ledger/local"
	"scv/reducer"
)

// Limits and defaults of a question, as the seed fixes them
// (DEFAULT_CONFIRM_SECONDS, MAX_CONFIRM_SECONDS) or this package does.
const (
	// DefaultTimeout is how long a question waits for an answer unless
	// the asker says otherwise.
	DefaultTimeout = 30 * time.Minute
	// MaxTimeout is the longest a question may wait. A longer
	// timeout_seconds is refused, not clamped.
	MaxTimeout = 4 * time.Hour
	// WithdrawAfter: a pending question nobody asked confirm_status about
	// for this long (since the ask or the last confirm_status) is
	// withdrawn.
	WithdrawAfter = time.Minute
	// DefaultTickEvery is how often Run looks for questions whose
	// deadline or withdrawal is due.
	DefaultTickEvery = time.Second
)

// Why a question ended without an answer: the decided_by of its listing.
const (
	reasonDeadline     = "deadline passed"
	reasonWithdrawn    = "not asked about for a minute"
	reasonNoChat       = "no chat connected"
	reasonRestarted    = "answer lost: the daemon restarted"
	reasonNotConnected = "chat %s is not connected"
	reasonUndelivered  = "delivery failed: %v"
	reasonAmbiguous    = "no chat chosen: %d chats connected and no notify target"
)

// Log keys.
const (
	keyQuestion = "question"
	keyErr      = "err"
)

// Chats is the daemon's chat accounts, as questions use them. Chats are
// named `<channel>:<account>`.
type Chats interface {
	// Connected reports whether chat can take a question now.
	Connected(chat string) bool
	// ConnectedChats is every connected chat account that the owner
	// chats in (mail accounts are not chats).
	ConnectedChats() []string
	// Deliver hands the question id with text to chat's owner, or
	// reports why it could not.
	Deliver(ctx context.Context, chat string, id, text string) error
}

// Manager asks the owner yes/no questions in chat and keeps what became of
// them: every step is a record of the ledger's question log (confirm_log),
// appended before memory changes, so that memory is always the fold of
// the log. Set the fields, call Load once, then Start; the zero value of
// the unexported state is ready.
type Manager struct {
	Log local.Questions
	// Clock decides deadlines and withdrawals and stamps records;
	// defaults to the system clock.
	Clock func() time.Time
	// Chats delivers questions; nil is no chat connected.
	Chats Chats
	// DelegationChat is the chat that started the work the SCV_PARENT
	// chain parent names, or "" (delegations.Registry.ChatOf); nil is
	// never one.
	DelegationChat func(parent string) string
	// Notify is the daemon's notify target (`--notify CHANNEL:ACCOUNT`),
	// or "".
	Notify string
	Logger *slog.Logger
	// TickEvery is how often deadlines are looked at once started (0:
	// DefaultTickEvery).
	TickEvery time.Duration
	// Ledger records approvals (questions about a project, SPEC section
	// 5) in their project's history: nil refuses them.
	Ledger Executor

	loop startstop.Loop
	// wmu orders every step: a record is appended and applied under it,
	// so that memory takes the records in the log's order and a question
	// is decided once.
	wmu sync.Mutex

	mu sync.Mutex
	qs map[string]*question
	// alive holds the pending questions: when each was last asked about
	// (asked, or confirm_status). It is not logged: a restart fails every
	// pending question anyway.
	alive map[string]time.Time
	// changed is closed and replaced whenever a record is applied.
	changed chan struct{}
}

// Executor is what the manager needs of the ledger (*ledger.Ledger).
type Executor interface {
	Execute(ctx context.Context, cmd reducer.Command) (ledger.Result, error)
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

// init makes the maps; m.mu is held.
func (m *Manager) init() {
	if m.qs == nil {
		m.qs = map[string]*question{}
		m.alive = map[string]time.Time{}
		m.changed = make(chan struct{})
	}
}

// Load folds the whole question log into memory, replacing what was
// there, then fails every question still pending: its answer, had one
// come, was lost with the daemon that asked. A record the fold refuses
// is skipped and logged.
func (m *Manager) Load(ctx context.Context) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	recs, err := m.Log.ConfirmLog(ctx, 0)
	if err != nil {
		return err
	}
	qs, errs := fold(recs)
	for _, err := range errs {
		m.logger().Warn("question log record skipped", keyErr, err)
	}
	m.mu.Lock()
	m.init()
	m.qs, m.alive = qs, map[string]time.Time{}
	var lost []*question
	for _, q := range qs {
		if q.State == api.ConfirmPending {
			m.alive[q.ID] = time.UnixMilli(q.Asked)
			lost = append(lost, q)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(lost, bySeq)
	now := m.now()
	out := make([]local.ConfirmRecord, len(lost))
	for i, q := range lost {
		out[i] = record(q.ID, KindFailed, now, endedData{Reason: reasonRestarted})
	}
	if _, err = m.record(ctx, out...); err != nil {
		return err
	}
	// Decisions of approvals that their project missed (the daemon
	// stopped in between): recorded there now.
	m.mu.Lock()
	var missed []*question
	for _, q := range m.qs {
		if q.unprojected() {
			missed = append(missed, q)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(missed, bySeq)
	m.project(ctx, missed)
	return nil
}

// Run calls Tick every interval until ctx ends.
func (m *Manager) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.Tick(ctx); err != nil && ctx.Err() == nil {
				m.logger().Error("question deadlines", keyErr, err)
			}
		}
	}
}

// Start starts the deadline keeper: every TickEvery (0:
// DefaultTickEvery) it ends the questions whose time has come, until
// Stop.
func (m *Manager) Start(ctx context.Context) error {
	every := m.TickEvery
	if every <= 0 {
		every = DefaultTickEvery
	}
	m.loop.Run(ctx, func(ctx context.Context) { m.run(ctx, every) })
	return nil
}

// Stop stops the deadline keeper and waits for it.
func (m *Manager) Stop() { m.loop.Stop() }

// Tick ends the pending questions the clock has decided: expired at the
// deadline, else withdrawn when nobody asked about them for WithdrawAfter.
// All of one tick's records are appended in one transaction.
func (m *Manager) Tick(ctx context.Context) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	now := m.now()
	m.mu.Lock()
	var ending []*question
	for id := range m.alive {
		ending = append(ending, m.qs[id])
	}
	m.mu.Unlock()
	slices.SortFunc(ending, bySeq)
	var out []local.ConfirmRecord
	for _, q := range ending {
		if kind, reason := m.due(q, now); kind != "" {
			out = append(out, record(q.ID, kind, now, endedData{Reason: reason}))
		}
	}
	_, err := m.record(ctx, out...)
	return err
}

// Ask checks a question, chooses its chat, records it and hands it to the
// chat (confirm_ask). A question that cannot be handed over is recorded
// as failed and answered as such, not refused: the asker learns its
// outcome the same way as every other.
func (m *Manager) Ask(ctx context.Context, c api.CmdConfirmAsk) (api.ConfirmInfo, error) {
	if err := reducer.ValidQuestion(c.Question); err != nil {
		return api.ConfirmInfo{}, err
	}
	timeout := DefaultTimeout
	if c.TimeoutSeconds != nil {
		s := *c.TimeoutSeconds
		if s == 0 || s > uint64(MaxTimeout/time.Second) {
			return api.ConfirmInfo{}, invalid("timeout_seconds %d: want 1 to %d", s, uint64(MaxTimeout/time.Second))
		}
		timeout = time.Duration(s) * time.Second
	}
	var parent, project, task string
	if c.Parent != nil {
		parent = *c.Parent
	}
	if c.Project != nil {
		if project = *c.Project; project == "" {
			return api.ConfirmInfo{}, invalid("project is empty")
		}
		if m.Ledger == nil {
			return api.ConfirmInfo{}, api.Errorf(api.ErrUnavailable, "this daemon records no approvals")
		}
	}
	if c.Task != nil {
		switch task = *c.Task; {
		case project == "":
			return api.ConfirmInfo{}, invalid("task %q without a project: an approval names its project", task)
		case task == "":
			return api.ConfirmInfo{}, invalid("task is empty: name a task, or leave task out to gate the whole project")
		}
	}
	chat, reason := m.route(parent)
	if reason == "" && (m.Chats == nil || !m.Chats.Connected(chat)) {
		reason = fmt.Sprintf(reasonNotConnected, chat)
	}
	id, now := ulid.Make().String(), m.now()
	deadline := now.Add(timeout)
	out := []local.ConfirmRecord{record(id, KindAsked, now, askedData{
		Question: c.Question, Chat: chat, DeadlineMS: deadline.UnixMilli(),
		Requester: requester(parent), Parent: parent, Project: project, Task: task,
	})}
	if reason != "" && project == "" {
		out = append(out, record(id, KindFailed, now, endedData{Reason: reason}))
	}
	m.wmu.Lock()
	qs, err := m.record(ctx, out...)
	m.wmu.Unlock()
	if err != nil {
		return api.ConfirmInfo{}, err
	}
	if project != "" {
		// An approval: its project records it (and refuses one it cannot
		// take, such as of a task that runs already), then it goes on
		// like any question; its decision reaches the project too.
		by := requester(parent)
		if by == "" {
			by = api.Who(ctx)
		}
		if _, err := m.Ledger.Execute(ctx, reducer.AskApproval{Project: project, TaskID: task, QuestionID: id,
			Question: c.Question, Deadline: deadline.UnixMilli(), By: by}); err != nil {
			m.end(context.WithoutCancel(ctx), id, KindFailed, "its project refused it: "+err.Error())
			return api.ConfirmInfo{}, err
		}
		if reason != "" {
			return m.end(context.WithoutCancel(ctx), id, KindFailed, reason)
		}
	}
	if reason != "" {
		m.logger().Info("question failed", keyQuestion, id, keyErr, reason)
		return qs[len(qs)-1].info(), nil
	}
	// Handed over only once it is recorded, so that an answer, however
	// quick, finds it.
	if err := m.Chats.Deliver(ctx, chat, id, c.Question); err != nil {
		m.logger().Warn("question not delivered", keyQuestion, id, keyErr, err)
		// The failure is recorded whether or not the asker still waits.
		return m.end(context.WithoutCancel(ctx), id, KindFailed, fmt.Sprintf(reasonUndelivered, err))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if q, ok := m.qs[id]; ok {
		return q.info(), nil
	}
	return api.ConfirmInfo{}, notFound(id) // Load ran meanwhile
}

// Tell tells the owner text, a notice about project (its name): in
// the chat the notify target or the only connected chat names, recorded
// in the question log as a question already final (state notice), so
// that `scv chat` and the web UI show it. A notice no chat can take is
// logged, and dropped.
func (m *Manager) Tell(ctx context.Context, project, text string) error {
	chat, reason := m.route("")
	if reason == "" && (m.Chats == nil || !m.Chats.Connected(chat)) {
		reason = fmt.Sprintf(reasonNotConnected, chat)
	}
	if reason != "" {
		m.logger().Warn("notice not told", "project", project, "text", text, keyErr, reason)
		return nil
	}
	id := ulid.Make().String()
	m.wmu.Lock()
	_, err := m.record(ctx, record(id, KindNotice, m.now(), askedData{Question: text, Chat: chat, Project: project}))
	m.wmu.Unlock()
	if err != nil {
		return err
	}
	if err := m.Chats.Deliver(ctx, chat, id, text); err != nil {
		m.logger().Warn("notice not delivered", keyQuestion, id, keyErr, err)
	}
	return nil
}

// TellMail tells text to chat, an account's mail chat (docs/mail.md), as
// the notice id: recorded in the question log as a notice of that chat, so
// that `scv chat` and the web UI show it, then handed to the chat's
// connector. Unlike Tell it never logs the text, and it is idempotent: a
// notice id that is in the log already is not told again, and told is
// false. A chat that is not connected is an error, with nothing recorded:
// the caller tells it again later.
func (m *Manager) TellMail(ctx context.Context, chat, id, text string) (told bool, err error) {
	if m.Chats == nil || !m.Chats.Connected(chat) {
		return false, fmt.Errorf(reasonNotConnected, chat)
	}
	m.wmu.Lock()
	if m.Told(id) {
		m.wmu.Unlock()
		return false, nil
	}
	_, err = m.record(ctx, record(id, KindNotice, m.now(), askedData{Question: text, Chat: chat}))
	m.wmu.Unlock()
	if err != nil {
		return false, err
	}
	if err := m.Chats.Deliver(ctx, chat, id, text); err != nil {
		m.logger().Warn("mail digest recorded, not delivered", keyQuestion, id, keyErr, err)
	}
	return true, nil
}

// Told reports whether the log holds a question or notice id.
func (m *Manager) Told(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.qs[id]
	return ok
}

// Status reports where question id stands (confirm_status) and keeps it
// alive: a pending question's withdrawal clock starts again. A pending
// question whose deadline has passed is expired first, even if Tick has
// not run yet.
func (m *Manager) Status(ctx context.Context, id string) (api.ConfirmInfo, error) {
	now := m.now()
	m.mu.Lock()
	q, ok := m.qs[id]
	if !ok {
		m.mu.Unlock()
		return api.ConfirmInfo{}, notFound(id)
	}
	if q.State != api.ConfirmPending {
		m.mu.Unlock()
		return q.info(), nil
	}
	if now.UnixMilli() < q.Deadline {
		m.alive[id] = now
		m.mu.Unlock()
		return q.info(), nil
	}
	m.mu.Unlock()
	return m.end(ctx, id, KindExpired, reasonDeadline)
}

// Answer records the owner's answer to question id (confirm_answer). A
// question is answered once: an answer to one that is not pending is
// refused (conflict) and nothing is appended for it. One whose deadline
// (or withdrawal) is due is ended first, as Tick would have, and the
// answer refused.
func (m *Manager) Answer(ctx context.Context, id string, yes bool, by string) (api.ConfirmInfo, error) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	now := m.now()
	m.mu.Lock()
	q, ok := m.qs[id]
	m.mu.Unlock()
	if !ok {
		return api.ConfirmInfo{}, notFound(id)
	}
	if q.State != api.ConfirmPending {
		return api.ConfirmInfo{}, conflict(q)
	}
	if kind, reason := m.due(q, now); kind != "" {
		qs, err := m.record(ctx, record(id, kind, now, endedData{Reason: reason}))
		if err != nil {
			return api.ConfirmInfo{}, err
		}
		return api.ConfirmInfo{}, conflict(qs[0])
	}
	answer := "no"
	if yes {
		answer = "yes"
	}
	qs, err := m.record(ctx, record(id, KindAnswered, now, answeredData{Answer: answer, By: by}))
	if err != nil {
		return api.ConfirmInfo{}, err
	}
	return qs[0].info(), nil
}

// List is the questions whose latest record is after c.After, of chat
// c.Chat or of all, in record order (confirm_list). With nothing to list
// and c.WaitSeconds set, it waits that long for a record and lists again;
// what it then answers may be empty.
func (m *Manager) List(ctx context.Context, c api.CmdConfirmList) ([]api.Question, error) {
	var after, wait uint64
	if c.After != nil {
		after = *c.After
	}
	if c.WaitSeconds != nil {
		wait = *c.WaitSeconds
	}
	if wait > api.MaxListWait {
		return nil, invalid("wait_seconds %d: at most %d", wait, api.MaxListWait)
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(time.Duration(wait) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	for {
		m.mu.Lock()
		m.init()
		var found []*question
		for _, q := range m.qs {
			if q.Seq > after && (c.Chat == nil || q.Chat == *c.Chat) {
				found = append(found, q)
			}
		}
		changed := m.changed
		m.mu.Unlock()
		slices.SortFunc(found, bySeq)
		out := make([]api.Question, len(found))
		for i, q := range found {
			out[i] = q.wire()
		}
		if len(out) > 0 || timeout == nil {
			return out, nil
		}
		select {
		case <-changed:
		case <-timeout:
			return out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// route chooses the chat of a question: the chat that started the work
// parent names, else the notify target, else the only connected chat. It
// returns why none was chosen, if none was.
func (m *Manager) route(parent string) (chat, reason string) {
	if parent != "" && m.DelegationChat != nil {
		if chat := m.DelegationChat(parent); chat != "" {
			return chat, ""
		}
	}
	if m.Notify != "" {
		return m.Notify, ""
	}
	var connected []string
	if m.Chats != nil {
		connected = m.Chats.ConnectedChats()
	}
	switch len(connected) {
	case 0:
		return "", reasonNoChat
	case 1:
		return connected[0], ""
	default:
		return "", fmt.Sprintf(reasonAmbiguous, len(connected))
	}
}

// due is what the clock at now decides for the pending question q:
// expired at its deadline, else withdrawn when nobody has asked about it
// for WithdrawAfter, else nothing ("").
func (m *Manager) due(q *question, now time.Time) (kind, reason string) {
	if now.UnixMilli() >= q.Deadline {
		return KindExpired, reasonDeadline
	}
	m.mu.Lock()
	last, ok := m.alive[q.ID]
	m.mu.Unlock()
	if !ok {
		last = time.UnixMilli(q.Asked)
	}
	if now.Sub(last) >= WithdrawAfter && q.Project == "" {
		// An approval waits for its answer or its deadline, not for
		// someone to keep asking about it.
		return KindWithdrawn, reasonWithdrawn
	}
	return "", ""
}

// end ends question id with a record of kind if it is still pending, and
// reports where it stands.
func (m *Manager) end(ctx context.Context, id, kind, reason string) (api.ConfirmInfo, error) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mu.Lock()
	q, ok := m.qs[id]
	m.mu.Unlock()
	if !ok {
		return api.ConfirmInfo{}, notFound(id)
	}
	if q.State != api.ConfirmPending {
		return q.info(), nil
	}
	qs, err := m.record(ctx, record(id, kind, m.now(), endedData{Reason: reason}))
	if err != nil {
		return api.ConfirmInfo{}, err
	}
	return qs[0].info(), nil
}

// record appends recs to the log in one transaction, then applies them to
// memory and wakes the waiting lists; it returns the questions as the
// records left them. m.wmu is held.
func (m *Manager) record(ctx context.Context, recs ...local.ConfirmRecord) ([]*question, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	appended, err := m.Log.AppendConfirm(ctx, recs...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.init()
	out := make([]*question, len(appended))
	var decided []*question // approvals whose project must hear of their decision
	for i, r := range appended {
		q, err := evolve(m.qs[r.QuestionID], r)
		if err != nil {
			// Every record was checked against memory under m.wmu.
			m.mu.Unlock()
			panic(fmt.Sprintf("confirm: a record memory cannot take: %v", err))
		}
		m.qs[r.QuestionID] = q
		switch {
		case q.State != api.ConfirmPending:
			delete(m.alive, q.ID)
		case r.Kind == KindAsked:
			m.alive[q.ID] = time.UnixMilli(r.Timestamp)
		}
		out[i] = q
		if q.unprojected() {
			decided = append(decided, q)
		}
	}
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	m.project(ctx, decided)
	return out, nil
}

// project records the decisions of approvals qs in their projects'
// histories, then that it did (KindProjected). A project that refuses
// one (it never recorded the approval, or has its decision already) has
// nothing to record; a failure to reach it is logged, and the next start
// tries again. m.wmu is held, m.mu is not.
func (m *Manager) project(ctx context.Context, qs []*question) {
	ctx = context.WithoutCancel(ctx)
	for _, q := range qs {
		if m.Ledger == nil {
			return
		}
		outcome := map[api.ConfirmState]reducer.ApprovalOutcome{
			api.ConfirmYes: reducer.ApprovalYes, api.ConfirmNo: reducer.ApprovalNo, api.ConfirmExpired: reducer.ApprovalExpired,
			api.ConfirmWithdrawn: reducer.ApprovalWithdrawn, api.ConfirmFailed: reducer.ApprovalFailed,
		}[q.State]
		_, err := m.Ledger.Execute(ctx, reducer.DecideApproval{Project: q.Project, QuestionID: q.ID, Outcome: outcome, By: q.DecidedBy})
		if err != nil && !errors.Is(err, reducer.ErrNotFound) && !errors.Is(err, reducer.ErrConflict) && !errors.Is(err, reducer.ErrInvalidTransition) {
			m.logger().Error("approval decided, but its project could not record it yet", keyQuestion, q.ID, keyErr, err)
			continue
		}
		appended, err := m.Log.AppendConfirm(ctx, record(q.ID, KindProjected, m.now(), struct{}{}))
		if err != nil {
			m.logger().Error("approval recorded in its project, but not marked so", keyQuestion, q.ID, keyErr, err)
			continue
		}
		m.mu.Lock()
		if p, err := evolve(m.qs[q.ID], appended[0]); err == nil {
			m.qs[q.ID] = p
		}
		m.mu.Unlock()
	}
}

// record builds a record of the question log.
func record(id, kind string, now time.Time, data any) local.ConfirmRecord {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("confirm: %s record: %v", kind, err))
	}
	return local.ConfirmRecord{QuestionID: id, Kind: kind, Timestamp: now.UnixMilli(), Data: string(b)}
}

// requester is the delegation that asks: the last of the parent chain.
func requester(parent string) string {
	chain := strings.Split(parent, ",")
	return strings.TrimSpace(chain[len(chain)-1])
}

func bySeq(a, b *question) int { return cmp.Compare(a.Seq, b.Seq) }

func invalid(format string, args ...any) error {
	return api.Errorf(api.ErrInvalidArgument, format, args...)
}

func notFound(id string) error {
	return api.Errorf(api.ErrNotFound, "question %q not found", id)
}

// conflict refuses an answer to q, which is not pending.
func conflict(q *question) error {
	return api.Errorf(api.ErrConflict, "question %s is %s (%s): it takes no answer", q.ID, q.State, q.DecidedBy)
}
