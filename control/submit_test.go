package control_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/rpc"
)

// A write the ledger commits is answered by the goroutine that committed
// it, while the connection's own goroutine reads on (Service.Submit).
// These tests hold that to what a client sees: replies in the order of the
// requests, and no client held up by another that does not read.

// runFixture creates project "acme" with one task and a running run, and
// returns the run's ID.
func runFixture(t *testing.T, d *daemon) string {
	t.Helper()
	c := d.client(t)
	call(t, c, api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	task := call(t, c, api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}}).TaskID
	return call(t, c, api.CmdProjectRunStart{Project: "acme", Task: task, Agent: "codex"}).RunID
}

// TestPipelinedRepliesKeepRequestOrder sends writes, reads, notifications
// and bad lines in one burst, without waiting for any reply, and checks
// that the replies come back in the order of the requests, each write's
// reply saying what that write did.
func TestPipelinedRepliesKeepRequestOrder(t *testing.T) {
	d := startDaemon(t, nil)
	run := runFixture(t, d)
	var lines, want []string
	for i := 1; i <= 300; i++ {
		id := fmt.Sprint(i)
		switch i % 5 {
		case 0:
			lines = append(lines, request(id, `{"action":"project_status","project":"acme"}`))
		case 1:
			lines = append(lines, request(id, fmt.Sprintf(`{"action":"project_task_add","project":"acme","title":"t%d","depends_on":[],"max_retries":0}`, i)))
		case 2:
			lines = append(lines, request("", fmt.Sprintf(`{"action":"project_run_progress","project":"acme","run":%q,"progress":"quiet %d"}`, run, i)))
			continue // a notification: no reply
		case 3:
			lines = append(lines, request(id, `{"action":"project_run_progress","project":"acme","run":"no-such-run","progress":"x"}`))
		case 4:
			lines = append(lines, request(id, fmt.Sprintf(`{"action":"project_run_progress","project":"acme","run":%q,"progress":"step %d"}`, run, i)))
		}
		want = append(want, id)
	}
	rc := d.raw(t)
	rc.write([]byte(strings.Join(lines, "\n") + "\n"))
	tasks := uint64(1)
	for _, id := range want {
		r := parseReply(t, rc.readLine())
		require.Equal(t, id, string(r.id), "replies out of the order of the requests")
		i, err := strconv.Atoi(id)
		require.NoError(t, err)
		switch i % 5 {
		case 1:
			tasks++
			var st api.DaemonStatus
			require.NoError(t, json.Unmarshal(r.result, &st), "%s", r.raw)
			assert.Equal(t, api.KindTaskAdded, st.Project.Kind)
			assert.Equal(t, tasks, st.Project.Project.TaskCount, "task_add %s answered with the state after it", id)
		case 3:
			require.NotNil(t, r.err, "progress of an unknown run: %s", r.raw)
		default:
			require.Nil(t, r.err, "%s", r.raw)
		}
	}
}

// TestClientThatDoesNotReadHoldsUpNoOther: one client pipelines writes
// and never reads its replies, until its socket and the daemon's are full
// and the daemon stops reading it. Meanwhile other clients' writes, some
// of them committed in the same batch as its last, are all answered; then
// the silent client reads, and finds every reply, in order.
func TestClientThatDoesNotReadHoldsUpNoOther(t *testing.T) {
	d := startDaemon(t, nil)
	run := runFixture(t, d)
	line := func(id int) string {
		return request(fmt.Sprint(id), fmt.Sprintf(`{"action":"project_run_progress","project":"acme","run":%q,"progress":"silent %d"}`, run, id))
	}
	const silent = 5000 // replies far beyond what the sockets buffer
	sc, err := net.DialTimeout("unix", d.sock, ioTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	sent := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(sc)
		for i := 1; i <= silent; i++ {
			if _, err := w.WriteString(line(i) + "\n"); err != nil {
				sent <- err
				return
			}
		}
		sent <- w.Flush()
	}()

	// The daemon has stopped reading the silent client once its lines
	// stop going out: the last of its replies that the daemon took is
	// then stuck, and what else was in that batch must not be.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := rpc.Dial(ctx, d.sock)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for i := range 200 {
				_, err := c.Call(ctx, api.CmdProjectRunProgress{Project: "acme", Run: run, Progress: fmt.Sprintf("client %d step %d", k, i)})
				if err != nil {
					errs <- fmt.Errorf("client %d, write %d: %w", k, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a client was held up by one that does not read")
	}
	select {
	case err := <-sent:
		t.Fatalf("the silent client's %d lines all went out (%v): the daemon never waited on it, so this test proved nothing", silent, err)
	default:
	}

	// The silent client reads at last: every reply, in order.
	r := bufio.NewReader(sc)
	for i := 1; i <= silent; i++ {
		require.NoError(t, sc.SetReadDeadline(time.Now().Add(ioTimeout)))
		b, err := r.ReadBytes('\n')
		require.NoError(t, err, "reply %d of the silent client", i)
		rep := parseReply(t, b[:len(b)-1])
		require.Equal(t, fmt.Sprint(i), string(rep.id))
		require.Nil(t, rep.err, "%s", rep.raw)
	}
	require.NoError(t, <-sent)
}
