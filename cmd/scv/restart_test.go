package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/proc"
)

// TestRestartWhenIdleSendsItsDelegation: `scv restart-when-idle` run
// inside a delegation sends its SCV_PARENT chain as the parent, so that
// the daemon waits for that delegation to end (control/daemon's
// TestRestartWhenIdle shows the waiting), with --version, and --max-wait
// in whole seconds.
func TestRestartWhenIdleSendsItsDelegation(t *testing.T) {
	t.Setenv(proc.ParentEnv, "OUTER,DELEG")
	f := newFakeDaemon(t, func(n int, action string, p map[string]any) (any, *api.Error) {
		return api.DaemonStatus{Version: "1.0.0-old", PID: 1, Components: []api.ComponentHealth{}}, nil
	})
	r := runScv(f.sock, "", "restart-when-idle", "--version", "2.0.0-new", "--max-wait", "90s")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []string{"restart_when_idle"}, f.actions())
	assert.Equal(t, map[string]any{"action": "restart_when_idle", "version": "2.0.0-new", "parent": "OUTER,DELEG", "max_wait_seconds": float64(90)},
		f.call(0))
}
