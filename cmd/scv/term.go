package main

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/term"
)

// What scv knows of the terminals it writes to. Tables are cut to the
// width of a terminal (never wrapped); elsewhere (a pipe, a file) rows
// are as long as their text, unless $COLUMNS sets a width. Status words
// are coloured only on a terminal, never with NO_COLOR or --json.

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// widthOf is how wide a table written to w may be: the terminal's width,
// else $COLUMNS, else 0 (no limit).
func widthOf(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 0
}

// colorFor reports whether output to w is coloured.
func colorFor(w io.Writer, asJSON bool) bool {
	if asJSON || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return isTerminal(w)
}
