package control_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	scvdaemon "scv/control/daemon"
	"scv/control/mail"
)

// oneMail is a mailbox that holds one mail from the boss and never
// changes.
type oneMail struct{}

func (oneMail) Check(_ context.Context, after uint32, _ int) (uint32, []mail.Mail, error) {
	if after >= 1 {
		return 1, nil, nil
	}
	return 1, []mail.Mail{{UID: 1, From: "boss@example.com", Subject: "Q3 numbers", Size: 100}}, nil
}

func (oneMail) Wait(ctx context.Context, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

func (oneMail) Close() error { return nil }

// TestSeedParsesMailCounts: a status whose email account's component has
// its `mail` filled (the account decided and reported a mail) and whose
// mail chat has `purpose: mail` parses through the seed's DaemonStatus,
// and serde writes it back byte for byte but for the email extension
// field the seed does not know.
func TestSeedParsesMailCounts(t *testing.T) {
	bin := seedClient(t)
	d := startDaemonWith(t, scvdaemon.Config{MailDial: func(context.Context, mail.Credentials) (mail.Mailbox, error) {
		return oneMail{}, nil
	}})
	pass := filepath.Join(d.dir, "work.pass")
	require.NoError(t, os.WriteFile(pass, []byte("hunter2\n"), 0o600))
	settings := fmt.Sprintf(`{"accounts": [
		{"channel": "local", "account": "mail", "purpose": "mail"},
		{"channel": "email", "account": "work", "email": {"imap": "imaps://mail.example.com", "user": "me@example.com",
			"password_file": %q, "mail_chat": "local:mail", "report_from": ["boss@example.com"]}}]}`, pass)
	require.NoError(t, os.WriteFile(filepath.Join(d.dir, "channels.json"), []byte(settings), 0o600))
	c := d.client(t)
	_, err := c.Call(testCtx(t), api.CmdReload{})
	require.NoError(t, err)
	var raw []byte
	require.Eventually(t, func() bool {
		raw, err = c.CallRaw(testCtx(t), api.CmdStatus{})
		return err == nil && strings.Contains(string(raw), `"messages_24h":1`)
	}, 30*time.Second, 10*time.Millisecond, "the mail decided and sent")

	v := seedDecode(t, bin, []string{"status\tstatus\t" + string(raw)})[0]
	require.True(t, v.ok, "serde refused: %s", v.out)
	assert.Contains(t, v.out, `"mail":{"claimed":0,"queued":0,"seen_today":1,"triaged_today":0,"reported_today":1,"tokens_today":0,"token_budget":0,"messages_24h":1,"last_check_unix_seconds":`)
	assert.Contains(t, v.out, `"id":"local:mail"`)
	assert.Contains(t, v.out, `"purpose":"mail"`)
	var sent, back map[string]any
	require.NoError(t, json.Unmarshal(raw, &sent))
	require.NoError(t, json.Unmarshal([]byte(v.out), &back))
	for _, comp := range sent["components"].([]any) {
		delete(comp.(map[string]any), "email") // the extension, which the seed ignores
	}
	assert.Equal(t, sent, back, "serde reads every field of the seed's and writes it as it came")
	assert.NotContains(t, string(raw), "Q3 numbers")
	assert.NotContains(t, string(raw), "hunter2")
}
