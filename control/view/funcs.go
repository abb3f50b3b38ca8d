package view

import (
	"html/template"
	"strconv"
	"strings"
	"time"
)

// Funcs are the template functions the report's template and the web
// UI's share. None of them marks ledger text safe: only svg does, for the
// SVG documents of control/render, whose text is escaped already.
var Funcs = template.FuncMap{
	"when":     When,
	"duration": Duration,
	"svg":      func(b []byte) template.HTML { return template.HTML(b) }, //nolint:gosec // control/render escapes all ledger text
	"retries":  Retries,
	"shortID":  ShortID,
	"quote":    ShellQuote,
	"inc":      func(i int) int { return i + 1 },
}

// When is t as the pages show it, or "—" when zero.
func When(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

// Duration is d rounded to the second, under a second to the millisecond
// (a run of 40ms is not 0s), or "—" when zero.
func Duration(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Retries is "spent/allowed".
func Retries(spent, allowed int) string { return strconv.Itoa(spent) + "/" + strconv.Itoa(allowed) }

// ShortID is the last 8 characters of a ULID (its random part, which
// tells the IDs of one project apart).
func ShortID(id string) string {
	if len(id) <= 10 {
		return id
	}
	return "…" + id[len(id)-8:]
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
