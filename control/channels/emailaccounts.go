package channels

import (
	"fmt"

	"scv/control/api"
)

// fileEmail completes the email accounts of a reload's list from the
// accounts current holds (the stored ones): an account whose file names
// no password_file keeps its stored password (from an earlier reload or
// channel_login). Then each email account's mail chat must be, among the
// accounts the reload keeps, one of purpose mail.
func fileEmail(list []Settings, current map[string]account) ([]Settings, error) {
	after := make(map[string]Settings, len(current)+len(list))
	for id, cur := range current {
		if cur.s.Source != SourceFile {
			after[id] = cur.s // kept unless the file lists it
		}
	}
	for _, s := range list {
		after[s.ID()] = s
	}
	out := make([]Settings, len(list))
	for i, s := range list {
		if s.Email != nil && s.Email.PasswordFile == "" {
			s.Password = current[s.ID()].s.Password
		}
		if s.Email != nil {
			if err := checkMailChat(s.Email.MailChat, after); err != nil {
				return nil, fmt.Errorf("accounts[%d]: %w", i, err)
			}
		}
		out[i] = s
	}
	return out, nil
}

// checkMailChat checks that chat (already checked in form) is an
// account of accounts whose purpose is mail.
func checkMailChat(chat string, accounts map[string]Settings) error {
	s, ok := accounts[chat]
	switch {
	case !ok:
		return invalid("email.mail_chat %s: no such chat account; create it with purpose mail first (in the settings file: {\"channel\":\"local\",\"account\":\"mail\",\"purpose\":\"mail\"})", chat)
	case s.Purpose != api.PurposeMail:
		return invalid("email.mail_chat %s is a chat of purpose %s: the digests go only to an account of purpose mail", chat, s.Purpose)
	}
	return nil
}
