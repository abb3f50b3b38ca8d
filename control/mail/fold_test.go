package mail_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/mail"
	"scv/ledger/local"
)

func rec(uv, uid uint32, kind string, at time.Time, data string) local.MailRecord {
	return local.MailRecord{MailKey: local.MailKey{Account: "work", UIDValidity: uv, UID: uid}, Kind: kind,
		Timestamp: at.UnixMilli(), Data: data}
}

func decided(d mail.Decision, by mail.By, tokens uint64) string {
	b, _ := json.Marshal(map[string]any{"decision": d, "by": by, "tokens": tokens})
	return string(b)
}

func sent(digest string) string { return `{"digest":"` + digest + `"}` }

// TestCountsOfADay: the counts of a worked example, by hand: a day's
// decisions in Berlin, a mail decided the day before, digests inside and
// outside the 24 hours.
func TestCountsOfADay(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, berlin)
	midnight := time.Date(2025, 3, 9, 23, 30, 0, 0, time.UTC) // 00:30 in Berlin: today there, yesterday in UTC
	records := []local.MailRecord{
		rec(1, 1, mail.KindClaimed, midnight, `{}`),
		rec(1, 1, mail.KindDecided, midnight, decided(mail.Reported, mail.ByTriage, 500)),
		rec(1, 1, mail.KindSent, midnight, sent("mail-work-1")),
		rec(1, 2, mail.KindClaimed, now.Add(-3*time.Hour), `{}`),
		rec(1, 2, mail.KindDecided, now.Add(-3*time.Hour), decided(mail.Reported, mail.ByRule, 0)),
		rec(1, 3, mail.KindClaimed, now.Add(-2*time.Hour), `{}`),
		rec(1, 3, mail.KindDecided, now.Add(-2*time.Hour), decided(mail.Skipped, mail.ByBulk, 0)),
		rec(1, 4, mail.KindClaimed, now.Add(-time.Hour), `{}`),
		rec(1, 4, mail.KindDecided, now.Add(-time.Hour), decided(mail.Skipped, mail.ByTriage, 300)),
		rec(1, 5, mail.KindClaimed, now.Add(-time.Hour), `{}`),
		rec(1, 5, mail.KindDecided, now.Add(-time.Hour), decided(mail.Reported, mail.ByTriage, 200)),
		rec(1, 2, mail.KindSent, now.Add(-30*time.Minute), sent("mail-work-2")),
		rec(1, 6, mail.KindClaimed, now.Add(-time.Minute), `{}`), // under triage
	}
	check := time.Unix(1_741_600_000, 0)
	got := mail.Counts(records, now, berlin, 1000, check)
	want := api.MailCounts{
		Claimed: 1, Queued: 1, SeenToday: 5, TriagedToday: 3, ReportedToday: 3, TokensToday: 1000, TokenBudget: 1000,
		Messages24h: 2, LastCheckUnixSeconds: new(uint64(1_741_600_000)),
	}
	assert.Equal(t, want, got)

	// In UTC mail 1 was decided the day before: it counts for nothing.
	utc := mail.Counts(records, now, time.UTC, 1000, time.Time{})
	assert.Equal(t, uint64(4), utc.SeenToday)
	assert.Equal(t, uint64(500), utc.TokensToday)
	assert.Nil(t, utc.LastCheckUnixSeconds, "no check yet")

	// A day later: the day's counts are gone, the 24 hours slid past
	// both digests, and what is open stays open.
	later := mail.Counts(records, now.Add(24*time.Hour), berlin, 1000, time.Time{})
	assert.Equal(t, api.MailCounts{Claimed: 1, Queued: 1, TokenBudget: 1000}, later)
}

// TestFoldRefusesWhatItCannotRead: a record of an unknown kind, or
// evidence that does not parse, changes nothing.
func TestFoldRefusesWhatItCannotRead(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := mail.NewFold(time.UTC)
	require.NoError(t, f.Add(rec(1, 1, mail.KindClaimed, now, `{}`)))
	before := f.Counts(now, 0, time.Time{})
	assert.Error(t, f.Add(rec(1, 1, "forwarded", now, `{}`)))
	assert.Error(t, f.Add(rec(1, 1, mail.KindDecided, now, `{"decision":"maybe","by":"rule"}`)))
	assert.Error(t, f.Add(rec(1, 1, mail.KindDecided, now, `not json`)))
	assert.Error(t, f.Add(rec(1, 1, mail.KindSent, now, `[]`)))
	assert.Equal(t, before, f.Counts(now, 0, time.Time{}))
	assert.Equal(t, []mail.Key{{UIDValidity: 1, UID: 1}}, f.Undecided())
}

// naive is the counts recomputed from scratch, the plainest way: every
// mail's fate read from all its records, each count a filter.
func naive(records []local.MailRecord, now time.Time, loc *time.Location, budget uint64) api.MailCounts {
	type fate struct{ claimed, decided, reported, sent bool }
	fates := map[mail.Key]*fate{}
	sameDay := func(ms int64) bool {
		y1, m1, d1 := time.UnixMilli(ms).In(loc).Date()
		y2, m2, d2 := now.In(loc).Date()
		return y1 == y2 && m1 == m2 && d1 == d2
	}
	c := api.MailCounts{TokenBudget: budget}
	firstSent := map[string]int64{}
	for _, r := range records {
		k := mail.Key{UIDValidity: r.UIDValidity, UID: r.UID}
		if fates[k] == nil {
			fates[k] = &fate{}
		}
		switch r.Kind {
		case mail.KindClaimed:
			fates[k].claimed = true
		case mail.KindDecided:
			var d struct {
				Decision mail.Decision
				By       mail.By
				Tokens   uint64
			}
			if json.Unmarshal([]byte(r.Data), &d) != nil {
				panic(r.Data)
			}
			fates[k].decided = true
			fates[k].reported = fates[k].reported || d.Decision == mail.Reported
			if sameDay(r.Timestamp) {
				c.SeenToday++
				c.TokensToday += d.Tokens
				if d.By == mail.ByTriage {
					c.TriagedToday++
				}
				if d.Decision == mail.Reported {
					c.ReportedToday++
				}
			}
		case mail.KindSent:
			fates[k].sent = true
			var d struct{ Digest string }
			_ = json.Unmarshal([]byte(r.Data), &d)
			if _, ok := firstSent[d.Digest]; !ok {
				firstSent[d.Digest] = r.Timestamp
			}
		}
	}
	for _, f := range fates {
		if f.claimed && !f.decided {
			c.Claimed++
		}
		if f.reported && !f.sent {
			c.Queued++
		}
	}
	for _, at := range firstSent {
		if t := time.UnixMilli(at); t.After(now.Add(-24*time.Hour)) && !t.After(now) {
			c.Messages24h++
		}
	}
	return c
}

// TestFoldAgreesWithANaiveRecount: over random journals as an account
// writes them (mails claimed in UID order under one UIDVALIDITY or a new
// one, decided by every way, reported ones sent in digests, their steps
// interleaved, over a few days and time zones), the fold's counts at
// random times, record by record, are the naive recount's.
func TestFoldAgreesWithANaiveRecount(t *testing.T) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 41))
		loc, err := time.LoadLocation(zones[r.IntN(len(zones))])
		require.NoError(t, err)
		records := journal(r)
		budget := uint64(r.IntN(3)) * 1000
		f := mail.NewFold(loc)
		for i, rec := range records {
			require.NoError(t, f.Add(rec))
			if r.IntN(4) > 0 && i < len(records)-1 {
				continue
			}
			at := time.UnixMilli(rec.Timestamp).Add(time.Duration(r.IntN(48*60)) * time.Minute)
			want := naive(records[:i+1], at, loc, budget)
			got := f.Counts(at, budget, time.Time{})
			require.Equal(t, want, got, "seed %d, after record %d, at %s in %s", seed, i, at, loc)
			require.Equal(t, want.TokensToday, f.TokensToday(at))
		}
	}
}

// journal is a random journal as an account writes it.
func journal(r *rand.Rand) []local.MailRecord {
	at := time.Date(2025, 3, 29, 20, 0, 0, 0, time.UTC) // across a change to summer time
	uv, uid := uint32(1), uint32(0)
	var out, open []local.MailRecord // open: claimed, not decided
	var queued []local.MailKey
	digest := 0
	bys := []mail.By{mail.ByRule, mail.ByBulk, mail.ByTriage, mail.ByUntriaged}
	for range r.IntN(80) {
		at = at.Add(time.Duration(r.IntN(180)) * time.Minute)
		switch r.IntN(6) {
		case 0, 1: // claim
			if r.IntN(20) == 0 {
				uv, uid = uv+1, 0
			}
			uid += uint32(1 + r.IntN(3))
			c := rec(uv, uid, mail.KindClaimed, at, `{}`)
			out = append(out, c)
			open = append(open, c)
		case 2, 3: // decide
			if len(open) == 0 {
				continue
			}
			i := r.IntN(len(open))
			c := open[i]
			open = append(open[:i], open[i+1:]...)
			d := mail.Skipped
			if r.IntN(2) == 0 {
				d = mail.Reported
				queued = append(queued, c.MailKey)
			}
			by := bys[r.IntN(len(bys))]
			tokens := uint64(0)
			if by == mail.ByTriage || by == mail.ByUntriaged {
				tokens = uint64(r.IntN(500))
			}
			out = append(out, rec(c.UIDValidity, c.UID, mail.KindDecided, at, decided(d, by, tokens)))
		default: // a digest of some of the queued
			if len(queued) == 0 {
				continue
			}
			digest++
			n := 1 + r.IntN(len(queued))
			for _, k := range queued[:n] {
				out = append(out, rec(k.UIDValidity, k.UID, mail.KindSent, at, sent(fmt.Sprintf("mail-work-%d", digest))))
			}
			queued = queued[n:]
		}
	}
	return out
}
