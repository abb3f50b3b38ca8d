package daemon

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/rpc"
)

// serve opens a daemon with cfg in this process and serves it until stop,
// or until the test ends. Empty, the database, the socket and the
// channel settings are files of a folder of the test's own; the version
// is version.
func serve(t *testing.T, cfg Config) (d *Daemon, stop func()) {
	t.Helper()
	dir := shortDir(t)
	if cfg.DB == "" {
		cfg.DB = filepath.Join(dir, "l.db")
	}
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(dir, "d.sock")
	}
	if cfg.ConfigPath == "" {
		cfg.ConfigPath = filepath.Join(dir, "channels.json")
	}
	if cfg.Version == "" {
		cfg.Version = version
	}
	d = New(cfg)
	require.NoError(t, d.Open(context.Background()))
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			assert.NoError(t, d.Close())
			assert.NoError(t, <-served)
		})
	}
	t.Cleanup(stop)
	return d, stop
}

// dial is a connection to the daemon at sock, closed when the test ends.
func dial(t *testing.T, sock string) *rpc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, sock)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// must sends cmd on c; it must be answered with a result.
func must(t *testing.T, c *rpc.Client, cmd api.Command) *api.DaemonStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Call(ctx, cmd)
	require.NoError(t, err, "%s", cmd.Action())
	return st
}
