package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"scv/control/api"
	"scv/control/daemon"
)

// diamond is a small project for the pictures: fetch, then build and lint
// (each depending on fetch), then package (on both); titles that are
// markup, with quotes and an ampersand.
type diamond struct {
	sock, db string
	titles   []string
	ids      []string
	// before is the sequence after the first run finished: then only
	// fetch was done.
	before uint64
}

var diamondTitles = []string{"fetch & unpack", `build "fast"`, "<img src=x onerror=alert(1)>", "package"}

func newDiamond(t *testing.T) *diamond {
	t.Helper()
	d := inDaemon(t, daemon.Config{})
	g := &diamond{sock: d.Config().Socket, db: d.Config().DB, titles: diamondTitles}
	cliOK(t, g.sock, "project", "create", "acme", "--workspace", t.TempDir())
	add := func(title string, deps ...string) string {
		args := []string{"project", "task", "add", "acme", "--max-retries", "1", "--", title}
		for _, dep := range deps {
			args = append(args[:len(args)-2], "--depends-on", dep, "--", title)
		}
		id := cliNewID(t, cliOK(t, g.sock, args...), "task", "added")
		g.ids = append(g.ids, id)
		return id
	}
	fetch := add(g.titles[0])
	build := add(g.titles[1], fetch)
	lint := add(g.titles[2], fetch)
	add(g.titles[3], build, lint)
	finish := func(task, status string) {
		run := cliNewID(t, cliOK(t, g.sock, "project", "run", "start", "acme", task, "--agent", "codex"), "run", "started")
		cliOK(t, g.sock, "project", "run", "finish", "acme", run, status)
	}
	finish(fetch, "succeeded")
	g.before = g.head(t)
	finish(build, "failed")
	finish(build, "succeeded")
	finish(lint, "succeeded")
	return g
}

// head is the sequence of acme's newest event.
func (g *diamond) head(t *testing.T) uint64 {
	t.Helper()
	var st api.DaemonStatus
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, g.sock, "--json", "project", "events", "acme")), &st))
	return st.Project.Events[len(st.Project.Events)-1].Sequence
}

func (g *diamond) run(t *testing.T, args ...string) string {
	t.Helper()
	return cliOK(t, g.sock, append(args, "--db", g.db)...)
}

// TestProjectGraphSVG: the graph's SVG is an XML document with one node
// per task, in the tasks' order, classed by status, and one edge per
// dependency; --at draws the earlier state; the timeline's SVG is XML.
// (pictures.txtar shows the pictures and their command lines.)
func TestProjectGraphSVG(t *testing.T) {
	t.Parallel()
	g := newDiamond(t)
	type node struct{ Class, TaskID string }
	svgNodes := func(doc string) (nodes []node, edges int) {
		t.Helper()
		dec := xml.NewDecoder(strings.NewReader(doc))
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				return nodes, edges
			}
			require.NoError(t, err, "the SVG is XML")
			el, ok := tok.(xml.StartElement)
			if !ok {
				continue
			}
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case el.Name.Local == "g" && attr["data-task-id"] != "":
				nodes = append(nodes, node{attr["class"], attr["data-task-id"]})
			case el.Name.Local == "path" && attr["class"] == "edge":
				edges++
			}
		}
	}
	nodes, edges := svgNodes(g.run(t, "project", "graph", "acme", "--format", "svg"))
	require.Len(t, nodes, 4)
	for i, n := range nodes {
		assert.Equal(t, g.ids[i], n.TaskID)
	}
	assert.Equal(t, "node status-ready", nodes[3].Class)
	assert.Equal(t, 4, edges)

	before := strconv.FormatUint(g.before, 10)
	nodes, _ = svgNodes(g.run(t, "project", "graph", "acme", "--format", "svg", "--at", before))
	require.Len(t, nodes, 4)
	assert.Equal(t, "node status-pending", nodes[3].Class)

	svgNodes(g.run(t, "project", "timeline", "acme", "--format", "svg"))
}

// TestProjectReportHTML: report --html -o FILE writes one self-contained
// HTML page (nothing it loads from outside: no script, no src, no href
// but the page's own fragments) with every task title as text of the
// page. (pictures.txtar shows the command lines.)
func TestProjectReportHTML(t *testing.T) {
	t.Parallel()
	g := newDiamond(t)
	file := filepath.Join(t.TempDir(), "acme.html")
	g.run(t, "project", "report", "acme", "--html", "-o", file)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	doc, err := html.Parse(bytes.NewReader(raw))
	require.NoError(t, err)
	var texts strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.ElementNode:
			assert.NotContains(t, []string{"script", "link", "img", "iframe", "object"}, n.Data)
			for _, a := range n.Attr {
				switch strings.ToLower(a.Key) {
				case "src", "href", "xlink:href", "action", "srcset":
					assert.True(t, strings.HasPrefix(a.Val, "#"), "<%s %s=%q>", n.Data, a.Key, a.Val)
				}
			}
		case html.TextNode:
			texts.WriteString(n.Data + "\n")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	for _, title := range g.titles {
		assert.Contains(t, texts.String(), title, "the title is text of the page")
	}
}
