package channels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"scv/control/api"
)

// Email is an email account's own settings: its `email` object in the
// settings file (docs/mail.md). Only accounts of channel email have one.
// The password is never here: PasswordFile names where it is read from,
// and the account's stored credentials keep what was read.
type Email struct {
	// IMAP is imaps://host[:port] or imap://host[:port] (STARTTLS; plain
	// text only to a loopback address).
	IMAP         string `json:"imap"`
	User         string `json:"user"`
	PasswordFile string `json:"password_file,omitempty"`
	// MailChat is the chat (`<channel>:<account>`) of purpose mail that
	// the account's digests go to.
	MailChat string `json:"mail_chat"`
	// ReportFrom and SkipFrom are senders (me@example.com) or domains
	// (@example.com) always, or never, reported.
	ReportFrom []string `json:"report_from,omitempty"`
	SkipFrom   []string `json:"skip_from,omitempty"`
	// TriageAgent is the ACP agent's command and arguments that triages
	// the mail no rule decides; empty: such mail is reported untriaged.
	TriageAgent []string `json:"triage_agent,omitempty"`
	// TokenBudget is the triage's tokens a day; 0 is no budget.
	TokenBudget uint64 `json:"token_budget,omitempty"`
	// DigestEvery is the least time between two digests (DefaultDigestEvery
	// when 0), DigestsPerDay the most digests a day (DefaultDigestsPerDay
	// when 0).
	DigestEvery   Duration `json:"digest_every,omitempty"`
	DigestsPerDay int      `json:"digests_per_day,omitempty"`
	// Poll is how often a mailbox whose server has no IDLE is checked
	// (DefaultPoll when 0).
	Poll Duration `json:"poll,omitempty"`
	// TimeZone is an IANA name (Europe/Berlin) that the account's days are
	// counted in; "" is the machine's.
	TimeZone string `json:"time_zone,omitempty"`
}

// The defaults of an email account's settings.
const (
	DefaultDigestEvery   = 15 * time.Minute
	DefaultDigestsPerDay = 24
	DefaultPoll          = time.Minute
)

// Duration is a time.Duration written in Go's syntax ("15m", "1s").
type Duration time.Duration

// MarshalJSON writes d in Go's syntax.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration in Go's syntax.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"15m\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Limits of an email account's settings and credentials.
const (
	// MaxIMAPLen is the longest IMAP URL, in bytes.
	MaxIMAPLen = 512
	// MaxUserLen is the longest user name, in bytes.
	MaxUserLen = 320
	// MaxPasswordLen is the longest password, in bytes.
	MaxPasswordLen = 1024
	// MaxFromRules is the most entries of report_from, and of skip_from.
	MaxFromRules = 1000
	// MaxAddressLen is the longest entry of report_from or skip_from.
	MaxAddressLen = 254
	// MaxTriageArgs is the most words of triage_agent (the command and
	// its arguments), MaxTriageArgLen the longest word, in bytes.
	MaxTriageArgs   = 64
	MaxTriageArgLen = 4096
	// MaxDigestsPerDay is the most digests_per_day: one a second.
	MaxDigestsPerDay = 86400
	// MinInterval is the least digest_every and poll.
	MinInterval = time.Second
)

// UnmarshalJSON reads the settings file's email object strictly (an
// unknown field is refused) and names the field of a value of the wrong
// kind. A digest_every or poll that is given must be at least
// MinInterval, a digests_per_day at least 1, a triage_agent not empty;
// the other checks are check's.
func (e *Email) UnmarshalJSON(b []byte) error {
	type plain Email
	v := struct {
		*plain
		TokenBudget   json.RawMessage `json:"token_budget"`
		DigestsPerDay json.RawMessage `json:"digests_per_day"`
		DigestEvery   json.RawMessage `json:"digest_every"`
		Poll          json.RawMessage `json:"poll"`
	}{plain: (*plain)(e)}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("email.%s: want %s, not a %s", strings.TrimPrefix(te.Field, "plain."), kindOf(te.Type), te.Value)
		}
		return fmt.Errorf("email: %w", err)
	}
	if v.TriageAgent != nil && len(v.TriageAgent) == 0 {
		return errors.New("email.triage_agent: the command is empty")
	}
	if present(v.TokenBudget) && json.Unmarshal(v.TokenBudget, &e.TokenBudget) != nil {
		return errors.New("email.token_budget: want a whole number of tokens (0 for no budget)")
	}
	if present(v.DigestsPerDay) {
		if json.Unmarshal(v.DigestsPerDay, &e.DigestsPerDay) != nil || e.DigestsPerDay < 1 {
			return errors.New("email.digests_per_day: want a whole number, at least 1")
		}
	}
	for _, d := range []struct {
		name string
		raw  json.RawMessage
		dst  *Duration
	}{{"digest_every", v.DigestEvery, &e.DigestEvery}, {"poll", v.Poll, &e.Poll}} {
		if !present(d.raw) {
			continue
		}
		if json.Unmarshal(d.raw, d.dst) != nil || time.Duration(*d.dst) < MinInterval {
			return fmt.Errorf("email.%s: want a duration such as \"15m\" or \"30s\", at least %s", d.name, MinInterval)
		}
	}
	return nil
}

// present reports whether a member was given, and not null.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// kindOf names what a JSON value of type t is, for an error.
func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	}
	return t.String()
}

// check checks every field (the mail chat's format, not that it exists:
// the Manager checks that) and returns a -32602 invalid_argument naming
// the first that is wrong. It never echoes anything of a URL with a user
// or password in it.
func (e *Email) check() error {
	if err := checkIMAP(e.IMAP); err != nil {
		return err
	}
	switch {
	case e.User == "":
		return invalid("email.user is empty")
	case len(e.User) > MaxUserLen:
		return invalid("email.user is longer than %d bytes", MaxUserLen)
	case !printable(e.User):
		return invalid("email.user holds a control character")
	}
	if e.PasswordFile != "" && !filepath.IsAbs(e.PasswordFile) {
		return invalid("email.password_file %q is not an absolute path", e.PasswordFile)
	}
	if err := checkMailChatName(e.MailChat); err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"report_from", e.ReportFrom}, {"skip_from", e.SkipFrom}} {
		if len(l.list) > MaxFromRules {
			return invalid("email.%s has more than %d entries", l.name, MaxFromRules)
		}
		for i, a := range l.list {
			if err := checkSender(a); err != nil {
				return invalid("email.%s[%d]: %v", l.name, i, err)
			}
		}
	}
	if err := checkTriageAgent(e.TriageAgent); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"digest_every", e.DigestEvery}, {"poll", e.Poll}} {
		if d.v != 0 && time.Duration(d.v) < MinInterval {
			return invalid("email.%s %s: want at least %s", d.name, time.Duration(d.v), MinInterval)
		}
	}
	if e.DigestsPerDay < 0 || e.DigestsPerDay > MaxDigestsPerDay {
		return invalid("email.digests_per_day %d: want 1 to %d", e.DigestsPerDay, MaxDigestsPerDay)
	}
	if e.TimeZone != "" {
		if _, err := time.LoadLocation(e.TimeZone); err != nil {
			return invalid("email.time_zone %q: not a time zone this machine knows (an IANA name such as Europe/Berlin)", e.TimeZone)
		}
	}
	return nil
}

// checkIMAP checks the IMAP URL: imaps://host[:port] (TLS) or
// imap://host[:port] (STARTTLS), nothing else. imap:// to any host is
// accepted here: the connector requires STARTTLS, and speaks plain text
// only to a loopback address whose server offers none.
func checkIMAP(u string) error {
	switch {
	case u == "":
		return invalid("email.imap is empty: want imaps://host[:port] or imap://host[:port]")
	case len(u) > MaxIMAPLen:
		return invalid("email.imap is longer than %d bytes", MaxIMAPLen)
	case strings.Contains(u, "@"):
		// Never echoed: it may hold a password.
		return invalid("email.imap holds a user or password: put the user in email.user and the password in a password file")
	case !printable(u):
		return invalid("email.imap holds a control character")
	}
	p, err := url.Parse(u)
	if err != nil || p.Opaque != "" {
		return invalid("email.imap %q is not a URL: want imaps://host[:port] or imap://host[:port]", u)
	}
	switch {
	case p.Scheme == "":
		return invalid("email.imap %q: want imaps:// (TLS) or imap:// (STARTTLS) before the host", u)
	case p.Scheme != "imaps" && p.Scheme != "imap":
		return invalid("email.imap %q: want imaps:// (TLS) or imap:// (STARTTLS), not %s://", u, p.Scheme)
	case p.Hostname() == "":
		return invalid("email.imap %q has no host", u)
	case p.Path != "" && p.Path != "/", p.RawQuery != "", p.Fragment != "", p.ForceQuery:
		return invalid("email.imap %q: want imaps://host[:port], without a path, query or fragment", u)
	}
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return invalid("email.imap %q: port %q is not 1 to 65535", u, port)
		}
	} else if strings.HasSuffix(p.Host, ":") {
		return invalid("email.imap %q: the port is empty", u)
	}
	return nil
}

// IsLoopback reports whether the IMAP URL's host is a loopback address
// (127.0.0.0/8, ::1) or localhost: the only hosts a connector may speak
// plain text to.
func IsLoopback(imapURL string) bool {
	p, err := url.Parse(imapURL)
	if err != nil {
		return false
	}
	h := p.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// checkMailChatName checks the mail chat's form: `<channel>:<account>`,
// not an email account.
func checkMailChatName(chat string) error {
	if chat == "" {
		return invalid("email.mail_chat is empty: name the chat account of purpose mail that gets the digests, such as local:mail")
	}
	channel, _, err := api.ParseChat(chat)
	if err != nil {
		return invalid("email.mail_chat: %s", err)
	}
	if Kind(channel) == KindEmail {
		return invalid("email.mail_chat %s is an email account: name a chat account of purpose mail, such as local:mail", chat)
	}
	return nil
}

// checkSender checks an entry of report_from or skip_from: an address
// (me@example.com) or a domain (@example.com).
func checkSender(a string) error {
	if len(a) > MaxAddressLen {
		return fmt.Errorf("longer than %d bytes", MaxAddressLen)
	}
	local, domain, ok := strings.Cut(a, "@")
	switch {
	case !ok || strings.Contains(domain, "@"):
		return fmt.Errorf("%q: want an address (me@example.com) or a domain (@example.com)", a)
	case strings.ContainsFunc(local, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '<' || r == '>' || r == ',' }):
		return fmt.Errorf("%q: want a bare address, without a name, spaces or brackets", a)
	}
	if !validDomain(domain) {
		return fmt.Errorf("%q: %q is not a domain name", a, domain)
	}
	return nil
}

// validDomain reports whether d is a domain name: dot-separated labels of
// letters, digits and hyphens (or any non-ASCII letter, for international
// names), none empty, none starting or ending with a hyphen.
func validDomain(d string) bool {
	if d == "" {
		return false
	}
	for _, l := range strings.Split(d, ".") {
		if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 0x7f && unicode.IsLetter(r)) {
				return false
			}
		}
	}
	return true
}

// checkTriageAgent checks the triage agent's command: none, or a command
// (not empty) and its arguments, within the limits, without NUL bytes.
func checkTriageAgent(cmd []string) error {
	if cmd == nil {
		return nil
	}
	switch {
	case len(cmd) == 0 || cmd[0] == "":
		return invalid("email.triage_agent: the command is empty")
	case len(cmd) > MaxTriageArgs:
		return invalid("email.triage_agent has more than %d words", MaxTriageArgs)
	}
	for i, a := range cmd {
		if len(a) > MaxTriageArgLen {
			return invalid("email.triage_agent[%d] is longer than %d bytes", i, MaxTriageArgLen)
		}
		if strings.ContainsRune(a, 0) {
			return invalid("email.triage_agent[%d] holds a NUL byte", i)
		}
	}
	return nil
}

// CheckPassword checks a password, without ever echoing it: not empty,
// at most MaxPasswordLen bytes, one line.
func CheckPassword(p Secret) error {
	switch {
	case p == "":
		return invalid("the password is empty")
	case len(p) > MaxPasswordLen:
		return invalid("the password is longer than %d bytes", MaxPasswordLen)
	case strings.ContainsAny(string(p), "\x00\r\n"):
		return invalid("the password holds a line break or a NUL byte: it is one line")
	}
	return nil
}

// Password reads a password from the bytes of a password file or of
// standard input: all of them, one trailing newline ("\n" or "\r\n")
// trimmed, checked by CheckPassword.
func Password(b []byte) (Secret, error) {
	s := strings.TrimSuffix(string(b), "\n")
	s = strings.TrimSuffix(s, "\r")
	p := Secret(s)
	return p, CheckPassword(p)
}

// ReadPasswordFile reads the password in the file at path (Password's
// rule). An error names field (the setting or flag that named the file)
// and the file, never what it holds.
func ReadPasswordFile(field, path string) (Secret, error) {
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", invalid("%s %s does not exist", field, path)
	case err != nil:
		return "", invalid("%s %s cannot be read: %v", field, path, errors.Unwrap(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPasswordLen+3))
	if err != nil {
		return "", invalid("%s %s cannot be read: %v", field, path, errors.Unwrap(err))
	}
	p, err := Password(b)
	if err != nil {
		return "", invalid("%s %s: %v", field, path, err)
	}
	return p, nil
}

// printable reports whether s holds no control character.
func printable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f })
}

// clone is a deep copy of e (nil for nil), with empty lists as nil.
func (e *Email) clone() *Email {
	if e == nil {
		return nil
	}
	c := *e
	c.ReportFrom = nilIfEmpty(slices.Clone(e.ReportFrom))
	c.SkipFrom = nilIfEmpty(slices.Clone(e.SkipFrom))
	c.TriageAgent = nilIfEmpty(slices.Clone(e.TriageAgent))
	return &c
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// equal reports whether e and o are the same settings (nil and an empty
// list are the same).
func (e *Email) equal(o *Email) bool {
	if e == nil || o == nil {
		return e == o
	}
	return reflect.DeepEqual(e.clone(), o.clone())
}
