package imap_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/mail"
	"scv/control/mail/dovecottest"
	"scv/control/mail/imap"
)

// testTimeout bounds each wait of a test for the server: generous, never
// an assertion on how fast it is.
const testTimeout = 30 * time.Second

func creds(s *dovecottest.Server, url string) mail.Credentials {
	return mail.Credentials{URL: url, User: s.User(), Password: s.Password()}
}

func dial(t *testing.T, o imap.Options, c mail.Credentials) mail.Mailbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	mb, err := o.Dial(ctx, c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mb.Close() })
	return mb
}

func check(t *testing.T, mb mail.Mailbox, after uint32, limit int) (uint32, []mail.Mail) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	validity, mails, err := mb.Check(ctx, after, limit)
	require.NoError(t, err)
	return validity, mails
}

func plainMail(from, subject, body string) []byte {
	return fmt.Appendf(nil, "From: %s\r\nTo: alice@example.com\r\nSubject: %s\r\nDate: Mon, 2 Jan 2006 15:04:05 +0000\r\nMessage-ID: <%s@example.com>\r\n\r\n%s\r\n",
		from, subject, strings.ReplaceAll(subject, " ", "."), body)
}

func TestConnect(t *testing.T) {
	s := dovecottest.Start(t)
	s.Append(t, s.User(), plainMail("bob@example.com", "hello", "Hi."))
	trusted := imap.Options{RootCAs: s.CAPool()}
	for name, url := range map[string]string{"imaps": s.TLSURL(), "starttls": s.URL()} {
		t.Run(name, func(t *testing.T) {
			mb := dial(t, trusted, creds(s, url))
			validity, mails := check(t, mb, 0, 10)
			assert.NotZero(t, validity)
			require.Len(t, mails, 1)
			assert.Equal(t, "hello", mails[0].Subject)
			require.NoError(t, mb.Close())

			// The server's certificate is checked: untrusted, it is refused.
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, err := imap.Dial(ctx, creds(s, url))
			require.Error(t, err)
			assert.NotErrorIs(t, err, mail.ErrRefused)
			assert.Contains(t, err.Error(), "certificate")
		})
	}
	t.Run("plain text to a loopback address", func(t *testing.T) {
		plain := dovecottest.Start(t, dovecottest.WithoutTLS())
		plain.Append(t, plain.User(), plainMail("bob@example.com", "hello", "Hi."))
		mb := dial(t, imap.Options{}, creds(plain, plain.URL()))
		_, mails := check(t, mb, 0, 10)
		require.Len(t, mails, 1)
		// localhost is a loopback address too.
		mb = dial(t, imap.Options{}, creds(plain, strings.Replace(plain.URL(), "127.0.0.1", "localhost", 1)))
		_, mails = check(t, mb, 0, 10)
		require.Len(t, mails, 1)
	})
}

// fakeServer is a scripted IMAP server that offers no STARTTLS and
// writes down the lines it reads. Its replies: CAPABILITY, LOGOUT, and
// what script says to the other commands (a NO when it says nothing).
type fakeServer struct {
	l      net.Listener
	script func(tag, command string) string
	mu     sync.Mutex
	lines  []string
}

const fakeCaps = "IMAP4rev1 AUTH=PLAIN IDLE"

func startFake(t *testing.T, script func(tag, command string) string) *fakeServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeServer{l: l, script: script}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(conn)
		}
	}()
	return f
}

func (f *fakeServer) serve(conn net.Conn) {
	defer conn.Close()
	fmt.Fprintf(conn, "* OK [CAPABILITY %s] fake ready\r\n", fakeCaps)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f.mu.Lock()
		f.lines = append(f.lines, line)
		f.mu.Unlock()
		tag, command, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch name, _, _ := strings.Cut(strings.ToUpper(command), " "); name {
		case "CAPABILITY":
			fmt.Fprintf(conn, "* CAPABILITY %s\r\n%s OK done\r\n", fakeCaps, tag)
		case "LOGOUT":
			fmt.Fprintf(conn, "* BYE bye\r\n%s OK done\r\n", tag)
			return
		default:
			reply := ""
			if f.script != nil {
				reply = f.script(tag, command)
			}
			if reply == "" {
				reply = tag + " NO not here\r\n"
			}
			fmt.Fprint(conn, reply)
		}
	}
}

func (f *fakeServer) read() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.lines, "")
}

// to dials f whatever the address.
func (f *fakeServer) to(ctx context.Context, network, _ string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, f.l.Addr().String())
}

func TestPlainTextRefused(t *testing.T) {
	f := startFake(t, nil)
	// Every host is the fake server: a name that is not a loopback one
	// reaches it without any network.
	var dialed []string
	o := imap.Options{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		return f.to(ctx, network, addr)
	}}
	c := mail.Credentials{URL: "imap://mail.example.com", User: "me", Password: "hunter2-secret"}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := o.Dial(ctx, c)
	require.ErrorIs(t, err, imap.ErrPlainText)
	assert.NotErrorIs(t, err, mail.ErrRefused)
	assert.Equal(t, []string{"mail.example.com:143"}, dialed)
	assert.Contains(t, err.Error(), "mail.example.com")
	assert.NotContains(t, err.Error(), c.Password)
	assert.NotContains(t, f.read(), c.Password, "nothing of the credentials was sent")
	assert.NotContains(t, strings.ToUpper(f.read()), "LOGIN")

	// A loopback address in the URL but not at the far end: refused too.
	c.URL = "imap://127.0.0.1"
	o.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		client, server := net.Pipe()
		go f.serve(server)
		return client, nil
	}
	_, err = o.Dial(ctx, c)
	require.ErrorIs(t, err, imap.ErrPlainText)
	assert.NotContains(t, f.read(), c.Password)
}

func TestParseURL(t *testing.T) {
	for url, want := range map[string]imap.Address{
		"imaps://mail.example.com":         {Host: "mail.example.com", Port: 993, TLS: true},
		"imaps://mail.example.com:1993/":   {Host: "mail.example.com", Port: 1993, TLS: true},
		"imap://mail.example.com":          {Host: "mail.example.com", Port: 143},
		"IMAP://[::1]:1143":                {Host: "::1", Port: 1143},
		"imap://127.0.0.1:10143":           {Host: "127.0.0.1", Port: 10143},
		"imap://localhost":                 {Host: "localhost", Port: 143},
		"imaps://xn--mnchen-3ya.example:1": {Host: "xn--mnchen-3ya.example", Port: 1, TLS: true},
	} {
		got, err := imap.ParseURL(url)
		require.NoError(t, err, url)
		assert.Equal(t, want, got, url)
	}
	for _, url := range []string{
		"", "mail.example.com", "https://mail.example.com", "pop3://mail.example.com", "imaps://",
		"imaps://:993", "imaps://mail.example.com:0", "imaps://mail.example.com:65536", "imaps://mail.example.com:x",
		"imaps://mail.example.com:", "imaps://me@mail.example.com", "imaps://me:pw@mail.example.com",
		"imaps://mail.example.com/INBOX", "imaps://mail.example.com?x=1", "imaps://mail.example.com#x",
		"imaps:mail.example.com",
	} {
		_, err := imap.ParseURL(url)
		assert.Error(t, err, url)
		ctx := context.Background()
		_, err = imap.Dial(ctx, mail.Credentials{URL: url, User: "me", Password: "pw-secret"})
		assert.Error(t, err, url)
	}
	for host, loopback := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "localhost": true, "LocalHost.": true,
		"128.0.0.1": false, "example.com": false, "::2": false, "localhost.example.com": false,
	} {
		assert.Equal(t, loopback, imap.Address{Host: host}.Loopback(), host)
	}
}

func TestWrongPassword(t *testing.T) {
	s := dovecottest.Start(t)
	c := creds(s, s.TLSURL())
	c.Password = "wrong-" + s.Password()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := imap.Options{RootCAs: s.CAPool()}.Dial(ctx, c)
	require.ErrorIs(t, err, mail.ErrRefused)
	assert.NotContains(t, err.Error(), c.Password)
	assert.NotContains(t, err.Error(), s.Password())
	assert.Contains(t, err.Error(), "refused the credentials")

	// The right one, after.
	dial(t, imap.Options{RootCAs: s.CAPool()}, creds(s, s.TLSURL()))
}

// A server's answer to LOGIN: a NO is a refusal, unless it is for now
// (UNAVAILABLE); a password it quotes is not in the error.
func TestLoginReplies(t *testing.T) {
	c := mail.Credentials{URL: "imap://127.0.0.1", User: "me", Password: "hunter2-secret"}
	for reply, refused := range map[string]bool{
		"NO [AUTHENTICATIONFAILED] wrong password hunter2-secret": true,
		"NO no":                           true,
		"BAD what":                        true,
		"NO [UNAVAILABLE] try later":      false,
		"NO [UNAVAILABLE] hunter2-secret": false,
	} {
		f := startFake(t, func(tag, command string) string {
			if strings.HasPrefix(strings.ToUpper(command), "LOGIN") {
				return tag + " " + reply + "\r\n"
			}
			return ""
		})
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		_, err := imap.Options{DialContext: f.to}.Dial(ctx, c)
		cancel()
		require.Error(t, err, reply)
		assert.Equal(t, refused, errors.Is(err, mail.ErrRefused), "%s: %v", reply, err)
		assert.NotContains(t, err.Error(), c.Password, reply)
		assert.Contains(t, f.read(), c.Password, "the password was sent")
	}
}

// startFakeMailbox is a fake server whose INBOX (UIDVALIDITY 7) holds
// exists mails: it logs in and examines it, and script answers the rest
// (given the command in upper case).
func startFakeMailbox(t *testing.T, exists int, script func(tag, upper string) string) *fakeServer {
	return startFake(t, func(tag, command string) string {
		upper := strings.ToUpper(command)
		switch {
		case strings.HasPrefix(upper, "LOGIN"), strings.HasPrefix(upper, "NOOP"):
			return tag + " OK done\r\n"
		case strings.HasPrefix(upper, "EXAMINE"):
			return fmt.Sprintf("* %d EXISTS\r\n* OK [UIDVALIDITY 7] v\r\n%s OK [READ-ONLY] done\r\n", exists, tag)
		}
		return script(tag, upper)
	})
}

// dialFake logs in to f as to a loopback address.
func dialFake(ctx context.Context, t *testing.T, f *fakeServer) mail.Mailbox {
	mb, err := imap.Options{DialContext: f.to}.Dial(ctx, mail.Credentials{URL: "imap://localhost", User: "me", Password: "pw"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mb.Close() })
	return mb
}

// A mail the server will not give: Partial, with what it gives.
func TestCheckRefusedFetch(t *testing.T) {
	f := startFakeMailbox(t, 3, func(tag, upper string) string {
		switch {
		case strings.HasPrefix(upper, "UID SEARCH"):
			return "* SEARCH 1 2 3\r\n" + tag + " OK done\r\n"
		case strings.HasPrefix(upper, "UID FETCH 1:3 "):
			// The third whole, the others not.
			header, text := "From: carol@example.com\r\nSubject: c\r\n\r\n", "hi\r\n"
			return fmt.Sprintf("* 3 FETCH (UID 3 RFC822.SIZE 30 ENVELOPE (NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL) "+
				"BODY[HEADER]<0> {%d}\r\n%s BODY[TEXT]<0> {%d}\r\n%s)\r\n%s NO [SERVERBUG] cannot\r\n", len(header), header, len(text), text, tag)
		case strings.HasPrefix(upper, "UID FETCH 1 "):
			return `* 1 FETCH (UID 1 RFC822.SIZE 10 ENVELOPE ("Mon, 2 Jan 2006 15:04:05 +0000" "the subject" (("Bob" NIL "Bob" "Example.com")) NIL NIL NIL NIL NIL NIL "<id1@example.com>"))` + "\r\n" +
				tag + " OK done\r\n"
		}
		return "" // UID FETCH 2: NO
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	mb := dialFake(ctx, t, f)
	validity, got, err := mb.Check(ctx, 0, 10)
	require.NoError(t, err)
	assert.Equal(t, uint32(7), validity)
	require.Len(t, got, 3)
	assert.Equal(t, mail.Mail{UID: 1, From: "bob@example.com", FromName: "Bob", Subject: "the subject", MessageID: "id1@example.com",
		Date: time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC), Size: 10, Header: textproto.MIMEHeader{}, Partial: true},
		withUTC(got[0]))
	assert.Equal(t, mail.Mail{UID: 2, Partial: true}, got[1])
	assert.Equal(t, uint32(3), got[2].UID)
	assert.False(t, got[2].Partial)
	assert.Equal(t, "carol@example.com", got[2].From)
	assert.Equal(t, "hi", got[2].Text)
}

func withUTC(m mail.Mail) mail.Mail {
	m.Date = m.Date.UTC()
	return m
}

// counter counts the bytes read from the connections it dials.
type counter struct{ n atomic.Int64 }

func (c *counter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: conn, n: &c.n}, nil
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func TestCheck(t *testing.T) {
	s := dovecottest.Start(t)
	long := strings.Repeat("naïve café ", 2*mail.MaxMailText/12) // 2-byte runes across the cut
	mails := [][]byte{
		// 1: a list's mail, a name and a subject in RFC 2047 words,
		// quoted-printable UTF-8.
		[]byte("From: =?UTF-8?Q?Bj=C3=B6rn_Example?= <Bjorn@Example.COM>\r\n" +
			"To: alice@example.com\r\n" +
			"Subject: =?UTF-8?B?R3LDvMOfZSBhdXMgQmVybGlu?=\r\n" +
			"Date: Tue, 3 Jan 2006 10:00:00 +0100\r\n" +
			"Message-ID: <one@example.com>\r\n" +
			"List-Id: News <news.example.com>\r\n" +
			"Precedence: bulk\r\n" +
			"X-Folded: first\r\n second\r\n" +
			"MIME-Version: 1.0\r\n" +
			"Content-Type: text/plain; charset=utf-8\r\n" +
			"Content-Transfer-Encoding: quoted-printable\r\n\r\n" +
			"Gr=C3=BC=C3=9Fe,\r\nthe news.\r\n"),
		// 2: text and HTML: the text wins.
		[]byte("From: carol@example.com\r\nSubject: alternative\r\nMIME-Version: 1.0\r\n" +
			"Content-Type: multipart/alternative; boundary=b1\r\n\r\n" +
			"--b1\r\nContent-Type: text/html\r\n\r\n<p>the <b>HTML</b></p>\r\n" +
			"--b1\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nthe text, =E9t=E9\r\n" +
			"--b1--\r\n"),
		// 3: HTML only, within a mixed mail with an attachment.
		[]byte("From: Dave <dave@example.com>\r\nSubject: html\r\nMIME-Version: 1.0\r\n" +
			"Content-Type: multipart/mixed; boundary=b2\r\n\r\n" +
			"--b2\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
			"<html><head><title>T</title><style>p{color:red}</style></head><body><script>alert(1)</script>" +
			"<p>Dear   Alice,</p><p>fish &amp; chips</p></body></html>\r\n" +
			"--b2\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\nnot the text\r\n" +
			"--b2--\r\n"),
		// 4: a long text, cut at a rune boundary.
		plainMail("erin@example.com", "long", long),
		// 5: no header but From: no subject, no date.
		[]byte("From: frank@example.com\r\n\r\njust this\r\n"),
	}
	for _, m := range mails {
		s.Append(t, s.User(), m)
	}
	var read counter
	mb := dial(t, imap.Options{RootCAs: s.CAPool(), DialContext: read.dial}, creds(s, s.TLSURL()))
	validity, got := check(t, mb, 0, 0)
	require.NotZero(t, validity)
	require.Len(t, got, len(mails))
	for i, m := range got {
		assert.Equal(t, uint32(i+1), m.UID)
		assert.False(t, m.Partial, i)
		assert.NotZero(t, m.Size)
		assert.LessOrEqual(t, len(m.Text), mail.MaxMailText)
		assert.True(t, utf8.ValidString(m.Text))
	}

	one := got[0]
	assert.Equal(t, "bjorn@example.com", one.From)
	assert.Equal(t, "Björn Example", one.FromName)
	assert.Equal(t, "Grüße aus Berlin", one.Subject)
	assert.Equal(t, "one@example.com", one.MessageID)
	assert.True(t, one.Date.Equal(time.Date(2006, 1, 3, 9, 0, 0, 0, time.UTC)), one.Date)
	assert.Equal(t, "News <news.example.com>", one.Header.Get("List-Id"))
	assert.Equal(t, "bulk", one.Header.Get("Precedence"))
	assert.Equal(t, "first second", one.Header.Get("X-Folded"))
	assert.Equal(t, "Grüße,\nthe news.", one.Text)

	assert.Equal(t, "carol@example.com", got[1].From)
	assert.Empty(t, got[1].FromName)
	assert.Equal(t, "the text, été", got[1].Text)

	assert.Equal(t, "Dave", got[2].FromName)
	assert.Equal(t, "Dear Alice,\n\nfish & chips", got[2].Text)

	assert.Equal(t, mail.MaxMailText, len(got[3].Text)+utf8.RuneLen(rune(long[len(got[3].Text)]))-1,
		"cut at the rune boundary just below the limit")
	assert.True(t, strings.HasPrefix(long, got[3].Text))

	assert.Equal(t, "frank@example.com", got[4].From)
	assert.Empty(t, got[4].Subject)
	assert.True(t, got[4].Date.IsZero())
	assert.Equal(t, "just this", got[4].Text)

	// Nothing after the last: none (not the last again, as after+1:* is).
	_, none := check(t, mb, 5, 10)
	assert.Empty(t, none)
	_, none = check(t, mb, math.MaxUint32, 10)
	assert.Empty(t, none)
	// A limit, then on from where it stopped.
	_, some := check(t, mb, 1, 2)
	require.Len(t, some, 2)
	assert.Equal(t, []uint32{2, 3}, []uint32{some[0].UID, some[1].UID})

	// A mail over MaxMailSize: Partial, its start read, never the whole.
	big := plainMail("gina@example.com", "big", "the start of it\r\n"+
		base64.StdEncoding.EncodeToString(make([]byte, mail.MaxMailSize)))
	s.Append(t, s.User(), big)
	before := read.n.Load()
	_, got = check(t, mb, 5, 10)
	require.Len(t, got, 1)
	assert.Equal(t, uint32(6), got[0].UID)
	assert.True(t, got[0].Partial)
	assert.Greater(t, got[0].Size, uint32(mail.MaxMailSize))
	assert.Equal(t, "big", got[0].Subject)
	assert.True(t, strings.HasPrefix(got[0].Text, "the start of it\nAAAA"), got[0].Text[:40])
	assert.LessOrEqual(t, len(got[0].Text), mail.MaxMailText)
	assert.Less(t, read.n.Load()-before, int64(1<<20), "bytes read for a mail of %d", len(big))

	// A header too long to read whole: Partial, what was read kept.
	var header strings.Builder
	header.WriteString("From: hank@example.com\r\nSubject: long header\r\n")
	for i := 0; header.Len() < 80<<10; i++ {
		fmt.Fprintf(&header, "X-Filler-%d: %s\r\n", i, strings.Repeat("x", 100))
	}
	s.Append(t, s.User(), []byte(header.String()+"\r\nthe text\r\n"))
	_, got = check(t, mb, 6, 10)
	require.Len(t, got, 1)
	assert.True(t, got[0].Partial)
	assert.Equal(t, "hank@example.com", got[0].From)
	assert.Equal(t, "long header", got[0].Subject)
	assert.Equal(t, strings.Repeat("x", 100), got[0].Header.Get("X-Filler-1"))
	assert.Equal(t, "the text", got[0].Text)
}

func TestUIDValidityAcrossReconnects(t *testing.T) {
	s := dovecottest.Start(t)
	s.Append(t, s.User(), plainMail("bob@example.com", "one", "1"))
	o := imap.Options{RootCAs: s.CAPool()}
	mb := dial(t, o, creds(s, s.URL()))
	validity, got := check(t, mb, 0, 10)
	require.Len(t, got, 1)
	require.NoError(t, mb.Close())

	mb = dial(t, o, creds(s, s.TLSURL()))
	again, got := check(t, mb, 0, 10)
	assert.Equal(t, validity, again)
	require.Len(t, got, 1)

	// The server stopped: the mailbox fails; started again: a new Dial
	// finds the same mailbox.
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := mb.Wait(ctx, time.Minute)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "Wait ended by the server's end, not the test's timeout")
	_, _, err = mb.Check(ctx, 0, 10)
	require.Error(t, err)
	require.NoError(t, mb.Close())
	_, err = o.Dial(ctx, creds(s, s.TLSURL()))
	require.Error(t, err)
	assert.NotErrorIs(t, err, mail.ErrRefused)

	s.Start()
	s.Append(t, s.User(), plainMail("bob@example.com", "two", "2"))
	mb = dial(t, o, creds(s, s.TLSURL()))
	again, got = check(t, mb, 1, 10)
	assert.Equal(t, validity, again)
	require.Len(t, got, 1)
	assert.Equal(t, uint32(2), got[0].UID)
}

func TestWaitIdle(t *testing.T) {
	s := dovecottest.Start(t)
	mb := dial(t, imap.Options{RootCAs: s.CAPool()}, creds(s, s.TLSURL()))
	_, got := check(t, mb, 0, 10)
	require.Empty(t, got)

	// A mail delivered by another connection wakes the Wait.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- mb.Wait(ctx, time.Hour) }()
	// Wait is idling once the server has had the time to see IDLE; an
	// APPEND before it still wakes it (the EXISTS is news either way).
	s.Append(t, s.User(), plainMail("bob@example.com", "new", "news"))
	require.NoError(t, <-waited)
	require.NoError(t, ctx.Err())
	_, got = check(t, mb, 0, 10)
	require.Len(t, got, 1)
	assert.Equal(t, "new", got[0].Subject)

	// The end of ctx ends the Wait, and the mailbox goes on.
	short, stop := context.WithCancel(context.Background())
	go func() { waited <- mb.Wait(short, time.Hour) }()
	stop()
	require.ErrorIs(t, <-waited, context.Canceled)
	s.Append(t, s.User(), plainMail("bob@example.com", "newer", "more news"))
	_, got = check(t, mb, 1, 10)
	require.Len(t, got, 1)
	assert.Equal(t, "newer", got[0].Subject)

	// Mail that came before the Wait: it returns at once.
	s.Append(t, s.User(), plainMail("bob@example.com", "newest", "yet more"))
	require.NoError(t, mb.Wait(ctx, time.Hour))
	require.NoError(t, ctx.Err())
	_, got = check(t, mb, 2, 10)
	require.Len(t, got, 1)
}

func TestWaitPolls(t *testing.T) {
	s := dovecottest.Start(t, dovecottest.WithoutIDLE())
	mb := dial(t, imap.Options{RootCAs: s.CAPool()}, creds(s, s.TLSURL()))
	check(t, mb, 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// No mail, no IDLE: Wait returns after the poll.
	require.NoError(t, mb.Wait(ctx, 50*time.Millisecond))
	require.NoError(t, ctx.Err())
	s.Append(t, s.User(), plainMail("bob@example.com", "polled", "hi"))
	require.NoError(t, mb.Wait(ctx, 50*time.Millisecond))
	_, got := check(t, mb, 0, 10)
	require.Len(t, got, 1)

	short, stop := context.WithCancel(context.Background())
	stop()
	assert.ErrorIs(t, mb.Wait(short, time.Hour), context.Canceled)
	require.NoError(t, mb.Close())
}

// Options.Timeout bounds commands, not the time between them: a mailbox
// unused for longer stays connected.
func TestTimeoutIsPerCommand(t *testing.T) {
	s := dovecottest.Start(t, dovecottest.WithoutIDLE())
	const timeout = 200 * time.Millisecond
	mb := dial(t, imap.Options{RootCAs: s.CAPool(), Timeout: timeout}, creds(s, s.TLSURL()))
	check(t, mb, 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	require.NoError(t, mb.Wait(ctx, 5*timeout))
	time.Sleep(5 * timeout)
	s.Append(t, s.User(), plainMail("bob@example.com", "later", "hi"))
	_, got := check(t, mb, 0, 10)
	require.Len(t, got, 1)
}

// The end of ctx ends a Check the server does not answer.
func TestCheckCanceled(t *testing.T) {
	f := startFakeMailbox(t, 0, func(tag, upper string) string {
		if strings.HasPrefix(upper, "UID SEARCH") {
			return "* OK thinking\r\n" // and never done
		}
		return ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	mb := dialFake(ctx, t, f)
	short, stop := context.WithCancel(ctx)
	go func() {
		for !strings.Contains(strings.ToUpper(f.read()), "UID SEARCH") {
			time.Sleep(time.Millisecond)
		}
		stop()
	}()
	_, _, err := mb.Check(short, 0, 10)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, ctx.Err())
}
