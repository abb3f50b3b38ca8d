package channels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"scv/control/api"
	"scv/control/workspace"
)

// FileName is the settings file's name in the scv config folder.
const FileName = "channels.json"

// DefaultPath is the settings file reload reads unless told otherwise:
// $XDG_CONFIG_HOME/scv/channels.json, or ~/.config/scv/channels.json.
func DefaultPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "scv", FileName), nil
}

// File is the settings file's format.
type File struct {
	Accounts []FileAccount `json:"accounts"`
}

// FileAccount is one account of the settings file. channel and account are
// required; a missing enabled is true (a listed account runs unless it
// says otherwise); the other fields missing take the defaults of a new
// account.
type FileAccount struct {
	Channel     string           `json:"channel"`
	Account     string           `json:"account"`
	Enabled     *bool            `json:"enabled,omitempty"`
	Workspace   string           `json:"workspace,omitempty"`
	RemoteTools *api.RemoteTools `json:"remote_tools,omitempty"`
	Senders     *api.Senders     `json:"senders,omitempty"`
	Purpose     *api.Purpose     `json:"purpose,omitempty"`
	OwnerID     string           `json:"owner_id,omitempty"`
	BotID       string           `json:"bot_id,omitempty"`
	// Email is an email account's settings; only channel email has one,
	// and an enabled email account must. Its password_file is read when
	// the file is.
	Email *Email `json:"email,omitempty"`
}

// ReadFile reads and checks the settings file at path: every account
// valid (as channel_set would check it), no channel:account twice. A
// missing file is an empty list. Anything wrong is a -32602
// invalid_argument *api.Error naming the file and the problem.
func ReadFile(path string) ([]Settings, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, invalid("settings file %s: %v", path, err)
	}
	list, err := ParseFile(b)
	if err != nil {
		return nil, fmt.Errorf("settings file %s: %w", path, err)
	}
	return list, nil
}

// ParseFile parses and checks a settings file's bytes as ReadFile does,
// reading the password files it names. Unknown fields are refused, so
// that a typo is not silently ignored. Whether an email account's mail
// chat is an account of purpose mail is the Manager's to check (Reload),
// which knows the accounts the file does not list.
func ParseFile(b []byte) ([]Settings, error) {
	var f struct {
		Accounts []json.RawMessage `json:"accounts"`
	}
	if err := decodeStrict(b, &f); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	list := make([]Settings, 0, len(f.Accounts))
	for i, raw := range f.Accounts {
		var a FileAccount
		err := decodeStrict(raw, &a)
		var s Settings
		if err == nil {
			s, err = a.settings()
		}
		if err != nil {
			return nil, fmt.Errorf("accounts[%d]: %w", i, err)
		}
		if seen[s.ID()] {
			return nil, invalid("accounts[%d]: %s is listed twice", i, s.ID())
		}
		seen[s.ID()] = true
		list = append(list, s)
	}
	return list, nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("unexpected data after the settings object")
	}
	return nil
}

func (a FileAccount) settings() (Settings, error) {
	if err := checkKey(a.Channel, a.Account); err != nil {
		return Settings{}, err
	}
	s := Defaults(Kind(a.Channel), a.Account)
	s.Source = SourceFile
	s.Enabled = a.Enabled == nil || *a.Enabled
	if a.Workspace != "" {
		ws, err := workspace.Check(a.Workspace)
		if err != nil {
			return Settings{}, err
		}
		s.Workspace = ws
	}
	if a.RemoteTools != nil {
		s.RemoteTools = *a.RemoteTools
	}
	if a.Senders != nil {
		s.Senders = *a.Senders
	}
	if a.Purpose != nil {
		s.Purpose = *a.Purpose
	}
	s.OwnerID, s.BotID = a.OwnerID, a.BotID
	s.Email = a.Email.clone()
	if err := s.Validate(); err != nil {
		return Settings{}, err
	}
	if s.Email != nil && s.Email.PasswordFile != "" {
		p, err := ReadPasswordFile("email.password_file", s.Email.PasswordFile)
		if err != nil {
			return Settings{}, err
		}
		s.Password = p
	}
	return s, nil
}
