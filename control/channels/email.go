package channels

import (
	"encoding/json"
	"fmt"
	"time"
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
