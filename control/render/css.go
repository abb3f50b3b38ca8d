package render

import "bytes"

// StyleSheet is the style sheet that every SVG document of the package
// carries inline in its <style> element: the graph's rules (scoped to
// .scv-graph) and the timeline's (scoped to .scv-timeline). It never
// depends on the input.
//
// A page whose Content-Security-Policy forbids inline style (style-src
// 'self', as the web UI's does) cannot use the inline copies: it serves
// this text as a style sheet of its own and drops the SVG's <style>
// element (StripStyle).
func StyleSheet() string { return graphCSS() + timelineCSS() }

// StripStyle returns an SVG document written by this package without its
// inline <style> element, for a page that links StyleSheet instead. The
// first "<style>" of such a document is that element: ledger text is
// escaped, so it never holds a '<'. Input without one is returned as it
// is.
func StripStyle(svg []byte) []byte {
	const open, end = "<style>\n", "</style>\n"
	i := bytes.Index(svg, []byte(open))
	if i < 0 {
		return svg
	}
	j := bytes.Index(svg[i:], []byte(end))
	if j < 0 {
		return svg
	}
	out := make([]byte, 0, len(svg)-j-len(end))
	out = append(out, svg[:i]...)
	return append(out, svg[i+j+len(end):]...)
}
