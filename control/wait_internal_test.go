package control

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"scv/control/api"
)

// TestIsWait: the long polls (confirm_list, agent_updates and
// project_work_status with wait_seconds) are waits, which a restart ends
// instead of waiting for them, and noWait makes each what there is now;
// without wait_seconds, or with 0, they are requests like any other.
func TestIsWait(t *testing.T) {
	five, zero := uint64(5), uint64(0)
	for _, c := range []struct {
		cmd, now api.Command
	}{
		{api.CmdConfirmList{WaitSeconds: &five}, api.CmdConfirmList{}},
		{api.CmdAgentUpdates{Agent: "a", WaitSeconds: &five}, api.CmdAgentUpdates{Agent: "a"}},
		{api.CmdProjectWorkStatus{Project: "p", WaitSeconds: &five}, api.CmdProjectWorkStatus{Project: "p"}},
	} {
		assert.True(t, isWait(c.cmd), "%s", c.cmd.Action())
		assert.Equal(t, c.now, noWait(c.cmd), "%s", c.cmd.Action())
		assert.False(t, isWait(c.now), "%s without wait_seconds", c.cmd.Action())
	}
	assert.False(t, isWait(api.CmdProjectWorkStatus{Project: "p", WaitSeconds: &zero}))
	assert.False(t, isWait(api.CmdStatus{}))
}
