package daemon

import (
	"context"
	"errors"
	"os"
	"time"

	"scv/control/api"
	"scv/control/channels"
	"scv/control/mail"
	"scv/control/mail/imap"
)

// The email accounts (docs/mail.md): a mail.Service whose connector runs
// every channel account of channel email, its counts in their components.

// openMail makes the email accounts' service and hands its connector and
// counts to the channel manager, before the manager loads the accounts.
// Triage agents work in a folder of their own beside the socket.
func (d *Daemon) openMail() error {
	dir := d.triageDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	dial := d.cfg.MailDial
	if dial == nil {
		dial = dialIMAP
	}
	log := d.log.With("component", "mail")
	d.mail = &mail.Service{
		Dial: dial, Store: d.db, Chats: d.questions, Clock: mailClock(d.cfg.Clock), Logger: log,
		Triage: mail.AgentTriage(dir, os.Environ(), log),
	}
	if r := d.recorder(); r != nil { // never a typed nil
		d.mail.Metrics = r
	}
	conns := channels.DefaultConnectors()
	conns[channels.KindEmail] = d.mail.Connector
	d.channels.Connectors = conns
	d.channels.MailCounts = d.mail.Counts
	return nil
}

// closeMail removes the triage agents' folder (the accounts, and their
// agents, stopped with the channel manager).
func (d *Daemon) closeMail() { os.RemoveAll(d.triageDir()) }

// triageDir is the triage agents' folder.
func (d *Daemon) triageDir() string { return d.cfg.Socket + ".mail-triage" }

// dialIMAP connects an email account over IMAP (control/mail/imap). Plain
// text refused fails the account for good, as a refusal of the
// credentials does: neither goes away by retrying.
func dialIMAP(ctx context.Context, c mail.Credentials) (mail.Mailbox, error) {
	mb, err := imap.Dial(ctx, c)
	if errors.Is(err, imap.ErrPlainText) {
		return nil, channels.Permanent(err)
	}
	return mb, err
}

// mailClock is the daemon's clock as the email accounts use it: its Now
// (the system's when nil), and the system's timers.
func mailClock(now func() time.Time) channels.Clock {
	if now == nil {
		return channels.SystemClock
	}
	return funcClock(now)
}

type funcClock func() time.Time

func (c funcClock) Now() time.Time                       { return c() }
func (funcClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// mailAccounts is the email accounts' components, for the web UI.
type mailAccounts struct{ m *channels.Manager }

func (a mailAccounts) MailAccounts() []api.ComponentHealth {
	var out []api.ComponentHealth
	for _, c := range a.m.Components() {
		if c.Channel == string(channels.KindEmail) {
			out = append(out, c)
		}
	}
	return out
}
