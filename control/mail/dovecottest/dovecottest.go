// Package dovecottest starts a private Dovecot IMAP server for tests, as
// net/http/httptest starts an HTTP server: Debian's /usr/sbin/dovecot
// (package dovecot-imapd) with a configuration of its own in a temporary
// folder (its base and state folders, its log, a passwd-file of users,
// their maildirs), listening on loopback ports only. No system
// configuration is read or touched.
//
// The server listens for IMAP (STARTTLS offered) and IMAPS, with a
// self-signed certificate made for the run (CAPool, CertFile); WithoutTLS
// starts one that offers no TLS at all, for plain text on loopback.
//
// It runs as the user running the tests; as root (CI), its mail and
// internal processes run as nobody, since Dovecot refuses root for them.
// Without /usr/sbin/dovecot the test is skipped, or fails when
// SCV_REQUIRE_DOVECOT=1.
package dovecottest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/client"
)

// Binary is the Dovecot the tests run.
const Binary = "/usr/sbin/dovecot"

// RequireEnv, set to 1, makes a missing Dovecot a failure instead of a skip.
const RequireEnv = "SCV_REQUIRE_DOVECOT"

// startTimeout bounds how long a start waits for the server to answer.
const startTimeout = 30 * time.Second

// Server is a running private Dovecot. Its methods report failures to the
// test that started it, and are to be called from that test's goroutine.
type Server struct {
	t      testing.TB
	dir    string
	noTLS  bool
	noIdle bool
	uid    int
	gid    int

	port, tlsPort int

	cert     []byte // PEM
	certPath string
	pool     *x509.CertPool

	mu    sync.Mutex
	users map[string]string // user → password
	order []string          // users in the order they were added
	// passwdStamp is the passwd-file's last mtime.
	passwdStamp time.Time

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// Option changes how Start configures the server.
type Option func(*Server)

// WithoutTLS starts a server that offers no TLS: no STARTTLS, no IMAPS
// listener (TLSURL is ""), plain text login allowed.
func WithoutTLS() Option { return func(s *Server) { s.noTLS = true } }

// WithoutIDLE starts a server that offers no IDLE (RFC 2177) after login.
func WithoutIDLE() Option { return func(s *Server) { s.noIdle = true } }

// Start starts a Dovecot for t with one user (User, Password), stopped and
// removed when t ends. It skips t when Dovecot is not installed, unless
// SCV_REQUIRE_DOVECOT=1.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("dovecottest: %s is missing (%s=1): install dovecot-imapd", Binary, RequireEnv)
		}
		t.Skipf("dovecottest: %s is missing: install Debian's dovecot-imapd to run this test", Binary)
	}
	s := &Server{t: t, users: map[string]string{}}
	for _, o := range opts {
		o(s)
	}
	dir, err := os.MkdirTemp(tempBase(), "dovecottest-")
	if err != nil {
		t.Fatalf("dovecottest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s.dir = dir
	if err := s.setup(); err != nil {
		t.Fatalf("dovecottest: %v", err)
	}
	t.Cleanup(s.stop)
	s.Start()
	return s
}

// setup writes the configuration, the certificate and the first user, and
// chooses the ports.
func (s *Server) setup() error {
	internalUser, internalGroup := "", ""
	s.uid, s.gid = os.Getuid(), os.Getgid()
	if s.uid == 0 {
		// Dovecot runs no mail process as root: the users' mail and
		// Dovecot's own processes are nobody's.
		u, err := user.Lookup("nobody")
		if err != nil {
			return fmt.Errorf("running as root needs the user nobody: %w", err)
		}
		s.uid, _ = strconv.Atoi(u.Uid)
		s.gid, _ = strconv.Atoi(u.Gid)
		internalUser = "nobody"
		g, err := user.LookupGroupId(u.Gid)
		if err != nil {
			return fmt.Errorf("the group of nobody: %w", err)
		}
		internalGroup = g.Name
		// nobody reaches the mail and the sockets through the folder.
		if err := os.Chmod(s.dir, 0o755); err != nil {
			return err
		}
	} else {
		u, err := user.Current()
		if err != nil {
			return fmt.Errorf("the current user: %w", err)
		}
		internalUser = u.Username
		g, err := user.LookupGroupId(strconv.Itoa(s.gid))
		if err != nil {
			return fmt.Errorf("the current group: %w", err)
		}
		internalGroup = g.Name
	}
	for _, d := range []string{"run", "state", "mail"} {
		if err := os.Mkdir(filepath.Join(s.dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chown(filepath.Join(s.dir, "mail"), s.uid, s.gid); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	s.port, s.tlsPort = ports[0], ports[1]
	if !s.noTLS {
		if err := s.makeCert(); err != nil {
			return err
		}
	}
	if err := os.WriteFile(s.path("dovecot.conf"), []byte(s.config(internalUser, internalGroup)), 0o644); err != nil {
		return err
	}
	return s.addUser("alice", randomPassword())
}

func (s *Server) path(name string) string { return filepath.Join(s.dir, name) }

// config is the server's dovecot.conf.
func (s *Server) config(internalUser, internalGroup string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# dovecottest: a private server for one test")
	w("instance_name = dovecottest")
	w("protocols = imap")
	w("listen = 127.0.0.1")
	w("base_dir = %s", s.path("run"))
	w("state_dir = %s", s.path("state"))
	w("log_path = %s", s.path("dovecot.log"))
	w("info_log_path = %s", s.path("dovecot.log"))
	w("default_internal_user = %s", internalUser)
	w("default_internal_group = %s", internalGroup)
	w("default_login_user = %s", internalUser)
	w("first_valid_uid = %d", s.uid)
	w("first_valid_gid = %d", s.gid)
	w("disable_plaintext_auth = no")
	w("auth_mechanisms = plain login")
	w("auth_failure_delay = 0")
	w("auth_verbose = yes")
	w("mail_location = maildir:%s/%%u", s.path("mail"))
	w("mail_fsync = never")
	if s.noIdle {
		w("imap_capability = IMAP4rev1 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE UIDPLUS")
	}
	w("passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%%u %s\n}", s.path("passwd"))
	w("userdb {\n  driver = passwd-file\n  args = username_format=%%u %s\n}", s.path("passwd"))
	// Without root there is no chroot; with it, none is needed.
	// No auth penalty (a growing delay after failed logins from an
	// address): the tests fail logins on purpose.
	w("service anvil {\n  chroot =\n  unix_listener anvil-auth-penalty {\n    mode = 0\n  }\n}")
	w("service imap-login {\n  chroot =")
	w("  inet_listener imap {\n    address = 127.0.0.1\n    port = %d\n  }", s.port)
	if s.noTLS {
		w("  inet_listener imaps {\n    port = 0\n  }")
	} else {
		w("  inet_listener imaps {\n    address = 127.0.0.1\n    port = %d\n    ssl = yes\n  }", s.tlsPort)
	}
	w("}")
	if s.noTLS {
		w("ssl = no")
	} else {
		w("ssl = yes")
		w("ssl_cert = <%s", s.path("cert.pem"))
		w("ssl_key = <%s", s.path("key.pem"))
	}
	return b.String()
}

// makeCert makes a self-signed certificate for 127.0.0.1, ::1 and
// localhost, valid for the day.
func (s *Server) makeCert() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "dovecottest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	s.cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	s.certPath = s.path("cert.pem")
	s.pool = x509.NewCertPool()
	s.pool.AddCert(cert)
	if err := os.WriteFile(s.certPath, s.cert, 0o644); err != nil {
		return err
	}
	return os.WriteFile(s.path("key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// Start starts the server again after Stop, on the same ports and with
// the same users and mail. Start (the function) has already started it.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatalf("dovecottest: Start of a server already running")
	}
	// -F: in the foreground, so that it is this process's child.
	cmd := exec.Command(Binary, "-F", "-c", s.path("dovecot.conf"))
	// A file, not a pipe: the master's children inherit it, and a pipe
	// would hold cmd.Wait until the last of them has gone.
	out, err := os.OpenFile(s.path("dovecot.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatalf("dovecottest: %v", err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("dovecottest: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.greeted()
		if err == nil {
			return
		}
		select {
		case <-done:
			s.cmd = nil
			s.t.Fatalf("dovecottest: dovecot exited at its start: %s\n%s%s", cmd.ProcessState, s.output(), s.Log())
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			s.t.Fatalf("dovecottest: no greeting on port %d within %s: %v\n%s%s", s.port, startTimeout, err, s.output(), s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// greeted is nil once the IMAP port answers with a greeting.
func (s *Server) greeted() error {
	conn, err := net.DialTimeout("tcp", s.addr(s.port), time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 4)
	if _, err := conn.Read(buf); err != nil {
		return err
	}
	if string(buf) != "* OK" {
		return fmt.Errorf("greeting %q", buf)
	}
	return nil
}

// Stop stops the server (its mail and users are kept for Start). The
// connections to it end with the server's BYE.
func (s *Server) Stop() {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatalf("dovecottest: Stop of a server not running")
	}
	s.stop()
}

func (s *Server) stop() {
	if s.cmd == nil {
		return
	}
	pgid := s.cmd.Process.Pid
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
	// What the master left (a login process serving a client, holding the
	// listeners) goes too: the server is gone, its ports free.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.done
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
	}
	s.cmd = nil
}

func (s *Server) addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Addr is the IMAP listener's host:port.
func (s *Server) Addr() string { return s.addr(s.port) }

// URL is imap://127.0.0.1:PORT: STARTTLS offered (none WithoutTLS).
func (s *Server) URL() string { return "imap://" + s.Addr() }

// TLSURL is imaps://127.0.0.1:PORT, "" for a server WithoutTLS.
func (s *Server) TLSURL() string {
	if s.noTLS {
		return ""
	}
	return "imaps://" + s.addr(s.tlsPort)
}

// CAPool holds the server's certificate, for a client to trust (nil
// WithoutTLS).
func (s *Server) CAPool() *x509.CertPool { return s.pool }

// CertFile is the server's certificate (PEM), for a process of its own
// to trust: SSL_CERT_FILE=CertFile makes Go's system roots hold it alone.
// "" WithoutTLS.
func (s *Server) CertFile() string { return s.certPath }

// User is the first user's name.
func (s *Server) User() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order[0]
}

// Password is the first user's password.
func (s *Server) Password() string { return s.PasswordOf(s.User()) }

// PasswordOf is user's password ("" for no such user).
func (s *Server) PasswordOf(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[user]
}

// AddUser adds a user with password (an empty mailbox), or changes an
// existing user's password. The server reads the change at the next
// login.
func (s *Server) AddUser(user, password string) {
	s.t.Helper()
	if err := s.addUser(user, password); err != nil {
		s.t.Fatalf("dovecottest: %v", err)
	}
}

// SetPassword changes user's password.
func (s *Server) SetPassword(user, password string) {
	s.t.Helper()
	if s.PasswordOf(user) == "" {
		s.t.Fatalf("dovecottest: no user %q", user)
	}
	s.AddUser(user, password)
}

func (s *Server) addUser(name, password string) error {
	if name == "" || strings.ContainsAny(name, ":/\n\r\t ") || strings.ContainsAny(password, ":\n\r") || password == "" {
		return fmt.Errorf("a user %q with that password cannot be written to a passwd-file", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[name]; !ok {
		s.order = append(s.order, name)
	}
	s.users[name] = password
	var b strings.Builder
	for _, u := range s.order {
		home := filepath.Join(s.path("mail"), u)
		// user:password:uid:gid:gecos:home:shell
		fmt.Fprintf(&b, "%s:{PLAIN}%s:%d:%d::%s::\n", u, s.users[u], s.uid, s.gid, home)
	}
	// Written aside and renamed: the server never reads half a file.
	tmp := s.path("passwd.tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	// Dovecot reads the file again when its mtime (in seconds) or size
	// changed, looking at most once a second: each version gets an mtime
	// of its own, and the change waits for the next second.
	s.passwdStamp = s.passwdStamp.Add(time.Second)
	if now := time.Now().Truncate(time.Second); now.After(s.passwdStamp) {
		s.passwdStamp = now
	}
	if err := os.Chtimes(tmp, s.passwdStamp, s.passwdStamp); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path("passwd")); err != nil {
		return err
	}
	if s.cmd != nil {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	}
	return nil
}

// Append delivers one mail (RFC 5322, CRLF line ends) to user's INBOX with
// IMAP APPEND, over its own connection.
func (s *Server) Append(t testing.TB, user string, rfc822 []byte) {
	t.Helper()
	password := s.PasswordOf(user)
	if password == "" {
		t.Fatalf("dovecottest: no user %q", user)
	}
	c, err := client.Dial(s.Addr())
	if err != nil {
		t.Fatalf("dovecottest: append: %v", err)
	}
	defer func() { _ = c.Logout() }()
	c.Timeout = startTimeout
	if err := c.Login(user, password); err != nil {
		t.Fatalf("dovecottest: append: login: %v\n%s", err, s.Log())
	}
	if err := c.Append("INBOX", nil, time.Now(), bytes.NewReader(rfc822)); err != nil {
		t.Fatalf("dovecottest: append: %v", err)
	}
}

// Log is what the server has logged so far.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.path("dovecot.log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Sprintf("(its log: %v)\n", err)
	}
	return string(b)
}

// output is what dovecot wrote to its standard output and error.
func (s *Server) output() string {
	b, _ := os.ReadFile(s.path("dovecot.out"))
	return string(b)
}

// tempBase is where the server's folder goes: the system's temporary
// folder, or /tmp when it runs as root and the temporary folder is closed
// to others (nobody, its mail's owner, could not reach the mail).
func tempBase() string {
	if os.Getuid() != 0 {
		return ""
	}
	if fi, err := os.Stat(os.TempDir()); err != nil || fi.Mode().Perm()&0o001 == 0 {
		return "/tmp"
	}
	return ""
}

// freePorts are n loopback ports free now.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomPassword() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
