package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// TestMailCountsPrinted: scv status gives an email account's counts a
// line, scv channel list a table of its own, between the accounts' health
// and their email settings; an account without counts has no row.
func TestMailCountsPrinted(t *testing.T) {
	now := time.Unix(1_741_600_000, 0)
	checked := uint64(now.Add(-2 * time.Minute).Unix())
	st := &api.DaemonStatus{Version: "1.0", PID: 7, Components: []api.ComponentHealth{
		{ID: "email:home", Channel: "email", Account: "home", Enabled: true, State: api.ComponentFailed,
			RemoteTools: api.RemoteToolsNone, Error: ptr("the IMAP server refused the credentials")},
		{ID: "email:work", Channel: "email", Account: "work", Enabled: true, State: api.ComponentConnected,
			RemoteTools: api.RemoteToolsNone, LastSuccessUnixSeconds: &checked,
			Mail: &api.MailCounts{Claimed: 1, Queued: 2, SeenToday: 20, TriagedToday: 6, ReportedToday: 11, TokensToday: 720,
				TokenBudget: 500, Messages24h: 3, LastCheckUnixSeconds: &checked},
			Email: &api.EmailAccount{IMAP: "imaps://mail.example.com", User: "me@example.com", MailChat: "local:mail"}},
	}}
	var b bytes.Buffer
	require.NoError(t, printDaemonStatus(&printer{w: &b, now: now}, st))
	assert.Contains(t, b.String(), "mail email:work  seen 20 today (6 triaged, 11 reported), 2 queued, 1 claimed, "+
		"720 of 500 tokens (budget reached), 3 digests in 24h, checked 2m ago\n")
	assert.NotContains(t, b.String(), "email:home")
	one := &api.MailCounts{SeenToday: 1, Messages24h: 1}
	assert.Equal(t, "seen 1 today (0 triaged, 0 reported), 0 queued, 0 claimed, 0 tokens, 1 digest in 24h, not checked yet",
		mailLine(&printer{w: &b, now: now}, one))

	b.Reset()
	require.NoError(t, printComponentsReply(&printer{w: &b, now: now}, st))
	assert.Equal(t, `ACCOUNT     ENABLED  STATE      TOOLS  SENDERS  RESTARTS  LAST SUCCESS  ERROR
email:home  true     failed     none   -        0         -             the IMAP server refused the credentials
email:work  true     connected  none   -        0         2m ago        -

MAIL        CLAIMED  QUEUED  SEEN TODAY  TRIAGED  REPORTED  TOKENS   DIGESTS 24H  LAST CHECK
email:work  1        2       20          6        11        720/500  3            2m ago

EMAIL       IMAP                      USER            MAIL CHAT
email:work  imaps://mail.example.com  me@example.com  local:mail
`, b.String())
}
