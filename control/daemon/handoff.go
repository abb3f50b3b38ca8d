package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"scv/control/restart"
)

// pauseTimeout bounds the wait for the requests being answered when a
// restart begins.
const pauseTimeout = 10 * time.Second

// handoff restarts into the release at Executable without refusing a
// connection. It pauses the server (the listener stays open: new
// connections queue), stops the services, closes the ledger and releases
// the locks, and starts the release with the same arguments, passing it
// the listener. Once the new process is open it returns nil, and Serve
// returns: this process is done. If the new process exits or is not
// ready in time, it is killed, and this daemon takes its locks and ledger
// back and serves on as before; the error says what went wrong.
func (d *Daemon) handoff(toVersion string) error {
	life := d.life
	life.mu.Lock()
	defer life.mu.Unlock()
	if life.closed {
		return errors.New("the daemon is shutting down")
	}
	log := d.log.With("component", "restart")
	ctx, cancel := context.WithTimeout(context.Background(), pauseTimeout)
	err := d.server.Pause(ctx)
	cancel()
	if err != nil {
		d.server.Resume()
		return fmt.Errorf("requests still being answered after %s: %w", pauseTimeout, err)
	}
	// Nothing is being answered now, and nothing will be until Resume.
	d.services.Stop()
	if err := d.closeStores(); err != nil {
		log.Warn("close ledger", "err", err)
	}
	d.unlock()

	pid, err := restart.Successor(d.cfg.Executable, d.cfg.Args, d.ln, d.cfg.ReadyTimeout, d.cfg.Failpoints)
	if err == nil {
		life.handedOff, life.successor = true, pid
		// The socket is the new process's now: close this copy of the
		// listener without removing the file.
		d.ln.(*net.UnixListener).SetUnlinkOnClose(false)
		d.server.Shutdown(context.Background()) // Serve returns
		log.Info("handed over", "to_version", toVersion, "pid", pid)
		return nil
	}
	err = fmt.Errorf("restart into %s: %w", toVersion, err)
	if rerr := d.reopen(); rerr != nil {
		// Nothing left to serve with: end, so that a service manager
		// can start the daemon afresh.
		life.broken = fmt.Errorf("%w; reopening failed too: %w", err, rerr)
		d.server.Shutdown(context.Background())
		return life.broken
	}
	d.server.Resume()
	return err
}

// reopen takes back what handoff gave up: the locks, the ledger, the
// services.
func (d *Daemon) reopen() error {
	if err := d.lock(); err != nil {
		return err
	}
	ctx := context.Background()
	if err := d.openStores(ctx); err != nil {
		d.unlock()
		return err
	}
	return d.services.Start(ctx)
}
