package main

import (
	"fmt"

	"scv/control/api"
	"scv/control/render"
)

// mailLine is an email account's counts in one line (docs/mail.md):
// `seen 20 today (7 triaged, 9 reported), 2 queued, 1 claimed, 2500 of
// 200000 tokens, 3 digests in 24h, checked 2m ago`.
func mailLine(p *printer, m *api.MailCounts) string {
	tokens := fmt.Sprintf("%d tokens", m.TokensToday)
	if m.TokenBudget > 0 {
		tokens = fmt.Sprintf("%d of %d tokens", m.TokensToday, m.TokenBudget)
		if m.TokensToday >= m.TokenBudget {
			tokens += " (budget reached)"
		}
	}
	checked := "not checked yet"
	if m.LastCheckUnixSeconds != nil {
		checked = "checked " + p.ago(*m.LastCheckUnixSeconds)
	}
	digests := "digests"
	if m.Messages24h == 1 {
		digests = "digest"
	}
	return fmt.Sprintf("seen %d today (%d triaged, %d reported), %d queued, %d claimed, %s, %d %s in 24h, %s",
		m.SeenToday, m.TriagedToday, m.ReportedToday, m.Queued, m.Claimed, tokens, m.Messages24h, digests, checked)
}

// mailTable is the email accounts' counts, a row for each component that
// has them (docs/mail.md), or nil when none has.
func mailTable(p *printer, components []api.ComponentHealth) *render.Table {
	var t *render.Table
	for _, c := range components {
		m := c.Mail
		if m == nil {
			continue
		}
		if t == nil {
			t = render.NewTable("MAIL", "CLAIMED", "QUEUED", "SEEN TODAY", "TRIAGED", "REPORTED", "TOKENS", "DIGESTS 24H", "LAST CHECK")
		}
		tokens := fmt.Sprint(m.TokensToday)
		if m.TokenBudget > 0 {
			tokens += "/" + fmt.Sprint(m.TokenBudget)
		}
		t.Add(c.ID, fmt.Sprint(m.Claimed), fmt.Sprint(m.Queued), fmt.Sprint(m.SeenToday), fmt.Sprint(m.TriagedToday),
			fmt.Sprint(m.ReportedToday), tokens, fmt.Sprint(m.Messages24h), p.agoPtr(m.LastCheckUnixSeconds))
	}
	return t
}
