package web

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"time"

	"scv/control/api"
)

// Mail is the daemon's email accounts (docs/mail.md): the channel
// manager's components of channel email, with their counts.
type Mail interface {
	// MailAccounts lists the email accounts' components, in ID order.
	MailAccounts() []api.ComponentHealth
}

// mailRow is one email account as the page shows it: its component and
// counts, nothing of any mail.
type mailRow struct {
	api.ComponentHealth
	// Counts is the account's counts; zero (and HasCounts false) when it
	// has not run since the daemon started.
	Counts    api.MailCounts
	HasCounts bool
	// LastCheck is its last successful check (zero: none since the
	// daemon started), CheckedFor how long ago.
	LastCheck  time.Time
	CheckedFor string
	// OverBudget: the day's tokens reached its budget.
	OverBudget bool
}

type mailPage struct {
	Rows []mailRow
}

// mailPage lists the email accounts and their counts.
func (s *Server) mailPage(w http.ResponseWriter, r *http.Request) {
	if s.Mail == nil {
		http.Error(w, "404 not found: this daemon has no email accounts", http.StatusNotFound)
		return
	}
	list := s.Mail.MailAccounts()
	now := s.now()
	rows := make([]mailRow, 0, len(list))
	for _, c := range list {
		row := mailRow{ComponentHealth: c}
		if c.Mail != nil {
			row.Counts, row.HasCounts = *c.Mail, true
			row.OverBudget = c.Mail.TokenBudget > 0 && c.Mail.TokensToday >= c.Mail.TokenBudget
			if c.Mail.LastCheckUnixSeconds != nil {
				row.LastCheck = time.Unix(int64(*c.Mail.LastCheckUnixSeconds), 0).In(now.Location())
				row.CheckedFor = ago(now.Sub(row.LastCheck))
			}
		}
		rows = append(rows, row)
	}
	q, err := s.questionsVersion(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.show(w, r, http.StatusOK, "mail", layout{Title: "Email accounts", Poll: "/api/version?page=mail",
		Version: mailVersion(list, now) + "." + q, Body: mailPage{Rows: rows}})
}

// mailVersion is the mail page's version: a hash of the listing (states,
// errors, counts) and of how long ago each account last checked, as the
// page words it.
func mailVersion(list []api.ComponentHealth, now time.Time) string {
	h := fnv.New64a()
	b, _ := json.Marshal(list) // plain data: never fails
	h.Write(b)
	for _, c := range list {
		if c.Mail != nil && c.Mail.LastCheckUnixSeconds != nil {
			h.Write([]byte("\x00" + ago(now.Sub(time.Unix(int64(*c.Mail.LastCheckUnixSeconds), 0)))))
		}
	}
	return strconv.FormatUint(h.Sum64(), 10)
}
