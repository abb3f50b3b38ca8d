package view_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"scv/control/view"
)

const hostile = `<img src=x onerror=alert(1)>`

// walk calls f with every node under n, n included.
func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func hasClass(n *html.Node, class string) bool {
	v, _ := attr(n, "class")
	for _, c := range strings.Fields(v) {
		if c == class {
			return true
		}
	}
	return false
}

// find is every element under n that match says.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	walk(n, func(m *html.Node) {
		if m.Type == html.ElementNode && match(m) {
			out = append(out, m)
		}
	})
	return out
}

func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(m *html.Node) {
		if m.Type == html.TextNode {
			b.WriteString(m.Data)
		}
	})
	return b.String()
}

func report(t *testing.T) (*history, []byte, *html.Node) {
	h := diamond(t, hostile)
	var b bytes.Buffer
	opts := view.ReportOptions{Options: view.Options{Now: tm(20), StaleAfter: 5 * time.Minute}, DB: "/var/lib/scv/my ledger.db", Version: "1.2.3"}
	require.NoError(t, view.Report(&b, h.p, h.rows, opts))
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	return h, b.Bytes(), doc
}

// TestReportSections: the report has each of its sections, one graph
// node per task and one timeline bar per run, a row per task and per run,
// the evidence, and the chain head with the verify command that names the
// database (quoted for the shell) and the head.
func TestReportSections(t *testing.T) {
	h, _, doc := report(t)
	sections := map[string]*html.Node{}
	for _, s := range find(doc, func(n *html.Node) bool { return n.Data == "section" }) {
		id, _ := attr(s, "id")
		sections[id] = s
	}
	for _, id := range []string{"summary", "graph", "timeline", "tasks", "runs", "evidence", "chain"} {
		require.Contains(t, sections, id)
	}
	nodes := find(sections["graph"], func(n *html.Node) bool { return n.Data == "g" && hasClass(n, "node") })
	assert.Len(t, nodes, h.p.TaskCount())
	var taskIDs []string
	for _, n := range nodes {
		id, _ := attr(n, "data-task-id")
		taskIDs = append(taskIDs, id)
	}
	assert.ElementsMatch(t, []string{"a", "b", "c", "d"}, taskIDs)
	bars := find(sections["timeline"], func(n *html.Node) bool { return n.Data == "rect" && hasClass(n, "bar") })
	assert.Len(t, bars, h.p.RunCount())
	assert.Len(t, find(sections["tasks"], func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "task") }), 4)
	assert.Len(t, find(sections["runs"], func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "run") }), 6)
	ev := find(sections["evidence"], func(n *html.Node) bool { return n.Data == "li" })
	require.NotEmpty(t, ev)
	assert.Equal(t, "3/4 tasks done", text(ev[0]))
	chain := text(sections["chain"])
	head := "01JPROJECTDIAMOND000000000=" + hexOf(h.p.ChainHead)
	assert.Contains(t, chain, head)
	assert.Contains(t, chain, "scv ledger verify --db '/var/lib/scv/my ledger.db' --head "+head)
	assert.Contains(t, text(sections["summary"]), "/work/diamond")
}

// TestReportIsSelfContained: nothing in the report reaches outside it:
// no script at all, no link or image element, no src or href (nor
// xlink:href) to anything but a fragment of the page, no url() or
// @import in its style but the page's own fragments.
func TestReportIsSelfContained(t *testing.T) {
	_, raw, doc := report(t)
	assert.NotEmpty(t, find(doc, func(n *html.Node) bool {
		return n.Data == "style" && strings.HasPrefix(text(n), view.StyleSheet())
	}), "the page's style starts with the style it shares with the web UI")
	assert.Empty(t, find(doc, func(n *html.Node) bool {
		return n.Data == "script" || n.Data == "link" || n.Data == "img" || n.Data == "iframe" || n.Data == "object"
	}))
	walk(doc, func(n *html.Node) {
		for _, a := range n.Attr {
			switch strings.ToLower(a.Key) {
			case "src", "href", "xlink:href", "action", "srcset", "poster", "data":
				assert.True(t, strings.HasPrefix(a.Val, "#"), "<%s %s=%q>", n.Data, a.Key, a.Val)
			}
			assert.False(t, strings.HasPrefix(strings.ToLower(a.Key), "on"), "event handler %s on <%s>", a.Key, n.Data)
		}
		if n.Type == html.ElementNode && n.Data == "style" {
			css := text(n)
			assert.NotContains(t, css, "@import")
			for _, u := range strings.Split(css, "url(")[1:] {
				assert.True(t, strings.HasPrefix(u, "#"), "url(%.20s", u)
			}
		}
	})
	for _, s := range []string{"http://", "https://", "//"} {
		for _, a := range []string{"src=", "href="} {
			assert.NotContains(t, string(raw), a+`"`+s)
		}
	}
	assert.NotContains(t, strings.ToLower(string(raw)), "<script")
}

// TestReportEscapesLedgerText: a task titled as markup is text wherever it
// is shown (the tasks table, the drawings' labels and tooltips, the runs
// table's task column): no element is made of it.
func TestReportEscapesLedgerText(t *testing.T) {
	_, raw, doc := report(t)
	assert.Empty(t, find(doc, func(n *html.Node) bool { return n.Data == "img" }))
	titles := find(doc, func(n *html.Node) bool { return n.Data == "span" && hasClass(n, "title") })
	var found bool
	for _, n := range titles {
		found = found || text(n) == hostile
	}
	assert.True(t, found, "the tasks table shows the title as text")
	tooltips := find(doc, func(n *html.Node) bool { return n.Data == "title" && strings.Contains(text(n), hostile) })
	assert.NotEmpty(t, tooltips, "the graph's tooltip shows the whole title as text")
	assert.NotContains(t, string(raw), hostile)
	assert.Contains(t, string(raw), "&lt;img src=x onerror=alert(1)&gt;")
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
