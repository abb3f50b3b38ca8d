package control

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/reducer"
)

// TestAppendStatusMatchesMarshal: the hand-written reply encoder writes
// exactly what reflection (marshal, itself held to serde's bytes by the
// wire fixtures) writes, for every shape and for strings that need
// escaping.
func TestAppendStatusMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "acme", `q"uote`, `back\slash`, "tab\tnl\ncr\r", "\x00\x01\x1f\x7f", "bs\bff\f",
		"<b>&amp;</b>", "line\u2028sep\u2029", "héllo wörld ✓ 😀", "/slash/", "bad\xffutf8"}
	str := func() string { return strs[r.IntN(len(strs))] }
	u64 := func() *uint64 {
		if r.IntN(3) == 0 {
			return nil
		}
		v := r.Uint64() >> r.IntN(64)
		return &v
	}
	summary := func() *api.ProjectSummary {
		return &api.ProjectSummary{
			ID: str(), Name: str(), Workspace: str(),
			Phase: reducer.PhaseImplementation, Status: reducer.ProjectBlocked,
			CreatedUnixSeconds: r.Uint64(), UpdatedUnixSeconds: r.Uint64() >> 20,
			TaskCount: uint64(r.IntN(1000)), CompletedTasks: uint64(r.IntN(1000)),
			LastHeartbeatUnixSeconds: u64(),
		}
	}
	kinds := []api.ResponseKind{api.KindCreated, api.KindStatus, api.KindUpdated, api.KindTaskAdded, api.KindRunStarted, api.KindEvents, api.KindTasks, api.KindReport}
	for i := range 2000 {
		st := &api.DaemonStatus{Version: str(), PID: r.Uint32(), Components: []api.ComponentHealth{}}
		if r.IntN(4) == 0 {
			st.Components = []api.ComponentHealth{{ID: str(), Channel: str(), Account: str(), State: api.ComponentConnected, RemoteTools: api.RemoteToolsNone}}
		}
		st.Delegations = api.DelegationSummary{Active: r.Uint64() >> 40, Reaped: uint64(r.IntN(5))}
		switch r.IntN(5) {
		case 0:
			st.Delegations.Idle = u64()
			st.Delegations.Killed = []string{str()}
		case 1, 2:
			st.Delegations.Idle = u64() // the fast path, with live agents counted
		}
		if r.IntN(6) == 0 {
			turn := uint32(r.IntN(9))
			st.Agents = &[]api.AgentInfo{{Name: str(), Handle: str(), State: api.AgentIdle, Command: []string{str()}, Turn: turn, IdleSinceUnixSeconds: u64()}}
			st.AgentUpdates = &api.AgentUpdates{Agent: str(), Updates: []api.AgentUpdate{{Seq: 1, Kind: "agent_message_chunk", Text: str(), Update: []byte(`{"sessionUpdate":"agent_message_chunk"}`)}}}
		}
		if r.IntN(6) == 0 {
			st.Confirm = &api.ConfirmInfo{ID: str(), State: api.ConfirmPending, Chat: str()}
		}
		if r.IntN(6) == 0 {
			st.Restart = &api.RestartInfo{ToVersion: str(), DeadlineUnixSeconds: 5}
		}
		if r.IntN(6) == 0 {
			st.Questions = []api.Question{{Seq: 3, ID: str(), Chat: str(), Question: str(), State: api.ConfirmPending}}
		}
		switch r.IntN(6) {
		case 0:
			st.Projects = &[]api.ProjectListItem{}
		case 1:
			st.Projects = &[]api.ProjectListItem{{ProjectSummary: *summary(), RunningRuns: uint64(r.IntN(9))}, {ProjectSummary: *summary()}}
		}
		if r.IntN(5) != 0 {
			k := kinds[r.IntN(len(kinds))]
			p := &api.ProjectResponse{Kind: k, Project: summary(), TaskID: str(), RunID: str(), ProjectID: str()}
			switch k {
			case api.KindEvents:
				p.Project = nil
				p.Events = []api.ProjectEvent{{Sequence: 1, ProjectID: str(), Kind: "heartbeat", Data: []byte(`{"a":1}`)}}
				p.CompactedBefore = u64()
			case api.KindTasks:
				p.Project = nil
				p.Tasks = []api.ProjectTask{{ID: str(), Title: str(), Status: reducer.TaskReady, DependsOn: []string{}}}
			case api.KindReport:
				p.Report = &api.ProjectReport{Project: *summary(), Tasks: []api.ProjectTask{}, Runs: []api.ProjectRun{}, Evidence: []string{str()}}
			}
			st.Project = p
		}
		want, err := marshal(st)
		require.NoError(t, err)
		got, err := appendStatus(nil, st)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "case %d", i)
	}
}

func BenchmarkReplyEncoding(b *testing.B) {
	hb := uint64(1795948600)
	st := &api.DaemonStatus{Version: "0.1.0", PID: 4242, Components: []api.ComponentHealth{}, Project: &api.ProjectResponse{
		Kind: api.KindUpdated, Project: &api.ProjectSummary{ID: "01M8KE1H8NNPNK7QV6PJBNDHYE", Name: "acme", Workspace: "/home/me/acme",
			Phase: reducer.PhaseImplementation, Status: reducer.ProjectActive, CreatedUnixSeconds: 1795948594,
			UpdatedUnixSeconds: 1795948600, TaskCount: 256, CompletedTasks: 3, LastHeartbeatUnixSeconds: &hb}}}
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			marshal(st)
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = appendStatus(buf[:0], st)
		}
	})
}
