// Package imap is the email account's Mailbox over IMAP (RFC 3501), with
// github.com/emersion/go-imap v1: Dial connects to the server of an
// imaps:// URL (TLS) or an imap:// URL (STARTTLS; plain text only to a
// loopback address whose server offers no STARTTLS), logs in, and opens
// the INBOX read-only (EXAMINE: the account never changes the mailbox).
//
// Check searches the UIDs above the last one seen and fetches, for each
// mail, its size, envelope, header and the start of its text (never more
// than a bounded prefix, however big the mail: FETCH BODY.PEEK[TEXT]<0.N>);
// the text is decoded (MIME, transfer encodings, charsets) to its first
// text/plain part, else its text/html stripped of markup. Wait idles
// (RFC 2177) where the server offers IDLE and polls where it does not.
//
// No error of this package holds the password, and none is logged: the
// library's own error log is silenced, since what it logs may quote the
// server's lines (and with them a mail's headers).
package imap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	goimap "github.com/emersion/go-imap"
	"github.com/emersion/go-imap/client"
	"github.com/emersion/go-imap/commands"

	"scv/control/mail"
)

// The ports of the URLs without one.
const (
	DefaultPort    = 143 // imap://, STARTTLS
	DefaultTLSPort = 993 // imaps://
)

// DefaultTimeout bounds each command to the server (and the connection,
// the TLS handshake and the login) when Options.Timeout is 0. A mailbox
// waiting in IDLE is not bounded by it.
const DefaultTimeout = 2 * time.Minute

// idleRestart is how long one IDLE command lasts before it is renewed:
// servers may log out a client idle for 30 minutes (RFC 2177).
const idleRestart = 25 * time.Minute

// logoutTimeout bounds the LOGOUT of Close.
const logoutTimeout = 5 * time.Second

// ErrPlainText is the refusal to log in in plain text: an imap:// server
// that offers no STARTTLS is refused unless both its URL's host and the
// address connected to are loopback addresses. Nothing is sent to it.
var ErrPlainText = errors.New("plain text refused: the server offers no STARTTLS and is not on a loopback address (127.0.0.0/8, ::1, localhost)")

// Address is where a mailbox's URL points.
type Address struct {
	// Host is a name or an IP address (without brackets).
	Host string
	Port int
	// TLS: imaps:// (TLS from the first byte); else imap:// (STARTTLS).
	TLS bool
}

// String is host:port.
func (a Address) String() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

// Loopback reports whether Host names a loopback address: localhost,
// 127.0.0.0/8 or ::1.
func (a Address) Loopback() bool {
	if strings.EqualFold(strings.TrimSuffix(a.Host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(a.Host)
	return ip != nil && ip.IsLoopback()
}

// ParseURL reads an account's IMAP URL: imaps://host[:port] or
// imap://host[:port], nothing else (no user, path but "/", query or
// fragment).
func ParseURL(s string) (Address, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Address{}, fmt.Errorf("the IMAP URL %q is not a URL: %w", s, err)
	}
	var a Address
	switch u.Scheme {
	case "imaps":
		a.TLS, a.Port = true, DefaultTLSPort
	case "imap":
		a.Port = DefaultPort
	default:
		return Address{}, fmt.Errorf("the IMAP URL %q is not imaps://host[:port] or imap://host[:port]", s)
	}
	if u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return Address{}, fmt.Errorf("the IMAP URL %q has more than a scheme, a host and a port", s)
	}
	a.Host = u.Hostname()
	if a.Host == "" {
		return Address{}, fmt.Errorf("the IMAP URL %q has no host", s)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Address{}, fmt.Errorf("the IMAP URL %q has a port that is not 1 to 65535", s)
		}
		a.Port = n
	} else if strings.HasSuffix(u.Host, ":") {
		return Address{}, fmt.Errorf("the IMAP URL %q has an empty port", s)
	}
	return a, nil
}

// Options are how Dial connects. The zero Options trust the system's
// roots and dial with a net.Dialer.
type Options struct {
	// RootCAs are the certificates trusted for the server's; nil: the
	// system's.
	RootCAs *x509.CertPool
	// DialContext connects to host:port; nil: a net.Dialer's (TCP keep
	// alives on, which find a dead server while idling).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds each command; 0: DefaultTimeout.
	Timeout time.Duration
}

// Dial connects with the zero Options: a mail.Dialer.
func Dial(ctx context.Context, c mail.Credentials) (mail.Mailbox, error) {
	return Options{}.Dial(ctx, c)
}

var _ mail.Dialer = Dial

// Dial connects to c.URL, logs in and opens the INBOX read-only. A refusal
// of the credentials is an error wrapping mail.ErrRefused; plain text to
// a host not on a loopback address one wrapping ErrPlainText. No error
// holds c.Password.
func (o Options) Dial(ctx context.Context, c mail.Credentials) (mail.Mailbox, error) {
	m, err := o.dial(ctx, c)
	if err != nil {
		return nil, scrub(err, c.Password)
	}
	return m, nil
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

func (o Options) dial(ctx context.Context, c mail.Credentials) (*mailbox, error) {
	addr, err := ParseURL(c.URL)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := o.timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dialContext := o.DialContext
	if dialContext == nil {
		dialContext = (&net.Dialer{}).DialContext
	}
	raw, err := dialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, fmt.Errorf("imap %s: %w", addr, err)
	}
	m := &mailbox{addr: addr, raw: raw, timeout: timeout}
	ok := false
	defer func() {
		if !ok {
			_ = raw.Close()
		}
	}()
	// Until Dial returns, the end of ctx ends what the connection does;
	// the dial as a whole is bounded by the timeout.
	step := m.begin(ctx)
	defer step.end()
	step.arm()
	tlsConfig := &tls.Config{ServerName: addr.Host, RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	var conn net.Conn = noDeadlines{raw}
	if addr.TLS {
		tc := tls.Client(conn, tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, m.errorf(ctx, "TLS", err)
		}
		conn = tc
	}
	cl, err := client.New(conn)
	if err != nil {
		return nil, m.errorf(ctx, "greeting", err)
	}
	m.c = cl
	cl.ErrorLog = log.New(io.Discard, "", 0)
	if !addr.TLS {
		starttls, err := cl.SupportStartTLS()
		if err != nil {
			return nil, m.errorf(ctx, "capabilities", err)
		}
		switch {
		case starttls:
			if err := cl.StartTLS(tlsConfig); err != nil {
				return nil, m.errorf(ctx, "STARTTLS", err)
			}
		case !addr.Loopback() || !peerLoopback(raw):
			return nil, fmt.Errorf("imap %s: %w", addr, ErrPlainText)
		}
	}
	if err := m.login(ctx, c.User, c.Password); err != nil {
		return nil, err
	}
	if m.idle, err = cl.Support("IDLE"); err != nil {
		return nil, m.errorf(ctx, "capabilities", err)
	}
	updates := make(chan client.Update, 64)
	m.newMail = make(chan struct{}, 1)
	cl.Updates = updates
	go m.watchUpdates(updates)
	status, err := cl.Select("INBOX", true)
	if err != nil {
		return nil, m.errorf(ctx, "EXAMINE INBOX", err)
	}
	if status.UidValidity == 0 {
		return nil, fmt.Errorf("imap %s: the INBOX has no UIDVALIDITY", addr)
	}
	ok = true
	return m, nil
}

// login logs in with LOGIN. A NO is a refusal (mail.ErrRefused), unless
// the server says it is unavailable for now (RFC 5530's UNAVAILABLE).
func (m *mailbox) login(ctx context.Context, user, password string) error {
	if ok, err := m.c.Support("LOGINDISABLED"); err != nil {
		return m.errorf(ctx, "capabilities", err)
	} else if ok {
		return fmt.Errorf("imap %s: %w: the server disables LOGIN", m.addr, mail.ErrRefused)
	}
	status, err := m.c.Execute(&commands.Login{Username: user, Password: password}, nil)
	if err != nil {
		return m.errorf(ctx, "LOGIN", err)
	}
	switch {
	case status.Type == goimap.StatusRespOk:
	case status.Code == "UNAVAILABLE":
		return fmt.Errorf("imap %s: the server cannot log in now: %s", m.addr, serverText(status))
	default:
		return fmt.Errorf("imap %s: %w: %s", m.addr, mail.ErrRefused, serverText(status))
	}
	m.c.SetState(goimap.AuthenticatedState, nil)
	// The capabilities after login are not those before.
	if _, err := m.c.Capability(); err != nil {
		return m.errorf(ctx, "capabilities", err)
	}
	return nil
}

// serverText is a status response's text and code, made printable and
// bounded.
func serverText(s *goimap.StatusResp) string {
	text := s.Info
	if s.Code != "" {
		text = "[" + string(s.Code) + "] " + text
	}
	text = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, text)
	if len(text) > 200 {
		text = cut(text, 200) + "…"
	}
	if text == "" {
		return string(s.Type)
	}
	return text
}

// peerLoopback reports whether conn's far end is a loopback address.
func peerLoopback(conn net.Conn) bool {
	a, ok := conn.RemoteAddr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// scrub takes secret out of err's text, keeping what it wraps.
func scrub(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &scrubbed{text: strings.ReplaceAll(err.Error(), secret, "[password]"), err: err}
}

type scrubbed struct {
	text string
	err  error
}

func (s *scrubbed) Error() string { return s.text }
func (s *scrubbed) Unwrap() error { return s.err }
