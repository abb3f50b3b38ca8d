package render

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TextOptions shape the text outputs.
type TextOptions struct {
	// Width is the terminal's width in columns; 0 means 80. No line of
	// the output is wider.
	Width int
	// Color adds ANSI colours by status.
	Color bool
	// ASCII draws marks, bars and frames with ASCII characters only
	// (titles are printed as they are).
	ASCII bool
}

func (o TextOptions) width() int {
	if o.Width <= 0 {
		return 80
	}
	return o.Width
}

func (o TextOptions) ellipsis() string {
	if o.ASCII {
		return "..."
	}
	return "…"
}

// clean makes ledger text safe for a terminal: control characters
// (escape sequences start with one) and the bidirectional overrides that
// could reorder what follows are replaced by U+FFFD, as is invalid UTF-8.
func clean(s string) string {
	ok := true
	for _, r := range s {
		if unsafeRune(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	switch {
	case r == utf8.RuneError, unicode.IsControl(r):
		return true
	case r == 0x061C, r == 0x200E, r == 0x200F,
		r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// runeCells is the number of terminal columns r takes: 0 for combining
// marks and zero-width characters, 2 for East Asian wide and fullwidth
// characters and most emoji, 1 otherwise. It is an approximation of
// wcwidth good enough to keep lines inside the width.
func runeCells(r rune) int {
	switch {
	case r < 0x300:
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	case r >= 0x1100 && r <= 0x115F, r >= 0x231A && r <= 0x231B,
		r >= 0x2329 && r <= 0x232A, r >= 0x23E9 && r <= 0x23EC,
		r >= 0x25FD && r <= 0x25FE, r >= 0x2614 && r <= 0x2615,
		r >= 0x2E80 && r <= 0x303E, r >= 0x3041 && r <= 0x33FF,
		r >= 0x3400 && r <= 0x4DBF, r >= 0x4E00 && r <= 0x9FFF,
		r >= 0xA000 && r <= 0xA4CF, r >= 0xAC00 && r <= 0xD7A3,
		r >= 0xF900 && r <= 0xFAFF, r >= 0xFE10 && r <= 0xFE19,
		r >= 0xFE30 && r <= 0xFE6F, r >= 0xFF00 && r <= 0xFF60,
		r >= 0xFFE0 && r <= 0xFFE6, r >= 0x1F300 && r <= 0x1F64F,
		r >= 0x1F900 && r <= 0x1F9FF, r >= 0x1F680 && r <= 0x1F6FF,
		r >= 0x1FA70 && r <= 0x1FAFF, r >= 0x20000 && r <= 0x3FFFD:
		return 2
	}
	return 1
}

// cells is the number of terminal columns s takes.
func cells(s string) int {
	n := 0
	for _, r := range s {
		n += runeCells(r)
	}
	return n
}

// cut shortens s to at most w columns, ending it with ell when it had to
// cut.
func cut(s string, w int, ell string) string {
	if cells(s) <= w {
		return s
	}
	budget := w - cells(ell)
	if budget < 0 {
		return takeCells(ell, w)
	}
	return takeCells(s, budget) + ell
}

// takeCells is the longest prefix of s that fits in w columns.
func takeCells(s string, w int) string {
	n := 0
	for i, r := range s {
		c := runeCells(r)
		if n+c > w {
			return s[:i]
		}
		n += c
	}
	return s
}

// pad is s cut to w columns and filled with spaces up to w.
func pad(s string, w int, ell string) string {
	s = cut(s, w, ell)
	return s + strings.Repeat(" ", max(0, w-cells(s)))
}

// padLeft is s filled with spaces on the left up to w columns.
func padLeft(s string, w int) string {
	return strings.Repeat(" ", max(0, w-cells(s))) + s
}

// span is a run of text in one ANSI style (SGR parameters, "" for none).
type span struct{ text, sgr string }

// line is one output line, built of spans.
type line []span

func (l *line) add(text, sgr string) { *l = append(*l, span{text, sgr}) }

// textOut collects the lines of a text output and writes them at once.
type textOut struct {
	opts TextOptions
	buf  bytes.Buffer
}

// emit writes l cut to the width (with the ellipsis when cut), trailing
// spaces dropped, coloured if asked.
func (o *textOut) emit(l line) {
	l = slices.Clone(l)
	width := o.opts.width()
	total := 0
	for _, s := range l {
		total += cells(s.text)
	}
	if total > width {
		ell := o.opts.ellipsis()
		budget := max(0, width-cells(ell))
		var kept line
		for _, s := range l {
			if budget <= 0 {
				break
			}
			t := takeCells(s.text, budget)
			budget -= cells(t)
			kept = append(kept, span{t, s.sgr})
			if t != s.text {
				break
			}
		}
		l = append(kept, span{takeCells(ell, width), ""})
	}
	// Drop trailing spaces, styled or not.
	for len(l) > 0 {
		last := &l[len(l)-1]
		last.text = strings.TrimRight(last.text, " ")
		if last.text != "" {
			break
		}
		l = l[:len(l)-1]
	}
	for _, s := range l {
		if o.opts.Color && s.sgr != "" && s.text != "" {
			o.buf.WriteString("\x1b[" + s.sgr + "m" + s.text + "\x1b[0m")
			continue
		}
		o.buf.WriteString(s.text)
	}
	o.buf.WriteByte('\n')
}

func (o *textOut) text(s string) { o.emit(line{{s, ""}}) }

// words emits the words of text, as many to a line as fit.
func (o *textOut) words(text string) {
	var items []line
	for _, w := range strings.Fields(text) {
		items = append(items, line{{w, ""}})
	}
	o.wrapped("", " ", items)
}

// wrapped emits items separated by sep, as many to a line as fit, the
// lines after the first indented by the width of lead.
func (o *textOut) wrapped(lead, sep string, items []line) {
	width := o.opts.width()
	cur := line{{lead, ""}}
	curW := cells(lead)
	for _, it := range items {
		w := 0
		for _, s := range it {
			w += cells(s.text)
		}
		if curW > cells(lead) && curW+cells(sep)+w > width {
			o.emit(cur)
			cur = line{{strings.Repeat(" ", cells(lead)), ""}}
			curW = cells(lead)
		}
		if curW > cells(lead) {
			cur.add(sep, "")
			curW += cells(sep)
		}
		cur = append(cur, it...)
		curW += w
	}
	o.emit(cur)
}

func (o *textOut) flush(w io.Writer) error {
	_, err := w.Write(o.buf.Bytes())
	return err
}
