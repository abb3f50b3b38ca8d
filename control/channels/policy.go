package channels

import "scv/control/api"

// The policy: who an account answers and who gets tools, from its settings
// alone. Pure functions; callers pass the settings as the Manager reports
// them (Manager.Settings), which include an owner ID the connector
// reported.

// EffectiveRemoteTools is the account's remote tool authority: owner only
// when the settings say owner, the owner ID is known, and the account is
// not a mail chat; else none.
func EffectiveRemoteTools(s Settings) api.RemoteTools {
	if s.RemoteTools == api.RemoteToolsOwner && s.OwnerID != "" && s.Purpose != api.PurposeMail {
		return api.RemoteToolsOwner
	}
	return api.RemoteToolsNone
}

// ModelAnswers reports whether a model ever answers in the account: never
// in a mail chat, which only carries reports to the owner.
func ModelAnswers(s Settings) bool { return s.Purpose != api.PurposeMail }

// Answers reports whether the account answers a message from senderID.
// Senders owner answers only the owner, and nobody while the owner ID is
// unknown; senders anyone answers everyone. A mail chat answers nobody.
func Answers(s Settings, senderID string) bool {
	if !ModelAnswers(s) {
		return false
	}
	switch s.Senders {
	case api.SendersAnyone:
		return true
	case api.SendersOwner:
		return isOwner(s, senderID)
	}
	return false
}

// ToolsFor reports whether the session of senderID gets tools: only the
// owner's, only when the effective remote tools are owner, and only when
// the account answers the owner at all.
func ToolsFor(s Settings, senderID string) bool {
	return EffectiveRemoteTools(s) == api.RemoteToolsOwner && isOwner(s, senderID) && Answers(s, senderID)
}

func isOwner(s Settings, senderID string) bool { return s.OwnerID != "" && senderID == s.OwnerID }

// health is the policy part of an account's ComponentHealth: its identity
// and authority. Senders is reported as set; purpose only when it is not
// an ordinary chat; user_id and bot_id when known; an email account's
// IMAP URL, user and mail chat (never its password). An email account's
// mail counts are the Manager's (Components, MailCounts).
func health(s Settings) api.ComponentHealth {
	h := api.ComponentHealth{
		ID: s.ID(), Channel: string(s.Channel), Account: s.Account, Enabled: s.Enabled,
		RemoteTools: EffectiveRemoteTools(s),
	}
	if s.OwnerID != "" {
		h.UserID = new(s.OwnerID)
	}
	if s.BotID != "" {
		h.BotID = new(s.BotID)
	}
	h.Senders = new(s.Senders)
	if s.Purpose != api.PurposeChat {
		h.Purpose = new(s.Purpose)
	}
	if s.Email != nil {
		h.Email = &api.EmailAccount{IMAP: s.Email.IMAP, User: s.Email.User, MailChat: s.Email.MailChat}
	}
	return h
}
