package render

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// esc is s escaped for XML text and attribute values (quotes included);
// characters XML cannot carry become U+FFFD.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}

// svgOut collects an SVG document and writes it at once.
type svgOut struct{ bytes.Buffer }

func (s *svgOut) f(format string, args ...any) { fmt.Fprintf(&s.Buffer, format, args...) }

// open starts the document: its root (with class, the scope of every
// style rule, so two drawings inlined in one HTML page do not restyle
// each other), its title and its style sheet. The document has no XML
// declaration, so it can be inlined in HTML as it is.
func (s *svgOut) open(class string, w, h int, title, css string) {
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" class="%s" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`+"\n", class, w, h, w, h, esc(title))
	s.f("<title>%s</title>\n", esc(title))
	s.f("<style>\n%s</style>\n", css)
}

func (s *svgOut) close(w io.Writer) error {
	s.WriteString("</svg>\n")
	_, err := w.Write(s.Bytes())
	return err
}

// svgText is ledger text for display in a drawing: made safe as for a
// terminal (no bidirectional overrides), cut to w columns, then escaped.
func svgText(s string, w int) string { return esc(cut(clean(s), w, "…")) }
