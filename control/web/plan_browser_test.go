package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// TestBrowserPlan: the project page shows the plan in a real browser: a
// task's priority, an epic's children's progress (in the table and the
// graph), a task's epic, the run its work was found in (linked to the
// run's row; a dotted line in the graph, a marker on the timeline), and
// its description, as text, under a <details> that stays open when the
// page updates itself.
func TestBrowserPlan(t *testing.T) {
	b := newBrowser(t)
	e := newEnv(t)
	pid, tasks := e.project("plan", "build")
	zero := 0
	epic, child, found, run := newID(), newID(), newID(), newID()
	e.exec(reducer.AddTask{Project: pid, TaskID: epic, Title: "release", Priority: &zero})
	e.exec(reducer.AddTask{Project: pid, TaskID: child, Title: "changelog", Parent: epic})
	e.exec(reducer.StartRun{Project: pid, TaskID: tasks["c"], RunID: run, Agent: "codex"})
	e.clock.advance(time.Minute)
	e.exec(reducer.AddTask{Project: pid, TaskID: found, Title: "docs", DiscoveredFrom: run,
		Description: "Document the flags.\n" + hostile, Acceptance: "every flag in --help"})
	b.open(t, e, "/p/"+pid)

	row := func(id string) string { return `#tasks tr#task-` + id }
	assert.Equal(t, "P0", eval[string](t, b, `document.querySelector('`+row(epic)+` .priority').textContent`))
	assert.Equal(t, "epic · 0/1 done", eval[string](t, b, `document.querySelector('`+row(epic)+` .epic').textContent`))
	assert.Contains(t, eval[string](t, b, `document.querySelector('`+row(child)+` .plan-link.parent').textContent`), "in epic release")
	assert.Contains(t, eval[string](t, b, `document.querySelector('`+row(found)+` .plan-link.found').textContent`), "of lint")
	assert.Equal(t, "#run-"+run, eval[string](t, b, `document.querySelector('`+row(found)+` .plan-link.found a').getAttribute('href')`))
	assert.Equal(t, 1, count(t, b, `#runs tr#run-`+run), "the run's row it links to")
	assert.Equal(t, 1, count(t, b, `#graph g.node.epic`))
	assert.Contains(t, eval[string](t, b, `document.querySelector('#graph g.node.epic text').textContent`), "epic 0/1 done")
	assert.Equal(t, 1, count(t, b, `#graph path.found[data-from="`+tasks["c"]+`"][data-to="`+found+`"]`))
	assert.Equal(t, 1, count(t, b, `#timeline path.marker-found[data-run-id="`+run+`"]`))
	assert.Equal(t, 0, count(t, b, "img"), "the description is text")

	// The description, opened, stays open as the page updates.
	desc := row(found) + ` details.description`
	assert.False(t, eval[bool](t, b, `document.querySelector('`+desc+`').open`))
	b.do(t, chromedp.Click(chromedp.CSS(desc+` summary`)))
	assert.Equal(t, "Document the flags.\n"+hostile, eval[string](t, b, `document.querySelector('`+desc+` .text').textContent`))
	assert.True(t, eval[bool](t, b, `document.querySelector('`+desc+`').open`))
	refreshed := eval[string](t, b, `document.documentElement.dataset.refreshed || "0"`)
	e.exec(reducer.ProgressRun{Project: pid, RunID: run, Progress: "writing the flags down"})
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`(document.documentElement.dataset.refreshed || "0") !== "`+refreshed+`"`, chromedp.WithPollingInterval(50*time.Millisecond)))
	require.NoError(t, err, "the page updated itself")
	assert.Contains(t, eval[string](t, b, `document.querySelector('#runs tr#run-`+run+`').textContent`), "writing the flags down")
	assert.True(t, eval[bool](t, b, `document.querySelector('`+desc+`').open`), "still open")
	assert.Equal(t, 0, count(t, b, "img"))
}
