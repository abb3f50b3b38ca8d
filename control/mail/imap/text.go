package imap

import (
	"bufio"
	"bytes"
	"io"
	"net/textproto"
	"strings"
	"unicode/utf8"

	goimap "github.com/emersion/go-imap"
	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // the charsets of mails' headers and texts
	gomail "github.com/emersion/go-message/mail"
	gmtextproto "github.com/emersion/go-message/textproto"
	"golang.org/x/net/html"

	"scv/control/mail"
)

// maxDepth is how deep in nested multiparts the text is looked for.
const maxDepth = 8

// readMail makes a fetched message a mail.Mail: its header parsed (the
// envelope standing in for what the header lacks) and its text decoded.
func readMail(msg *goimap.Message) mail.Mail {
	m := mail.Mail{UID: msg.Uid, Size: msg.Size, Partial: msg.Size > mail.MaxMailSize}
	rawHeader, ok := section(msg, headerSection)
	if !ok {
		m.Partial = true
	}
	rawText, ok := section(msg, textSection)
	if !ok {
		m.Partial = true
	}
	if len(rawHeader) >= maxHeader {
		// Cut: the whole lines only, the last one perhaps folded further.
		m.Partial = true
		if i := bytes.LastIndexByte(rawHeader, '\n'); i >= 0 {
			rawHeader = rawHeader[:i+1]
		}
	}
	h := readHeader(rawHeader)
	m.Header = make(textproto.MIMEHeader, h.Len())
	for f := h.Fields(); f.Next(); {
		m.Header[f.Key()] = append(m.Header[f.Key()], unfold(f.Value()))
	}
	if from, err := h.AddressList("From"); err == nil && len(from) > 0 {
		m.From, m.FromName = strings.ToLower(from[0].Address), printable(from[0].Name)
	}
	if s, err := h.Subject(); err == nil {
		m.Subject = printable(s)
	} else {
		m.Subject = printable(unfold(h.Get("Subject")))
	}
	m.Date, _ = h.Date()
	m.MessageID, _ = h.MessageID()
	if env := msg.Envelope; env != nil {
		if m.From == "" && len(env.From) > 0 && env.From[0].MailboxName != "" {
			m.From = strings.ToLower(env.From[0].Address())
			if m.FromName == "" {
				m.FromName = printable(env.From[0].PersonalName)
			}
		}
		if m.Subject == "" {
			m.Subject = printable(env.Subject)
		}
		if m.Date.IsZero() {
			m.Date = env.Date
		}
		if m.MessageID == "" {
			m.MessageID = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(env.MessageId), "<"), ">")
		}
	}
	m.Text = readText(h.Header, rawText)
	return m
}

// section is the bytes the server gave of s, and whether it gave any.
func section(msg *goimap.Message, s *goimap.BodySectionName) ([]byte, bool) {
	l := msg.GetBody(s)
	if l == nil {
		return nil, false
	}
	b, err := io.ReadAll(l)
	return b, err == nil
}

// readHeader parses a header, keeping the fields before any malformed
// line.
func readHeader(b []byte) gomail.Header {
	h, _ := gmtextproto.ReadHeader(bufio.NewReader(bytes.NewReader(b)))
	return gomail.Header{Header: message.Header{Header: h}}
}

// readText is the start of a body's text: its first text/plain part,
// else its first text/html part stripped of markup, decoded to UTF-8, at
// most mail.MaxMailText bytes cut at a rune boundary. A body cut short
// (the fetch is bounded) gives what it has.
func readText(h message.Header, body []byte) string {
	// An unknown charset or transfer encoding leaves the body as it is.
	e, _ := message.New(h, bytes.NewReader(body))
	text, isHTML, ok := findText(e, 0)
	if !ok {
		return ""
	}
	if isHTML {
		text = stripHTML(text)
	}
	return cut(clean(text), mail.MaxMailText)
}

// findText looks for e's text: its first text/plain part (found), else
// its first text/html part (isHTML).
func findText(e *message.Entity, depth int) (text string, isHTML, found bool) {
	if mr := e.MultipartReader(); mr != nil {
		if depth >= maxDepth {
			return "", false, false
		}
		var htmlText string
		haveHTML := false
		for {
			p, err := mr.NextPart()
			if p == nil || err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
				break
			}
			t, isH, ok := findText(p, depth+1)
			switch {
			case ok && !isH:
				return t, false, true
			case ok && !haveHTML:
				htmlText, haveHTML = t, true
			}
		}
		return htmlText, true, haveHTML
	}
	if disp, _, _ := e.Header.ContentDisposition(); disp == "attachment" {
		return "", false, false
	}
	mediaType, _, err := e.Header.ContentType()
	if err != nil || mediaType == "" {
		mediaType = "text/plain" // RFC 2045's default
	}
	var limit int64
	switch mediaType {
	case "text/plain":
		// Decoded, a byte may be up to a rune's worth.
		limit = mail.MaxMailText + utf8.UTFMax
	case "text/html":
		limit = 4 * maxText
	default:
		return "", false, false
	}
	b, _ := io.ReadAll(io.LimitReader(e.Body, limit))
	return string(b), mediaType == "text/html", true
}

// blocks are the HTML elements that end a line of text; paragraphs those
// that end a paragraph (an empty line after it).
var (
	blocks = map[string]bool{
		"address": true, "article": true, "aside": true, "dd": true, "div": true, "dl": true,
		"dt": true, "footer": true, "header": true, "hr": true, "li": true, "main": true, "nav": true,
		"ol": true, "section": true, "td": true, "th": true, "tr": true, "ul": true,
	}
	paragraphs = map[string]bool{
		"blockquote": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
		"p": true, "pre": true, "table": true,
	}
)

// stripHTML is the text of an HTML document: no markup, no scripts or
// styles, entities decoded, a line per block, an empty one after a
// paragraph.
func stripHTML(s string) string {
	var b strings.Builder
	// lineEnd ends the text so far with n line ends (unless it is empty).
	lineEnd := func(n int) {
		t := b.String()
		if strings.TrimSpace(t) == "" {
			return
		}
		have := len(t) - len(strings.TrimRight(t, "\n"))
		for ; have < n; have++ {
			b.WriteByte('\n')
		}
	}
	z := html.NewTokenizer(strings.NewReader(s))
	skip := 0 // inside script, style, head or title
	for {
		switch tt := z.Next(); tt {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			if skip == 0 {
				raw := z.Text()
				words := strings.Join(strings.Fields(string(raw)), " ")
				if words != "" && len(raw) > 0 && isSpace(raw[0]) && b.Len() > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(words)
				if words != "" && isSpace(raw[len(raw)-1]) {
					b.WriteByte(' ')
				}
			}
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			tag := string(name)
			switch tag {
			case "script", "style", "head", "title":
				if tt == html.StartTagToken {
					skip++
				} else if tt == html.EndTagToken && skip > 0 {
					skip--
				}
			}
			switch {
			case tag == "br":
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
			case paragraphs[tag]:
				lineEnd(2)
			case blocks[tag]:
				lineEnd(1)
			}
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// clean makes text printable: valid UTF-8, lines ended by \n, no other
// control characters but tabs, no trailing spaces, at most one empty
// line in a row, no empty lines at either end.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return '\n'
		case r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0:
			return -1
		}
		return r
	}, s)
	lines := strings.Split(s, "\n")
	out := lines[:0]
	blank := false
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			if blank || len(out) == 0 {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// printable is a header's text on one line: no control characters.
func printable(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0:
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD")))
}

// unfold joins a header value's folded lines.
func unfold(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "")
	return strings.ReplaceAll(s, "\n", "")
}

// cut is s cut to at most n bytes at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
