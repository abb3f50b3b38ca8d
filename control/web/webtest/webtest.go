// Package webtest starts a real browser for the tests of the web UI: a
// headless Chromium (Debian's) of the test's own, with a fresh profile.
// Where Chromium is missing, a test skips saying how to install it, or
// fails when SCV_REQUIRE_CHROMIUM is set (as CI sets it). Only tests
// import it.
package webtest

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Chromium is the path of Debian's Chromium ($SCV_CHROMIUM, else
// /usr/bin/chromium).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SCV_CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	msg := "no Chromium at /usr/bin/chromium: install Debian's with `apt-get install -y chromium` (or set SCV_CHROMIUM)"
	if os.Getenv("SCV_REQUIRE_CHROMIUM") != "" {
		t.Fatal(msg + "; SCV_REQUIRE_CHROMIUM is set")
	}
	t.Skip(msg)
	return ""
}

// Browser is a tab of a headless Chromium, and how many JavaScript
// dialogs it opened (each one is dismissed).
type Browser struct {
	Ctx     context.Context
	Dialogs atomic.Int32
}

// New starts Chromium for the test; it ends with the test.
func New(t testing.TB) *Browser {
	t.Helper()
	exe := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx), "start Chromium")
	b := &Browser{Ctx: ctx}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			b.Dialogs.Add(1)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b
}
