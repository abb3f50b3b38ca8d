package control_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
)

// wireExamples is a verbatim copy of shared/wire-examples.jsonl (beside
// SPEC.md): serde's own encoding of every DaemonCommand variant and every
// DaemonStatus reply shape of seed/daemon.rs, in serde's field order. Each
// line is {"example": "<type> <what>", "json": <serde's bytes>}. Refresh it
// with `cp ../shared/wire-examples.jsonl control/testdata/` when the seed
// changes; never edit it by hand.
const wireExamples = "testdata/wire-examples.jsonl"

type wireExample struct {
	Name string          `json:"example"`
	JSON json.RawMessage `json:"json"` // the exact bytes serde wrote
}

func readWireExamples(t *testing.T) []wireExample {
	t.Helper()
	f, err := os.Open(wireExamples)
	require.NoError(t, err)
	defer f.Close()
	var out []wireExample
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ex wireExample
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ex), "line %q", sc.Text())
		// RawMessage keeps the input bytes; make sure they are serde's
		// compact form and nothing was lost on the way.
		require.Contains(t, sc.Text(), `"json":`+string(ex.JSON)+`}`)
		out = append(out, ex)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

// TestWireExamples checks every seed shape byte for byte: a command
// decodes strictly and re-encodes to serde's exact bytes; a reply
// unmarshals into DaemonStatus and marshals back to serde's exact bytes.
func TestWireExamples(t *testing.T) {
	actions := map[string]bool{}
	kinds := map[string]bool{}
	compacted := false
	for _, ex := range readWireExamples(t) {
		t.Run(ex.Name, func(t *testing.T) {
			switch {
			case strings.HasPrefix(ex.Name, "DaemonCommand "):
				cmd, err := control.DecodeCommand(ex.JSON)
				require.NoError(t, err)
				var tag struct{ Action string }
				require.NoError(t, json.Unmarshal(ex.JSON, &tag))
				assert.Equal(t, tag.Action, cmd.Action(), "decoded into the wrong variant")
				actions[cmd.Action()] = true
				got, err := api.EncodeCommand(cmd)
				require.NoError(t, err)
				assert.Equal(t, string(ex.JSON), string(got))
			case strings.HasPrefix(ex.Name, "DaemonStatus "):
				var st api.DaemonStatus
				require.NoError(t, json.Unmarshal(ex.JSON, &st))
				if st.Project != nil {
					kinds[string(st.Project.Kind)] = true
					if st.Project.CompactedBefore != nil {
						compacted = true
					}
				}
				got, err := json.Marshal(st)
				require.NoError(t, err)
				assert.Equal(t, string(ex.JSON), string(got))
			default:
				t.Fatalf("example %q is neither a DaemonCommand nor a DaemonStatus", ex.Name)
			}
		})
	}
	// The file must keep covering every variant, or this test proves less
	// than it claims.
	for _, a := range []string{
		"status", "reload", "channel_set", "channel_logout", "delegations", "delegation_kill",
		"restart_when_idle", "confirm_ask", "confirm_status", "project_create", "project_status",
		"project_events", "project_tasks", "project_report", "project_task_add", "project_task_update",
		"project_run_start", "project_run_progress", "project_run_finish", "project_heartbeat",
	} {
		assert.True(t, actions[a], "no wire example of action %s", a)
	}
	for _, k := range []string{"created", "events", "tasks", "report", "task_added", "run_started"} {
		assert.True(t, kinds[k], "no wire example of reply kind %s", k)
	}
	assert.True(t, compacted, "no wire example of events with compacted_before")
}

// TestWireExampleCompactedBefore pins the one reply field the daemon cannot
// produce yet (compaction is not reachable over the socket): the value is
// read and written back in serde's place, between project_id and events.
func TestWireExampleCompactedBefore(t *testing.T) {
	for _, ex := range readWireExamples(t) {
		if ex.Name != "DaemonStatus events after compaction" {
			continue
		}
		var st api.DaemonStatus
		require.NoError(t, json.Unmarshal(ex.JSON, &st))
		require.NotNil(t, st.Project)
		require.NotNil(t, st.Project.CompactedBefore)
		assert.Equal(t, uint64(5), *st.Project.CompactedBefore)
		got, err := json.Marshal(st)
		require.NoError(t, err)
		assert.Contains(t, string(got), `"project_id":"01J0PROJ","compacted_before":5,"events":[`)
		// Absent stays absent (skip_serializing_if), never null.
		st.Project.CompactedBefore = nil
		got, err = json.Marshal(st)
		require.NoError(t, err)
		assert.NotContains(t, string(got), "compacted_before")
		return
	}
	t.Fatal("wire example with compacted_before not found")
}
