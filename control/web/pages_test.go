package web_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"scv/control/render"
	"scv/control/view"
	"scv/reducer"
)

const hostile = `<img src=x onerror=alert(1)>`

func parse(t *testing.T, body string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	require.NoError(t, err)
	return doc
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	for _, c := range strings.Fields(attr(n, "class")) {
		if c == class {
			return true
		}
	}
	return false
}

func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	walk(n, func(m *html.Node) {
		if m.Type == html.ElementNode && match(m) {
			out = append(out, m)
		}
	})
	return out
}

func byID(n *html.Node, id string) *html.Node {
	if f := find(n, func(m *html.Node) bool { return attr(m, "id") == id }); len(f) == 1 {
		return f[0]
	}
	return nil
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

// TestProjectPage: the project page has its sections, one graph node
// per task and one timeline bar per run, the drawings without inline
// style (the page's policy forbids it) and the style sheet and script of
// the UI itself only; a hostile title is text; a failed task has a Retry
// form and no other task has one.
func TestProjectPage(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("acme", hostile)
	resp, body := e.get("/p/" + pid)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	doc := parse(t, body)
	for _, id := range []string{"summary", "graph", "timeline", "tasks", "runs", "evidence", "chain", "events"} {
		require.NotNil(t, byID(doc, id), id)
	}
	assert.Len(t, find(byID(doc, "graph"), func(n *html.Node) bool { return n.Data == "g" && hasClass(n, "node") }), 4)
	assert.Len(t, find(byID(doc, "timeline"), func(n *html.Node) bool { return n.Data == "rect" && hasClass(n, "bar") }), 2)
	assert.Empty(t, find(doc, func(n *html.Node) bool { return n.Data == "style" }), "no inline style")
	assert.NotContains(t, body, "style=")
	for _, s := range find(doc, func(n *html.Node) bool { return n.Data == "script" }) {
		assert.Equal(t, "/static/app.js", attr(s, "src"))
		assert.Empty(t, text(s), "no inline script")
	}
	links := find(doc, func(n *html.Node) bool { return n.Data == "link" })
	require.Len(t, links, 1)
	assert.Equal(t, "/static/app.css", attr(links[0], "href"))

	assert.Empty(t, find(doc, func(n *html.Node) bool { return n.Data == "img" }), "the title made no element")
	titles := find(byID(doc, "tasks"), func(n *html.Node) bool { return n.Data == "span" && hasClass(n, "title") })
	require.Len(t, titles, 4)
	assert.Equal(t, hostile, text(titles[1]))
	assert.NotContains(t, body, hostile)

	forms := find(doc, func(n *html.Node) bool { return n.Data == "form" && hasClass(n, "retry") })
	require.Len(t, forms, 1, "only the failed task")
	assert.Equal(t, "/p/"+pid+"/tasks/"+tasks["b"]+"/retry", attr(forms[0], "action"))
	assert.Equal(t, "post", attr(forms[0], "method"))

	// The verify command names the database and the head.
	p, err := e.l.Project(t.Context(), pid)
	require.NoError(t, err)
	assert.Contains(t, text(byID(doc, "chain")), "--head "+pid+"=")
	assert.Contains(t, text(byID(doc, "chain")), "sequence "+strconv.FormatUint(p.LastSequence, 10))

	// Unknown projects are 404, by ID or by name.
	resp, _ = e.get("/p/nothing-here")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = e.get("/p/acme")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "by name")
}

// TestNoActionsNoRetry: without Actions no Retry button, and the retry
// URL is not there.
func TestNoActionsNoRetry(t *testing.T) {
	e := newEnv(t, withoutActions)
	pid, tasks := e.project("acme", "build")
	_, body := e.get("/p/" + pid)
	assert.Empty(t, find(parse(t, body), func(n *html.Node) bool { return n.Data == "form" && hasClass(n, "retry") }))
	resp, _ := e.do(http.MethodPost, "/p/"+pid+"/tasks/"+tasks["b"]+"/retry", nil, http.Header{"Origin": {e.base}}, true)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestProjectsAndQuestionsPages: the list names every project, linked to
// its page; the questions page has Yes and No for a pending question,
// and shows a decided one with its outcome and no buttons.
func TestProjectsAndQuestionsPages(t *testing.T) {
	e := newEnv(t)
	a, _ := e.project("alpha", "build")
	b, _ := e.project("beta", hostile)
	_, body := e.get("/")
	doc := parse(t, body)
	rows := find(doc, func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "project") })
	require.Len(t, rows, 2)
	var ids []string
	for _, r := range rows {
		ids = append(ids, attr(r, "data-project-id"))
	}
	assert.ElementsMatch(t, []string{a, b}, ids)
	assert.Len(t, find(doc, func(n *html.Node) bool { return n.Data == "a" && attr(n, "href") == "/p/"+a }), 1)

	pending := e.ask("Deploy " + hostile + "?")
	decided := e.ask("Tag the release?")
	_, err := e.q.Answer(t.Context(), decided, false, "owner in chat")
	require.NoError(t, err)
	_, body = e.get("/questions")
	doc = parse(t, body)
	assert.Empty(t, find(doc, func(n *html.Node) bool { return n.Data == "img" }))
	p := find(byID(doc, "pending"), func(n *html.Node) bool { return n.Data == "li" && attr(n, "data-question-id") == pending })
	require.Len(t, p, 1)
	assert.Contains(t, text(p[0]), "Deploy "+hostile+"?")
	buttons := find(p[0], func(n *html.Node) bool { return n.Data == "button" })
	require.Len(t, buttons, 2)
	assert.Equal(t, []string{"yes", "no"}, []string{attr(buttons[0], "value"), attr(buttons[1], "value")})
	d := find(byID(doc, "decided"), func(n *html.Node) bool { return n.Data == "li" && attr(n, "data-question-id") == decided })
	require.Len(t, d, 1)
	assert.Contains(t, text(d[0]), "owner in chat")
	assert.Empty(t, find(d[0], func(n *html.Node) bool { return n.Data == "button" }))
	// The project page shows the pending one, and its form comes back there.
	_, body = e.get("/p/" + a)
	forms := find(parse(t, body), func(n *html.Node) bool { return n.Data == "form" && hasClass(n, "answer") })
	require.Len(t, forms, 1)
	back := find(forms[0], func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == "back" })
	require.Len(t, back, 1)
	assert.Equal(t, "/p/"+a, attr(back[0], "value"))
}

// TestEventsPaged: the events are listed newest first, EventsPerPage at a
// time, with links to the older and newer pages that lead through all of
// them once.
func TestEventsPaged(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("acme", "build")
	for i := 0; i < 100; i++ {
		e.exec(reducer.RecordHeartbeat{Project: pid, TaskID: tasks["c"]})
	}
	page, err := e.l.EventsPage(t.Context(), pid, 0, 1000)
	require.NoError(t, err)
	all := len(page.Rows)
	require.Greater(t, all, 100)
	var seen []uint64
	path := "/p/" + pid
	older := regexp.MustCompile(`href="(/p/[^"#]+\?before=\d+)#events">older`)
	for pages := 0; path != ""; pages++ {
		require.Less(t, pages, 10)
		_, body := e.get(path)
		doc := parse(t, body)
		rows := find(byID(doc, "events"), func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "event") })
		assert.LessOrEqual(t, len(rows), 50)
		for _, r := range rows {
			seq, err := strconv.ParseUint(attr(r, "data-seq"), 10, 64)
			require.NoError(t, err)
			if len(seen) > 0 {
				assert.Less(t, seq, seen[len(seen)-1], "newest first")
			}
			seen = append(seen, seq)
		}
		if pages > 0 {
			assert.Contains(t, body, "← newer")
		}
		path = ""
		if m := older.FindStringSubmatch(body); m != nil {
			path = html.UnescapeString(m[1])
		}
	}
	assert.Len(t, seen, all, "every event once")
	assert.Equal(t, page.Rows[len(page.Rows)-1].Sequence, seen[0])
	assert.Equal(t, page.Rows[0].Sequence, seen[len(seen)-1])
}

// TestVersionFollowsTheLedger: the version a page polls changes with a
// new event of its project (and of any project, for the list) and with a
// question's step, and not otherwise.
func TestVersionFollowsTheLedger(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("acme", "build")
	other, _ := e.project("other", "build")
	version := func(q string) string {
		resp, body := e.get("/api/version?" + q)
		require.Equal(t, http.StatusOK, resp.StatusCode, q)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		m := regexp.MustCompile(`^\{"version":"([0-9.]+)"\}\n$`).FindStringSubmatch(body)
		require.NotNil(t, m, body)
		return m[1]
	}
	p0, l0, q0 := version("page=project&id="+pid), version("page=projects"), version("page=questions")
	assert.Equal(t, p0, version("page=project&id="+pid), "stable")
	e.exec(reducer.RecordHeartbeat{Project: other})
	assert.Equal(t, p0, version("page=project&id="+pid), "another project's event")
	l1 := version("page=projects")
	assert.NotEqual(t, l0, l1)
	e.exec(reducer.StartRun{Project: pid, TaskID: tasks["c"], RunID: newID(), Agent: "codex"})
	p1 := version("page=project&id=" + pid)
	assert.NotEqual(t, p0, p1)
	e.ask("Ship it?")
	assert.NotEqual(t, q0, version("page=questions"))
	assert.NotEqual(t, p1, version("page=project&id="+pid), "the page shows pending questions")
	resp, _ := e.get("/api/version?page=project&id=none")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestMetricsEndpoint: /metrics needs the token like every page, parses
// as the Prometheus text format, and counts the UI's own requests and
// refusals.
func TestMetricsEndpoint(t *testing.T) {
	e := newEnv(t)
	e.project("acme", "build")
	e.get("/")
	e.get("/")
	e.do(http.MethodGet, "/", nil, nil, false)
	resp, _ := e.do(http.MethodGet, "/metrics", nil, nil, false)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, body := e.do(http.MethodGet, "/metrics", nil, http.Header{"Accept": {"text/plain"}}, true)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	count := func(name, label, value string) float64 {
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
		return -1
	}
	assert.Equal(t, 2.0, count("scv_http_requests_total", "code", "200"))
	assert.Equal(t, 2.0, count("scv_http_refused_total", "reason", "token"))
	assert.Contains(t, fams, "scv_ledger_cache_hits_total")
}

// TestReportDownload: the report is a file to save (so the policy of
// the UI, which would forbid its inline style, never applies to it), and
// it is the report of the project.
func TestReportDownload(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.project("acme", hostile)
	resp, body := e.get("/p/" + pid + "/report.html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `attachment; filename="scv-report-`+pid+`.html"`, resp.Header.Get("Content-Disposition"))
	doc := parse(t, body)
	for _, id := range []string{"summary", "graph", "timeline", "tasks", "runs", "evidence", "chain"} {
		assert.NotNil(t, byID(doc, id), id)
	}
	assert.Empty(t, find(doc, func(n *html.Node) bool { return n.Data == "img" || n.Data == "script" }))
}

// TestStyleSheet: the UI's style sheet carries the style it shares with
// the HTML report and the drawings' rules, which the pages' SVGs no
// longer have inline.
func TestStyleSheet(t *testing.T) {
	e := newEnv(t)
	resp, body := e.get("/static/app.css")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.True(t, strings.HasPrefix(body, view.StyleSheet()), "the shared style comes first")
	assert.Contains(t, body, ".q-yes{", "then the UI's own")
	assert.True(t, strings.HasSuffix(body, render.StyleSheet()), "then the drawings'")
	resp, _ = e.get("/static/other.css")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
