package mail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"

	"scv/control/channels"
	"scv/ledger/local"
)

// digestRetry is how long a digest the mail chat could not take waits
// before it is told again.
const digestRetry = 30 * time.Second

// lost is the mailbox's connection lost: the account is disconnected.
type lost struct{ err error }

func (l lost) Error() string { return l.err.Error() }
func (l lost) Unwrap() error { return l.err }

// account is one run of an email account: its settings, its mailbox, and
// its loop (serve). It is used by the run's goroutine alone; its view is
// shared with Counts under Service.mu.
type account struct {
	s     *Service
	name  string
	e     channels.Email
	rules Rules
	loc   *time.Location
	view  *view
	log   *slog.Logger
	mb    Mailbox
	h     channels.Health

	triager Triager
	// held: the day's tokens reached the budget and a mail waits for the
	// triage, unclaimed, until the next local day.
	held bool
	// nextDigest is when a digest the chat could not take is told again;
	// digestFailing says the last try failed (logged once).
	nextDigest    time.Time
	digestFailing bool
	// uv is the mailbox's UIDVALIDITY as the last check found it (at
	// first, that of the journal's newest claim).
	uv      uint32
	uvKnown bool
}

func (a *account) now() time.Time { return a.s.clock().Now() }

// fold runs f on the account's fold under the Service's lock.
func (a *account) fold(f func(*Fold)) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	f(a.view.fold)
}

func (a *account) close() {
	if a.triager != nil {
		a.triager.Close()
		a.triager = nil
	}
}

// serve is the account's loop: a digest told before a crash is recorded
// sent; then, until ctx ends or the connection is lost, check the mailbox
// (decide what was claimed and not decided, claim and decide what is
// new), tell a digest when one is due, and wait for new mail or the next
// digest.
func (a *account) serve(ctx context.Context) error {
	if err := a.resumeDigest(ctx); err != nil {
		return err
	}
	for {
		more, err := a.check(ctx)
		if err != nil {
			return err
		}
		a.s.mu.Lock()
		a.view.lastCheck = a.now()
		a.s.mu.Unlock()
		a.h.Success()
		if more {
			continue
		}
		if err := a.digest(ctx); err != nil {
			return err
		}
		if err := a.wait(ctx); err != nil {
			return err
		}
	}
}

// check decides the mails claimed and not decided, then claims and
// decides the new ones, in UID order, until the budget holds them. more
// says the mailbox may have more new mail at once.
func (a *account) check(ctx context.Context) (more bool, err error) {
	var undecided []Key
	a.fold(func(f *Fold) { undecided = f.Undecided() })
	for _, k := range undecided {
		m, err := a.fetch(ctx, k)
		if err != nil {
			return false, err
		}
		if _, err := a.decide(ctx, k, m, true); err != nil {
			return false, err
		}
	}
	var after uint32
	a.fold(func(f *Fold) {
		if !a.uvKnown {
			a.uv, _ = f.LastValidity()
			a.uvKnown = true
		}
		after = f.Highest(a.uv)
	})
	got, mails, err := a.mb.Check(ctx, after, MaxCheck)
	if err != nil {
		return false, lost{err}
	}
	if got != a.uv {
		// A new UIDVALIDITY: the UIDs claimed before name other mails,
		// or none; the account starts over with every mail of the box.
		if after > 0 {
			a.log.Info("the mailbox has a new UIDVALIDITY: its mails are claimed anew", "uid_validity", got)
		}
		a.uv = got
		var again uint32
		a.fold(func(f *Fold) { again = f.Highest(got) })
		if again != after {
			return true, nil
		}
	}
	a.held = false
	for i := range mails {
		held, err := a.decide(ctx, Key{got, mails[i].UID}, &mails[i], false)
		if err != nil {
			return false, err
		}
		if held {
			a.held = true
			return false, nil
		}
	}
	return len(mails) == MaxCheck, nil
}

// fetch is the mail k names, or nil when the mailbox no longer has it
// (expunged, or under a new UIDVALIDITY).
func (a *account) fetch(ctx context.Context, k Key) (*Mail, error) {
	uv, mails, err := a.mb.Check(ctx, k.UID-1, 1)
	if err != nil {
		return nil, lost{err}
	}
	if uv != k.UIDValidity || len(mails) == 0 || mails[0].UID != k.UID {
		return nil, nil
	}
	return &mails[0], nil
}

// decide decides the mail m (k; nil: gone from the mailbox) and records
// it: by the rules, by the documented rule for mail the agent cannot
// triage, or by the triage agent. A new mail (claimed false) is claimed
// in the same step as its decision, or, for the triage, before it; when
// the day's tokens have reached the budget it is not claimed at all
// (held).
func (a *account) decide(ctx context.Context, k Key, m *Mail, claimed bool) (held bool, err error) {
	var recs []local.MailRecord
	if !claimed && m != nil {
		recs = append(recs, a.record(k, KindClaimed, claimedData{MessageID: hashID(m.MessageID)}))
	}
	if m == nil {
		return false, a.decided(ctx, k, recs, nil, decidedData{Decision: Skipped, By: ByUntriaged, Why: WhyGone}, "")
	}
	if v := a.rules.Decide(m); v.Decided {
		return false, a.decided(ctx, k, recs, m, decidedData{Decision: v.Decision, By: v.By}, "")
	}
	if why := a.untriaged(m); why != "" {
		return false, a.decided(ctx, k, recs, m, decidedData{Decision: Reported, By: ByUntriaged, Why: why}, untriagedSummary[why])
	}
	if !claimed {
		var spent uint64
		a.fold(func(f *Fold) { spent = f.TokensToday(a.now()) })
		if a.e.TokenBudget > 0 && spent >= a.e.TokenBudget {
			return true, nil
		}
		if err := a.append(ctx, recs, nil, nil); err != nil {
			return false, err
		}
		recs = nil
	}
	d, summary, err := a.triage(ctx, m)
	if err != nil {
		return false, err // ctx ended: the mail stays claimed, decided at the next start
	}
	return false, a.decided(ctx, k, recs, m, d, summary)
}

// untriaged is why m is reported without the triage, or "": it is partial
// or over the size limit, or the account has no triage agent.
func (a *account) untriaged(m *Mail) string {
	switch {
	case m.Size > MaxMailSize:
		return WhyOversize
	case m.Partial:
		return WhyPartial
	case len(a.e.TriageAgent) == 0 || a.s.Triage == nil:
		return WhyNoAgent
	}
	return ""
}

// triage asks the triage agent about m: its decision (by triage, or
// reported untriaged when the agent fails or answers nonsense), the
// summary, and the tokens spent. An error is ctx's: the account stops.
func (a *account) triage(ctx context.Context, m *Mail) (decidedData, string, error) {
	fail := func(why string, tokens uint64) (decidedData, string, error) {
		return decidedData{Decision: Reported, By: ByUntriaged, Why: why, Tokens: tokens}, untriagedSummary[why], nil
	}
	if a.triager == nil {
		t, err := a.s.Triage(ctx, a.name, a.e.TriageAgent)
		if ctx.Err() != nil {
			return decidedData{}, "", ctx.Err()
		}
		if err != nil {
			a.log.Warn("the triage agent did not start; the mail is reported untriaged", "err", err)
			return fail(WhyFailed, 0)
		}
		a.triager = t
	}
	tctx, cancel := context.WithTimeout(ctx, TriageTimeout)
	answer, tokens, err := a.triager.Triage(tctx, Prompt(m))
	cancel()
	if ctx.Err() != nil {
		return decidedData{}, "", ctx.Err()
	}
	if err != nil {
		// The error may quote the agent, which may quote the mail: not
		// logged.
		a.log.Warn("the triage failed; the mail is reported untriaged, and the agent started again for the next")
		a.triager.Close()
		a.triager = nil
		return fail(WhyFailed, tokens)
	}
	d, summary, ok := ParseAnswer(answer)
	if !ok {
		return fail(WhyNonsense, tokens)
	}
	return decidedData{Decision: d, By: ByTriage, Tokens: tokens}, summary, nil
}

// decided records the decision d of mail k after recs, and its outbox
// item when it is reported.
func (a *account) decided(ctx context.Context, k Key, recs []local.MailRecord, m *Mail, d decidedData, summary string) error {
	recs = append(recs, a.record(k, KindDecided, d))
	var put []local.MailItem
	if d.Decision == Reported {
		put = []local.MailItem{{MailKey: a.key(k), Data: marshal(itemOf(m, summary))}}
	}
	if err := a.append(ctx, recs, put, nil); err != nil {
		return err
	}
	if a.s.Metrics != nil {
		a.s.Metrics.MailDecided(a.name, string(d.Decision))
	}
	return nil
}

// resumeDigest records sent the digest told before the daemon stopped and
// not recorded: the outbox is as it was when it was told (nothing else
// changes it in between), so its first MaxDigestMails items are the
// digest's.
func (a *account) resumeDigest(ctx context.Context) error {
	var n int
	a.fold(func(f *Fold) { n = f.Digests() + 1 })
	id := digestID(a.name, n)
	if !a.s.Chats.Told(id) {
		return nil
	}
	items, err := a.s.Store.MailOutbox(ctx, a.name)
	if err != nil {
		return err
	}
	a.log.Info("a digest told before the daemon stopped is recorded sent", "digest", id)
	return a.sent(ctx, id, items[:min(len(items), MaxDigestMails)])
}

// digest tells the mail chat a digest of the outbox, when one is due: at
// most one per digest_every, at most digests_per_day a local day. A chat
// that cannot take it now is told again after digestRetry.
func (a *account) digest(ctx context.Context) error {
	now := a.now()
	due, ok := a.digestDue(now)
	if !ok || now.Before(due) {
		return nil
	}
	items, err := a.s.Store.MailOutbox(ctx, a.name)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		a.log.Error("mails are queued, and the outbox has none of them")
		a.nextDigest = now.Add(a.every())
		return nil
	}
	var n int
	a.fold(func(f *Fold) { n = f.Digests() + 1 })
	id := digestID(a.name, n)
	shown := items[:min(len(items), MaxDigestMails)]
	if _, err := a.s.Chats.TellMail(ctx, a.e.MailChat, id, digestText(a.name, shown, len(items)-len(shown))); err != nil {
		if !a.digestFailing {
			a.log.Warn("the mail chat did not take the digest; told again every 30s until it does", "digest", id, "err", err)
		}
		a.digestFailing, a.nextDigest = true, now.Add(digestRetry)
		return nil
	}
	if a.digestFailing {
		a.log.Info("the mail chat took the digest", "digest", id)
		a.digestFailing = false
	}
	return a.sent(ctx, id, shown)
}

// sent records items sent in the digest id, and takes them out of the
// outbox, in one step.
func (a *account) sent(ctx context.Context, id string, items []local.MailItem) error {
	recs := make([]local.MailRecord, len(items))
	del := make([]local.MailKey, len(items))
	for i, it := range items {
		recs[i] = a.record(keyOf(it.MailKey), KindSent, sentData{Digest: id})
		del[i] = it.MailKey
	}
	return a.append(ctx, recs, nil, del)
}

// digestDue is when the next digest may be told, and whether one is
// waiting at all.
func (a *account) digestDue(now time.Time) (time.Time, bool) {
	var queued uint64
	var last time.Time
	var today int
	a.fold(func(f *Fold) { queued, last, today = f.Queued(), f.LastDigest(), f.DigestsToday(now) })
	if queued == 0 {
		return time.Time{}, false
	}
	due := a.nextDigest
	if !last.IsZero() && last.Add(a.every()).After(due) {
		due = last.Add(a.every())
	}
	perDay := a.e.DigestsPerDay
	if perDay <= 0 {
		perDay = channels.DefaultDigestsPerDay
	}
	if today >= perDay {
		if next := nextDay(now, a.loc); next.After(due) {
			due = next
		}
	}
	return due, true
}

func (a *account) every() time.Duration {
	if a.e.DigestEvery <= 0 {
		return channels.DefaultDigestEvery
	}
	return time.Duration(a.e.DigestEvery)
}

// wait waits for new mail, or for the next thing the clock brings: a
// digest due, or the next local day when the budget holds mail back.
func (a *account) wait(ctx context.Context) error {
	now := a.now()
	var wake time.Time
	if due, ok := a.digestDue(now); ok {
		wake = due
	}
	if a.held {
		if next := nextDay(now, a.loc); wake.IsZero() || next.Before(wake) {
			wake = next
		}
	}
	if !wake.IsZero() && !wake.After(now) {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !wake.IsZero() {
		timer := a.s.clock().After(wake.Sub(now))
		go func() {
			select {
			case <-timer:
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	poll := time.Duration(a.e.Poll)
	if poll <= 0 {
		poll = channels.DefaultPoll
	}
	err := a.mb.Wait(wctx, poll)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case wctx.Err() != nil:
		return nil // the clock's turn: a check shows whether the box survived the wait
	case err != nil:
		return lost{err}
	}
	return nil
}

// record is a record of kind about the mail k, stamped now.
func (a *account) record(k Key, kind string, data any) local.MailRecord {
	return local.MailRecord{MailKey: a.key(k), Kind: kind, Timestamp: a.now().UnixMilli(), Data: marshal(data)}
}

func (a *account) key(k Key) local.MailKey {
	return local.MailKey{Account: a.name, UIDValidity: k.UIDValidity, UID: k.UID}
}

// append appends to the journal and the outbox in one step, then folds
// the records in.
func (a *account) append(ctx context.Context, recs []local.MailRecord, put []local.MailItem, del []local.MailKey) error {
	out, err := a.s.Store.AppendMail(ctx, recs, put, del)
	if err != nil {
		return err
	}
	a.fold(func(f *Fold) {
		for _, r := range out {
			if err := f.Add(r); err != nil {
				a.log.Error("a mail record the fold cannot take", "err", err)
			}
		}
	})
	return nil
}

// hashID is the SHA-256 of a Message-ID, hex, or "" for none: what the
// journal may keep of a mail.
func hashID(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
