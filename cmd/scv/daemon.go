package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"scv/control"
	"scv/ledger"
)

// Daemon is `scv daemon`: the ledger and the control server wired
// together. Tests drive it in-process through Open, Serve and Close.
type Daemon struct {
	DBPath     string
	SocketPath string
	Logger     *slog.Logger

	ledger *ledger.Ledger
	server *control.Server
	ln     net.Listener
}

// defaultDBPath is $SCV_DB, else $XDG_STATE_HOME/scv/ledger.db.
func defaultDBPath() string {
	if p := os.Getenv("SCV_DB"); p != "" {
		return p
	}
	return filepath.Join(control.StateDir(), "ledger.db")
}

// ParseFlags reads `scv daemon` flags.
func (d *Daemon) ParseFlags(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("scv daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&d.DBPath, "db", defaultDBPath(), "ledger database `path` (env SCV_DB)")
	fs.StringVar(&d.SocketPath, "socket", control.DefaultSocketPath(), "control socket `path` (env SCV_SOCKET)")
	return fs.Parse(args)
}

// Open opens the ledger and the socket.
func (d *Daemon) Open(ctx context.Context) error {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	l, err := ledger.Open(ctx, d.DBPath, ledger.Options{})
	if err != nil {
		return err
	}
	ln, err := control.Listen(d.SocketPath)
	if err != nil {
		l.Close()
		return fmt.Errorf("listen on %s: %w", d.SocketPath, err)
	}
	d.ledger, d.ln = l, ln
	d.server = &control.Server{
		Service: &control.Service{Ledger: l, Version: version, PID: uint32(os.Getpid())},
		Logger:  d.Logger.With("component", "control"),
	}
	return nil
}

// Serve answers requests until Close.
func (d *Daemon) Serve() error { return d.server.Serve(d.ln) }

// Close stops taking requests, answers those in flight, and closes the
// ledger.
func (d *Daemon) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.server.Shutdown(ctx)
	os.Remove(d.SocketPath)
	return errors.Join(err, d.ledger.Close())
}

// runDaemon is `scv daemon`: it runs in the foreground until SIGINT or
// SIGTERM.
func runDaemon(args []string, stderr io.Writer) error {
	d := &Daemon{Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if err := d.ParseFlags(args, stderr); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := d.Open(ctx); err != nil {
		return err
	}
	d.Logger.Info("daemon started", "version", version, "db", d.DBPath, "socket", d.SocketPath)
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	select {
	case <-ctx.Done():
		d.Logger.Info("shutting down")
	case err := <-served:
		d.Close()
		return err
	}
	if err := d.Close(); err != nil {
		return err
	}
	d.Logger.Info("daemon stopped")
	return nil
}
