package pgcluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Bouncer is a PgBouncer in front of a PostgreSQL server, with nothing but
// Debian's pgbouncer package: its configuration and its socket in Dir (no
// TCP port), every database of the server behind it, clients let in
// without a password (as the private cluster does), and the server
// reached as the upstream URL's user. Like PostgreSQL, PgBouncer refuses
// to run as root: run as root, it runs as the cluster's user.
type Bouncer struct {
	Dir string
	// Upstream is the URL of the server behind it (any database).
	Upstream string
	// Mode is PgBouncer's pool_mode: "session" (the one the daemon
	// supports), "transaction" or "statement".
	Mode string
	// LoginRetry is how long PgBouncer waits before it tries a server
	// that refused a login again (its server_login_retry; 0: one second,
	// where PgBouncer's own default is 15 s).
	LoginRetry time.Duration

	cmd  *exec.Cmd
	done chan struct{}
}

// BouncerInstalled reports whether the pgbouncer program can be found.
func BouncerInstalled() bool {
	_, err := bouncerBin()
	return err == nil
}

func bouncerBin() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if p := "/usr/sbin/pgbouncer"; isExec(p) {
		return p, nil
	}
	return "", errors.New("no pgbouncer: install PgBouncer (Debian: apt-get install pgbouncer)")
}

// bouncerPort only names the socket (.s.PGSQL.6432): there is no TCP port.
const bouncerPort = 6432

// URL is the URL of database db through the bouncer, as the upstream
// URL's user.
func (b *Bouncer) URL(db string) string {
	user := Role
	if cfg, err := pgconn.ParseConfig(b.Upstream); err == nil {
		user = cfg.User
	}
	q := url.Values{"host": {b.Dir}, "port": {strconv.Itoa(bouncerPort)}}
	return (&url.URL{Scheme: "postgres", User: url.User(user), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// Start writes the configuration and starts PgBouncer; it returns once
// the socket takes connections.
func (b *Bouncer) Start() error {
	if b.cmd != nil {
		return errors.New("pgbouncer is running already")
	}
	bin, err := bouncerBin()
	if err != nil {
		return err
	}
	up, err := pgconn.ParseConfig(b.Upstream)
	if err != nil {
		return fmt.Errorf("the upstream URL: %w", err)
	}
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return err
	}
	server := fmt.Sprintf("host=%s port=%d user=%s", up.Host, up.Port, up.User)
	if up.Password != "" {
		server += " password=" + up.Password
	}
	retry := max(1, int(b.LoginRetry.Seconds()))
	ini := strings.Join([]string{
		"[databases]",
		"* = " + server,
		"[pgbouncer]",
		"listen_addr =",
		fmt.Sprintf("listen_port = %d", bouncerPort),
		"unix_socket_dir = " + b.Dir,
		"auth_type = trust",
		"auth_file = " + filepath.Join(b.Dir, "userlist.txt"),
		"pool_mode = " + b.Mode,
		"max_client_conn = 1000",
		"default_pool_size = 100",
		fmt.Sprintf("server_login_retry = %d", retry),
		"",
	}, "\n")
	files := map[string]string{
		"pgbouncer.ini": ini,
		"userlist.txt":  authQuote(up.User) + ` ""` + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(b.Dir, name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	c := &Cluster{Dir: b.Dir}
	if err := c.own(); err != nil {
		return err
	}
	cmd := exec.Command(bin, filepath.Join(b.Dir, "pgbouncer.ini"))
	if err := c.asUnprivileged(cmd); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(b.Dir, "pgbouncer.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgbouncer: %w", err)
	}
	b.cmd, b.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(b.done) }()
	sock := filepath.Join(b.Dir, fmt.Sprintf(".s.PGSQL.%d", bouncerPort))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-b.done:
			b.cmd = nil
			return fmt.Errorf("pgbouncer exited at start (see %s)", filepath.Join(b.Dir, "pgbouncer.log"))
		default:
		}
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return nil
		}
	}
	b.Stop()
	return fmt.Errorf("pgbouncer did not listen on %s (see %s)", sock, filepath.Join(b.Dir, "pgbouncer.log"))
}

// Stop shuts PgBouncer down at once (SIGTERM: every client connection is
// cut) and waits for it to exit.
func (b *Bouncer) Stop() error {
	if b.cmd == nil {
		return nil
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd = nil
	return nil
}

// authQuote quotes a name for PgBouncer's auth_file ("" doubles a ").
func authQuote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
