package mail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"scv/control/agents"
	"scv/control/api"
	"scv/control/channels"
	"scv/ledger/local"
	"scv/reducer"
)

// Chats is where an account's digests go (*confirm.Manager): a notice of
// the mail chat, told once per ID.
type Chats interface {
	// TellMail tells text to chat as the notice id, unless id was told
	// already (told false); a chat that cannot take it now is an error.
	TellMail(ctx context.Context, chat, id, text string) (told bool, err error)
	// Told reports whether id was told.
	Told(id string) bool
}

// Metrics counts what the accounts decide (*metrics.Recorder).
type Metrics interface {
	// MailDecided counts one mail of account decided (skipped or
	// reported).
	MailDecided(account, decision string)
}

// StartTriage starts an account's triage agent from its command (the
// account's triage_agent).
type StartTriage func(ctx context.Context, account string, command []string) (Triager, error)

// Service runs the daemon's email accounts: Connector is the channel
// connector of kind email, which the channel manager runs once per
// enabled account, and Counts the accounts' MailCounts for `status`. Set
// the fields before the first Run.
type Service struct {
	// Dial connects to an account's mailbox (package control/mail/imap).
	Dial Dialer
	// Store is the mail journal and its outbox.
	Store local.Mail
	// Chats tells the digests.
	Chats Chats
	// Triage starts triage agents; nil: every mail no rule decides is
	// reported untriaged.
	Triage StartTriage
	// Clock is the accounts' time: their days, digests and budget
	// (channels.SystemClock when nil).
	Clock   channels.Clock
	Logger  *slog.Logger
	Metrics Metrics

	mu       sync.Mutex
	accounts map[string]*view
}

// view is what Counts reads of one account: its fold, as its loop keeps
// it, its budget and its last successful check. Guarded by Service.mu.
type view struct {
	fold      *Fold
	budget    uint64
	lastCheck time.Time
}

func (s *Service) clock() channels.Clock {
	if s.Clock == nil {
		return channels.SystemClock
	}
	return s.Clock
}

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Counts is account's MailCounts now, or nil when the account has not
// run since the daemon started.
func (s *Service) Counts(account string) *api.MailCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.accounts[account]
	if v == nil {
		return nil
	}
	c := v.fold.Counts(s.clock().Now(), v.budget, v.lastCheck)
	return &c
}

// Connector is a connector of an email account, for the channel manager
// (channels.Manager.Connectors[channels.KindEmail]).
func (s *Service) Connector() channels.Connector { return connector{s} }

// connector runs one email account.
type connector struct{ s *Service }

// Run loads the account's journal, dials its mailbox and serves it until
// ctx ends. A refusal of the credentials fails the account for good
// (channels.Permanent); any other failure to connect, and a connection
// lost, is an error the manager retries after its backoff.
func (c connector) Run(ctx context.Context, set channels.Settings, h channels.Health) error {
	a, err := c.s.open(ctx, set)
	if err != nil {
		return err
	}
	defer a.close()
	mb, err := c.s.Dial(ctx, Credentials{URL: set.Email.IMAP, User: set.Email.User, Password: string(set.Password)})
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, ErrRefused):
		return channels.Permanent(err)
	case err != nil:
		return err
	}
	defer mb.Close()
	h.Connected()
	a.mb, a.h = mb, h
	err = a.serve(ctx)
	if ctx.Err() != nil {
		return nil
	}
	var l lost
	if errors.As(err, &l) {
		h.Disconnected(l.err)
		return l.err
	}
	return err
}

// Deliver refuses: an email account is no chat; its digests go to its
// mail chat.
func (connector) Deliver(context.Context, channels.Settings, channels.Message) error {
	return errors.New("an email account takes no messages: its reports go to its mail chat")
}

// open makes account set's loop: its settings read, its journal folded
// from the store and shown by Counts.
func (s *Service) open(ctx context.Context, set channels.Settings) (*account, error) {
	e := set.Email
	if e == nil {
		return nil, channels.Permanent(errors.New("the email account has no email settings"))
	}
	loc := time.Local
	if e.TimeZone != "" {
		var err error
		if loc, err = time.LoadLocation(e.TimeZone); err != nil {
			return nil, channels.Permanent(fmt.Errorf("time_zone %q: %v", e.TimeZone, err))
		}
	}
	recs, err := s.Store.MailJournal(ctx, set.Account, 0)
	if err != nil {
		return nil, err
	}
	log := s.logger().With("account", set.ID())
	f := NewFold(loc)
	for _, r := range recs {
		if err := f.Add(r); err != nil {
			log.Warn("mail journal record skipped", "err", err)
		}
	}
	s.mu.Lock()
	if s.accounts == nil {
		s.accounts = map[string]*view{}
	}
	v := s.accounts[set.Account]
	if v == nil {
		v = &view{}
		s.accounts[set.Account] = v
	}
	v.fold, v.budget = f, e.TokenBudget
	s.mu.Unlock()
	a := &account{s: s, name: set.Account, e: *e, rules: Rules{ReportFrom: e.ReportFrom, SkipFrom: e.SkipFrom},
		loc: loc, view: v, log: log}
	return a, nil
}

// AgentTriage starts triage agents as private live agents (package
// control/agents) working in workspace with the environment env.
func AgentTriage(workspace string, env []string, logger *slog.Logger) StartTriage {
	return func(ctx context.Context, account string, command []string) (Triager, error) {
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		p, err := agents.StartPrivate(ctx, agents.PrivateSpec{Name: "triage", Command: command, Workspace: workspace,
			Env: env, Logger: logger.With("account", string(channels.KindEmail)+":"+account)})
		if err != nil {
			return nil, err
		}
		return agentTriager{p}, nil
	}
}

// agentTriager is a Triager over a private live agent.
type agentTriager struct{ p *agents.Private }

func (t agentTriager) Triage(ctx context.Context, prompt string) (string, uint64, error) {
	turn, err := t.p.Prompt(ctx, prompt)
	if err != nil {
		return "", 0, err
	}
	if turn.Status != reducer.RunSucceeded {
		return turn.Text, turn.Tokens.Total(), fmt.Errorf("the triage agent's turn %s", turn.Status)
	}
	return turn.Text, turn.Tokens.Total(), nil
}

func (t agentTriager) Close() { t.p.Stop() }
