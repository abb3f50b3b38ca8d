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

// ANSI colours of the status words.
const (
	ansiReset   = "\x1b[0m"
	ansiRed     = "\x1b[31m"
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiMagenta = "\x1b[35m"
	ansiCyan    = "\x1b[36m"
	ansiDim     = "\x1b[2m"
)

// statusColor is the colour of a status word ("" for none).
func statusColor(word string) string {
	switch word {
	case "done", "succeeded", "completed", "yes", "connected", "ok", "intact", "production":
		return ansiGreen
	case "failed", "no", "expired":
		return ansiRed
	case "running", "pending", "waiting_approval", "starting", "reconnecting":
		return ansiYellow
	case "blocked", "stale", "withdrawn", "cancelled":
		return ansiMagenta
	case "ready", "active":
		return ansiCyan
	case "disabled", "archived":
		return ansiDim
	}
	return ""
}

// paint colours s as its status word when on is set.
func paint(s string, on bool) string {
	if !on {
		return s
	}
	if c := statusColor(s); c != "" {
		return c + s + ansiReset
	}
	return s
}
