package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"scv/control/daemon/daemonproc"
)

// TestProfileWindow builds the profiling daemon as -profile does, starts
// it, and takes one window's CPU profile, allocation profile and trace
// from its pprof socket: the build's extra source must compile, and every
// file must be written.
func TestProfileWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a daemon")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "scv-pprof")
	t.Cleanup(func() { os.Unsetenv(pprofEnv) })
	require.NoError(t, buildProfilingDaemon(ctx, dir, bin))
	run := filepath.Join(dir, "run")
	require.NoError(t, os.Mkdir(run, 0o700))
	d, err := daemonproc.Start(bin, filepath.Join(run, "p.db"), filepath.Join(run, "p.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { d.Stop() })
	_, err = d.Ready(ctx, time.Minute)
	require.NoError(t, err)

	old := profileDir
	profileDir = t.TempDir()
	t.Cleanup(func() { profileDir = old })
	require.NoError(t, profileWindow(ctx, d.Sock, "w", time.Second))
	for _, f := range []string{"w.pprof", "w.allocs.pprof", "w.trace"} {
		st, err := os.Stat(filepath.Join(profileDir, f))
		require.NoError(t, err, f)
		require.Positive(t, st.Size(), f)
	}
}
