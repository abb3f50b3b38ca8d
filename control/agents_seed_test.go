package control_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// TestMain runs the test binary as a helper when the environment says
// so (reportJobs); otherwise it runs the tests.
func TestMain(m *testing.M) {
	if sock := os.Getenv(jobsEnv); sock != "" {
		os.Exit(reportJobs(sock))
	}
	os.Exit(m.Run())
}

// jobsEnv makes the test binary report background jobs: a process that a
// live agent starts is one of the agent's, so the daemon takes its
// delegation_update.
const jobsEnv = "SCV_TEST_REPORT_JOBS"

// reportJobs sends delegation_update for $SCV_DELEGATION with
// $SCV_TEST_JOBS background jobs to the daemon on sock.
func reportJobs(sock string) int {
	n, err := strconv.ParseUint(os.Getenv("SCV_TEST_JOBS"), 10, 32)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	if _, err := c.Call(ctx, api.CmdDelegationUpdate{Handle: os.Getenv("SCV_DELEGATION"), BackgroundJobs: uint32(n)}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("reported", n)
	return 0
}

var (
	acpOnce sync.Once
	acpBin  string
	acpErr  error
)

// acpagent is the test ACP agent (cmd/internal/acpagent), built once.
func acpagent(t *testing.T) string {
	t.Helper()
	acpOnce.Do(func() {
		dir, err := os.MkdirTemp("", "acpagent")
		if err != nil {
			acpErr = err
			return
		}
		acpBin = filepath.Join(dir, "acpagent")
		if out, err := exec.Command("go", "build", "-o", acpBin, "scv/cmd/internal/acpagent").CombinedOutput(); err != nil {
			acpErr = fmt.Errorf("%w: %s", err, out)
		}
	})
	require.NoError(t, acpErr, "build the test agent")
	return acpBin
}

// TestSeedParsesLiveAgents: with two live agents, one in the middle of a
// turn and one idle with two background jobs, every reply that carries
// them (status, delegations, the agent actions) parses through the seed's
// DaemonStatus, with conversation, turn, idle_since_unix_seconds,
// background_jobs and delegations.idle set; those the seed describes
// fully, serde writes back byte for byte.
func TestSeedParsesLiveAgents(t *testing.T) {
	bin := seedClient(t)
	d := startDaemon(t, nil)
	c := d.client(t)
	ctx := testCtx(t)
	must := func(cmd api.Command) []byte {
		t.Helper()
		raw, err := c.CallRaw(ctx, cmd)
		require.NoError(t, err, "%s", cmd.Action())
		return raw
	}
	must(api.CmdProjectCreate{Name: "acme", Workspace: d.workspace})
	must(api.CmdProjectTaskAdd{Project: "acme", Title: "build", DependsOn: []string{}})
	project, task := "acme", "build"
	env := append(os.Environ(), jobsEnv+"="+d.sock, "SCV_TEST_JOBS=2")
	state := t.TempDir()
	start := func(name string, p, tk *string) {
		must(api.CmdAgentStart{Name: name, Command: []string{acpagent(t), "--state", state}, Workspace: d.workspace, Env: env, Project: p, Task: tk})
	}
	start("busy", &project, &task)
	start("quiet", nil, nil)
	self, err := os.Executable()
	require.NoError(t, err)
	must(api.CmdAgentPrompt{Agent: "quiet", Text: "exec " + self})
	require.Eventually(t, func() bool {
		st, err := c.Call(ctx, api.CmdAgentList{})
		require.NoError(t, err)
		for _, a := range *st.Agents {
			if a.Name == "quiet" {
				return a.State == api.AgentIdle && a.BackgroundJobs != nil && *a.BackgroundJobs == 2
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "the quiet agent's turn reported two jobs and ended")
	must(api.CmdAgentPrompt{Agent: "busy", Text: "say working\nsleep 30s"})

	var input strings.Builder
	exact := map[string]bool{}
	reply := func(name string, same bool, cmd api.Command) string {
		raw := string(must(cmd))
		fmt.Fprintf(&input, "%s\tstatus\t%s\n", name, raw)
		exact[name] = same
		return raw
	}
	status := reply("status", true, api.CmdStatus{})
	assert.Contains(t, status, `"delegations":{"active":2,"idle":0,"reaped":0}`, "one works, the other has jobs")
	list := reply("delegations", true, api.CmdDelegations{})
	reply("agent_list", false, api.CmdAgentList{})
	reply("agent_updates", false, api.CmdAgentUpdates{Agent: "busy"})

	assert.Regexp(t, `"agent":"busy"[^}]*"conversation":"sess-[0-9a-f]+","turn":1\}`, list, "the working agent has no idle_since")
	assert.Regexp(t, `"agent":"quiet"[^}]*"conversation":"sess-[0-9a-f]+","turn":1,"idle_since_unix_seconds":\d+,"background_jobs":2\}`, list)
	sent := strings.Split(strings.TrimSuffix(input.String(), "\n"), "\n")
	for i, v := range seedDecode(t, bin, sent) {
		assert.True(t, v.ok, "%s: serde refused: %s", v.name, v.out)
		if exact[v.name] {
			assert.Equal(t, sent[i][strings.LastIndex(sent[i], "\t")+1:], v.out, "%s: serde writes it otherwise", v.name)
		}
	}
}
