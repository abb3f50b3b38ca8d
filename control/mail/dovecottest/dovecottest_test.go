package dovecottest_test

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/emersion/go-imap/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/mail/dovecottest"
)

func mail(subject string) []byte {
	return fmt.Appendf(nil, "From: Bob <bob@example.com>\r\nTo: alice@example.com\r\nSubject: %s\r\nDate: Mon, 2 Jan 2006 15:04:05 +0000\r\n\r\nHello.\r\n", subject)
}

// count logs in over IMAPS and counts the INBOX's mails.
func count(t *testing.T, s *dovecottest.Server, user, password string) uint32 {
	t.Helper()
	c, err := client.DialTLS(s.TLSURL()[len("imaps://"):], &tls.Config{RootCAs: s.CAPool(), ServerName: "127.0.0.1"})
	require.NoError(t, err)
	defer c.Logout()
	require.NoError(t, c.Login(user, password))
	mbox, err := c.Select("INBOX", true)
	require.NoError(t, err)
	return mbox.Messages
}

func TestServer(t *testing.T) {
	s := dovecottest.Start(t)
	assert.Regexp(t, `^imap://127\.0\.0\.1:\d+$`, s.URL())
	assert.Regexp(t, `^imaps://127\.0\.0\.1:\d+$`, s.TLSURL())
	require.NotEmpty(t, s.Password())
	s.Append(t, s.User(), mail("one"))
	s.Append(t, s.User(), mail("two"))
	assert.Equal(t, uint32(2), count(t, s, s.User(), s.Password()))

	// STARTTLS on the IMAP port, with the certificate trusted.
	c, err := client.Dial(s.Addr())
	require.NoError(t, err)
	ok, err := c.SupportStartTLS()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, c.StartTLS(&tls.Config{RootCAs: s.CAPool(), ServerName: "127.0.0.1"}))
	require.NoError(t, c.Login(s.User(), s.Password()))
	require.NoError(t, c.Logout())

	// Stopped: nothing answers; started again: the same port, the same mail.
	s.Stop()
	_, err = client.Dial(s.Addr())
	require.Error(t, err)
	s.Start()
	assert.Equal(t, uint32(2), count(t, s, s.User(), s.Password()))

	// Users and passwords change while it runs.
	s.AddUser("carol", "carol-secret")
	s.Append(t, "carol", mail("three"))
	assert.Equal(t, uint32(1), count(t, s, "carol", "carol-secret"))
	s.SetPassword("carol", "another")
	c, err = client.Dial(s.Addr())
	require.NoError(t, err)
	c.Timeout = 10 * time.Second
	require.Error(t, c.Login("carol", "carol-secret"))
	require.NoError(t, c.Login("carol", "another"))
	require.NoError(t, c.Logout())
}

func TestServerWithoutTLS(t *testing.T) {
	s := dovecottest.Start(t, dovecottest.WithoutTLS())
	assert.Empty(t, s.TLSURL())
	assert.Nil(t, s.CAPool())
	c, err := client.Dial(s.Addr())
	require.NoError(t, err)
	ok, err := c.SupportStartTLS()
	require.NoError(t, err)
	assert.False(t, ok, "a server without TLS offers no STARTTLS")
	require.NoError(t, c.Login(s.User(), s.Password()))
	require.NoError(t, c.Logout())
}
