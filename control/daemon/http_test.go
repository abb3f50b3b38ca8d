package daemon

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/web"
)

// TestHTTPRefusesNonLoopback: a daemon configured with a web UI address
// that is not loopback is refused by Check and by Open, before Open
// touches anything: no socket, no lock, no database.
func TestHTTPRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":8080", "[::]:0", "192.168.1.10:80", "example.com:80"} {
		dir := shortDir(t)
		cfg := Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), HTTP: addr}
		assert.ErrorContains(t, cfg.Check(), "loopback", addr)
		d := New(cfg)
		err := d.Open(context.Background())
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "loopback", addr)
		entries, _ := os.ReadDir(dir)
		assert.Empty(t, entries, "%s: nothing was created", addr)
	}
	cfg := Config{DB: "/x/l.db", Socket: "/x/d.sock", HTTP: "127.0.0.1:0"}
	assert.NoError(t, cfg.Check())
}

// TestHTTPServes: with Config.HTTP the daemon serves the UI: the token
// and URL files are beside the socket, 0600; a project created on the
// socket is on the projects page for the token and only for it; /metrics
// parses and its head sequence is the ledger's; Close removes the files.
func TestHTTPServes(t *testing.T) {
	dir := shortDir(t)
	d := New(Config{DB: filepath.Join(dir, "l.db"), Socket: filepath.Join(dir, "d.sock"), HTTP: "127.0.0.1:0", Version: version})
	require.NoError(t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	closed := false
	t.Cleanup(func() {
		if !closed {
			d.Close()
			<-served
		}
	})
	tokenFile, urlFile := web.Files(d.cfg.Socket)
	for _, f := range []string{tokenFile, urlFile} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	b, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	token := strings.TrimSpace(string(b))
	u, err := os.ReadFile(urlFile)
	require.NoError(t, err)
	assert.Equal(t, d.Web().TokenURL()+"\n", string(u))

	st := inCall(t, d, control.CmdProjectCreate{Name: "via-socket", Workspace: dir})
	require.NotNil(t, st.Project)
	get := func(path string, auth bool) (int, string) {
		req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(d.Web().URL(), "/")+path, nil)
		require.NoError(t, err)
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("/", false)
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.NotContains(t, body, "via-socket")
	code, body = get("/", true)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "via-socket")

	code, body = get("/metrics", true)
	require.Equal(t, http.StatusOK, code)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	p, err := d.Ledger().Project(context.Background(), "via-socket")
	require.NoError(t, err)
	head := fams["scv_ledger_head_sequence"].GetMetric()
	require.Len(t, head, 1)
	assert.Equal(t, strconv.FormatUint(p.LastSequence, 10), strconv.FormatFloat(head[0].GetGauge().GetValue(), 'f', -1, 64))
	running := fams["scv_runs_running"].GetMetric()
	require.Len(t, running, 1)
	assert.Zero(t, running[0].GetGauge().GetValue())

	require.NoError(t, d.Close())
	require.NoError(t, <-served)
	closed = true
	for _, f := range []string{tokenFile, urlFile} {
		_, err := os.Stat(f)
		assert.ErrorIs(t, err, os.ErrNotExist, f)
	}
}
