package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/web"
	"scv/control/web/webtest"
)

// TestMCPSeenLiveInTheWebUI: an agent configured as docs/mcp.md says
// (`scv mcp --project P`) takes a task, reports progress and finishes
// it, and the owner's open project page, in a real browser, shows the
// run start, its progress and its end as they happen, without a reload.
func TestMCPSeenLiveInTheWebUI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, starts a browser")
	}
	b := webtest.New(t)
	dir := shortDir(t)
	bin := buildScv(t, dir, "mcp-test")
	d := startTestDaemon(t, bin, filepath.Join(dir, "l.db"), filepath.Join(dir, "d.sock"), "", "--http", "127.0.0.1:0", "--heartbeat-every", "0")
	st := d.must(t, api.CmdProjectCreate{Name: "acme", Workspace: dir})
	pid := st.Project.Project.ID
	d.must(t, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}})
	base, token := webAddress(t, d.sock)

	ctx, cancel := context.WithTimeout(b.Ctx, 60*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Navigate(base+"/p/"+pid+"?token="+token))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("#app"))))
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.scvMarker = "same page"; window.scvMarker`))
	require.NoError(t, err)
	shows := func(js, what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
		defer cancel()
		_, err := chromedp.Run(wctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond)))
		require.NoError(t, err, "the page shows %s", what)
	}
	badges := func(status string) string {
		return fmt.Sprintf(`document.querySelectorAll('#runs tr.run .badge.run-%s').length === 1`, status)
	}

	s := startMCP(t, bin, d.sock, "--project", "acme")
	var claim struct {
		RunID string `json:"run_id"`
	}
	s.call("task_claim", map[string]any{"task": "build"}, &claim)
	require.NotEmpty(t, claim.RunID)
	shows(badges("running"), "the claimed run, running")
	s.call("run_progress", map[string]any{"run": claim.RunID, "progress": "compiled 3 of 5 packages"}, nil)
	shows(`document.body.innerText.includes('compiled 3 of 5 packages')`, "the run's progress")
	s.call("run_finish", map[string]any{"run": claim.RunID, "status": "succeeded"}, nil)
	shows(badges("succeeded"), "the run succeeded")

	again, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.scvMarker`))
	require.NoError(t, err)
	assert.Equal(t, marker, again, "no reload")
}

// webAddress is the address of the daemon's web UI and its token, from
// the files the daemon on sock writes beside it.
func webAddress(t *testing.T, sock string) (base, token string) {
	t.Helper()
	tokenFile, urlFile := web.Files(sock)
	require.Eventually(t, func() bool {
		tb, err1 := os.ReadFile(tokenFile)
		ub, err2 := os.ReadFile(urlFile)
		token, base = strings.TrimSpace(string(tb)), strings.TrimSpace(string(ub))
		return err1 == nil && err2 == nil && token != "" && base != ""
	}, 10*time.Second, 20*time.Millisecond)
	u, err := url.Parse(base)
	require.NoError(t, err)
	return "http://" + u.Host, token
}
