package main

import (
	"bufio"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDaemonHTTP runs the binary with --http 127.0.0.1:0: its log says
// "web UI" with the address and token, which scv ui prints too and which
// opens the UI; without the token it is 401. (ui.txtar shows scv ui, and
// an address that is not loopback refused.)
func TestDaemonHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := shortDir(t)
	bin := buildScv(t, dir, "1.2.3-test")
	sock := filepath.Join(dir, "d.sock")
	base := []string{"--db", filepath.Join(dir, "ledger.db"), "--socket", sock, "--config", filepath.Join(dir, "channels.json")}

	cmd := exec.Command(bin, append([]string{"daemon", "--http", "127.0.0.1:0"}, base...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		for s := bufio.NewScanner(stderr); s.Scan(); {
			lines <- s.Text()
		}
	}()
	logged := regexp.MustCompile(`msg="web UI" url="?(http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{64})"?$`)
	var url string
	timeout := time.After(20 * time.Second)
	for url == "" {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the daemon ended before it logged the web UI")
			if m := logged.FindStringSubmatch(l); m != nil {
				url = m[1]
			}
		case <-timeout:
			require.FailNow(t, "no web UI line in the log")
		}
	}
	assert.Equal(t, url+"\n", cliOK(t, sock, "ui"))
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Less(t, resp.StatusCode, 400, "the token opens the UI")
	resp, err = http.Get(strings.Split(url, "?")[0])
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "without it: 401")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for range lines {
	}
	require.NoError(t, cmd.Wait())
}
