package mail

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"scv/control/api"
	"scv/ledger/local"
)

// The kinds of the mail journal's records: the steps of one mail. A mail
// is claimed once, decided once, and, when reported, sent once.
const (
	// KindClaimed: the account took the mail to decide it
	// (claimedData).
	KindClaimed = "claimed"
	// KindDecided: the mail was skipped or reported (decidedData).
	KindDecided = "decided"
	// KindSent: the mail was in a digest to the mail chat (sentData).
	KindSent = "sent"
)

// Decision is what became of a mail.
type Decision string

// The decisions.
const (
	Skipped  Decision = "skipped"
	Reported Decision = "reported"
)

// By is who decided a mail.
type By string

// Who decides.
const (
	// ByRule: the account's report_from or skip_from.
	ByRule By = "rule"
	// ByBulk: the mail is bulk (a list, a bulk precedence, an
	// auto-reply), and no report_from names its sender.
	ByBulk By = "bulk"
	// ByTriage: the triage agent's answer.
	ByTriage By = "triage"
	// ByUntriaged: the documented rule for mail the agent could not
	// decide (no agent, its answer not understood, the mail partial or
	// over the size limit, the triage failed, the mail gone).
	ByUntriaged By = "untriaged"
)

// claimedData is a claimed record's evidence: at most a SHA-256 of the
// mail's Message-ID, never its text.
type claimedData struct {
	MessageID string `json:"message_id_sha256,omitempty"`
}

// decidedData is a decided record's evidence. Why is one of the fixed
// reasons of an untriaged decision (never text of the mail); Tokens the
// triage's tokens, counted against the day's budget.
type decidedData struct {
	Decision Decision `json:"decision"`
	By       By       `json:"by"`
	Why      string   `json:"why,omitempty"`
	Tokens   uint64   `json:"tokens,omitempty"`
}

// sentData is a sent record's evidence: the digest the mail went out in.
type sentData struct {
	Digest string `json:"digest"`
}

// Key names one mail of an account: its mailbox's UIDVALIDITY and its UID.
type Key struct {
	UIDValidity uint32
	UID         uint32
}

func keyOf(k local.MailKey) Key { return Key{k.UIDValidity, k.UID} }

func cmpKey(a, b Key) int {
	return cmp.Or(cmp.Compare(a.UIDValidity, b.UIDValidity), cmp.Compare(a.UID, b.UID))
}

// stage is where an open mail is: claimed and not decided, or reported
// and not sent. A mail that is done (skipped, or sent) has none.
type stage uint8

const (
	stageClaimed stage = iota + 1
	stageQueued
)

// day is what the account decided on one local day.
type day struct {
	seen, triaged, reported, tokens uint64
}

// sentDigest is one digest sent: its ID and when (its first sent record).
type sentDigest struct {
	id string
	at int64 // Unix milliseconds
}

// Fold is an account's mail journal folded record by record: where each
// open mail is, what each local day (in Loc) decided, the digests sent.
// It is pure (no clock, no I/O): the account keeps one, built from the
// store at start and added to as it appends; Counts reads it at any time.
// The zero value is not ready: use NewFold.
type Fold struct {
	loc     *time.Location
	stage   map[Key]stage
	claimed uint64
	queued  uint64
	days    map[int]day
	digests []sentDigest
	seen    map[string]bool // digest IDs
	highest map[uint32]uint32
	// last is the UIDVALIDITY of the newest claim (valid when any).
	last       uint32
	claimedAny bool
}

// NewFold is the fold of no records, its days counted in loc.
func NewFold(loc *time.Location) *Fold {
	if loc == nil {
		loc = time.Local
	}
	return &Fold{loc: loc, stage: map[Key]stage{}, days: map[int]day{}, seen: map[string]bool{}, highest: map[uint32]uint32{}}
}

// dayOf is the local day of the Unix milliseconds ms, as yyyymmdd.
func (f *Fold) dayOf(t time.Time) int {
	y, m, d := t.In(f.loc).Date()
	return y*10000 + int(m)*100 + d
}

// Add folds one record in. A record the fold cannot read (an unknown
// kind, evidence that does not parse) is an error and changes nothing.
func (f *Fold) Add(r local.MailRecord) error {
	k := keyOf(r.MailKey)
	switch r.Kind {
	case KindClaimed:
		if _, ok := f.stage[k]; !ok {
			f.stage[k] = stageClaimed
			f.claimed++
		}
		f.highest[k.UIDValidity] = max(f.highest[k.UIDValidity], k.UID)
		f.last, f.claimedAny = k.UIDValidity, true
	case KindDecided:
		var d decidedData
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
			return fmt.Errorf("mail record %d: %w", r.Seq, err)
		}
		if d.Decision != Skipped && d.Decision != Reported {
			return fmt.Errorf("mail record %d: decision %q", r.Seq, d.Decision)
		}
		if f.stage[k] == stageClaimed {
			f.claimed--
			delete(f.stage, k)
		}
		if d.Decision == Reported {
			if _, ok := f.stage[k]; !ok {
				f.stage[k] = stageQueued
				f.queued++
			}
		}
		n := f.dayOf(time.UnixMilli(r.Timestamp))
		c := f.days[n]
		c.seen++
		c.tokens += d.Tokens
		if d.By == ByTriage {
			c.triaged++
		}
		if d.Decision == Reported {
			c.reported++
		}
		f.days[n] = c
	case KindSent:
		var d sentData
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
			return fmt.Errorf("mail record %d: %w", r.Seq, err)
		}
		if f.stage[k] == stageQueued {
			f.queued--
			delete(f.stage, k)
		}
		if !f.seen[d.Digest] {
			f.seen[d.Digest] = true
			f.digests = append(f.digests, sentDigest{id: d.Digest, at: r.Timestamp})
		}
	default:
		return fmt.Errorf("mail record %d: unknown kind %q", r.Seq, r.Kind)
	}
	return nil
}

// Counts is the account's MailCounts at now: claimed and queued as the
// journal leaves them; seen, triaged, reported and tokens over the local
// day of now; the digests sent in the 24 hours up to now.
func (f *Fold) Counts(now time.Time, budget uint64, lastCheck time.Time) api.MailCounts {
	today := f.days[f.dayOf(now)]
	c := api.MailCounts{
		Claimed: f.claimed, Queued: f.queued,
		SeenToday: today.seen, TriagedToday: today.triaged, ReportedToday: today.reported, TokensToday: today.tokens,
		TokenBudget: budget, Messages24h: f.digestsSince(now.Add(-24*time.Hour), now),
	}
	if !lastCheck.IsZero() {
		c.LastCheckUnixSeconds = new(uint64(max(lastCheck.Unix(), 0)))
	}
	return c
}

// Counts is the MailCounts the records make at now, their days counted in
// loc: the fold of records, as the daemon reports it.
func Counts(records []local.MailRecord, now time.Time, loc *time.Location, budget uint64, lastCheck time.Time) api.MailCounts {
	f := NewFold(loc)
	for _, r := range records {
		_ = f.Add(r) // a record the fold cannot read counts for nothing
	}
	return f.Counts(now, budget, lastCheck)
}

// digestsSince counts the digests sent after from, up to to.
func (f *Fold) digestsSince(from, to time.Time) uint64 {
	var n uint64
	for i := len(f.digests) - 1; i >= 0; i-- {
		at := time.UnixMilli(f.digests[i].at)
		if at.After(to) {
			continue
		}
		if !at.After(from) {
			break
		}
		n++
	}
	return n
}

// TokensToday is the triage's tokens on the local day of now.
func (f *Fold) TokensToday(now time.Time) uint64 { return f.days[f.dayOf(now)].tokens }

// DigestsToday is the digests sent on the local day of now.
func (f *Fold) DigestsToday(now time.Time) int {
	n, today := 0, f.dayOf(now)
	for i := len(f.digests) - 1; i >= 0; i-- {
		switch d := f.dayOf(time.UnixMilli(f.digests[i].at)); {
		case d == today:
			n++
		case d < today:
			return n
		}
	}
	return n
}

// Digests is how many digests were ever sent: the next is numbered one
// more.
func (f *Fold) Digests() int { return len(f.digests) }

// LastDigest is when the newest digest was sent, zero when none was.
func (f *Fold) LastDigest() time.Time {
	if len(f.digests) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(f.digests[len(f.digests)-1].at)
}

// Highest is the highest UID claimed under uidValidity, 0 when none.
func (f *Fold) Highest(uidValidity uint32) uint32 { return f.highest[uidValidity] }

// LastValidity is the UIDVALIDITY of the newest claim, and whether there
// was one.
func (f *Fold) LastValidity() (uint32, bool) { return f.last, f.claimedAny }

// Undecided is the mails claimed and not decided, in key order.
func (f *Fold) Undecided() []Key {
	var out []Key
	for k, s := range f.stage {
		if s == stageClaimed {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, cmpKey)
	return out
}

// Queued is how many mails wait for a digest.
func (f *Fold) Queued() uint64 { return f.queued }

// Loc is the zone the fold's days are counted in.
func (f *Fold) Loc() *time.Location { return f.loc }

// nextDay is the start of the local day after now's.
func nextDay(now time.Time, loc *time.Location) time.Time {
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}
