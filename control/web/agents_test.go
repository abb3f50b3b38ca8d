package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"scv/control/api"
	"scv/reducer"
)

// agentsFixture is a project "acme" whose task "lint" has a run going,
// and two live agents: "claude-1" working on that run, mid-turn (its
// third), and one named as markup, idle for five minutes with two
// background jobs and no project.
type agentsFixture struct {
	pid, task, run string
	working, idle  api.AgentInfo
}

func newAgentsFixture(e *env) agentsFixture {
	e.t.Helper()
	pid, tasks := e.project("acme", "build")
	run := newID()
	e.exec(reducer.StartRun{Project: pid, TaskID: tasks["c"], RunID: run, Agent: "claude"})
	now := e.clock.now()
	f := agentsFixture{pid: pid, task: tasks["c"], run: run}
	f.working = api.AgentInfo{
		Name: "claude-1", Handle: "d-claude-1", State: api.AgentWorking, Command: []string{"claude-code-acp"},
		Workspace: "/work/acme", PID: 4242, Conversation: ptr("sess-0123456789abcdef"), Turn: 3,
		Project: ptr(pid), Task: ptr(tasks["c"]), Run: ptr(run), StopReason: ptr("end_turn"),
		StartedUnixSeconds: uint64(now.Add(-20 * time.Minute).Unix()),
	}
	f.idle = api.AgentInfo{
		Name: "gemini " + hostile, Handle: "d-gemini", State: api.AgentIdle, Command: []string{"gemini", "--acp"},
		Workspace: "/work/other", PID: 4343, Conversation: ptr("sess-fedcba9876543210"), Turn: 1,
		IdleSinceUnixSeconds: ptr(uint64(now.Add(-5 * time.Minute).Unix())), BackgroundJobs: ptr(uint32(2)),
		StopReason: ptr("cancelled"), StartedUnixSeconds: uint64(now.Add(-10 * time.Minute).Unix()),
	}
	e.agents.set(f.working, f.idle)
	return f
}

// cells is the text of each cell of an agents table row, by its class,
// a line break read as a space, spaces collapsed.
func cells(row *html.Node) map[string]string {
	out := map[string]string{}
	for _, td := range find(row, func(n *html.Node) bool { return n.Data == "td" }) {
		var b strings.Builder
		walk(td, func(m *html.Node) {
			switch {
			case m.Type == html.TextNode:
				b.WriteString(m.Data)
			case m.Type == html.ElementNode && m.Data == "br":
				b.WriteString(" ")
			}
		})
		out[attr(td, "class")] = strings.Join(strings.Fields(b.String()), " ")
	}
	return out
}

func links(n *html.Node) []string {
	var out []string
	for _, a := range find(n, func(m *html.Node) bool { return m.Data == "a" }) {
		out = append(out, attr(a, "href"))
	}
	return out
}

// TestAgentsPage: /agents lists the live agents in the manager's order,
// one row each with its name, state, conversation, turn, idle time
// ("working" while a turn runs), background jobs, task (by its title
// and project's name, linked to the run on the project's page), run and
// last stop reason; a name made of markup is text. The project page has
// the row the link names, and lists its own live agent (and no other)
// with a link to its run. The navigation links to /agents.
func TestAgentsPage(t *testing.T) {
	e := newEnv(t)
	f := newAgentsFixture(e)
	resp, body := e.get("/agents")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	doc := parse(t, body)
	assert.Len(t, find(doc, func(n *html.Node) bool { return n.Data == "nav" && contains(links(n), "/agents") }), 1, "the navigation links to the page")
	assert.Empty(t, find(doc, func(n *html.Node) bool { return n.Data == "img" }), "the name made no element")
	assert.NotContains(t, body, hostile)
	for _, s := range find(doc, func(n *html.Node) bool { return n.Data == "script" }) {
		assert.Equal(t, "/static/app.js", attr(s, "src"))
		assert.Empty(t, text(s), "no inline script")
	}

	rows := find(doc, func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "agent") })
	require.Len(t, rows, 2)
	assert.Equal(t, "d-claude-1", attr(rows[0], "data-agent"), "oldest first, as listed")
	assert.Equal(t, "d-gemini", attr(rows[1], "data-agent"))

	w := cells(rows[0])
	assert.Equal(t, "claude-1 d-claude-1", w["name"])
	assert.Equal(t, "working", w["state"])
	assert.Equal(t, "…89abcdef", w["conversation"])
	assert.Equal(t, "3", w["turn"])
	assert.Equal(t, "working", w["idle"])
	assert.Equal(t, "—", w["jobs"])
	assert.Equal(t, "lint acme", w["task"])
	assert.Equal(t, "…"+f.run[len(f.run)-8:], w["run"])
	assert.Equal(t, "end_turn", w["stop"])
	target := "/p/" + f.pid + "#run-" + f.run
	assert.Equal(t, []string{target, target}, links(rows[0]), "the task and the run link to the run's row")

	i := cells(rows[1])
	assert.Equal(t, "gemini "+hostile+" d-gemini", i["name"])
	assert.Equal(t, "idle", i["state"])
	assert.Equal(t, "1", i["turn"])
	assert.Equal(t, "5m ago", i["idle"])
	assert.Equal(t, "2", i["jobs"])
	assert.Equal(t, "—", i["task"])
	assert.Equal(t, "—", i["run"])
	assert.Equal(t, "cancelled", i["stop"])
	assert.Empty(t, links(rows[1]))
	times := find(rows[1], func(n *html.Node) bool { return n.Data == "time" })
	require.Len(t, times, 1)
	idleSince := time.Unix(int64(*f.idle.IdleSinceUnixSeconds), 0)
	assert.Equal(t, idleSince.Format(time.RFC3339), attr(times[0], "datetime"))

	// The link's target: the run's row in the project's runs table.
	resp, body = e.get("/p/" + f.pid)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	doc = parse(t, body)
	row := byID(doc, "run-"+f.run)
	require.NotNil(t, row, "the project page has the run's row")
	assert.Equal(t, "tr", row.Data)
	assert.Equal(t, f.run, attr(row, "data-run-id"))
	require.Len(t, find(byID(doc, "runs"), func(n *html.Node) bool { return attr(n, "id") == "run-"+f.run }), 1, "in the runs section")
	// Its live agents: the working one only, linked to its run.
	section := byID(doc, "agents")
	require.NotNil(t, section, "a live agents section")
	items := find(section, func(n *html.Node) bool { return n.Data == "li" && hasClass(n, "agent") })
	require.Len(t, items, 1)
	assert.Equal(t, "d-claude-1", attr(items[0], "data-agent"))
	assert.Contains(t, text(items[0]), "claude-1")
	assert.Contains(t, text(items[0]), "working")
	assert.Equal(t, []string{"#run-" + f.run}, links(items[0]))
	assert.NotContains(t, body, "gemini")
}

// TestAgentsPageLinks: an agent between turns of a task links to the
// project's runs table; one of a project the ledger does not have shows
// its IDs and links nowhere.
func TestAgentsPageLinks(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("acme", "build")
	e.agents.set(
		api.AgentInfo{Name: "between", Handle: "d-1", State: api.AgentIdle, Turn: 2, Project: ptr(pid), Task: ptr(tasks["c"]),
			IdleSinceUnixSeconds: ptr(uint64(e.clock.now().Add(-90 * time.Minute).Unix()))},
		api.AgentInfo{Name: "lost", Handle: "d-2", State: api.AgentStarting, Project: ptr("no-such-project"), Task: ptr("no-such-task")},
	)
	_, body := e.get("/agents")
	rows := find(parse(t, body), func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "agent") })
	require.Len(t, rows, 2)
	assert.Equal(t, []string{"/p/" + pid + "#runs"}, links(rows[0]))
	assert.Equal(t, "1h 30m ago", cells(rows[0])["idle"])
	assert.Equal(t, "lint acme", cells(rows[0])["task"])
	assert.Empty(t, links(rows[1]))
	assert.Equal(t, "no-such-task no-such-project (not in the ledger)", cells(rows[1])["task"])
	assert.Equal(t, "—", cells(rows[1])["idle"], "starting: neither working nor idle")
	// No agents: the page says so.
	e.agents.set()
	_, body = e.get("/agents")
	assert.Empty(t, find(parse(t, body), func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "agent") }))
	assert.Contains(t, body, "No live agent runs")
}

// TestNoAgents: without Agents there is no /agents page, no link to it
// and no live agents section.
func TestNoAgents(t *testing.T) {
	e := newEnv(t, withoutAgents)
	pid, _ := e.project("acme", "build")
	resp, _ := e.get("/agents")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = e.get("/api/version?page=agents")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	_, body := e.get("/p/" + pid)
	doc := parse(t, body)
	assert.Nil(t, byID(doc, "agents"))
	assert.NotContains(t, links(doc), "/agents")
}

// TestAgentsVersion: the agents page's version changes when an agent's
// state, turn, idle time (as the page words it) or background jobs
// change, or an agent comes or goes, and not otherwise; a project page's
// changes with its own agents only.
func TestAgentsVersion(t *testing.T) {
	e := newEnv(t)
	f := newAgentsFixture(e)
	version := func(q string) string {
		resp, body := e.get("/api/version?" + q)
		require.Equal(t, http.StatusOK, resp.StatusCode, q)
		m := regexp.MustCompile(`^\{"version":"([0-9.]+)"\}\n$`).FindStringSubmatch(body)
		require.NotNil(t, m, body)
		return m[1]
	}
	agents, project := "page=agents", "page=project&id="+f.pid
	v, pv := version(agents), version(project)
	// The page carries the version it polls.
	_, body := e.get("/agents")
	assert.Contains(t, body, `data-version="`+v+`"`)
	assert.Contains(t, body, `data-poll="/api/version?page=agents"`)
	_, body = e.get("/p/" + f.pid)
	assert.Contains(t, body, `data-version="`+pv+`"`)

	assert.Equal(t, v, version(agents), "stable")
	step := func(what string, change func(w, i *api.AgentInfo), projectChanges bool) {
		t.Helper()
		w, i := f.working, f.idle
		change(&w, &i)
		f.working, f.idle = w, i
		e.agents.set(w, i)
		nv, npv := version(agents), version(project)
		assert.NotEqual(t, v, nv, what)
		if projectChanges {
			assert.NotEqual(t, pv, npv, what+": the project page")
		} else {
			assert.Equal(t, pv, npv, what+": not the project page")
		}
		v, pv = nv, npv
	}
	step("jobs", func(_, i *api.AgentInfo) { i.BackgroundJobs = ptr(uint32(1)) }, false)
	step("no jobs reported", func(_, i *api.AgentInfo) { i.BackgroundJobs = nil }, false)
	step("idle since", func(_, i *api.AgentInfo) { i.IdleSinceUnixSeconds = ptr(*i.IdleSinceUnixSeconds + 60) }, false)
	step("turn", func(w, _ *api.AgentInfo) { w.Turn++ }, true)
	step("state", func(w, _ *api.AgentInfo) {
		w.State, w.Run = api.AgentIdle, nil
		w.IdleSinceUnixSeconds = ptr(uint64(e.clock.now().Unix()))
	}, true)
	// A minute on, "<1m ago" becomes "1m ago": the page refreshes.
	e.clock.advance(time.Minute)
	nv := version(agents)
	assert.NotEqual(t, v, nv, "the idle time as shown")
	assert.Equal(t, pv, version(project))
	v = nv
	e.agents.set(f.idle)
	assert.NotEqual(t, v, version(agents), "an agent gone")
	assert.NotEqual(t, pv, version(project), "the project's agent gone")
}

// TestBrowserAgentsPage: in a real browser /agents shows a row per live
// agent; when the working agent's turn ends (the listing says idle) the
// open page shows it within a second and a half, without a reload; and
// the task's link leads to the run's row on the project page.
func TestBrowserAgentsPage(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t)
	f := newAgentsFixture(e)
	b.open(t, e, "/agents")

	rowsJS := `Array.from(document.querySelectorAll('#agents tr.agent')).map(r => Array.from(r.cells).map(c => c.innerText.trim().replace(/\s+/g, ' ')))`
	rows := eval[[][]string](t, b, rowsJS)
	short := "…" + f.run[len(f.run)-8:]
	require.Equal(t, [][]string{
		{"claude-1 d-claude-1", "working", "…89abcdef", "3", "working", "—", "lint acme", short, "end_turn"},
		{"gemini " + hostile + " d-gemini", "idle", "…76543210", "1", "5m ago", "2", "—", "—", "cancelled"},
	}, rows)
	target := "/p/" + f.pid + "#run-" + f.run
	assert.Equal(t, target, eval[string](t, b, `document.querySelector('tr.agent[data-agent="d-claude-1"] td.task a').getAttribute('href')`))
	assert.Equal(t, 0, count(t, b, "img"), "no element from the name")
	assert.Equal(t, 1, count(t, b, `nav a[href="/agents"]`))

	// The turn ends: the working agent becomes idle.
	marker := eval[string](t, b, `window.scvMarker = "same page"; window.scvMarker`)
	start := time.Now()
	w := f.working
	w.State, w.Run = api.AgentIdle, nil
	w.IdleSinceUnixSeconds = ptr(uint64(e.clock.now().Unix()))
	w.BackgroundJobs = ptr(uint32(1))
	e.agents.set(w, f.idle)
	ctx, cancel := context.WithTimeout(b.ctx, 1500*time.Millisecond)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('tr.agent[data-agent="d-claude-1"] td.state').textContent === 'idle'`, chromedp.WithPollingInterval(50*time.Millisecond)))
	require.NoError(t, err, "the agent shows idle within 1.5 s")
	t.Logf("the agent showed idle on the open page %v after the listing said so", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, marker, eval[string](t, b, `window.scvMarker`), "no reload")
	rows = eval[[][]string](t, b, rowsJS)
	require.Len(t, rows, 2)
	assert.Equal(t, []string{"claude-1 d-claude-1", "idle", "…89abcdef", "3", "<1m ago", "1", "lint acme", "—", "end_turn"}, rows[0])
	assert.Equal(t, "/p/"+f.pid+"#runs", eval[string](t, b, `document.querySelector('tr.agent[data-agent="d-claude-1"] td.task a').getAttribute('href')`))

	// The run's link leads to its row.
	b.do(t, chromedp.Navigate(e.base+target), chromedp.WaitReady(chromedp.CSS("#runs")))
	assert.Equal(t, f.run, eval[string](t, b, `document.getElementById(decodeURIComponent(location.hash.slice(1))).dataset.runId`))
	assert.Equal(t, "claude-1", eval[string](t, b, `document.querySelector('#agents li.agent .title').textContent`))
	assert.Zero(t, b.dialogs.Load(), "no dialog opened")
}
