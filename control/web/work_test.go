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
	"scv/control/view"
	"scv/reducer"
)

// TestProjectPageWork: the project page shows the project's work, as the
// daemon's project_work_status has it: its state and turns, each agent
// with its task (titled from the ledger, linked to its row), its run,
// turns and starts, and what the work waits for; nothing without a work
// or without the daemon's Handler. Its version follows what the section
// shows.
func TestProjectPageWork(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("acme", "build")
	run := newID()
	e.exec(reducer.StartRun{Project: pid, TaskID: tasks["c"], RunID: run, Agent: "acme-1"})

	_, body := e.get("/p/" + pid)
	assert.NotContains(t, body, `id="work"`, "no work, no section")
	version := func() string {
		resp, body := e.get("/api/version?page=project&id=" + pid)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		m := regexp.MustCompile(`^\{"version":"([0-9.]+)"\}\n$`).FindStringSubmatch(body)
		require.NotNil(t, m, body)
		return m[1]
	}
	v := version()

	w := api.WorkInfo{
		Project: pid, ProjectName: "acme", State: api.WorkRunning, Agents: 2, Command: []string{"acpagent"},
		Waiting: "task " + tasks["d"] + " (package) waits for the owner's approval " + hostile,
		Turns:   api.WorkTurns{Started: 5, Succeeded: 3, Failed: 1},
		Slots: []api.WorkSlot{
			{Agent: "acme-1", State: "working", Task: ptr(tasks["c"]), Run: ptr(run), Turns: 3, Starts: 1},
			{Agent: "acme-2", State: "stopped", Turns: 1, Starts: 4, Why: "its agent ended 4 times " + hostile},
		},
	}
	e.actions.setWork(pid, &w)
	nv := version()
	assert.NotEqual(t, v, nv, "a work: the page changes")
	v = nv
	assert.Equal(t, v, version(), "stable")

	resp, body := e.get("/p/" + pid)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, `data-version="`+v+`"`)
	assert.NotContains(t, body, hostile, "the work's text escaped")
	doc, err := html.Parse(strings.NewReader(body))
	require.NoError(t, err)
	section := find(doc, func(n *html.Node) bool { return attr(n, "id") == "work" })
	require.Len(t, section, 1)
	assert.Contains(t, text(section[0]), "running 2 agents · turns: 5 started, 3 succeeded, 1 failed, 0 cancelled")
	assert.Contains(t, text(section[0]), "Waiting: task "+tasks["d"]+" (package) waits for the owner's approval")
	rows := find(section[0], func(n *html.Node) bool { return n.Data == "tr" && attr(n, "class") == "slot" })
	require.Len(t, rows, 2)
	assert.Equal(t, "acme-1 working lint "+view.ShortID(run)+" 3 1 —", rowText(rows[0]))
	links := find(rows[0], func(n *html.Node) bool { return n.Data == "a" })
	require.Len(t, links, 2)
	assert.Equal(t, "#task-"+tasks["c"], attr(links[0], "href"))
	assert.Equal(t, "#run-"+run, attr(links[1], "href"))
	assert.Equal(t, "acme-2 stopped — — 1 4 its agent ended 4 times "+hostile, rowText(rows[1]))

	// A turn ends: the version changes; the work ended, it is still shown.
	w.Turns.Succeeded++
	w.Slots[0].State, w.Slots[0].Task, w.Slots[0].Run = "idle", nil, nil
	e.actions.setWork(pid, &w)
	assert.NotEqual(t, v, version(), "a turn ended")
	v = version()
	w.State, w.Why, w.Waiting = api.WorkEnded, "nothing ready", ""
	e.actions.setWork(pid, &w)
	assert.NotEqual(t, v, version(), "the work ended")
	_, body = e.get("/p/" + pid)
	assert.Contains(t, body, `<span class="badge work-ended">ended</span>`)
	assert.NotContains(t, body, "Waiting:")

	// Without the daemon's Handler, no work is shown.
	e2 := newEnv(t, withoutActions)
	pid2, _ := e2.project("shop", "build")
	resp, body = e2.get("/p/" + pid2)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotContains(t, body, `id="work"`)
}

// rowText is the text of a table row's cells, one space between them.
func rowText(row *html.Node) string {
	var cells []string
	for _, td := range find(row, func(n *html.Node) bool { return n.Data == "td" }) {
		cells = append(cells, strings.Join(strings.Fields(text(td)), " "))
	}
	return strings.Join(cells, " ")
}

// TestBrowserProjectPageWork: in a real browser the open project page's
// Work section follows the work without a reload: a turn that ends shows
// its agent idle and the turns counted; the agent's task link leads to
// the task's row.
func TestBrowserProjectPageWork(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t)
	pid, tasks := e.project("acme", "build")
	run := newID()
	e.exec(reducer.StartRun{Project: pid, TaskID: tasks["c"], RunID: run, Agent: "acme-1"})
	w := api.WorkInfo{
		Project: pid, ProjectName: "acme", State: api.WorkRunning, Agents: 1, Command: []string{"acpagent"},
		Turns: api.WorkTurns{Started: 1},
		Slots: []api.WorkSlot{{Agent: "acme-1", State: "working", Task: ptr(tasks["c"]), Run: ptr(run), Starts: 1}},
	}
	e.actions.setWork(pid, &w)
	b.open(t, e, "/p/"+pid)

	rowJS := `Array.from(document.querySelector('#work tr.slot').cells).map(c => c.innerText.trim().replace(/\s+/g, ' '))`
	assert.Equal(t, []string{"acme-1", "working", "lint", view.ShortID(run), "0", "1", "—"}, eval[[]string](t, b, rowJS))
	assert.Equal(t, 1, count(t, b, `nav a[href="#work"]`))

	marker := eval[string](t, b, `window.scvMarker = "same page"; window.scvMarker`)
	w.Turns.Succeeded, w.Slots[0].Turns = 1, 1
	w.Slots[0].State, w.Slots[0].Task, w.Slots[0].Run = "idle", nil, nil
	e.actions.setWork(pid, &w)
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#work tr.slot td:nth-child(2)').textContent === 'idle'`, chromedp.WithPollingInterval(50*time.Millisecond)))
	require.NoError(t, err, "the agent shows idle")
	assert.Equal(t, marker, eval[string](t, b, `window.scvMarker`), "no reload")
	assert.Equal(t, []string{"acme-1", "idle", "—", "—", "1", "1", "—"}, eval[[]string](t, b, rowJS))
	assert.Contains(t, eval[string](t, b, `document.querySelector('#work p.sub').innerText`), "turns: 1 started, 1 succeeded")

	// The task's link leads to its row.
	w.Slots[0].State, w.Slots[0].Task = "working", ptr(tasks["c"])
	e.actions.setWork(pid, &w)
	b.do(t, chromedp.Navigate(e.base+"/p/"+pid), chromedp.WaitReady(chromedp.CSS("#work")))
	href := eval[string](t, b, `document.querySelector('#work tr.slot a').getAttribute('href')`)
	assert.Equal(t, "#task-"+tasks["c"], href)
	assert.Equal(t, tasks["c"], eval[string](t, b, `document.getElementById('task-`+tasks["c"]+`').dataset.taskId`))
	assert.Zero(t, b.dialogs.Load(), "no dialog opened")
}
