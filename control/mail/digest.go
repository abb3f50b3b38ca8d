package mail

import (
	"encoding/json"
	"fmt"
	"strings"

	"scv/ledger/local"
)

// MaxDigestMails is the most mails one digest lists, oldest first; the
// rest wait for the next.
const MaxDigestMails = 50

// item is what the outbox keeps of a mail to report: what its digest line
// says. It lives in the outbox only, never in the journal.
type item struct {
	From    string `json:"from"`
	Subject string `json:"subject"`
	Summary string `json:"summary"`
}

// itemOf is the outbox's item for m, with summary.
func itemOf(m *Mail, summary string) item {
	return item{From: oneLine(sender(m), MaxSender), Subject: oneLine(m.Subject, MaxSubject), Summary: oneLine(summary, MaxSummary)}
}

// digestID is the ID of account's digest number n: the same for the same
// digest however often it is told, so that it is told once.
func digestID(account string, n int) string { return fmt.Sprintf("mail-%s-%d", account, n) }

// digestText is the digest of items for account: a line for the count,
// then each mail's sender and subject, and its summary below.
//
//	Mail for work: 2 to report.
//	1. The Boss <boss@example.com>: Q3 numbers
//	   The boss wants the Q3 numbers by Friday.
//	2. client@client.example: Invoice 42
//	   (not triaged: the account has no triage agent)
//	(3 more in the next digest)
func digestText(account string, items []local.MailItem, more int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Mail for %s: %d to report.", account, len(items))
	for i, it := range items {
		var d item
		_ = json.Unmarshal([]byte(it.Data), &d) // an item that does not read shows as empty
		subject := d.Subject
		if subject == "" {
			subject = "(no subject)"
		}
		fmt.Fprintf(&b, "\n%d. %s: %s", i+1, d.From, subject)
		if d.Summary != "" {
			fmt.Fprintf(&b, "\n   %s", d.Summary)
		}
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n(%d more in the next digest)", more)
	}
	return b.String()
}

// marshal is v as JSON; the mail package's records and items always are.
func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("mail: %T: %v", v, err))
	}
	return string(b)
}
