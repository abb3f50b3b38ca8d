package web_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/web"
)

const wantCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"

// paths is every kind of page, with the IDs of a project and a question.
func paths(project, task, question string) (gets, posts []string) {
	gets = []string{"/", "/p/" + project, "/p/" + project + "/report.html", "/questions", "/agents", "/mail", "/metrics",
		"/api/version?page=projects", "/api/version?page=project&id=" + project, "/api/version?page=agents", "/api/version?page=mail",
		"/static/app.js", "/static/app.css", "/nowhere"}
	posts = []string{"/questions/" + question + "/answer", "/p/" + project + "/tasks/" + task + "/retry"}
	return gets, posts
}

// assertNothingOfTheLedger: body names nothing the ledger holds.
func assertNothingOfTheLedger(t *testing.T, body string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		assert.NotContains(t, body, s)
	}
}

// TestNoTokenNoLedger: without the token every request, page, API,
// static file, /metrics or write, is answered 401 with a body that names
// nothing of the ledger; a wrong bearer token, cookie or ?token= is no
// better. Nothing is written.
func TestNoTokenNoLedger(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("secret-project", "secret task title")
	qid := e.ask("secret question?")
	secrets := []string{"secret", pid, tasks["b"], qid, "scv_"}
	gets, posts := paths(pid, tasks["b"], qid)
	wrong := strings.Repeat("0", 64)
	for _, p := range gets {
		for name, h := range map[string]http.Header{
			"none":          nil,
			"wrong bearer":  {"Authorization": {"Bearer " + wrong}},
			"not bearer":    {"Authorization": {"Basic " + e.token}},
			"wrong cookie":  {"Cookie": {"scv_ui_" + port(e) + "=" + wrong}},
			"other cookie":  {"Cookie": {"scv_ui_1=" + e.token}},
			"empty cookie":  {"Cookie": {"scv_ui_" + port(e) + "="}},
			"token twice":   nil,
			"wrong ?token=": nil,
		} {
			path := p
			switch name {
			case "wrong ?token=":
				path = withQuery(p, "token", wrong)
			case "token twice":
				path = withQuery(withQuery(p, "token", e.token), "token", wrong)
			}
			resp, body := e.do(http.MethodGet, path, nil, h, false)
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s", name, path)
			assertNothingOfTheLedger(t, body, secrets...)
			assert.Empty(t, resp.Header.Values("Set-Cookie"), "%s %s", name, path)
		}
	}
	for _, p := range posts {
		resp, body := e.do(http.MethodPost, p, strings.NewReader("answer=yes"),
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {e.base}}, false)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, p)
		assertNothingOfTheLedger(t, body, secrets...)
		// A token in the URL does not authorize a write.
		resp, _ = e.do(http.MethodPost, withQuery(p, "token", e.token), strings.NewReader("answer=yes"),
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {e.base}}, false)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, p)
	}
	assert.Equal(t, api.ConfirmPending, e.question(qid).State, "no answer was recorded")
	assert.Empty(t, e.actions.asked(), "no retry was asked for")
}

func port(e *env) string {
	u, _ := url.Parse(e.base)
	return u.Port()
}

func withQuery(p, k, v string) string {
	sep := "?"
	if strings.Contains(p, "?") {
		sep = "&"
	}
	return p + sep + url.QueryEscape(k) + "=" + url.QueryEscape(v)
}

// TestTokenInURLBecomesCookie: a GET with ?token= is answered with the
// cookie (HttpOnly, SameSite=Strict, for the whole site) and a redirect
// to the same URL without the token; the cookie then opens every page,
// and the bearer token does without a cookie.
func TestTokenInURLBecomesCookie(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.project("acme", "build")
	resp, body := e.do(http.MethodGet, "/p/"+pid+"?before=9&token="+e.token, nil, nil, false)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/p/"+pid+"?before=9", resp.Header.Get("Location"))
	assert.NotContains(t, body, "acme")
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	assert.Equal(t, "scv_ui_"+port(e), c.Name)
	assert.Equal(t, e.token, c.Value)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	assert.Equal(t, "/", c.Path)

	resp, body = e.do(http.MethodGet, "/p/"+pid, nil, http.Header{"Cookie": {c.Name + "=" + c.Value}}, false)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, "acme")
	resp, body = e.get("/")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, "acme")

	// The URL file is the address that does this.
	b, err := os.ReadFile(e.urlFile)
	require.NoError(t, err)
	assert.Equal(t, e.base+"/?token="+e.token+"\n", string(b))
	// A redirect never leaves the site.
	resp, _ = e.do(http.MethodGet, "//evil.example/?token="+e.token, nil, nil, false)
	assert.Equal(t, "/", resp.Header.Get("Location"))
}

// TestHostMustBeTheUI: a request whose Host is not the address the UI
// listens on (a rebound DNS name, another port) is refused, token or
// not, and learns nothing of the ledger; localhost with the right port is
// the UI.
func TestHostMustBeTheUI(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("secret-project", "secret task")
	qid := e.ask("secret question?")
	gets, _ := paths(pid, tasks["b"], qid)
	for _, host := range []string{"evil.example:" + port(e), "evil.example", "127.0.0.1:1", "127.0.0.1", "localhost", "[::1]:" + port(e), "127.0.0.2:" + port(e)} {
		for _, p := range gets {
			resp, body := e.do(http.MethodGet, p, nil, http.Header{"Host": {host}}, true)
			assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "Host %s %s", host, p)
			assertNothingOfTheLedger(t, body, "secret", pid, qid)
		}
	}
	// A refused host's write changes nothing either.
	resp, _ := e.do(http.MethodPost, "/questions/"+qid+"/answer", strings.NewReader("answer=yes"),
		http.Header{"Host": {"evil.example:" + port(e)}, "Origin": {"http://evil.example:" + port(e)}, "Content-Type": {"application/x-www-form-urlencoded"}}, true)
	assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
	assert.Equal(t, api.ConfirmPending, e.question(qid).State)

	resp, body := e.do(http.MethodGet, "/", nil, http.Header{"Host": {"localhost:" + port(e)}}, true)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, "secret-project")
}

// TestWritesNeedTheUIsOrigin: an answer or a retry posted with another
// Origin, with none, or with "null" is refused (403) and changes nothing,
// bearer token and all; from the UI's own origin it is recorded (by "web
// UI") and redirects back. A GET on a write's URL is no write.
func TestWritesNeedTheUIsOrigin(t *testing.T) {
	e := newEnv(t)
	pid, tasks := e.project("acme", "build")
	qid := e.ask("Ship it?")
	form := func(origin string) http.Header {
		h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		return h
	}
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1", "https://" + strings.TrimPrefix(e.base, "http://"), "null", ""} {
		resp, body := e.do(http.MethodPost, "/questions/"+qid+"/answer", strings.NewReader("answer=yes"), form(origin), true)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "Origin %q", origin)
		assert.NotContains(t, body, "Ship it")
		resp, _ = e.do(http.MethodPost, "/p/"+pid+"/tasks/"+tasks["b"]+"/retry", nil, form(origin), true)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "Origin %q", origin)
	}
	assert.Equal(t, api.ConfirmPending, e.question(qid).State, "nothing was answered")
	assert.Empty(t, e.actions.asked(), "nothing was retried")
	resp, _ := e.do(http.MethodGet, "/questions/"+qid+"/answer?answer=yes", nil, nil, true)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, api.ConfirmPending, e.question(qid).State)

	resp, _ = e.do(http.MethodPost, "/questions/"+qid+"/answer", strings.NewReader("answer=yes&back=/p/"+pid), form(e.base), true)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/p/"+pid, resp.Header.Get("Location"))
	q := e.question(qid)
	assert.Equal(t, api.ConfirmYes, q.State)
	require.NotNil(t, q.DecidedBy)
	assert.Equal(t, web.AnsweredBy, *q.DecidedBy)
	// Answered once: a second answer is a conflict.
	resp, _ = e.do(http.MethodPost, "/questions/"+qid+"/answer", strings.NewReader("answer=no"), form(e.base), true)
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Equal(t, api.ConfirmYes, e.question(qid).State)

	resp, _ = e.do(http.MethodPost, "/p/"+pid+"/tasks/"+tasks["b"]+"/retry", nil, form("http://localhost:"+port(e)), true)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, []string{pid + "/" + tasks["b"]}, e.actions.asked())
}

// TestHeaders: every answer, refusals included, carries the policy, no
// sniffing and no framing, and none a CORS header, not even to a
// preflight.
func TestHeaders(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.project("acme", "build")
	for _, c := range []struct {
		method, path string
		header       http.Header
		auth         bool
		code         int
	}{
		{http.MethodGet, "/", nil, true, 200},
		{http.MethodGet, "/p/" + pid, nil, true, 200},
		{http.MethodGet, "/agents", nil, true, 200},
		{http.MethodGet, "/static/app.js", nil, true, 200},
		{http.MethodGet, "/nowhere", nil, true, 404},
		{http.MethodGet, "/", nil, false, 401},
		{http.MethodGet, "/", http.Header{"Host": {"evil.example"}}, true, 421},
		{http.MethodPost, "/questions/x/answer", http.Header{"Origin": {"http://evil.example"}}, true, 403},
		{http.MethodOptions, "/", http.Header{"Origin": {"http://evil.example"}, "Access-Control-Request-Method": {"POST"}}, true, 405},
		{http.MethodOptions, "/", http.Header{"Origin": {"http://evil.example"}, "Access-Control-Request-Method": {"POST"}}, false, 401},
		{http.MethodGet, "/", http.Header{"Origin": {"http://evil.example"}}, true, 200},
	} {
		resp, _ := e.do(c.method, c.path, nil, c.header, c.auth)
		what := c.method + " " + c.path
		assert.Equal(t, c.code, resp.StatusCode, what)
		assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), wantCSP), "%s: %q", what, resp.Header.Get("Content-Security-Policy"))
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), what)
		assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), what)
		assert.Equal(t, "same-origin", resp.Header.Get("Referrer-Policy"), what)
		for k := range resp.Header {
			assert.False(t, strings.HasPrefix(strings.ToLower(k), "access-control-"), "%s: %s", what, k)
		}
	}
	resp, _ := e.get("/static/app.js")
	assert.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
}

// TestLoopbackOnly: Start refuses every address but 127.0.0.1, ::1 and
// localhost, and then listens on nothing; CheckAddr says the same.
func TestLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.168.1.10:8080", "10.0.0.1:0", "127.0.0.2:0",
		"example.com:80", "localhost.example.com:0", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", ""} {
		s := &web.Server{Addr: addr, Ledger: ledgerOf{}}
		err := s.Start(context.Background())
		assert.Error(t, err, addr)
		assert.Error(t, web.CheckAddr(addr), addr)
		assert.Empty(t, s.URL(), addr)
		s.Stop()
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		assert.NoError(t, web.CheckAddr(addr), addr)
	}
	// localhost listens on 127.0.0.1, whatever the resolver says.
	dir := t.TempDir()
	s := &web.Server{Addr: "localhost:0", Ledger: ledgerOf{}, TokenFile: dir + "/t"}
	require.NoError(t, s.Start(context.Background()))
	defer s.Stop()
	host, _, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(s.URL(), "/"), "http://"))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
}

// TestStartLogLine: the one line the UI logs at start has its address and
// the command that prints the address to open (Open; "scv ui" when
// unset), and never the token: the address alone gives 401.
func TestStartLogLine(t *testing.T) {
	for _, open := range []string{"scv --socket /run/scv/daemon.sock ui", ""} {
		var log strings.Builder
		e := newEnv(t, func(s *web.Server) {
			s.Logger = slog.New(slog.NewTextHandler(&log, nil))
			s.Open = open
		})
		want := open
		if want == "" {
			want = "scv ui"
		}
		lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
		require.Len(t, lines, 1, log.String())
		assert.Contains(t, lines[0], ` level=INFO msg="web UI listening; scv ui prints the address to open, with its token" url=`+e.srv.URL()+` open="`+want+`"`)
		assert.NotContains(t, lines[0], e.token)
		resp, err := http.Get(e.srv.URL())
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the logged address alone")
	}
}

// TestTokenFiles: the token and URL files are 0600 and hold this start's
// token (256 bits in hex); a new start makes a new token and the old one
// no longer opens anything; Stop removes both files.
func TestTokenFiles(t *testing.T) {
	e := newEnv(t)
	for _, f := range []string{e.tokenFile, e.urlFile} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	assert.Regexp(t, `^[0-9a-f]{64}$`, e.token)
	assert.Equal(t, e.srv.TokenURL(), e.srv.URL()+"?token="+e.token)

	old := e.token
	e.srv.Stop()
	for _, f := range []string{e.tokenFile, e.urlFile} {
		_, err := os.Stat(f)
		assert.ErrorIs(t, err, os.ErrNotExist, f)
	}
	require.NoError(t, e.srv.Start(context.Background()))
	e.base = strings.TrimSuffix(e.srv.URL(), "/")
	b, err := os.ReadFile(e.tokenFile)
	require.NoError(t, err)
	e.token = strings.TrimSpace(string(b))
	assert.NotEqual(t, old, e.token)
	resp, _ := e.do(http.MethodGet, "/", nil, http.Header{"Authorization": {"Bearer " + old}}, false)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = e.get("/")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestMCPGuard: /mcp is for programs: the token only in an Authorization
// header (not the UI's cookie, nor the URL), no Origin or the UI's own
// (never another site's), and DELETE too, which no page takes.
func TestMCPGuard(t *testing.T) {
	var served []string
	e := newEnv(t, func(s *web.Server) {
		s.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served = append(served, r.Method)
			w.WriteHeader(http.StatusOK)
		})
	})
	bearer := http.Header{"Authorization": {"Bearer " + e.token}}
	traded, _ := e.do(http.MethodGet, "/?token="+e.token, nil, nil, false)
	require.NotEmpty(t, traded.Cookies(), "the token traded for the UI's cookie")
	cookie := http.Header{"Cookie": {traded.Cookies()[0].String()}, "Origin": {e.base}}
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		h.Set(k, v)
		return h
	}
	for _, tc := range []struct {
		name   string
		method string
		path   string
		header http.Header
		auth   bool
		want   int
	}{
		{"no token", http.MethodPost, "/mcp", nil, false, http.StatusUnauthorized},
		{"the cookie opens a page", http.MethodGet, "/agents", cookie, false, http.StatusOK},
		{"the UI's cookie", http.MethodPost, "/mcp", cookie, false, http.StatusUnauthorized},
		{"the token in the URL", http.MethodGet, "/mcp?token=" + e.token, nil, false, http.StatusUnauthorized},
		{"a wrong token", http.MethodPost, "/mcp", http.Header{"Authorization": {"Bearer nope"}}, false, http.StatusUnauthorized},
		{"another site's page", http.MethodPost, "/mcp", with(bearer, "Origin", "http://evil.example"), false, http.StatusForbidden},
		{"a program", http.MethodPost, "/mcp", bearer, false, http.StatusOK},
		{"a program, the UI's Origin", http.MethodPost, "/mcp", with(bearer, "Origin", e.base), false, http.StatusOK},
		{"its stream", http.MethodGet, "/mcp", bearer, false, http.StatusOK},
		{"a session's end", http.MethodDelete, "/mcp", bearer, false, http.StatusOK},
		{"DELETE elsewhere", http.MethodDelete, "/agents", bearer, false, http.StatusMethodNotAllowed},
		{"a page's POST without Origin", http.MethodPost, "/questions/x/answer", bearer, false, http.StatusForbidden},
	} {
		resp, _ := e.do(tc.method, tc.path, strings.NewReader("{}"), tc.header, tc.auth)
		assert.Equal(t, tc.want, resp.StatusCode, tc.name)
	}
	assert.Equal(t, []string{http.MethodPost, http.MethodPost, http.MethodGet, http.MethodDelete}, served, "only what passed reached /mcp")
}
