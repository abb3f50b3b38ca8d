package api

import (
	"fmt"
	"log/slog"
	"strings"
)

// CmdChannelLogin is an extension (action `channel_login`,
// docs/channels.md): it sets an email account's IMAP URL, user and
// password, and its mail chat when MailChat is given, creating the account
// if need be (source api), and enables it; its other email settings are
// kept. Only channel email takes a login. Password is a secret: the
// command prints and logs without it (String, GoString, LogValue); only
// its JSON, on the wire, holds it.
type CmdChannelLogin struct {
	Channel  string  `json:"channel"`
	Account  string  `json:"account"`
	IMAP     string  `json:"imap"`
	User     string  `json:"user"`
	Password string  `json:"password"`
	MailChat *string `json:"mail_chat,omitempty"`
}

func (CmdChannelLogin) Action() string { return "channel_login" }

// String is the command without its password (nor a URL with a user or
// password in it).
func (c CmdChannelLogin) String() string {
	chat, imap := "(kept)", c.IMAP
	if c.MailChat != nil {
		chat = *c.MailChat
	}
	if strings.Contains(imap, "@") {
		imap = "[a URL with credentials]"
	}
	return fmt.Sprintf("channel_login %s:%s imap %s user %s password [secret] mail_chat %s", c.Channel, c.Account, imap, c.User, chat)
}

// GoString is String.
func (c CmdChannelLogin) GoString() string { return c.String() }

// LogValue is String.
func (c CmdChannelLogin) LogValue() slog.Value { return slog.StringValue(c.String()) }

// EmailAccount is an extension of ComponentHealth (`email`): an email
// account's IMAP URL, user and mail chat, as set. Never its password.
type EmailAccount struct {
	IMAP     string `json:"imap"`
	User     string `json:"user"`
	MailChat string `json:"mail_chat"`
}
