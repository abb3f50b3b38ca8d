package render

import (
	"bytes"
	"encoding/xml"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGraphTextGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		opts TextOptions
	}{
		{"graph-80.golden", TextOptions{Width: 80}},
		{"graph-100.golden", TextOptions{Width: 100}},
		{"graph-ascii-80.golden", TextOptions{Width: 80, ASCII: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, GraphText(&b, diamond(), c.opts))
			golden(t, c.name, b.Bytes())
		})
	}
}

func TestGraphTextFitsWidth(t *testing.T) {
	for _, p := range []Project{diamond(), hostileProject(), randomProject(7, 120, 4, 30), {Name: "empty"}} {
		for _, w := range []int{16, 24, 40, 60, 80, 100, 132} {
			for _, color := range []bool{false, true} {
				var b bytes.Buffer
				require.NoError(t, GraphText(&b, p, TextOptions{Width: w, Color: color}))
				assertFits(t, b.Bytes(), w)
			}
		}
	}
}

func TestGraphTextASCII(t *testing.T) {
	p := randomProject(3, 50, 3, 10)
	var b bytes.Buffer
	require.NoError(t, GraphText(&b, p, TextOptions{Width: 30, ASCII: true}))
	for i, r := range b.String() {
		require.Less(t, r, rune(0x80), "non-ASCII %q at byte %d", r, i)
	}
}

func TestGraphTextColor(t *testing.T) {
	var plain, color bytes.Buffer
	require.NoError(t, GraphText(&plain, hostileProject(), TextOptions{Width: 100}))
	require.NoError(t, GraphText(&color, hostileProject(), TextOptions{Width: 100, Color: true}))
	assert.NotContains(t, plain.String(), "\x1b", "no colour asked, and the titles' escapes are neutralised")
	assert.Contains(t, color.String(), "\x1b[32m[✓]\x1b[0m", "a done task's mark is green")
	assert.Contains(t, color.String(), "\x1b[1;33m[▶]\x1b[0m", "a running task's mark is bold yellow")
	assert.Equal(t, plain.String(), ansi.ReplaceAllString(color.String(), ""), "colour changes nothing but the colour")
}

// graphLine is one task line of GraphText: " #k [m] title  meta  ← #i t, #j t".
var graphLine = regexp.MustCompile(`^ +#(\d+) \[(.)\] (.*?) {2,}(\d+ att(?:, \d+/\d+ retries)?)(?: {2,}← (.*))?$`)

// TestGraphTextEdges reads every task line back: each task once, its
// status mark, its attempts, and the numbers of its dependencies, which
// must be exactly its kept dependencies and already printed.
func TestGraphTextEdges(t *testing.T) {
	for _, p := range []Project{diamond(), randomProject(11, 80, 4, 20)} {
		var b bytes.Buffer
		require.NoError(t, GraphText(&b, p, TextOptions{Width: 400}))
		ix := indexTasks(p.Tasks)
		taskOf := map[int]int{} // printed number → task index
		byTitle := map[string]int{}
		for i, task := range p.Tasks {
			byTitle[task.Title] = i
		}
		for _, l := range strings.Split(b.String(), "\n") {
			m := graphLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			k, _ := strconv.Atoi(m[1])
			i, ok := byTitle[m[3]]
			require.True(t, ok, "line %q names no task", l)
			taskOf[k] = i
			assert.Equal(t, taskLook(p.Tasks[i].Status).mark, m[2], "mark of %q", m[3])
			assert.Equal(t, attemptsText(p.Tasks[i]), m[4])
			var deps []int
			if m[5] != "" {
				for _, ref := range strings.Split(m[5], ", #") {
					n, err := strconv.Atoi(strings.Fields(strings.TrimPrefix(ref, "#"))[0])
					require.NoError(t, err, "ref %q", ref)
					require.Less(t, n, k, "a dependency is printed before its dependant")
					deps = append(deps, taskOf[n])
				}
			}
			assert.ElementsMatch(t, ix.deps[i], deps, "dependencies of %q", m[3])
		}
		assert.Len(t, taskOf, len(p.Tasks), "one line per task")
	}
}

// xnode is any XML element, read with encoding/xml.
type xnode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []xnode    `xml:",any"`
}

func parseSVG(t *testing.T, b []byte) xnode {
	t.Helper()
	var root xnode
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	require.NoError(t, d.Decode(&root), "the SVG is not well-formed XML")
	require.Equal(t, "svg", root.XMLName.Local)
	require.Equal(t, "http://www.w3.org/2000/svg", root.XMLName.Space)
	return root
}

func (n xnode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n xnode) classes() []string { return strings.Fields(n.attr("class")) }

func (n xnode) hasClass(c string) bool { return slices.Contains(n.classes(), c) }

// walk calls f on n and every element below it.
func (n xnode) walk(f func(xnode)) {
	f(n)
	for _, c := range n.Nodes {
		c.walk(f)
	}
}

// find is every element named name (any name if empty) with class class
// (any if empty).
func (n xnode) find(name, class string) []xnode {
	var out []xnode
	n.walk(func(e xnode) {
		if (name == "" || e.XMLName.Local == name) && (class == "" || e.hasClass(class)) {
			out = append(out, e)
		}
	})
	return out
}

// allText is the character data of n and everything below it.
func (n xnode) allText() string {
	var b strings.Builder
	n.walk(func(e xnode) { b.WriteString(e.Text) })
	return b.String()
}

// assertStandalone checks what makes a drawing safe to open or inline:
// a viewBox, a <style>, and nothing that runs or loads: no script, no
// foreignObject, no event attributes, no reference that is not to the
// document itself.
func assertStandalone(t *testing.T, root xnode) {
	t.Helper()
	assert.NotEmpty(t, root.attr("viewBox"))
	assert.Len(t, root.find("style", ""), 1)
	root.walk(func(e xnode) {
		assert.NotEqual(t, "script", e.XMLName.Local)
		assert.NotEqual(t, "foreignObject", e.XMLName.Local)
		assert.NotEqual(t, "img", e.XMLName.Local)
		for _, a := range e.Attrs {
			assert.False(t, strings.HasPrefix(a.Name.Local, "on"), "event attribute %s", a.Name.Local)
			assert.NotEqual(t, "href", a.Name.Local)
			if a.Name.Local == "xmlns" {
				continue
			}
			for _, ref := range regexp.MustCompile(`url\(([^)]*)\)`).FindAllStringSubmatch(a.Value, -1) {
				assert.True(t, strings.HasPrefix(ref[1], "#"), "external reference %s", ref[0])
			}
		}
	})
	for _, s := range root.find("style", "") {
		assert.NotContains(t, s.Text, "@import")
		for _, ref := range regexp.MustCompile(`url\(([^)]*)\)`).FindAllStringSubmatch(s.Text, -1) {
			assert.True(t, strings.HasPrefix(ref[1], "#"), "external reference %s", ref[0])
		}
	}
}

func TestGraphSVG(t *testing.T) {
	for _, p := range []Project{diamond(), randomProject(5, 150, 4, 25), hostileProject()} {
		var b bytes.Buffer
		require.NoError(t, GraphSVG(&b, p))
		root := parseSVG(t, b.Bytes())
		assertStandalone(t, root)

		nodes := root.find("g", "node")
		require.Len(t, nodes, len(p.Tasks), "one node per task")
		for i, n := range nodes {
			task := p.Tasks[i]
			assert.Equal(t, task.ID, n.attr("data-task-id"))
			assert.Contains(t, n.classes(), "status-"+statusWord(task.Status, taskStatuses))
			require.Len(t, n.find("rect", ""), 1, "task %s", task.ID)
			texts := n.find("text", "")
			require.Len(t, texts, 1, "task %s", task.ID)
			assert.Contains(t, texts[0].allText(), metaText(task))
			assert.Contains(t, n.allText(), clean(task.Title), "the full title, in the tooltip")
		}

		ix := indexTasks(p.Tasks)
		var want []string
		for i, task := range p.Tasks {
			for _, d := range ix.deps[i] {
				want = append(want, p.Tasks[d].ID+" -> "+task.ID)
			}
		}
		var got []string
		for _, e := range root.find("path", "edge") {
			got = append(got, e.attr("data-from")+" -> "+e.attr("data-to"))
			assert.True(t, strings.HasPrefix(e.attr("d"), "M"))
		}
		assert.Equal(t, want, got, "one edge per dependency")
	}
}

func TestGraphSVGEscapes(t *testing.T) {
	p := hostileProject()
	var b bytes.Buffer
	require.NoError(t, GraphSVG(&b, p))
	root := parseSVG(t, b.Bytes())
	assert.Empty(t, root.find("img", ""), "a title became markup")
	assert.Empty(t, root.find("script", ""), "an ID became markup")
	assert.Empty(t, root.find("b", ""), "the project name became markup")
	assert.Contains(t, root.allText(), `<img src=x onerror=alert(1)>`, "the title is shown as text")
	assert.Contains(t, root.allText(), `<b>bold</b> & "quoted"`, "the project name is shown as text")
	var ids []string
	for _, n := range root.find("g", "node") {
		ids = append(ids, n.attr("data-task-id"))
	}
	assert.Contains(t, ids, `"><script>alert(1)</script>`, "the ID survives as an attribute value")
}

func TestGraphSVGEmpty(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, GraphSVG(&b, Project{Name: "nothing"}))
	root := parseSVG(t, b.Bytes())
	assert.Empty(t, root.find("g", "node"))
	assert.Contains(t, root.allText(), "no tasks")
}

// dotStatement is one statement of a DOT body: its tokens, quoted strings
// unescaped.
type dotToken struct {
	text   string
	quoted bool
}

// parseDOT reads the subset of DOT that GraphDOT writes: "digraph ID {",
// statements ending in ';', "}". It fails on anything else, an
// unterminated string included.
func parseDOT(t *testing.T, s string) [][]dotToken {
	t.Helper()
	var toks []dotToken
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '"':
			var b strings.Builder
			i++
			for ; ; i++ {
				require.Less(t, i, len(s), "unterminated string")
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					b.WriteByte(s[i+1])
					i++
					continue
				}
				if s[i] == '"' {
					break
				}
				require.NotEqual(t, byte('\n'), s[i], "a raw line break inside a string")
				b.WriteByte(s[i])
			}
			i++
			toks = append(toks, dotToken{b.String(), true})
		case strings.HasPrefix(s[i:], "->"):
			toks = append(toks, dotToken{"->", false})
			i += 2
		case strings.ContainsRune("{}[];,=", rune(c)):
			toks = append(toks, dotToken{string(c), false})
			i++
		default:
			j := i
			for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9' || s[j] == '_' || s[j] == '.') {
				j++
			}
			require.Greater(t, j, i, "unexpected %q", s[i:min(len(s), i+20)])
			toks = append(toks, dotToken{s[i:j], false})
			i = j
		}
	}
	require.GreaterOrEqual(t, len(toks), 4)
	require.Equal(t, "digraph", toks[0].text)
	require.True(t, toks[1].quoted)
	require.Equal(t, "{", toks[2].text)
	require.Equal(t, "}", toks[len(toks)-1].text)
	var stmts [][]dotToken
	var cur []dotToken
	for _, tk := range toks[3 : len(toks)-1] {
		if tk.text == ";" && !tk.quoted {
			stmts = append(stmts, cur)
			cur = nil
			continue
		}
		cur = append(cur, tk)
	}
	require.Empty(t, cur, "a statement without its ';'")
	return stmts
}

// dotAttrs reads "[k=v, k=v]" from the tokens.
func dotAttrs(t *testing.T, toks []dotToken) map[string]string {
	t.Helper()
	require.Equal(t, "[", toks[0].text)
	require.Equal(t, "]", toks[len(toks)-1].text)
	attrs := map[string]string{}
	inner := toks[1 : len(toks)-1]
	for k := 0; k < len(inner); k += 4 {
		require.GreaterOrEqual(t, len(inner)-k, 3)
		require.Equal(t, "=", inner[k+1].text)
		attrs[inner[k].text] = inner[k+2].text
		if k+3 < len(inner) {
			require.Equal(t, ",", inner[k+3].text)
		}
	}
	return attrs
}

func TestGraphDOT(t *testing.T) {
	for _, p := range []Project{diamond(), hostileProject(), randomProject(2, 60, 3, 10)} {
		var b bytes.Buffer
		require.NoError(t, GraphDOT(&b, p))
		stmts := parseDOT(t, b.String())
		nodes := map[string]map[string]string{}
		var edges, found []string
		for _, st := range stmts {
			switch {
			case !st[0].quoted:
				require.Contains(t, []string{"graph", "node", "edge"}, st[0].text, "statement %v", st)
			case len(st) == 3 && st[1].text == "->" && !st[1].quoted:
				require.True(t, st[2].quoted)
				edges = append(edges, st[0].text+" -> "+st[2].text)
			case len(st) > 3 && st[1].text == "->" && !st[1].quoted:
				assert.Equal(t, "found", dotAttrs(t, st[3:])["class"])
				found = append(found, st[0].text+" -> "+st[2].text)
			default:
				_, dup := nodes[st[0].text]
				require.False(t, dup, "node %q stated twice", st[0].text)
				nodes[st[0].text] = dotAttrs(t, st[1:])
			}
		}
		require.Len(t, nodes, len(p.Tasks), "one node statement per task")
		for _, task := range p.Tasks {
			a, ok := nodes[task.ID]
			require.True(t, ok, "no node for %q", task.ID)
			assert.Equal(t, clean(task.Title)+`\n`+clean(task.Status)+" · "+metaText(task), a["label"], "the label reads back as the title")
			assert.Equal(t, taskLook(task.Status).fill, a["fillcolor"])
			assert.Equal(t, "status-"+statusWord(task.Status, taskStatuses), a["class"])
		}
		ix := indexTasks(p.Tasks)
		var want []string
		for i, task := range p.Tasks {
			for _, d := range ix.deps[i] {
				want = append(want, p.Tasks[d].ID+" -> "+task.ID)
			}
		}
		assert.Equal(t, want, edges, "one edge per dependency")
		var wantFound []string
		for _, task := range p.Tasks {
			if task.FoundIn != "" {
				wantFound = append(wantFound, task.FoundIn+" -> "+task.ID)
			}
		}
		assert.Equal(t, wantFound, found, "one dotted edge per task found during a run")
	}
}

func TestDOTEscape(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        `plain`,
		`say "hi"`:     `say \"hi\"`,
		`back\slash`:   `back\\slash`,
		`\N and \G`:    `\\N and \\G`,
		"two\nlines":   `two lines`,
		`"]; a -> b [`: `\"]; a -> b [`,
	} {
		assert.Equal(t, want, dotEscape(in), "%q", in)
	}
}
