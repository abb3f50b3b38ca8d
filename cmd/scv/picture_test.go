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
	"unicode/utf8"

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

// TestProjectGraph: the task graph as text (every title, the layers, cut
// to $COLUMNS), as SVG (an XML document with one node per task and one
// edge per dependency) and as DOT; --at draws the earlier state; the
// database is read with no daemon.
func TestProjectGraph(t *testing.T) {
	g := newDiamond(t)

	t.Setenv("COLUMNS", "60")
	text := g.run(t, "project", "graph", "acme")
	assert.True(t, strings.HasPrefix(text, "acme ("), text)
	assert.Regexp(t, `4 tasks in 3 layers, 4\s+dependencies`, text)
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 60, "%q", l)
	}
	for _, title := range []string{"fetch & unpack", `build "fast"`, "package"} {
		assert.Contains(t, text, title)
	}
	assert.Contains(t, text, "[✓] build \"fast\"")
	assert.Contains(t, text, "2 att, 1/1 retries")
	assert.Contains(t, text, "[○] package", "package is ready")
	assert.NotContains(t, g.run(t, "project", "graph", "acme", "--ascii"), "✓")
	t.Setenv("COLUMNS", "")

	type node struct {
		Class  string `xml:"class,attr"`
		TaskID string `xml:"data-task-id,attr"`
	}
	type path struct {
		Class string `xml:"class,attr"`
		From  string `xml:"data-from,attr"`
		To    string `xml:"data-to,attr"`
	}
	svgNodes := func(doc string) (nodes []node, edges []path) {
		t.Helper()
		dec := xml.NewDecoder(strings.NewReader(doc))
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				return nodes, edges
			}
			require.NoError(t, err, "the SVG is XML")
			if el, ok := tok.(xml.StartElement); ok {
				switch el.Name.Local {
				case "g":
					var n node
					for _, a := range el.Attr {
						switch a.Name.Local {
						case "class":
							n.Class = a.Value
						case "data-task-id":
							n.TaskID = a.Value
						}
					}
					if n.TaskID != "" {
						nodes = append(nodes, n)
					}
				case "path":
					var p path
					for _, a := range el.Attr {
						switch a.Name.Local {
						case "class":
							p.Class = a.Value
						case "data-from":
							p.From = a.Value
						case "data-to":
							p.To = a.Value
						}
					}
					if p.Class == "edge" {
						edges = append(edges, p)
					}
				}
			}
		}
	}
	svg := g.run(t, "project", "graph", "acme", "--format", "svg")
	assert.True(t, strings.HasPrefix(svg, "<svg "), svg)
	nodes, edges := svgNodes(svg)
	require.Len(t, nodes, 4)
	for i, n := range nodes {
		assert.Equal(t, g.ids[i], n.TaskID)
	}
	assert.Equal(t, "node status-ready", nodes[3].Class)
	assert.Len(t, edges, 4)
	assert.Contains(t, svg, "&lt;img src=x onerror=alert(1)&gt;")
	assert.NotContains(t, svg, "<img")

	dot := g.run(t, "project", "graph", "acme", "--format", "dot")
	assert.True(t, strings.HasPrefix(dot, "digraph "), dot)
	assert.Equal(t, 4, strings.Count(dot, " -> "))
	assert.Contains(t, dot, `build \"fast\"`)

	// --at: fetch alone was done; then the state moved on.
	before := strconv.FormatUint(g.before, 10)
	then := g.run(t, "project", "graph", "acme", "--at", before)
	assert.Contains(t, then, "[✓] fetch & unpack")
	assert.Contains(t, then, "[○] build \"fast\"")
	assert.Contains(t, then, "[◌] package")
	nodes, _ = svgNodes(g.run(t, "project", "graph", "acme", "--format", "svg", "--at", before))
	require.Len(t, nodes, 4)
	assert.Equal(t, "node status-pending", nodes[3].Class)
	r := cliRun(t, g.sock, "project", "graph", "acme", "--at", "99999", "--db", g.db)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "--at 99999: sequence 99999 is past the ledger's head")
	r = cliRun(t, g.sock, "project", "graph", "nope", "--db", g.db)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `not found: project "nope"`)
	r = cliRun(t, g.sock, "project", "graph", "acme", "--format", "png", "--db", g.db)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `--format "png": want one of text, svg, dot`)

	// -o FILE, and --json; no daemon needed.
	nowhere := filepath.Join(cliShortDir(t), "none.sock")
	file := filepath.Join(t.TempDir(), "acme.dot")
	out := cliOK(t, nowhere, "project", "graph", "acme", "--format", "dot", "--db", g.db, "-o", file)
	assert.Regexp(t, `^acme: graph \(dot\) as of sequence \d+ written to `+file+`\n$`, out)
	written, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, dot, string(written))
	var j pictureJSON
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, nowhere, "--json", "project", "graph", "acme", "--format", "dot", "--db", g.db)), &j))
	require.NotNil(t, j.Content)
	assert.Equal(t, dot, *j.Content)
	assert.Equal(t, "acme", j.Name)
	assert.Equal(t, "dot", j.Format)
	assert.Equal(t, g.head(t), j.Sequence)
	assert.Equal(t, len(dot), j.Bytes)
}

// TestProjectTimeline: the runs over time as text (a row per task, the
// critical path by title) and as SVG (one bar per run); --at draws the
// earlier state.
func TestProjectTimeline(t *testing.T) {
	g := newDiamond(t)
	text := g.run(t, "project", "timeline", "acme")
	assert.Contains(t, text, "4 runs of 4 tasks")
	assert.Contains(t, text, "critical path")
	assert.Contains(t, text, "critical path (0s): fetch & unpack → ", "by title")
	assert.Regexp(t, `(?m)^ ✓ build "fast" +│ *✗+ *↻.*│$`, text, "a failed attempt, then the retry")
	svg := g.run(t, "project", "timeline", "acme", "--format", "svg")
	require.NoError(t, xmlValid(svg))
	assert.Equal(t, 4, strings.Count(svg, `class="bar run-`))
	then := g.run(t, "project", "timeline", "acme", "--format", "svg", "--at", strconv.FormatUint(g.before, 10))
	assert.Equal(t, 1, strings.Count(then, `class="bar run-`))
	r := cliRun(t, g.sock, "project", "timeline", "acme", "--format", "dot", "--db", g.db)
	assert.Equal(t, 2, r.code, r.stderr)
}

func xmlValid(doc string) error {
	dec := xml.NewDecoder(strings.NewReader(doc))
	for {
		if _, err := dec.Token(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestProjectReportHTML: report --html -o FILE writes one self-contained
// HTML file (nothing it loads from outside: no script, no src, no href
// but the page's own fragments) with every task title, escaped; -o -
// writes it to stdout; --html without -o, and -o without --html, are
// usage errors; report without --html still asks the daemon.
func TestProjectReportHTML(t *testing.T) {
	g := newDiamond(t)
	file := filepath.Join(t.TempDir(), "acme.html")
	out := g.run(t, "project", "report", "acme", "--html", "-o", file)
	assert.Regexp(t, `^acme: report \(html\) as of sequence \d+ written to `+file+`\n$`, out)
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
	assert.NotContains(t, string(raw), "<img")
	assert.Contains(t, string(raw), "&lt;img src=x onerror=alert(1)&gt;")
	assert.Contains(t, string(raw), "fetch &amp; unpack")
	for _, s := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "@import"} {
		assert.NotContains(t, string(raw), s)
	}
	assert.Contains(t, string(raw), "scv ledger verify --db "+g.db+" --head ")

	// To stdout, as of a sequence, with no daemon; reproducible.
	nowhere := filepath.Join(cliShortDir(t), "none.sock")
	before := strconv.FormatUint(g.before, 10)
	page := cliOK(t, nowhere, "project", "report", "acme", "--html", "-o", "-", "--at", before, "--db", g.db)
	assert.True(t, strings.HasPrefix(strings.ToLower(page), "<!doctype html>"), page[:40])
	assert.Equal(t, page, cliOK(t, nowhere, "project", "report", "acme", "--html", "-o", "-", "--at", before, "--db", g.db))
	var j pictureJSON
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, nowhere, "--json", "project", "report", "acme", "--html", "-o", file, "--db", g.db)), &j))
	assert.Equal(t, pictureJSON{ProjectID: j.ProjectID, Name: "acme", Sequence: g.head(t), Format: "html", Bytes: j.Bytes, File: file}, j)

	for _, args := range [][]string{
		{"project", "report", "acme", "--html"},
		{"project", "report", "acme", "-o", file},
		{"project", "report", "acme", "--stale-after", "1m"},
		{"project", "report", "acme", "--db", g.db},
	} {
		r := cliRun(t, g.sock, args...)
		assert.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
	}
	assert.Contains(t, cliOK(t, g.sock, "project", "report", "acme"), "\nRuns:\n", "without --html: the daemon's report")
}
