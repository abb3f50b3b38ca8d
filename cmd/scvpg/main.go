// Command scvpg runs a private PostgreSQL cluster for the ledger's tests
// and for trying a fleet, with nothing but Debian's postgresql package:
//
//	scvpg start DIR    initdb in DIR (once) and start a server on a Unix socket in DIR; print its URL
//	scvpg url DIR      print the URL of the cluster in DIR
//	scvpg stop DIR     stop it
//	scvpg fleet DIR    start the cluster, a database "fleet" and two daemons on it, until Ctrl-C
//
// The server listens on no TCP port, only on DIR's socket, with fsync on.
// PostgreSQL refuses to run as root: run as root (as CI does), scvpg runs
// the cluster as the user "postgres" (Debian's package creates it), or
// "nobody" where there is none, and gives DIR to that user.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scvpg:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  scvpg start DIR    initdb in DIR (once) and start a server on a Unix socket in DIR; print its URL
  scvpg url DIR      print the URL of the cluster in DIR
  scvpg stop DIR     stop it
  scvpg fleet DIR    start the cluster, a database "fleet" and two daemons on it, until Ctrl-C`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) != 2 {
		return errors.New(usage)
	}
	dir, err := filepath.Abs(args[1])
	if err != nil {
		return err
	}
	c := &cluster{dir: dir, log: stderr}
	switch args[0] {
	case "start":
		if err := c.start(); err != nil {
			return err
		}
		fmt.Fprintln(stdout, c.url("postgres"))
		return nil
	case "url":
		fmt.Fprintln(stdout, c.url("postgres"))
		return nil
	case "stop":
		return c.stop()
	case "fleet":
		return fleet(c, stdout, stderr)
	}
	return errors.New(usage)
}

// cluster is a private PostgreSQL cluster in dir: data in dir/data, the
// socket in dir.
type cluster struct {
	dir string
	log io.Writer
}

// role is the cluster's superuser.
const role = "scv"

func (c *cluster) url(db string) string {
	return (&url.URL{Scheme: "postgres", User: url.User(role), Path: "/" + db, RawQuery: "host=" + url.QueryEscape(c.dir)}).String()
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
func (c *cluster) runAs(name string, args ...string) error {
	p, err := bin(name)
	if err != nil {
		return err
	}
	cmd := exec.Command(p, args...)
	if os.Geteuid() == 0 {
		u, err := unprivileged()
		if err != nil {
			return err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(os.Environ(), "HOME="+c.dir)
	}
	cmd.Stdout, cmd.Stderr = c.log, c.log
	cmd.Dir = c.dir
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// unprivileged is the user a root process runs the cluster as.
func unprivileged() (*user.User, error) {
	for _, name := range []string{"postgres", "nobody"} {
		if u, err := user.Lookup(name); err == nil {
			return u, nil
		}
	}
	return nil, errors.New("running as root, and there is no user postgres or nobody to run PostgreSQL as")
}

// own gives dir to the cluster's user when this process is root.
func (c *cluster) own() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := unprivileged()
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(c.dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func (c *cluster) start() error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	if err := c.own(); err != nil {
		return err
	}
	data := filepath.Join(c.dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		if err := c.runAs("initdb", "-D", data, "-A", "trust", "-U", role, "-E", "UTF8", "--no-instructions"); err != nil {
			return err
		}
	}
	if c.ready() {
		return nil
	}
	opts := "-k " + c.dir + " -c listen_addresses= -c fsync=on -c synchronous_commit=on -c max_connections=300"
	if err := c.runAs("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		return err
	}
	for range 100 {
		if c.ready() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the server in %s did not answer (see %s)", c.dir, filepath.Join(c.dir, "server.log"))
}

// ready reports whether the server answers.
func (c *cluster) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

func (c *cluster) stop() error {
	return c.runAs("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "stop")
}

// createDB creates database name unless it exists.
func (c *cluster) createDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	}
	return err
}

// fleet starts the cluster, a database and two daemons sharing it, each
// with its own socket and local state, and stops them all on Ctrl-C.
func fleet(c *cluster, stdout, stderr io.Writer) error {
	if err := c.start(); err != nil {
		return err
	}
	defer c.stop()
	if err := c.createDB("fleet"); err != nil {
		return err
	}
	scv, err := filepath.Abs("bin/scv")
	if err != nil || !isExec(scv) {
		return errors.New("no bin/scv: run `make build` first (make fleet does)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var daemons []*exec.Cmd
	for _, name := range []string{"a", "b"} {
		home := filepath.Join(filepath.Dir(c.dir), "daemon-"+name)
		if err := os.MkdirAll(home, 0o700); err != nil {
			return err
		}
		cmd := exec.Command(scv, "daemon", "--db", c.url("fleet"), "--local-db", filepath.Join(home, "local.db"),
			"--socket", filepath.Join(home, "d.sock"))
		logf, err := os.Create(filepath.Join(home, "daemon.log"))
		if err != nil {
			return err
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return err
		}
		daemons = append(daemons, cmd)
		fmt.Fprintf(stdout, "daemon %s: scv --socket %s …   (log %s)\n", name, filepath.Join(home, "d.sock"), logf.Name())
	}
	fmt.Fprintf(stdout, "ledger:   %s\nCtrl-C stops the daemons and the cluster.\n", c.url("fleet"))
	<-ctx.Done()
	for _, d := range daemons {
		d.Process.Signal(syscall.SIGTERM)
	}
	for _, d := range daemons {
		d.Wait()
	}
	return nil
}
