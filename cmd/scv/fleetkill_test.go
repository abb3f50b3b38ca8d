package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/ledger/postgres/pgtest"
)

// TestFleetDaemonKilled: one daemon of two SIGKILLed under load. Every
// write either daemon acknowledged is in the ledger exactly once; the
// writes of the killed daemon's clients that got no reply may or may not
// be; the other daemon serves on, and verify passes.
func TestFleetDaemonKilled(t *testing.T) {
	url := pgtest.Database(t)
	ds := startPGFleet(t, url, 2)
	setup := ds[1].client(t)
	fleetCall(t, setup, api.CmdProjectCreate{Name: "kill", Workspace: t.TempDir()})
	const clients = 32
	runs := make([]string, clients)
	for i := range runs {
		task := fleetCall(t, setup, api.CmdProjectTaskAdd{Project: "kill", Title: fmt.Sprint("t", i), DependsOn: []string{}}).Project.TaskID
		runs[i] = fleetCall(t, setup, api.CmdProjectRunStart{Project: "kill", Task: task, Agent: "a"}).Project.RunID
	}

	var acked sync.Map
	var nAcked, nDropped atomic.Int64
	var killed atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		d := ds[i%2]
		wg.Go(func() {
			ctx := context.Background()
			c, err := control.Dial(ctx, d.Sock)
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer c.Close()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("c%d n%d", i, n)
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				_, err := c.Call(cctx, api.CmdProjectRunProgress{Project: "kill", Run: runs[i], Progress: text})
				cancel()
				var e *api.Error
				switch {
				case err == nil:
					acked.Store(text, true)
					nAcked.Add(1)
				case errors.As(err, &e):
					t.Errorf("%s refused: %v", text, e)
					return
				case d == ds[0] && killed.Load():
					nDropped.Add(1) // killed while this one was in flight: in doubt
					return
				default:
					t.Errorf("%s: %v", text, err)
					return
				}
			}
		})
	}
	time.Sleep(time.Second)
	killed.Store(true)
	require.True(t, ds[0].Kill(), "SIGKILL daemon a")
	killedAt := nAcked.Load()
	time.Sleep(time.Second)
	require.Greater(t, nAcked.Load(), killedAt, "daemon b serves on")
	close(stop)
	wg.Wait()

	present := written(t, allEvents(t, setup, "kill"))
	lost := 0
	acked.Range(func(k, _ any) bool {
		if present[k.(string)] != 1 {
			lost++
		}
		return true
	})
	assert.Zero(t, lost, "acknowledged writes lost (or stored twice)")
	out, err := exec.Command(fleetBinary(t), "ledger", "verify", "--db", url).CombinedOutput()
	require.NoError(t, err, "verify: %s", out)
	t.Logf("FLEET: daemon a SIGKILLed under %d clients on 2 daemons: %d acknowledged (%d lost), %d in flight on a when it died",
		clients, nAcked.Load(), lost, nDropped.Load())
}
