package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"scv/control/api"
	"scv/control/workspace"
	"scv/ledger/local"
)

// Kind is a chat channel: the platform an account belongs to.
type Kind string

// The channel kinds this build knows. Any other channel is refused.
const (
	KindLocal    Kind = "local"
	KindWechat   Kind = "wechat"
	KindFeishu   Kind = "feishu"
	KindTelegram Kind = "telegram"
	KindSlack    Kind = "slack"
	KindEmail    Kind = "email"
)

// Kinds lists the known channel kinds.
var Kinds = []Kind{KindLocal, KindWechat, KindFeishu, KindTelegram, KindSlack, KindEmail}

// Known reports whether k is one of Kinds.
func (k Kind) Known() bool {
	for _, v := range Kinds {
		if k == v {
			return true
		}
	}
	return false
}

// Source says who last set an account.
type Source string

// The sources.
const (
	// SourceAPI: created by channel_set. Reload leaves it alone unless the
	// settings file lists it.
	SourceAPI Source = "api"
	// SourceFile: set from the settings file by reload. Reload removes it
	// once the file no longer lists it; channel_set keeps the source.
	SourceFile Source = "file"
)

// Settings is one channel account's configuration.
type Settings struct {
	Channel Kind
	Account string
	Enabled bool
	// Workspace is an absolute, cleaned path to an existing directory, or
	// "" for none.
	Workspace   string
	RemoteTools api.RemoteTools
	Senders     api.Senders
	Purpose     api.Purpose
	// OwnerID and BotID are the platform's IDs of the account's owner and
	// bot as configured; "" is unknown (a connector may report them).
	OwnerID string
	BotID   string
	Source  Source
	// Email is an email account's own settings; nil for every other
	// channel.
	Email *Email
	// Password is an email account's password, from its stored
	// credentials: it never leaves the daemon.
	Password Secret
}

// Secret is a credential. It prints as [secret] however it is printed,
// logged or marshalled, so that it never reaches a log, a reply or an
// error by mistake; string(s) is the value.
type Secret string

const redacted = "[secret]"

// String is [secret].
func (Secret) String() string { return redacted }

// GoString is [secret].
func (Secret) GoString() string { return redacted }

// MarshalJSON writes "[secret]".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// LogValue is [secret].
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Defaults is a new account's settings: no workspace, no remote tools,
// answering only the owner, an ordinary chat (the seed's defaults).
func Defaults(channel Kind, account string) Settings {
	return Settings{
		Channel: channel, Account: account,
		RemoteTools: api.RemoteToolsNone, Senders: api.SendersOwner, Purpose: api.PurposeChat,
		Source: SourceAPI,
	}
}

// ID is the account's component ID, `<channel>:<account>`.
func (s Settings) ID() string { return ID(s.Channel, s.Account) }

// ID is the component ID of an account, `<channel>:<account>`.
func ID(channel Kind, account string) string { return string(channel) + ":" + account }

// Validate checks every field and returns a -32602 invalid_argument
// *api.Error naming the first one that is wrong. A workspace must be
// an absolute path to an existing directory.
func (s Settings) Validate() error { return s.check(true) }

// check is Validate; without exists, a workspace need only be absolute
// (a stored account's workspace may have gone since it was set).
func (s Settings) check(exists bool) error {
	if err := checkKey(string(s.Channel), s.Account); err != nil {
		return err
	}
	switch {
	case s.Workspace == "":
	case exists:
		if _, err := workspace.Check(s.Workspace); err != nil {
			return err
		}
	case !filepath.IsAbs(s.Workspace):
		return invalid("workspace %q is not an absolute path", s.Workspace)
	}
	if !oneOf(s.RemoteTools, api.RemoteToolsNone, api.RemoteToolsOwner) {
		return invalid("remote_tools %q: want none or owner", s.RemoteTools)
	}
	if !oneOf(s.Senders, api.SendersOwner, api.SendersAnyone) {
		return invalid("senders %q: want owner or anyone", s.Senders)
	}
	if !oneOf(s.Purpose, api.PurposeChat, api.PurposeMail) {
		return invalid("purpose %q: want chat or mail", s.Purpose)
	}
	if !oneOf(s.Source, SourceAPI, SourceFile) {
		return invalid("source %q: want api or file", s.Source)
	}
	return s.checkEmail()
}

// checkEmail checks an account's email settings and password: only an
// email account has them, an enabled one must have its settings, and
// those it has must be valid.
func (s Settings) checkEmail() error {
	if s.Channel != KindEmail {
		switch {
		case s.Email != nil:
			return invalid("%s: only an email account has email settings", s.ID())
		case s.Password != "":
			return invalid("%s: only an email account has a password", s.ID())
		}
		return nil
	}
	if s.Email == nil {
		if s.Enabled {
			return invalid("%s: an enabled email account needs its email settings (the settings file's email object, or scv channel login)", s.ID())
		}
		return nil
	}
	if err := s.Email.check(); err != nil {
		return err
	}
	if s.Password != "" {
		return CheckPassword(s.Password)
	}
	return nil
}

// equal reports whether s and o are the same settings.
func (s Settings) equal(o Settings) bool {
	e, f := s.Email, o.Email
	s.Email, o.Email = nil, nil
	return s == o && e.equal(f)
}

// checkKey checks a channel and an account name.
func checkKey(channel, account string) error {
	switch {
	case channel == "":
		return invalid("channel is empty")
	case !Kind(channel).Known():
		return invalid("unknown channel %q: want one of %s", channel, kindList())
	}
	return api.CheckChatName("account", account)
}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func oneOf[T comparable](v T, allowed ...T) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// invalid is the invalid_argument refusal.
func invalid(format string, args ...any) error {
	return api.Errorf(api.ErrInvalidArgument, format, args...)
}

// notFound is the not_found refusal.
func notFound(format string, args ...any) error {
	return api.Errorf(api.ErrNotFound, format, args...)
}

// apply is s changed by a channel_set: omitted fields (and a null
// workspace) keep s's values; an empty workspace clears it. The result is
// validated.
func apply(s Settings, c api.CmdChannelSet) (Settings, error) {
	s.Enabled = c.Enabled
	if c.Workspace != nil {
		s.Workspace = ""
		if *c.Workspace != "" {
			ws, err := workspace.Check(*c.Workspace)
			if err != nil {
				return Settings{}, err
			}
			s.Workspace = ws
		}
	}
	if c.RemoteTools != nil {
		s.RemoteTools = *c.RemoteTools
	}
	if c.Senders != nil {
		s.Senders = *c.Senders
	}
	if c.Purpose != nil {
		s.Purpose = *c.Purpose
	}
	if err := s.Validate(); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// fromRow reads a stored account; it is not validated. An email
// account's settings come from the row's email column, its password from
// its credentials ({"password": ...}); an error (which never holds
// anything of the credentials) says that one of them cannot be read, and
// the account is shown as invalid.
func fromRow(r local.ChannelAccount) (Settings, error) {
	s := Settings{
		Channel: Kind(r.Channel), Account: r.Account, Enabled: r.Enabled, Workspace: r.Workspace,
		RemoteTools: api.RemoteTools(r.RemoteTools), Senders: api.Senders(r.Senders),
		Purpose: api.Purpose(r.Purpose), OwnerID: r.OwnerID, BotID: r.BotID, Source: Source(r.Source),
	}
	if r.Email != "" {
		if err := json.Unmarshal([]byte(r.Email), &s.Email); err != nil {
			return s, fmt.Errorf("the stored email settings cannot be read: %w", err)
		}
	}
	if s.Channel == KindEmail && r.Credentials != "" {
		var c emailCredentials
		if json.Unmarshal([]byte(r.Credentials), &c) != nil {
			return s, errors.New("the stored credentials cannot be read")
		}
		s.Password = Secret(c.Password)
	}
	return s, nil
}

// emailCredentials is an email account's stored credentials.
type emailCredentials struct {
	Password string `json:"password,omitempty"`
}

// toRow is the stored form of s, with the connector's credentials and
// state of the stored row prev (empty for a new account); an email
// account's credentials are its password.
func toRow(s Settings, prev local.ChannelAccount, updatedMS int64) local.ChannelAccount {
	r := local.ChannelAccount{
		Channel: string(s.Channel), Account: s.Account, Enabled: s.Enabled, Workspace: s.Workspace,
		RemoteTools: string(s.RemoteTools), Senders: string(s.Senders), Purpose: string(s.Purpose),
		OwnerID: s.OwnerID, BotID: s.BotID, Source: string(s.Source),
		Credentials: prev.Credentials, State: prev.State, Updated: updatedMS,
	}
	if s.Email != nil {
		b, _ := json.Marshal(s.Email) // plain strings, lists and numbers: it cannot fail
		r.Email = string(b)
	}
	if s.Channel == KindEmail {
		b, _ := json.Marshal(emailCredentials{Password: string(s.Password)})
		r.Credentials = string(b)
	}
	return r
}
