package mail

import (
	"net/textproto"
	"strings"
)

// Rules are an account's rules (its report_from and skip_from): each entry
// is an address (me@example.com) or a domain (@example.com), compared
// without regard to case.
type Rules struct {
	ReportFrom []string
	SkipFrom   []string
}

// Verdict is what the rules make of a mail: decided (Decision, By), or
// left to the triage (Decided false).
type Verdict struct {
	Decided  bool
	Decision Decision
	By       By
}

// Decide applies the rules to m, in this order:
//
//  1. report_from names the sender: reported (by rule). It wins over
//     skip_from, so that "skip @example.com, report boss@example.com"
//     reports the boss alone, and over bulk, so that a list the owner
//     follows can be reported.
//  2. skip_from names the sender: skipped (by rule).
//  3. the mail is bulk (Bulk): skipped (by bulk).
//  4. anything else is left to the triage.
//
// An entry names a sender when it is the sender's address, or @ and the
// domain after the sender's @ (exactly: @example.com does not name
// sub.example.com).
func (r Rules) Decide(m *Mail) Verdict {
	switch from := strings.ToLower(strings.TrimSpace(m.From)); {
	case names(r.ReportFrom, from):
		return Verdict{Decided: true, Decision: Reported, By: ByRule}
	case names(r.SkipFrom, from):
		return Verdict{Decided: true, Decision: Skipped, By: ByRule}
	case Bulk(m.Header):
		return Verdict{Decided: true, Decision: Skipped, By: ByBulk}
	}
	return Verdict{}
}

// names reports whether one of entries names the address from.
func names(entries []string, from string) bool {
	if from == "" {
		return false
	}
	domain := ""
	if i := strings.LastIndexByte(from, '@'); i >= 0 {
		domain = from[i:]
	}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
		case strings.HasPrefix(e, "@"):
			if e == domain {
				return true
			}
		case e == from:
			return true
		}
	}
	return false
}

// Bulk reports whether a mail's header says it is bulk mail, not written
// to the owner by a person: a List-Id (a mailing list), Precedence bulk,
// list or junk, Auto-Submitted with any value but "no" (RFC 3834), or an
// X-Autoreply or X-Autorespond field.
func Bulk(h textproto.MIMEHeader) bool {
	if strings.TrimSpace(h.Get("List-Id")) != "" {
		return true
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("Precedence"))) {
	case "bulk", "list", "junk":
		return true
	}
	if v := h.Get("Auto-Submitted"); strings.TrimSpace(v) != "" {
		token, _, _ := strings.Cut(v, ";")
		if !strings.EqualFold(strings.TrimSpace(token), "no") {
			return true
		}
	}
	return len(h.Values("X-Autoreply")) > 0 || len(h.Values("X-Autorespond")) > 0
}
