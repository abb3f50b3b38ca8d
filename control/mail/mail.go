// Package mail runs the daemon's email accounts: a mailbox watched over
// IMAP, each mail decided exactly once (skipped by a rule, triaged by a
// live agent, reported), the reports sent as digests to the account's mail
// chat, and the seed's MailCounts derived from the account's mail journal
// by a pure fold. docs/mail.md is the user's side of it.
//
// The IMAP side is a Mailbox (package control/mail/imap dials one); the
// rest of the package sees mail only through it.
//
// # The journal
//
// What an account does with each mail is an append-only record of the
// machine's local store (local.Mail; not the project ledger: the mailbox,
// its credentials and its chat are this machine's, mail is no project
// history, and a ledger may be shared by a fleet), keyed by the mailbox's
// UIDVALIDITY and the mail's UID: claimed, decided (skipped or reported;
// by rule, bulk, triage or untriaged, with the triage's tokens), sent (in
// a digest). No text of a mail is in it: at most a SHA-256 of its
// Message-ID. The text a digest needs of a reported mail waits in the
// outbox, written with its decision and deleted with its sending.
//
// # The fold
//
// Fold folds an account's records, one by one, into where each open mail
// is and what each local day decided; Counts reads the seed's MailCounts
// from it at any time. It is pure; Counts(records, …) is the whole of it.
//
// # The account
//
// Service is the daemon's side: Connector is the channel connector of
// kind email (the channel manager runs one per enabled account), Counts
// what `status` shows. One run of an account (account.serve) records a
// digest told before a crash, decides what was claimed and not decided,
// claims and decides the new mails in UID order (Rules first, then the
// triage agent, a private live agent of package control/agents, within
// the day's token budget), tells a digest to the mail chat when one is due
// (confirm.Manager.TellMail, once per digest ID), and waits for new mail.
package mail

import (
	"context"
	"errors"
	"net/textproto"
	"time"
)

// Limits of what the account reads of one mail.
const (
	// MaxMailSize is the largest mail read: a bigger one is decided by the
	// rule for mail over the size limit (docs/mail.md), never fetched
	// whole.
	MaxMailSize = 10 << 20
	// MaxMailText is how much of a mail's text the account reads (and
	// puts in the triage prompt), in bytes.
	MaxMailText = 4 << 10
	// MaxCheck is the most mails one Check returns.
	MaxCheck = 100
)

// Mail is one mail as the account reads it: its headers and the start of
// its text. It lives in memory only; no text of it enters an event.
type Mail struct {
	// UID is the mail's UID in its mailbox (under the UIDVALIDITY of the
	// Check that returned it).
	UID uint32
	// MessageID is the Message-ID header ("" when there is none).
	MessageID string
	// From is the sender's address (lower case, without a display name),
	// FromName its display name.
	From, FromName string
	Subject        string
	Date           time.Time
	// Header is every header field, canonical keys (List-Id, Precedence,
	// Auto-Submitted, X-Autoreply, ...).
	Header textproto.MIMEHeader
	// Text is the start of the mail's text (its first text/plain part,
	// decoded to UTF-8, else text/html stripped of tags), at most
	// MaxMailText bytes, cut at a rune boundary.
	Text string
	// Size is the mail's size on the server (RFC822.SIZE), in bytes.
	Size uint32
	// Partial: the server could not give the mail whole, or it is over
	// MaxMailSize; Header and Text hold what could be read (perhaps
	// nothing but From and Subject).
	Partial bool
}

// Mailbox is one IMAP mailbox (the INBOX), connected and logged in. It is
// used by one goroutine at a time.
type Mailbox interface {
	// Check returns the mailbox's UIDVALIDITY and the mails whose UID is
	// greater than after, in UID order, at most limit of them. A mail the
	// server cannot give whole comes back Partial, never as an error.
	Check(ctx context.Context, after uint32, limit int) (uidValidity uint32, mails []Mail, err error)
	// Wait returns when the mailbox may have changed: at once when IDLE
	// (RFC 2177) reports new mail, or after poll where the server offers
	// no IDLE; with ctx's error when ctx ends. An error means the
	// connection is lost.
	Wait(ctx context.Context, poll time.Duration) error
	// Close logs out and closes the connection.
	Close() error
}

// Credentials is what an account logs in with. Password is a secret:
// never logged, never in an error, a reply or status.
type Credentials struct {
	// URL is imaps://host[:port] (TLS, port 993 by default) or
	// imap://host[:port] (STARTTLS, port 143; plain text only to a
	// loopback address).
	URL      string
	User     string
	Password string
}

// Dialer connects and logs in to a mailbox. A refusal of the credentials
// is an error wrapping ErrRefused (and no secret); any other error (the
// server unreachable, the connection dropped) is worth retrying.
type Dialer func(ctx context.Context, c Credentials) (Mailbox, error)

// ErrRefused is the server refusing the credentials: the account fails
// and is not retried until its settings change.
var ErrRefused = errors.New("the IMAP server refused the credentials")
