// Package pgcluster runs a private PostgreSQL cluster, with nothing but
// Debian's postgresql package: initdb in a folder, a server on a Unix
// socket in it (and on a TCP port of 127.0.0.1 if asked), fsync on.
// PostgreSQL refuses to run as root:
// run as root (as CI does), the cluster runs as the user "postgres"
// (Debian's package creates it), or "nobody" where there is none, who is
// given the folder. cmd/scvpg and the fleet's fault tests use it.
//
// Bouncer puts a PgBouncer (Debian's pgbouncer package) in front of a
// server, in the same way, for the tests that reach the server through
// one.
//
// # Standbys and failover
//
// StartStandby copies a running cluster (pg_basebackup) into a streaming
// standby of it; SetSynchronous and WaitSync make the primary wait for
// that standby at every commit; Kill stops a server as a crash would, and
// Promote turns a standby into the primary. MultiHostURL names several
// clusters in one URL that reaches whichever of them accepts writes, as a
// fleet's daemons are given it when their database fails over.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

func (c *Cluster) log() io.Writer {
	if c.Log != nil {
		return c.Log
	}
	return io.Discard
}

// Installed reports whether PostgreSQL's initdb can be found.
func Installed() bool {
	_, err := bin("initdb")
	return err == nil
}

// Cluster is a private PostgreSQL cluster in Dir: data in Dir/data, the
// socket in Dir. Log receives what the PostgreSQL programs print (nil:
// discarded).
type Cluster struct {
	Dir string
	Log io.Writer
	// Port, when not zero, is a TCP port the server also listens on, on
	// 127.0.0.1 only (and the number in its socket's name,
	// .s.PGSQL.<Port>). Zero: no TCP port, and the socket is
	// .s.PGSQL.5432.
	Port int
}

// Role is the cluster's superuser.
const Role = "scv"

// defaultPort is PostgreSQL's port, which names the socket of a cluster
// with no TCP port.
const defaultPort = 5432

// port is the number in the name of the server's socket.
func (c *Cluster) port() int {
	if c.Port != 0 {
		return c.Port
	}
	return defaultPort
}

// URL is the URL of database db on the cluster, through its Unix socket,
// as its superuser.
func (c *Cluster) URL(db string) string {
	q := "host=" + url.QueryEscape(c.Dir)
	if c.Port != 0 {
		q += "&port=" + strconv.Itoa(c.Port)
	}
	return (&url.URL{Scheme: "postgres", User: url.User(Role), Path: "/" + db, RawQuery: q}).String()
}

// TCPURL is the URL of database db on the cluster, through its TCP port
// on 127.0.0.1, as its superuser. It panics if the cluster has no Port.
func (c *Cluster) TCPURL(db string) string {
	if c.Port == 0 {
		panic("pgcluster: TCPURL of a cluster with no TCP port")
	}
	return (&url.URL{Scheme: "postgres", User: url.User(Role), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)), Path: "/" + db}).String()
}

// bin finds a PostgreSQL program: on PATH, else in Debian's newest
// /usr/lib/postgresql/N/bin.
func bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if p := filepath.Join(d, name); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s: install PostgreSQL (Debian: apt-get install postgresql)", name)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&0o111 != 0
}

// runAs runs a PostgreSQL program, as an unprivileged user when this
// process is root.
func (c *Cluster) runAs(name string, args ...string) error {
	p, err := bin(name)
	if err != nil {
		return err
	}
	cmd := exec.Command(p, args...)
	if err := c.asUnprivileged(cmd); err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = c.log(), c.log()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// asUnprivileged makes cmd run as an unprivileged user, with Dir as its
// home and working folder, when this process is root.
func (c *Cluster) asUnprivileged(cmd *exec.Cmd) error {
	cmd.Dir = c.Dir
	if os.Geteuid() != 0 {
		return nil
	}
	_, uid, gid, err := unprivileged()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Env = append(os.Environ(), "HOME="+c.Dir)
	return nil
}

// unprivileged is the user a root process runs the cluster as, and its
// IDs.
func unprivileged() (u *user.User, uid, gid int, err error) {
	for _, name := range []string{"postgres", "nobody"} {
		if u, err := user.Lookup(name); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			return u, uid, gid, nil
		}
	}
	return nil, 0, 0, errors.New("running as root, and there is no user postgres or nobody to run PostgreSQL as")
}

// own gives dir to the cluster's user when this process is root.
func (c *Cluster) own() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, uid, gid, err := unprivileged()
	if err != nil {
		return err
	}
	// The user must be able to reach the folder: every folder above it
	// must let others (or that user) through.
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm()&0o001 == 0 && (st == nil || int(st.Uid) != uid) {
			return fmt.Errorf("the cluster runs as %s, who cannot reach %s: %s is mode %04o; choose a folder others may pass through",
				u.Username, c.Dir, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return filepath.Walk(c.Dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// Start creates the cluster (initdb, once) and starts its server, unless
// it answers already. A standby stopped (Stop, Kill) starts again with
// Start, as the standby it was.
func (c *Cluster) Start() error {
	// The folders above it as any folder (others may pass through); the
	// cluster's own is private.
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	if err := c.own(); err != nil {
		return err
	}
	data := filepath.Join(c.Dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		if err := c.runAs("initdb", "-D", data, "-A", "trust", "-U", Role, "-E", "UTF8", "--no-instructions"); err != nil {
			return err
		}
	}
	return c.serve()
}

// serve starts the server on the data in Dir/data, unless it answers
// already, and returns once it does.
func (c *Cluster) serve() error {
	if c.Ready() {
		return nil
	}
	listen := "-c listen_addresses="
	if c.Port != 0 {
		listen = fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d", c.Port)
	}
	opts := "-k " + c.Dir + " " + listen + " -c fsync=on -c synchronous_commit=on -c max_connections=300"
	data := filepath.Join(c.Dir, "data")
	if err := c.runAs("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(c.Dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		return err
	}
	for range 100 {
		if c.Ready() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the server in %s did not answer (see %s)", c.Dir, filepath.Join(c.Dir, "server.log"))
}

// Ready reports whether the server answers.
func (c *Cluster) Ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.withConn(ctx, func(*pgx.Conn) error { return nil }) == nil
}

// Stop stops the server (fast shutdown: connections are cut).
func (c *Cluster) Stop() error {
	return c.runAs("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "fast", "-w", "stop")
}

// CreateDB creates database name unless it exists. On a standby, which
// is read-only, it fails unless the database exists (it came from the
// primary).
func (c *Cluster) CreateDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.withConn(ctx, func(conn *pgx.Conn) error {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n)
		if err == nil && n == 0 {
			_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		}
		return err
	})
}

// withConn runs f on a connection of its own to the cluster's postgres
// database.
func (c *Cluster) withConn(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return f(conn)
}
