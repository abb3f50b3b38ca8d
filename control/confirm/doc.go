// Package confirm asks the owner yes/no questions in chat: the daemon's
// side of confirm_ask, confirm_status and the confirm_list and
// confirm_answer extensions (control.Questions).
//
// # Use
//
// The daemon builds one Manager over its ledger and its chat accounts,
// calls Load once before serving, runs Run in the background, and hands
// the Manager to control.Service as its Questions:
//
//	m := &confirm.Manager{Log: store, Chats: chats, DelegationChat: delegations.ChatOf, Notify: notify}
//	if err := m.Load(ctx); err != nil { ... }
//	err = m.Start(ctx) // the deadline keeper, until m.Stop()
//	svc.Questions = m
//
// # State
//
// Every step of a question (asked, answered, expired, withdrawn, failed)
// is a record of the ledger's append-only question log (confirm_log),
// appended before memory changes: memory is the fold of the log (evolve),
// and the log is the audit of who decided what and when. Which chat is
// asked, deadlines, withdrawal and restarts are described in
// docs/questions.md.
//
// # Time
//
// Deadlines and withdrawals are decided against the injected Clock by
// Tick, which Run calls every interval and tests call after moving a fake
// clock. An answer or a confirm_status that comes after the deadline but
// before the next Tick finds the question expired all the same.
package confirm
