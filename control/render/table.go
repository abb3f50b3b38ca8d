package render

import (
	"io"
	"math"
	"strings"
	"unicode"
)

// A Table is rows of text under columns, drawn for a terminal: the
// command line's listings (tasks, runs, projects, agents, questions).
// Columns are two spaces apart, each as wide as its widest cell; when
// that is wider than the width, the free-text columns are cut first,
// widest first, down to a floor, then each line is cut at the width. A
// row is never wrapped. A table without column names is a block of `key
// value` lines (Block).
type Table struct {
	cols []tableColumn
	rows [][]string
}

type tableColumn struct {
	name   string
	flex   bool // free text: cut first (with …) when the table is too wide
	status bool // status words: coloured (Paint)
}

// minFlex is the narrowest a free-text column is cut to.
const minFlex = 12

// NewTable is a table with columns named names. A name that starts with
// "~" is a free-text column (the first cut when the table is too wide);
// one that starts with "!" (after any "~") holds status words, coloured
// when the table is written with Color.
func NewTable(names ...string) *Table {
	t := &Table{}
	for _, n := range names {
		c := tableColumn{name: n}
		if rest, ok := strings.CutPrefix(n, "~"); ok {
			c = tableColumn{name: rest, flex: true}
		}
		if rest, ok := strings.CutPrefix(c.name, "!"); ok {
			c.name, c.status = rest, true
		}
		t.cols = append(t.cols, c)
	}
	return t
}

// Block is a table of `key  value` lines whose values are free text, and
// coloured when they are status words.
func Block() *Table {
	return &Table{cols: []tableColumn{{}, {flex: true, status: true}}}
}

// Add adds a row. Its cells are made one-line and safe for a terminal
// (Clean).
func (t *Table) Add(cells ...string) {
	for i, c := range cells {
		cells[i] = Clean(c)
	}
	t.rows = append(t.rows, cells)
}

// Write draws t on w, o.Width columns wide at most (0: no limit), its
// status words coloured with o.Color.
func (t *Table) Write(w io.Writer, o TextOptions) error {
	n := len(t.cols)
	header := false
	widths := make([]int, n)
	for i, c := range t.cols {
		if c.name != "" {
			header = true
		}
		widths[i] = cells(c.name)
	}
	for _, r := range t.rows {
		for i := range min(n, len(r)) {
			widths[i] = max(widths[i], cells(r[i]))
		}
	}
	total := func() int {
		s := 2 * (n - 1)
		for _, w := range widths {
			s += w
		}
		return s
	}
	for o.Width > 0 && total() > o.Width {
		widest := -1
		for i, c := range t.cols {
			floor := max(minFlex, cells(c.name))
			if c.flex && widths[i] > floor && (widest < 0 || widths[i] > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break
		}
		widths[widest]--
	}
	// Only status spans are coloured, after any cut, so that the colour
	// codes never count.
	out := &textOut{opts: TextOptions{Width: o.Width, Color: o.Color}}
	if o.Width <= 0 {
		out.opts.Width = math.MaxInt32
	}
	row := func(r []string) {
		var l line
		for i, c := range t.cols {
			cell := ""
			if i < len(r) {
				cell = r[i]
			}
			cell = cut(cell, widths[i], "…")
			sgr := ""
			if c.status {
				sgr = wordSGR(cell)
			}
			l.add(cell, sgr)
			if i < n-1 {
				l.add(strings.Repeat(" ", widths[i]-cells(cell)+2), "")
			}
		}
		out.emit(l)
	}
	if header {
		names := make([]string, n)
		for i, c := range t.cols {
			names[i] = c.name
		}
		row(names)
	}
	for _, r := range t.rows {
		row(r)
	}
	return out.flush(w)
}

// Clean is s as one line safe for a terminal: tabs, newlines and the
// other control characters become spaces, and what could rewrite or
// reorder the terminal's text (escape sequences, bidirectional
// overrides, invalid UTF-8) is replaced as the drawings replace it.
func Clean(s string) string {
	return clean(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s))
}

// Cut shortens s to at most w terminal columns, ending in … when cut (w
// <= 0: s as it is).
func Cut(s string, w int) string {
	if w <= 0 {
		return s
	}
	return cut(s, w, "…")
}

// Paint is word coloured as the status it names (a task's, a run's, a
// project's, a question's, a chat's: the drawings' colours), when on and
// when it is one.
func Paint(word string, on bool) string {
	if sgr := wordSGR(word); on && sgr != "" {
		return "\x1b[" + sgr + "m" + word + "\x1b[0m"
	}
	return word
}
