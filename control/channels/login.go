package channels

import (
	"context"

	"scv/control/api"
	"scv/ledger/local"
)

// Login sets an email account's IMAP URL, user and password
// (channel_login), and its mail chat when c names one; a new account
// starts from the defaults with source api, an existing one keeps its
// source and its other settings (an account of the settings file is set
// back to the file's values at the next reload, its password too if the
// file names a password_file). The account is enabled, and its component
// follows as for Set. Only channel email takes a login; the new settings
// are checked as the settings file's are (the mail chat an account of
// purpose mail), and invalid input changes nothing. No error holds the
// password.
func (m *Manager) Login(ctx context.Context, c api.CmdChannelLogin) error {
	if err := checkKey(c.Channel, c.Account); err != nil {
		return err
	}
	if Kind(c.Channel) != KindEmail {
		return invalid("channel_login: channel %s takes no login: only email does", c.Channel)
	}
	password := Secret(c.Password)
	if err := CheckPassword(password); err != nil {
		return err
	}
	m.ops.Lock()
	defer m.ops.Unlock()
	if err := m.ready(ctx); err != nil {
		return err
	}
	id := ID(KindEmail, c.Account)
	m.mu.Lock()
	a := m.accounts[id]
	s, row := Defaults(KindEmail, c.Account), local.ChannelAccount{}
	if a != nil {
		s, row = a.s, a.row
	}
	all := make(map[string]Settings, len(m.accounts))
	for id, a := range m.accounts {
		all[id] = a.s
	}
	m.mu.Unlock()

	e := s.Email.clone()
	if e == nil {
		e = &Email{}
	}
	e.IMAP, e.User = c.IMAP, c.User
	if c.MailChat != nil {
		e.MailChat = *c.MailChat
	}
	s.Email, s.Password, s.Enabled = e, password, true
	if err := s.Validate(); err != nil {
		return err
	}
	if err := checkMailChat(e.MailChat, all); err != nil {
		return err
	}
	return m.put(ctx, id, a, s, row)
}

// put stores s (the row prev's credentials and state kept as toRow
// keeps them) as account id's settings, a its account (nil: a new one),
// then makes its component follow. The caller holds ops, and has checked
// s.
func (m *Manager) put(ctx context.Context, id string, a *account, s Settings, prev local.ChannelAccount) error {
	row := toRow(s, prev, m.clock().Now().UnixMilli())
	if err := m.Store.ReplaceChannelAccounts(ctx, []local.ChannelAccount{row}, nil); err != nil {
		return err
	}
	m.mu.Lock()
	if a == nil {
		a = &account{state: api.ComponentDisabled}
		m.accounts[id] = a
	}
	a.s, a.row, a.bad = s, row, ""
	m.mu.Unlock()
	m.reconcile(a)
	return nil
}
