// Package local is the machine's own state, kept apart from the project
// ledger: the delegation registry (processes of this machine, named by PID
// and boot), the channel accounts (this machine's chats), the question
// log, and the email accounts' mail journal and outbox. In fleet mode the project ledger is shared by daemons on many
// machines while this state stays on the one it belongs to; with SQLite
// both live in the one database file.
//
// Store is what the daemon's services need of it; scv/ledger/sqlite
// implements it. Its errors are of the domain's kinds: a record that is
// there already is refused with reducer.ErrConflict, one refused as it is
// (data that is not JSON) with reducer.ErrInvalidArgument, and a failure
// wraps reducer.ErrStorage.
package local

import "context"

// Store keeps the machine's own state. Every method is one transaction:
// all of it is kept or none. Failures wrap reducer.ErrStorage.
type Store interface {
	Delegations
	Agents
	Works
	Channels
	Questions
	Mail
}

// Delegations is the delegation registry.
type Delegations interface {
	// PutDelegation registers d; a handle already registered is refused
	// with reducer.ErrConflict.
	PutDelegation(ctx context.Context, d Delegation) error
	// DeleteDelegation removes handle and reports whether it was there.
	DeleteDelegation(ctx context.Context, handle string) (bool, error)
	// Delegations lists the registry, oldest first.
	Delegations(ctx context.Context) ([]Delegation, error)
}

// Agents is the live agents the daemon runs.
type Agents interface {
	// PutAgent writes a, inserting it or replacing every column of the row
	// with its handle. A name another handle has is refused with
	// reducer.ErrConflict, a Spec that is not a JSON object with
	// reducer.ErrInvalidArgument, and nothing changes.
	PutAgent(ctx context.Context, a Agent) error
	// DeleteAgent removes handle and reports whether it was there.
	DeleteAgent(ctx context.Context, handle string) (bool, error)
	// Agents lists the live agents, oldest first.
	Agents(ctx context.Context) ([]Agent, error)
}

// Works is the projects' work the daemon runs.
type Works interface {
	// PutWork writes w, inserting it or replacing the row of its project.
	// A Spec that is not a JSON object is refused with
	// reducer.ErrInvalidArgument.
	PutWork(ctx context.Context, w Work) error
	// DeleteWork removes project's work and reports whether it was there.
	DeleteWork(ctx context.Context, project string) (bool, error)
	// Works lists the works, oldest first.
	Works(ctx context.Context) ([]Work, error)
}

// Channels is the channel account settings.
type Channels interface {
	// ReplaceChannelAccounts deletes the accounts del names ({channel,
	// account}; one that is not there is no error) and puts every account
	// of put (inserting it or replacing every column of the row with the
	// same channel and account). Credentials or state that are not JSON,
	// and email settings that are neither "" nor JSON, are refused with
	// reducer.ErrInvalidArgument.
	ReplaceChannelAccounts(ctx context.Context, put []ChannelAccount, del [][2]string) error
	// DeleteChannelAccount removes one account and reports whether it was
	// there.
	DeleteChannelAccount(ctx context.Context, channel, account string) (bool, error)
	// ChannelAccounts lists every account, ordered by channel and account.
	ChannelAccounts(ctx context.Context) ([]ChannelAccount, error)
}

// Questions is the append-only question log.
type Questions interface {
	// AppendConfirm appends recs in order and returns them with Seq set.
	// A record whose Data is not JSON is refused with
	// reducer.ErrInvalidArgument and nothing is appended.
	AppendConfirm(ctx context.Context, recs ...ConfirmRecord) ([]ConfirmRecord, error)
	// ConfirmLog reads the log after seq after, in order.
	ConfirmLog(ctx context.Context, after uint64) ([]ConfirmRecord, error)
}

// Mail is the email accounts' mail journal (docs/mail.md): an
// append-only log of what each account did with each mail, keyed by the
// mailbox's UIDVALIDITY and the mail's UID, with no text of a mail in it;
// and the outbox, the text a digest needs of each mail reported and not
// yet sent (sender, subject, summary), which lives only until the digest
// is sent.
type Mail interface {
	// AppendMail, in one transaction, appends recs in order, puts the
	// outbox items put and deletes the outbox items of the mails del
	// names; it returns recs with Seq set. All of it is kept or none: a
	// record or an item whose Data is not JSON is refused with
	// reducer.ErrInvalidArgument; a record of a kind its mail has
	// already (a mail claimed, decided or sent twice), an item of a mail
	// that has one, or a deletion of an item that is not there with
	// reducer.ErrConflict.
	AppendMail(ctx context.Context, recs []MailRecord, put []MailItem, del []MailKey) ([]MailRecord, error)
	// MailJournal reads account's records after seq after, in order.
	MailJournal(ctx context.Context, account string, after uint64) ([]MailRecord, error)
	// MailOutbox reads account's outbox, oldest first.
	MailOutbox(ctx context.Context, account string) ([]MailItem, error)
}

// MailKey names one mail of an account: its mailbox's UIDVALIDITY and its
// UID under it.
type MailKey struct {
	Account     string `db:"account"`
	UIDValidity uint32 `db:"uid_validity"`
	UID         uint32 `db:"uid"`
}

// MailRecord is one step of an account's handling of a mail (claimed,
// decided, sent), one row of the append-only mail journal. It is never
// changed or removed (the schema refuses UPDATE and DELETE), and no text
// of the mail is in it.
type MailRecord struct {
	// Seq is the row's place in the journal, strictly increasing, set by
	// AppendMail.
	Seq uint64 `db:"seq"`
	MailKey
	Kind string `db:"kind"`
	// Timestamp is the daemon's clock when the step was taken, in Unix
	// milliseconds.
	Timestamp int64 `db:"timestamp_ms"`
	// Data is the step's evidence, a JSON object.
	Data string `db:"data"`
}

// MailItem is one mail waiting in the outbox for its digest: what the
// digest says of it (Data, a JSON object the mail package writes and
// reads). Seq orders the outbox; AppendMail sets it.
type MailItem struct {
	Seq uint64 `db:"seq"`
	MailKey
	Data string `db:"data"`
}

// Delegation is one row of the delegation registry: an agent command an
// `scv delegate` process (the owner) started and registered. It is the
// daemon's operational state, kept so that a restarted daemon still knows
// what runs; it is not project history and has no events.
type Delegation struct {
	Handle  string `db:"handle"`
	Agent   string `db:"agent"`
	Session string `db:"session"`
	Depth   uint32 `db:"depth"`
	// Parent is the SCV_PARENT chain the command was started with, the
	// handle itself last.
	Parent string `db:"parent"`
	// The command's process (and process group) and its owner, each named
	// by PID and start time (clock ticks since boot) within BootID.
	PID        int    `db:"pid"`
	PIDStart   uint64 `db:"pid_start"`
	OwnerPID   int    `db:"owner_pid"`
	OwnerStart uint64 `db:"owner_start"`
	BootID     string `db:"boot_id"`
	Cwd        string `db:"cwd"`
	// Started is when the daemon registered it, in Unix milliseconds.
	Started int64 `db:"started_unix_ms"`
	// Chat is the chat that started its work (`<channel>:<account>`), or
	// "".
	Chat string `db:"chat"`
}

// Agent is one row of the live agents: an ACP agent the daemon started
// and speaks to. It is kept so that a restarted daemon starts it again and
// loads its conversation; it is not project history and has no events
// (its turns are runs, which do).
type Agent struct {
	Handle string `db:"handle"`
	Name   string `db:"name"`
	// Spec is what the agent was started with, a JSON object that the
	// agents package writes and reads.
	Spec string `db:"spec"`
	// Conversation is the ACP session ID ("" before session/new
	// answered), Turn the turns sent.
	Conversation string `db:"conversation"`
	Turn         uint32 `db:"turn"`
	// RunID is the run of the turn under way when the row was written,
	// "" between turns.
	RunID string `db:"run_id"`
	// Started is when the daemon first started it, in Unix milliseconds.
	Started int64 `db:"started_unix_ms"`
}

// Work is one row of the projects' work: N live agents the daemon keeps
// on a project's ready tasks. It is kept so that a restarted daemon
// resumes the work; it is not project history and has no events (its
// turns are runs, which do).
type Work struct {
	Project string `db:"project"` // the project's ID
	// Spec is what the work was started with, a JSON object that the work
	// package writes and reads.
	Spec string `db:"spec"`
	// Started is when the work started, in Unix milliseconds.
	Started int64 `db:"started_unix_ms"`
}

// ChannelAccount is one row of the channel account settings: the daemon's
// configuration of one chat account, changed in place by channel_set,
// channel_logout and reload. It is operational state, not project
// history, and has no events. The store keeps what it is given; what the
// values mean (and which are valid) is the channel manager's business
// (package control/channels).
type ChannelAccount struct {
	Channel     string `db:"channel"`
	Account     string `db:"account"`
	Enabled     bool   `db:"enabled"`
	Workspace   string `db:"workspace"`
	RemoteTools string `db:"remote_tools"`
	Senders     string `db:"senders"`
	Purpose     string `db:"purpose"`
	OwnerID     string `db:"owner_id"`
	BotID       string `db:"bot_id"`
	// Source is who last set the account: "api" or "file".
	Source string `db:"source"`
	// Email is an email account's own settings, a JSON object the
	// channels package writes and reads; "" for every other account.
	Email string `db:"email"`
	// Credentials and State are the connector's own, opaque JSON; empty
	// is stored as "{}".
	Credentials string `db:"credentials"`
	State       string `db:"state"`
	// Updated is when the row was last written, in Unix milliseconds;
	// zero is stamped with the store's clock.
	Updated int64 `db:"updated_unix_ms"`
}

// ConfirmRecord is one step of a question to the owner (asked, answered,
// expired, withdrawn, failed), one row of the append-only question log:
// the audit of who decided what and when. It is never changed or removed
// (the schema refuses UPDATE and DELETE).
type ConfirmRecord struct {
	// Seq is the row's place in the log, strictly increasing, set by
	// AppendConfirm.
	Seq        uint64 `db:"seq"`
	QuestionID string `db:"question_id"`
	Kind       string `db:"kind"`
	// Timestamp is the daemon's clock when the step was taken, in Unix
	// milliseconds.
	Timestamp int64 `db:"timestamp_ms"`
	// Data is the step's evidence, a JSON object.
	Data string `db:"data"`
}
