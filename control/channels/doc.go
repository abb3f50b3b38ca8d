// Package channels runs the daemon's channel accounts: the chat accounts
// through which the owner talks to SCV (channel_set, channel_logout,
// reload, and the components of `scv status`). docs/channels.md is the
// user's side of it.
//
// # Settings
//
// Settings is one account's configuration, kept in the ledger's
// channel_accounts table. Set (channel_set) changes one account, Logout
// removes one, and Reload makes the accounts agree with the settings file
// (ReadFile, DefaultPath). Invalid input is refused with a -32602
// invalid_argument *api.Error and changes nothing.
//
// # Email accounts
//
// An account of channel email carries an Email (the settings file's
// `email` object, or channel_login's IMAP URL, user and mail chat) and a
// Password. They are stored in the account's channel_accounts row: the
// Email as JSON in the row's own email column (migration 00010), the
// password in the row's credentials ({"password": ...}), and nowhere
// else; channel_logout deletes the row, both with it. The settings file
// never holds the password: its password_file is read at each reload.
// The password is a Secret, which prints as [secret] through fmt, JSON
// and slog, and no error, reply or log line of this package holds it.
//
// # Components
//
// The Manager runs one component per enabled account: a goroutine that
// runs the account's Connector, reports through Health, and restarts it
// after a failure with an exponential backoff timed by the Manager's
// Clock. Its state is a control.ComponentState, reported by Components.
// Connectors maps each Kind to a connector factory; this build has the
// Local one only, and an enabled account of another kind fails.
//
// # Policy
//
// EffectiveRemoteTools, Answers, ToolsFor and ModelAnswers decide, from an
// account's settings alone, who it answers and who gets tools.
//
// # Use
//
//	m := channels.New(l)
//	m.Path = configFlag // "" is DefaultPath()
//	if err := m.Load(ctx); err != nil { ... }
//	defer m.Close()
//	svc.Channels = m
//
// Connected, ConnectedChats and Deliver let other parts of the daemon
// (questions to the owner) reach a connected chat.
package channels
