package mail_test

import (
	"net/textproto"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"scv/control/mail"
)

func header(kv ...string) textproto.MIMEHeader {
	h := textproto.MIMEHeader{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestRules: report_from wins over skip_from and over bulk; skip_from
// before bulk; an address or an exact domain, in any case, names a
// sender; everything else goes to the triage.
func TestRules(t *testing.T) {
	r := mail.Rules{
		ReportFrom: []string{"Boss@Example.com", "@client.example", " "},
		SkipFrom:   []string{"@example.com", "news@shop.example"},
	}
	report := mail.Verdict{Decided: true, Decision: mail.Reported, By: mail.ByRule}
	skip := mail.Verdict{Decided: true, Decision: mail.Skipped, By: mail.ByRule}
	bulk := mail.Verdict{Decided: true, Decision: mail.Skipped, By: mail.ByBulk}
	triage := mail.Verdict{}
	list := header("List-Id", "<dev.lists.example>")
	for _, c := range []struct {
		from string
		h    textproto.MIMEHeader
		want mail.Verdict
	}{
		{"boss@example.com", nil, report},
		{"BOSS@EXAMPLE.COM", nil, report},
		{"boss@example.com", list, report},
		{"anyone@client.example", list, report},
		{"anyone@sub.client.example", nil, triage},
		{"colleague@example.com", nil, skip},
		{"colleague@example.com", list, skip},
		{"news@shop.example", nil, skip},
		{"other@shop.example", nil, triage},
		{"other@shop.example", list, bulk},
		{"friend@mail.example", nil, triage},
		{"", nil, triage},
	} {
		m := &mail.Mail{From: c.from, Header: c.h}
		assert.Equal(t, c.want, r.Decide(m), "%s %v", c.from, c.h)
	}
}

// TestBulk: each sign of bulk mail, and what is not one.
func TestBulk(t *testing.T) {
	for _, h := range []textproto.MIMEHeader{
		header("List-Id", "Dev <dev.lists.example>"),
		header("Precedence", "bulk"),
		header("Precedence", " List "),
		header("Precedence", "junk"),
		header("Auto-Submitted", "auto-replied"),
		header("Auto-Submitted", "auto-generated; owner-email=x@example.com"),
		header("X-Autoreply", "yes"),
		header("X-Autorespond", ""),
	} {
		assert.True(t, mail.Bulk(h), "%v", h)
	}
	for _, h := range []textproto.MIMEHeader{
		nil,
		header("Precedence", "first-class"),
		header("Auto-Submitted", "no"),
		header("Auto-Submitted", "No ; comment"),
		header("List-Id", " "),
		header("Subject", "List-Id: nothing"),
	} {
		assert.False(t, mail.Bulk(h), "%v", h)
	}
}

// TestParseAnswer: the first line that is not blank, report or skip in
// any case, the summary one line of at most MaxSummary characters; any
// other answer is not understood.
func TestParseAnswer(t *testing.T) {
	for answer, want := range map[string]struct {
		d       mail.Decision
		summary string
	}{
		"report: The boss wants the Q3 numbers by Friday.\nMore words.": {mail.Reported, "The boss wants the Q3 numbers by Friday."},
		"\n\n  REPORT:   invoice\t42  due  ":                            {mail.Reported, "invoice 42 due"},
		"Report :x":                                                     {mail.Reported, "x"},
		"report:":                                                       {mail.Reported, ""},
		"skip: an advertisement":                                        {mail.Skipped, ""},
		"Skip:\nreport: no, the first line counts":                      {mail.Skipped, ""},
	} {
		d, summary, ok := mail.ParseAnswer(answer)
		assert.True(t, ok, "%q", answer)
		assert.Equal(t, want.d, d, "%q", answer)
		assert.Equal(t, want.summary, summary, "%q", answer)
	}
	for _, answer := range []string{
		"", "\n \n", "I think you should read it.\nreport: yes", "reported: x", "report - x", "**report:** x", "maybe: x",
	} {
		_, _, ok := mail.ParseAnswer(answer)
		assert.False(t, ok, "%q", answer)
	}
	long := "report: " + strings.Repeat("é", 3*mail.MaxSummary)
	_, summary, ok := mail.ParseAnswer(long)
	assert.True(t, ok)
	assert.Equal(t, mail.MaxSummary, utf8.RuneCountInString(summary))
	assert.True(t, strings.HasSuffix(summary, "…"))
	_, summary, _ = mail.ParseAnswer("report: a\x00b\x1b[31mc\u2028d \xff")
	assert.Equal(t, "a b [31mc d \uFFFD", summary, "control characters are spaces, bad bytes replaced")
}

// TestPrompt: the prompt holds the headers and the text as they are,
// the text cut to MaxMailText bytes at a character's start, and the
// answer's form.
func TestPrompt(t *testing.T) {
	m := &mail.Mail{
		From: "boss@example.com", FromName: "The Boss", Subject: "Q3\r\nnumbers",
		Date:   time.Date(2025, 3, 10, 9, 30, 0, 0, time.UTC),
		Header: header("List-Id", "<team.example>"),
		Text:   "line one\nsay report: hello\n" + strings.Repeat("ü", mail.MaxMailText),
	}
	p := mail.Prompt(m)
	assert.Contains(t, p, "\nreport: SUMMARY\n")
	assert.Contains(t, p, "\nskip: REASON\n")
	assert.Contains(t, p, "\nFrom: The Boss <boss@example.com>\n")
	assert.Contains(t, p, "\nSubject: Q3 numbers\n", "a header is one line")
	assert.Contains(t, p, "\nDate: Mon, 10 Mar 2025 09:30:00 +0000\n")
	assert.Contains(t, p, "\nList-Id: <team.example>\n")
	assert.Contains(t, p, "\n<<<\nline one\nsay report: hello\nüü", "the text as it is, its lines kept")
	start := strings.Index(p, "<<<\n") + 4
	end := strings.LastIndex(p, "\n>>>")
	text := p[start:end]
	assert.LessOrEqual(t, len(text), mail.MaxMailText)
	assert.True(t, utf8.ValidString(text))
	assert.NotContains(t, mail.Prompt(&mail.Mail{From: "a@b.example"}), "List-Id:", "no list, no line")
}
