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
	"scv/reducer"
)

// docSection is one "### " section of a doc with the JSON lines of its
// code blocks.
type docSection struct {
	heading string
	lines   []string
}

// docSections splits the markdown file at path into its "### " sections
// and collects the lines of their fenced code blocks that hold JSON
// objects.
func docSections(t *testing.T, path string) []docSection {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []docSection
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(line, "## "):
			out = append(out, docSection{heading: line})
		case !fenced && strings.HasPrefix(line, "### "):
			out = append(out, docSection{heading: strings.TrimPrefix(line, "### ")})
		case fenced && strings.HasPrefix(line, "{") && len(out) > 0:
			out[len(out)-1].lines = append(out[len(out)-1].lines, line)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// strictDecode decodes raw into v, refusing unknown fields and anything
// after the value.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return &json.SyntaxError{Offset: dec.InputOffset()}
	}
	return nil
}

// reasonCodes is the code every reason goes with (control/api/errors.go).
var reasonCodes = map[string]int{
	api.ReasonParseError:        api.CodeParseError,
	api.ReasonInvalidRequest:    api.CodeInvalidRequest,
	api.ReasonTooLarge:          api.CodeInvalidRequest,
	api.ReasonMethodNotFound:    api.CodeMethodNotFound,
	api.ReasonInvalidParams:     api.CodeInvalidParams,
	api.ReasonInvalidArgument:   api.CodeInvalidParams,
	api.ReasonInternal:          api.CodeInternal,
	api.ReasonNotFound:          api.CodeNotFound,
	api.ReasonConflict:          api.CodeConflict,
	api.ReasonInvalidTransition: api.CodeInvalidTransition,
	api.ReasonRunNotRunning:     api.CodeRunNotRunning,
	api.ReasonUnavailable:       api.CodeUnavailable,
	api.ReasonStorage:           api.CodeStorage,
	api.ReasonUnimplemented:     api.CodeUnimplemented,
	api.ReasonForbidden:         api.CodeForbidden,
	api.ReasonStorageFull:       api.CodeStorageFull,
	api.ReasonBudgetReached:     api.CodeInvalidTransition,
}

// TestDocExamples: every example line of the extension sections of
// docs/protocol.md is what the daemon sends and takes. A request decodes
// as DecodeCommand decodes params; a reply's result decodes strictly into
// api.DaemonStatus and encodes back to the same bytes (so no field
// the wire types lack, or order they would not write, hides in the doc);
// an error reply has a known reason with its code. So the doc cannot
// drift from the wire.
func TestDocExamples(t *testing.T) {
	// The sections of the owner's decisions must show real replies.
	withReplies := map[string]bool{
		"project_list (extension)":                                     false,
		"project_task_retry (extension)":                               false,
		"project_release (extension)":                                  false,
		"project_archive (extension)":                                  false,
		"confirm_ask with `project` and `task`: approvals (extension)": false,
	}
	checked := 0
	for _, sec := range docSections(t, "../docs/protocol.md") {
		if !strings.Contains(sec.heading, "(extension") {
			continue
		}
		for _, line := range sec.lines {
			checked++
			var env struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Method  string          `json:"method"`
				Params  json.RawMessage `json:"params"`
				Result  json.RawMessage `json:"result"`
				Error   *api.Error      `json:"error"`
			}
			if !assert.NoError(t, strictDecode([]byte(line), &env), "%s: %s", sec.heading, line) {
				continue
			}
			assert.Equal(t, "2.0", env.JSONRPC, "%s: %s", sec.heading, line)
			switch {
			case env.Method != "":
				assert.Equal(t, "daemon.control", env.Method, "%s: %s", sec.heading, line)
				_, err := control.DecodeCommand(env.Params)
				assert.NoError(t, err, "%s: request %s", sec.heading, line)
			case env.Result != nil:
				var st api.DaemonStatus
				if !assert.NoError(t, strictDecode(env.Result, &st), "%s: reply %s", sec.heading, line) {
					continue
				}
				again, err := reducer.Marshal(st)
				require.NoError(t, err)
				assert.Equal(t, string(env.Result), string(again), "%s: the reply does not encode back to itself", sec.heading)
				if _, ok := withReplies[sec.heading]; ok {
					withReplies[sec.heading] = true
				}
			case env.Error != nil:
				code, known := reasonCodes[env.Error.Data.Reason]
				if assert.True(t, known, "%s: unknown reason in %s", sec.heading, line) {
					assert.Equal(t, code, env.Error.Code, "%s: %s", sec.heading, line)
				}
				assert.NotEmpty(t, env.Error.Message, "%s: %s", sec.heading, line)
			default:
				t.Errorf("%s: neither request, result nor error: %s", sec.heading, line)
			}
		}
	}
	assert.Positive(t, checked, "no example lines found")
	for heading, seen := range withReplies {
		assert.True(t, seen, "section %q has no reply example (or was renamed)", heading)
	}
}
