package web_test

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"scv/control/api"
)

// mailAccounts is two email accounts: "work" connected, over its budget,
// checked two minutes ago; "home" failed with an error made of markup,
// never run.
func mailAccounts(e *env) (work, home api.ComponentHealth) {
	checked := uint64(e.clock.now().Add(-2 * time.Minute).Unix())
	work = api.ComponentHealth{ID: "email:work", Channel: "email", Account: "work", Enabled: true, State: api.ComponentConnected,
		Mail: &api.MailCounts{Claimed: 1, Queued: 2, SeenToday: 20, TriagedToday: 7, ReportedToday: 9, TokensToday: 2500,
			TokenBudget: 2000, Messages24h: 3, LastCheckUnixSeconds: &checked}}
	home = api.ComponentHealth{ID: "email:home", Channel: "email", Account: "home", Enabled: true, State: api.ComponentFailed,
		Error: ptr("the IMAP server refused the credentials " + hostile)}
	return work, home
}

// TestMailPage: /mail lists the email accounts, one row each with its
// state, its last check and its counts (the tokens against the budget,
// and whether it was reached); an account that has not run shows no
// counts; an error made of markup is text. The navigation links to it.
func TestMailPage(t *testing.T) {
	e := newEnv(t)
	work, home := mailAccounts(e)
	e.mail.set(home, work)
	resp, body := e.get("/mail")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	doc := parse(t, body)
	assert.Len(t, find(doc, func(n *html.Node) bool { return n.Data == "nav" && contains(links(n), "/mail") }), 1)
	assert.Empty(t, find(doc, func(n *html.Node) bool { return n.Data == "img" }), "the error made no element")
	rows := find(doc, func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "account") })
	require.Len(t, rows, 2)
	assert.Equal(t, "email:home", attr(rows[0], "data-account"), "as listed")

	h := cells(rows[0])
	assert.Equal(t, "email:home the IMAP server refused the credentials "+hostile, h["name"])
	assert.Equal(t, "failed", h["state"])
	for _, c := range []string{"checked", "claimed", "queued", "seen", "triaged", "reported", "tokens", "digests"} {
		assert.Equal(t, "—", h[c], c)
	}
	w := cells(rows[1])
	assert.Equal(t, map[string]string{
		"name": "email:work", "state": "connected", "checked": "2m ago", "claimed": "1", "queued": "2", "seen": "20",
		"triaged": "7", "reported": "9", "tokens over": "2500 of 2000 (budget reached: the rest waits for tomorrow)", "digests": "3",
	}, w)

	e.mail.set()
	_, body = e.get("/mail")
	assert.Contains(t, body, "No email account is set")
}

// TestMailVersion: the mail page's version changes with an account's
// counts or state, and not otherwise.
func TestMailVersion(t *testing.T) {
	e := newEnv(t)
	work, home := mailAccounts(e)
	e.mail.set(work, home)
	version := func() string {
		resp, body := e.get("/api/version?page=mail")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		m := regexp.MustCompile(`^\{"version":"([0-9.]+)"\}\n$`).FindStringSubmatch(body)
		require.NotNil(t, m, body)
		return m[1]
	}
	v := version()
	_, body := e.get("/mail")
	assert.Contains(t, body, `data-version="`+v+`"`)
	assert.Contains(t, body, `data-poll="/api/version?page=mail"`)
	assert.Equal(t, v, version(), "stable")
	counts := *work.Mail
	counts.SeenToday++
	work.Mail = &counts
	e.mail.set(work, home)
	assert.NotEqual(t, v, version(), "a count")
	v = version()
	home.State = api.ComponentBackoff
	e.mail.set(work, home)
	assert.NotEqual(t, v, version(), "a state")
}

// TestNoMail: without Mail there is no /mail page and no link to it.
func TestNoMail(t *testing.T) {
	e := newEnv(t, withoutMail)
	resp, _ := e.get("/mail")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = e.get("/api/version?page=mail")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	_, body := e.get("/")
	assert.NotContains(t, links(parse(t, body)), "/mail")
}
