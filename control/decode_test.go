package control_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/reducer"
)

func ptr[T any](v T) *T { return &v }

// TestDecodeCommandAccepts decodes the minimal valid form of every action
// (every field serde lets be missing is missing) and a full form, and
// checks the value and serde's canonical re-encoding.
func TestDecodeCommandAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want api.Command
		enc  string // serde's re-encoding of in
	}{
		{"status", `{"action":"status"}`, api.CmdStatus{}, `{"action":"status"}`},
		{"reload", `{"action":"reload"}`, api.CmdReload{}, `{"action":"reload"}`},
		{"channel_set minimal", `{"action":"channel_set","channel":"wechat","account":"main","enabled":true}`,
			api.CmdChannelSet{Channel: "wechat", Account: "main", Enabled: true},
			`{"action":"channel_set","channel":"wechat","account":"main","enabled":true,"workspace":null}`},
		{"channel_set full", `{"action":"channel_set","channel":"c","account":"a","enabled":false,"workspace":"/w","remote_tools":"none","senders":"owner","purpose":"chat"}`,
			api.CmdChannelSet{Channel: "c", Account: "a", Workspace: ptr("/w"), RemoteTools: ptr(api.RemoteToolsNone),
				Senders: ptr(api.SendersOwner), Purpose: ptr(api.PurposeChat)},
			`{"action":"channel_set","channel":"c","account":"a","enabled":false,"workspace":"/w","remote_tools":"none","senders":"owner","purpose":"chat"}`},
		{"channel_set null options", `{"action":"channel_set","channel":"c","account":"a","enabled":true,"workspace":null,"remote_tools":null,"senders":null,"purpose":null}`,
			api.CmdChannelSet{Channel: "c", Account: "a", Enabled: true},
			`{"action":"channel_set","channel":"c","account":"a","enabled":true,"workspace":null}`},
		{"channel_logout", `{"action":"channel_logout","channel":"c","account":"a"}`,
			api.CmdChannelLogout{Channel: "c", Account: "a"}, `{"action":"channel_logout","channel":"c","account":"a"}`},
		{"delegations minimal", `{"action":"delegations"}`, api.CmdDelegations{}, `{"action":"delegations","all":false}`},
		{"delegations all", `{"action":"delegations","all":true}`, api.CmdDelegations{All: true}, `{"action":"delegations","all":true}`},
		{"delegation_kill minimal", `{"action":"delegation_kill"}`, api.CmdDelegationKill{}, `{"action":"delegation_kill","orphans":false}`},
		{"delegation_kill null handle", `{"action":"delegation_kill","handle":null,"orphans":true}`,
			api.CmdDelegationKill{Orphans: true}, `{"action":"delegation_kill","orphans":true}`},
		{"delegation_kill handle", `{"action":"delegation_kill","handle":"d-1"}`,
			api.CmdDelegationKill{Handle: ptr("d-1")}, `{"action":"delegation_kill","handle":"d-1","orphans":false}`},
		{"restart_when_idle minimal", `{"action":"restart_when_idle"}`, api.CmdRestartWhenIdle{}, `{"action":"restart_when_idle"}`},
		{"restart_when_idle u64 max", `{"action":"restart_when_idle","max_wait_seconds":18446744073709551615}`,
			api.CmdRestartWhenIdle{MaxWaitSeconds: ptr(uint64(18446744073709551615))},
			`{"action":"restart_when_idle","max_wait_seconds":18446744073709551615}`},
		{"confirm_ask minimal", `{"action":"confirm_ask","question":"ok?"}`, api.CmdConfirmAsk{Question: "ok?"}, `{"action":"confirm_ask","question":"ok?"}`},
		{"confirm_status", `{"action":"confirm_status","id":"q"}`, api.CmdConfirmStatus{ID: "q"}, `{"action":"confirm_status","id":"q"}`},
		{"project_create", `{"action":"project_create","name":"acme","workspace":"/w"}`,
			api.CmdProjectCreate{Name: "acme", Workspace: "/w"}, `{"action":"project_create","name":"acme","workspace":"/w"}`},
		{"project_status", `{"action":"project_status","project":"acme"}`,
			api.CmdProjectStatus{Project: "acme"}, `{"action":"project_status","project":"acme"}`},
		{"project_events without after", `{"action":"project_events","project":"acme"}`,
			api.CmdProjectEvents{Project: "acme"}, `{"action":"project_events","project":"acme","after":null}`},
		{"project_events after 0", `{"action":"project_events","project":"acme","after":0}`,
			api.CmdProjectEvents{Project: "acme", After: ptr(uint64(0))}, `{"action":"project_events","project":"acme","after":0}`},
		{"project_events after u64 max", `{"action":"project_events","project":"acme","after":18446744073709551615}`,
			api.CmdProjectEvents{Project: "acme", After: ptr(uint64(18446744073709551615))},
			`{"action":"project_events","project":"acme","after":18446744073709551615}`},
		{"project_tasks", `{"action":"project_tasks","project":"acme"}`,
			api.CmdProjectTasks{Project: "acme"}, `{"action":"project_tasks","project":"acme"}`},
		{"project_report", `{"action":"project_report","project":"acme"}`,
			api.CmdProjectReport{Project: "acme"}, `{"action":"project_report","project":"acme"}`},
		{"project_task_add", `{"action":"project_task_add","project":"acme","title":"t","depends_on":[],"max_retries":0}`,
			api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: []string{}},
			`{"action":"project_task_add","project":"acme","title":"t","depends_on":[],"max_retries":0}`},
		{"project_task_add u32 max", `{"action":"project_task_add","project":"acme","title":"t","depends_on":[ "a" , "b" ],"max_retries":4294967295}`,
			api.CmdProjectTaskAdd{Project: "acme", Title: "t", DependsOn: []string{"a", "b"}, MaxRetries: 4294967295},
			`{"action":"project_task_add","project":"acme","title":"t","depends_on":["a","b"],"max_retries":4294967295}`},
		{"project_task_update minimal", `{"action":"project_task_update","project":"acme","task":"t","status":"done"}`,
			api.CmdProjectTaskUpdate{Project: "acme", Task: "t", Status: reducer.TaskDone},
			`{"action":"project_task_update","project":"acme","task":"t","status":"done","progress":null}`},
		{"project_task_update progress", `{"action":"project_task_update","project":"acme","task":"t","status":"stale","progress":"p"}`,
			api.CmdProjectTaskUpdate{Project: "acme", Task: "t", Status: reducer.TaskStale, Progress: ptr("p")},
			`{"action":"project_task_update","project":"acme","task":"t","status":"stale","progress":"p"}`},
		{"project_run_start", `{"action":"project_run_start","project":"acme","task":"t","agent":"codex"}`,
			api.CmdProjectRunStart{Project: "acme", Task: "t", Agent: "codex"},
			`{"action":"project_run_start","project":"acme","task":"t","agent":"codex"}`},
		{"project_run_progress", `{"action":"project_run_progress","project":"acme","run":"r","progress":"p"}`,
			api.CmdProjectRunProgress{Project: "acme", Run: "r", Progress: "p"},
			`{"action":"project_run_progress","project":"acme","run":"r","progress":"p"}`},
		// serde accepts every variant of the enum here; the daemon refuses
		// running and stale later, as a domain error.
		{"project_run_finish", `{"action":"project_run_finish","project":"acme","run":"r","status":"stale"}`,
			api.CmdProjectRunFinish{Project: "acme", Run: "r", Status: reducer.RunStale},
			`{"action":"project_run_finish","project":"acme","run":"r","status":"stale"}`},
		{"project_heartbeat minimal", `{"action":"project_heartbeat","project":"acme"}`,
			api.CmdProjectHeartbeat{Project: "acme"}, `{"action":"project_heartbeat","project":"acme","task":null,"run":null}`},
		// Serde details: the tag may come anywhere, unknown fields (even
		// repeated ones) are ignored, keys and values may be escaped,
		// surrogate pairs are fine.
		{"tag last, unknown fields", `{"project":"a","x":1,"x":{"y":[null,true]},"action":"project_status","z":"\u00e9"}`,
			api.CmdProjectStatus{Project: "a"}, `{"action":"project_status","project":"a"}`},
		{"unknown fields on a unit variant", `{"action":"status","project":"a","after":-1}`, api.CmdStatus{}, `{"action":"status"}`},
		{"escaped key and tag", `{"\u0061ction":"project_st\u0061tus","proj\u0065ct":"a"}`,
			api.CmdProjectStatus{Project: "a"}, `{"action":"project_status","project":"a"}`},
		{"surrogate pair", `{"action":"project_status","project":"\ud83d\ude00"}`,
			api.CmdProjectStatus{Project: "😀"}, `{"action":"project_status","project":"😀"}`},
		{"whitespace", " {\n\t\"action\" : \"status\" } \n", api.CmdStatus{}, `{"action":"status"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := control.DecodeCommand([]byte(tc.in))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			enc, err := api.EncodeCommand(got)
			require.NoError(t, err)
			assert.Equal(t, tc.enc, string(enc))
		})
	}
}

// fieldKind is the seed type of a DaemonCommand field.
type fieldKind int

const (
	kString     fieldKind = iota // String
	kOptString                   // Option<String>
	kBool                        // bool, #[serde(default)]
	kU32                         // u32
	kOptU64                      // Option<u64>
	kVecString                   // Vec<String>
	kTaskStatus                  // ProjectTaskStatus
	kRunStatus                   // ProjectRunStatus
	kOptEnum                     // Option<RemoteTools|Senders|Purpose>
)

type seedField struct {
	name     string
	kind     fieldKind
	required bool   // serde refuses the command without it
	valid    string // a valid JSON value
}

// seedActions lists every DaemonCommand variant of seed/daemon.rs with its
// fields, in the seed's order.
var seedActions = []struct {
	action string
	fields []seedField
}{
	{"status", nil},
	{"reload", nil},
	{"channel_set", []seedField{
		{"channel", kString, true, `"wechat"`}, {"account", kString, true, `"main"`},
		{"enabled", kBool, true, `true`}, {"workspace", kOptString, false, `"/w"`},
		{"remote_tools", kOptEnum, false, `"owner"`}, {"senders", kOptEnum, false, `"anyone"`},
		{"purpose", kOptEnum, false, `"mail"`},
	}},
	{"channel_logout", []seedField{{"channel", kString, true, `"wechat"`}, {"account", kString, true, `"main"`}}},
	{"delegations", []seedField{{"all", kBool, false, `true`}}},
	{"delegation_kill", []seedField{{"handle", kOptString, false, `"d-1"`}, {"orphans", kBool, false, `true`}}},
	{"restart_when_idle", []seedField{
		{"version", kOptString, false, `"0.4.1"`}, {"commit", kOptString, false, `"abc"`},
		{"parent", kOptString, false, `"s1"`}, {"max_wait_seconds", kOptU64, false, `600`},
	}},
	{"confirm_ask", []seedField{
		{"question", kString, true, `"ok?"`}, {"parent", kOptString, false, `"s1"`},
		{"timeout_seconds", kOptU64, false, `120`},
	}},
	{"confirm_status", []seedField{{"id", kString, true, `"q-1"`}}},
	{"project_create", []seedField{{"name", kString, true, `"acme"`}, {"workspace", kString, true, `"/w"`}}},
	{"project_status", []seedField{{"project", kString, true, `"acme"`}}},
	{"project_events", []seedField{{"project", kString, true, `"acme"`}, {"after", kOptU64, false, `41`}}},
	{"project_tasks", []seedField{{"project", kString, true, `"acme"`}}},
	{"project_report", []seedField{{"project", kString, true, `"acme"`}}},
	{"project_task_add", []seedField{
		{"project", kString, true, `"acme"`}, {"title", kString, true, `"build"`},
		{"depends_on", kVecString, true, `["T1"]`}, {"max_retries", kU32, true, `2`},
	}},
	{"project_task_update", []seedField{
		{"project", kString, true, `"acme"`}, {"task", kString, true, `"T1"`},
		{"status", kTaskStatus, true, `"blocked"`}, {"progress", kOptString, false, `"p"`},
	}},
	{"project_run_start", []seedField{
		{"project", kString, true, `"acme"`}, {"task", kString, true, `"T1"`}, {"agent", kString, true, `"codex"`},
	}},
	{"project_run_progress", []seedField{
		{"project", kString, true, `"acme"`}, {"run", kString, true, `"R1"`}, {"progress", kString, true, `"p"`},
	}},
	{"project_run_finish", []seedField{
		{"project", kString, true, `"acme"`}, {"run", kString, true, `"R1"`}, {"status", kRunStatus, true, `"failed"`},
	}},
	{"project_heartbeat", []seedField{
		{"project", kString, true, `"acme"`}, {"task", kOptString, false, `"T1"`}, {"run", kOptString, false, `"R1"`},
	}},
}

// wrongValues are JSON values serde refuses for a field of each kind.
var wrongValues = map[fieldKind][]string{
	kString:    {`1`, `true`, `[]`, `{}`, `["a"]`, `"\ud800"`, `"a\udc00"`, `"\ud800\u0041"`},
	kOptString: {`1`, `false`, `{}`, `"\ud800"`},
	kBool:      {`1`, `0`, `"true"`, `null`, `[]`},
	kU32: {`null`, `"1"`, `-1`, `1.5`, `1.0`, `1e2`, `1E0`, `-0`, `4294967296`,
		`18446744073709551616`, `-99999999999999999999`, `true`, `[1]`},
	kOptU64:     {`"1"`, `-1`, `2.5`, `1e2`, `-0`, `18446744073709551616`, `true`, `{}`},
	kVecString:  {`null`, `{}`, `"a"`, `1`, `[1]`, `[null]`, `["a",2]`, `[["a"]]`, `[{}]`, `["\ud800"]`},
	kTaskStatus: {`null`, `"bogus"`, `"Blocked"`, `"BLOCKED"`, `""`, `" blocked"`, `1`, `["blocked"]`},
	kRunStatus:  {`null`, `"bogus"`, `"done"`, `"Succeeded"`, `""`, `0`},
	kOptEnum:    {`"bogus"`, `"Owner"`, `1`, `[]`},
}

// object writes {"action":…} plus fields in order, each with its value
// from vals (a missing key means the field's valid value; skip drops it).
func object(action string, fields []seedField, vals map[string]string, skip string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"action":%q`, action)
	for _, f := range fields {
		if f.name == skip {
			continue
		}
		v, ok := vals[f.name]
		if !ok {
			v = f.valid
		}
		fmt.Fprintf(&b, `,%q:%s`, f.name, v)
	}
	b.WriteString("}")
	return b.String()
}

// TestDecodeCommandFields checks every field of every action: the full
// form is accepted, a missing required field, null where serde has no
// Option, a wrong type, an out-of-range or non-integer number, an unknown
// enum variant and a duplicate are refused, each naming the field.
func TestDecodeCommandFields(t *testing.T) {
	for _, a := range seedActions {
		t.Run(a.action, func(t *testing.T) {
			full := object(a.action, a.fields, nil, "")
			cmd, err := control.DecodeCommand([]byte(full))
			require.NoError(t, err, "full form %s", full)
			assert.Equal(t, a.action, cmd.Action())
			enc, err := api.EncodeCommand(cmd)
			require.NoError(t, err)
			assert.JSONEq(t, full, string(enc), "full form survives a round trip")

			for _, f := range a.fields {
				missing := object(a.action, a.fields, nil, f.name)
				_, err := control.DecodeCommand([]byte(missing))
				if f.required {
					assertRefused(t, missing, err, f.name)
					if assert.Error(t, err) {
						assert.Contains(t, err.Error(), "missing field", "input %s", missing)
					}
				} else {
					assert.NoError(t, err, "optional field %s may be missing: %s", f.name, missing)
				}

				null := object(a.action, a.fields, map[string]string{f.name: "null"}, "")
				_, err = control.DecodeCommand([]byte(null))
				switch f.kind {
				case kOptString, kOptU64, kOptEnum:
					assert.NoError(t, err, "null is None for Option field %s: %s", f.name, null)
				default:
					assertRefused(t, null, err, f.name)
				}

				for _, v := range wrongValues[f.kind] {
					in := object(a.action, a.fields, map[string]string{f.name: v}, "")
					_, err := control.DecodeCommand([]byte(in))
					assertRefused(t, in, err, f.name)
				}

				dup := strings.TrimSuffix(full, "}") + fmt.Sprintf(`,%q:%s}`, f.name, f.valid)
				_, err = control.DecodeCommand([]byte(dup))
				assertRefused(t, dup, err, f.name)
				if assert.Error(t, err) {
					assert.Contains(t, err.Error(), "duplicate field", "input %s", dup)
				}
			}
		})
	}
}

// assertRefused checks that DecodeCommand refused in and that the error
// names the field in serde's backquotes.
func assertRefused(t *testing.T, in string, err error, field string) {
	t.Helper()
	if assert.Error(t, err, "want a refusal of %s", in) {
		assert.Contains(t, err.Error(), "`"+field+"`", "error for %s should name the field", in)
	}
}

// TestDecodeCommandIntegerBounds pins the edges of u32 and u64.
func TestDecodeCommandIntegerBounds(t *testing.T) {
	add := func(n string) string {
		return `{"action":"project_task_add","project":"a","title":"t","depends_on":[],"max_retries":` + n + `}`
	}
	events := func(n string) string { return `{"action":"project_events","project":"a","after":` + n + `}` }

	for in, want := range map[string]api.Command{
		add("0"):                       api.CmdProjectTaskAdd{Project: "a", Title: "t", DependsOn: []string{}},
		add("4294967295"):              api.CmdProjectTaskAdd{Project: "a", Title: "t", DependsOn: []string{}, MaxRetries: 4294967295},
		events("18446744073709551615"): api.CmdProjectEvents{Project: "a", After: ptr(uint64(18446744073709551615))},
	} {
		got, err := control.DecodeCommand([]byte(in))
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for in, field := range map[string]string{
		add("4294967296"):              "max_retries",
		add("-1"):                      "max_retries",
		add("-0"):                      "max_retries", // serde reads -0 as a float
		add("1.5"):                     "max_retries",
		add("2.0"):                     "max_retries",
		add("2e0"):                     "max_retries",
		events("18446744073709551616"): "after",
		events("-0"):                   "after",
		events("1E3"):                  "after",
	} {
		_, err := control.DecodeCommand([]byte(in))
		assertRefused(t, in, err, field)
	}
}

// TestDecodeCommandRefusals covers the tag and the object itself.
func TestDecodeCommandRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, in, field string // field "" when no field can be named
	}{
		{"unknown action", `{"action":"project_delete","project":"a"}`, "action"},
		{"action in the wrong case", `{"action":"Status"}`, "action"},
		{"action of a Rust variant name", `{"action":"ProjectStatus","project":"a"}`, "action"},
		{"empty action", `{"action":""}`, "action"},
		{"missing action", `{"project":"a"}`, "action"},
		{"empty object", `{}`, "action"},
		{"action a number", `{"action":1}`, "action"},
		{"action null", `{"action":null}`, "action"},
		{"action an object", `{"action":{"status":{}}}`, "action"},
		{"action an array", `{"action":["status"]}`, "action"},
		{"action a lone surrogate", `{"action":"\udc00"}`, "action"},
		{"duplicate action", `{"action":"status","action":"status"}`, "action"},
		{"duplicate action, other variant", `{"action":"status","action":"reload"}`, "action"},
		{"duplicate through an escaped key", `{"action":"project_status","project":"a","proj\u0065ct":"b"}`, "project"},
		{"string", `"status"`, ""},
		{"null", `null`, ""},
		{"number", `1`, ""},
		{"empty input", ``, ""},
		{"invalid JSON", `{"action":"status",}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := control.DecodeCommand([]byte(tc.in))
			if tc.field == "" {
				assert.Error(t, err, "want a refusal of %s", tc.in)
				return
			}
			assertRefused(t, tc.in, err, tc.field)
		})
	}
}

// TestDecodeCommandWholeInput: DecodeCommand reads one complete JSON value,
// as serde_json::from_slice does: a truncated object or anything after the
// object is refused.
func TestDecodeCommandWholeInput(t *testing.T) {
	for _, in := range []string{
		`{"action":"status"`,
		`{"action":"project_status","project":"a"`,
		`{"action":"status"} x`,
		`{"action":"status"}}`,
		`{"action":"status"}{"action":"reload"}`,
	} {
		_, err := control.DecodeCommand([]byte(in))
		assert.Error(t, err, "want a refusal of %q", in)
	}
}

// TestDecodeCommandInvalidUTF8: serde_json refuses bytes that are not
// UTF-8 inside a string ("invalid unicode code point"); encoding/json would
// replace them with U+FFFD. The server refuses such lines earlier (-32700),
// but DecodeCommand is public and promises serde's judgement.
func TestDecodeCommandInvalidUTF8(t *testing.T) {
	for _, in := range []string{
		"{\"action\":\"project_status\",\"project\":\"a\xffb\"}",
		"{\"action\":\"project_status\",\"project\":\"\xed\xa0\x80\"}",
		"{\"action\":\"status\",\"x\":\"\xc0\xaf\"}",
	} {
		_, err := control.DecodeCommand([]byte(in))
		assert.Error(t, err, "want a refusal of %q", in)
	}
}

// TestDecodeCommandUnknownFieldValues: serde buffers an internally tagged
// enum's whole object before it picks the variant, so it parses the values
// of unknown fields too and refuses what serde_json cannot represent (a
// lone surrogate, a number out of f64 range). Unknown fields are ignored,
// but they must still be valid JSON serde can read.
func TestDecodeCommandUnknownFieldValues(t *testing.T) {
	for _, in := range []string{
		`{"action":"status","x":"\ud800"}`,
		`{"action":"project_status","project":"a","note":"\udc00"}`,
		`{"action":"status","\ud800":1}`,
		`{"action":"status","x":1e400}`,
		`{"action":"project_status","project":"a","x":[-1e400]}`,
	} {
		_, err := control.DecodeCommand([]byte(in))
		assert.Error(t, err, "want a refusal of %s", in)
	}
}
