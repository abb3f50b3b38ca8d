package control

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// FuzzBatchLine feeds a batch line (an input that is not one is made the
// one element of a batch) to a real Server and Service on a real ledger,
// through handleBatch, and checks: no panic; a line that is not one JSON
// array, an empty array and one of more than MaxBatch elements get one
// error object (parse_error, invalid_request, too_large), nothing run;
// else the reply is an array with a response for each element in order,
// but for notifications, each answered as FuzzDispatch requires of a line
// alone; no reply line when every element is a notification; nothing
// appended when no element is a valid request or every one was refused.
func FuzzBatchLine(f *testing.F) {
	var requests []string
	for _, p := range slices.Concat(SeedCommandParams, SeedMalformedParams, SeedHostileParams) {
		requests = append(requests, `{"jsonrpc":"2.0","id":1,"method":"daemon.control","params":`+p+`}`,
			`{"jsonrpc":"2.0","method":"daemon.control","params":`+p+`}`)
	}
	for _, r := range slices.Concat(requests, SeedMalformedLines) {
		f.Add([]byte(r))
	}
	f.Add([]byte(`[` + strings.Join(requests, ",") + `]`))
	f.Add([]byte(`[` + strings.Join(requests[:10], ",") + `,` + strings.Join(SeedMalformedLines[1:], ",") + `]`))
	for _, l := range []string{`[]`, ` [ ] `, `[[]]`, `[[` + requests[0] + `]]`, `[1,"a",null,{}]`, `[` + requests[0] + ` x`,
		`[` + requests[0] + `]]`, `[` + strings.Repeat(requests[0]+`,`, MaxBatch) + requests[0] + `]`} {
		f.Add([]byte(l))
	}
	srv, lastSeq := fuzzServer(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, in []byte) {
		line := in
		if !isBatch(in) {
			line = slices.Concat([]byte("["), in, []byte("]"))
		}
		before := lastSeq(t)
		replies, whole := srv.handleBatch(ctx, line)
		after := lastSeq(t)
		out := appendBatchReply(nil, replies, whole)
		if len(out) > 0 {
			require.Equal(t, 1, bytes.Count(out, []byte("\n")), "one line: %q", out)
			require.True(t, json.Valid(out), "the reply is JSON: %q", out)
		}

		var elems []json.RawMessage
		refused := func(code int, reason string) {
			require.False(t, whole, "%q is refused whole", line)
			require.Len(t, replies, 1)
			r := replies[0]
			require.NotNil(t, r.Error, "%q", line)
			require.Equal(t, code, r.Error.Code, "%q: %+v", line, r.Error)
			require.Equal(t, reason, r.Error.Data.Reason, "%q: %+v", line, r.Error)
			require.Equal(t, "null", string(r.ID))
			require.Equal(t, before, after, "nothing appended for %q", line)
		}
		switch {
		case !utf8.Valid(line) || json.Unmarshal(line, &elems) != nil:
			refused(api.CodeParseError, api.ReasonParseError)
			return
		case len(elems) == 0:
			refused(api.CodeInvalidRequest, api.ReasonInvalidRequest)
			return
		case len(elems) > MaxBatch:
			refused(api.CodeInvalidRequest, api.ReasonTooLarge)
			return
		}
		require.True(t, whole, "%q is a batch", line)
		require.Len(t, replies, len(elems), "a reply for each element of %q", line)
		appended := false
		answered := 0
		for i, el := range elems {
			k := classifyLine(t, el) // a nested array is not a request
			checkDispatched(t, el, k, replies[i])
			if k.valid && (replies[i] == nil || replies[i].Error == nil) {
				appended = true // maybe
			}
			if replies[i] != nil {
				answered++
			}
		}
		if answered == 0 {
			require.Empty(t, out, "notifications only: no reply line")
		}
		if !appended {
			require.Equal(t, before, after, "nothing appended for %q", line)
		}
	})
}
