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
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"scv/ledger/postgres/pgcluster"
	"syscall"
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
	c := &pgcluster.Cluster{Dir: dir, Log: stderr}
	switch args[0] {
	case "start":
		if err := c.Start(); err != nil {
			return err
		}
		fmt.Fprintln(stdout, c.URL("postgres"))
		return nil
	case "url":
		fmt.Fprintln(stdout, c.URL("postgres"))
		return nil
	case "stop":
		return c.Stop()
	case "fleet":
		return fleet(c, stdout, stderr)
	}
	return errors.New(usage)
}

// fleet starts the cluster, a database and two daemons sharing it, each
// with its own socket and local state, and stops them all on Ctrl-C.
func fleet(c *pgcluster.Cluster, stdout, stderr io.Writer) error {
	if err := c.Start(); err != nil {
		return err
	}
	defer c.Stop()
	if err := c.CreateDB("fleet"); err != nil {
		return err
	}
	scv, err := filepath.Abs("bin/scv")
	if fi, serr := os.Stat(scv); err != nil || serr != nil || fi.Mode()&0o111 == 0 {
		return errors.New("no bin/scv: run `make build` first (make fleet does)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var daemons []*exec.Cmd
	for _, name := range []string{"a", "b"} {
		home := filepath.Join(filepath.Dir(c.Dir), "daemon-"+name)
		if err := os.MkdirAll(home, 0o700); err != nil {
			return err
		}
		cmd := exec.Command(scv, "daemon", "--db", c.URL("fleet"), "--local-db", filepath.Join(home, "local.db"),
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
	fmt.Fprintf(stdout, "ledger:   %s\nCtrl-C stops the daemons and the cluster.\n", c.URL("fleet"))
	<-ctx.Done()
	for _, d := range daemons {
		d.Process.Signal(syscall.SIGTERM)
	}
	for _, d := range daemons {
		d.Wait()
	}
	return nil
}
