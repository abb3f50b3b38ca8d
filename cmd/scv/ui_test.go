package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/web"
)

// TestDaemonHTTP runs the binary with --http 127.0.0.1:0: its log says
// "web UI listening" with the address and the command that prints it with
// the token (scv ui), and never has the token; scv ui's address opens the
// UI. (ui.txtar shows scv ui, and an address that is not loopback
// refused before anything is opened.)
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
	// The log names the command that prints the address to open, and
	// never the token.
	logged := regexp.MustCompile(`msg="web UI listening; scv ui prints the address to open, with its token" component=web url=(http://127\.0\.0\.1:\d+/) open="scv --socket (\S+) ui"$`)
	var address string
	var log []string
	timeout := time.After(20 * time.Second)
	for address == "" {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the daemon ended before it logged the web UI")
			log = append(log, l)
			if m := logged.FindStringSubmatch(l); m != nil {
				address = m[1]
				assert.Equal(t, sock, m[2])
			}
		case <-timeout:
			require.FailNow(t, "no web UI line in the log")
		}
	}
	url := strings.TrimSuffix(cliOK(t, sock, "ui"), "\n")
	require.Regexp(t, `^`+regexp.QuoteMeta(address)+`\?token=[0-9a-f]{64}$`, url)
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
	for l := range lines {
		log = append(log, l)
	}
	require.NoError(t, cmd.Wait())
	_, token, _ := strings.Cut(url, "?token=")
	for _, l := range log {
		assert.NotContains(t, l, token, "the token is not logged")
	}
	_, file := web.Files(sock)
	_, err = os.Stat(file)
	assert.True(t, os.IsNotExist(err), "the address file is removed at stop")
}
