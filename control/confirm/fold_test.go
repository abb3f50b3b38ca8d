package confirm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/ledger/local"
)

// TestFold: a question's state is the fold of its records, and nothing
// else; a record the log cannot hold is skipped, reported, and leaves the
// question as the records before it made it (the first decision stands).
func TestFold(t *testing.T) {
	asked := func(id string, seq uint64) local.ConfirmRecord {
		return local.ConfirmRecord{Seq: seq, QuestionID: id, Kind: KindAsked, Timestamp: 1_000_500,
			Data: `{"question":"Deploy?","chat":"local:owner","deadline_ms":1060500,"requester":"H2","parent":"H1,H2"}`}
	}
	step := func(id string, seq uint64, kind, data string) local.ConfirmRecord {
		return local.ConfirmRecord{Seq: seq, QuestionID: id, Kind: kind, Timestamp: 1_030_000, Data: data}
	}
	pending := &question{ID: "Q", Text: "Deploy?", Chat: "local:owner", Requester: "H2", Parent: "H1,H2",
		State: api.ConfirmPending, Seq: 1, Asked: 1_000_500, Deadline: 1_060_500}
	decided := func(state api.ConfirmState, by string) *question {
		q := *pending
		q.State, q.Seq, q.Decided, q.DecidedBy = state, 2, 1_030_000, by
		return &q
	}
	for _, tc := range []struct {
		name   string
		recs   []local.ConfirmRecord
		want   *question
		errors int
	}{
		{"asked is pending", []local.ConfirmRecord{asked("Q", 1)}, pending, 0},
		{"answered yes", []local.ConfirmRecord{asked("Q", 1), step("Q", 2, KindAnswered, `{"answer":"yes","by":"uid 1000 pid 1"}`)},
			decided(api.ConfirmYes, "uid 1000 pid 1"), 0},
		{"answered no", []local.ConfirmRecord{asked("Q", 1), step("Q", 2, KindAnswered, `{"answer":"no","by":"uid 1000 pid 1"}`)},
			decided(api.ConfirmNo, "uid 1000 pid 1"), 0},
		{"expired", []local.ConfirmRecord{asked("Q", 1), step("Q", 2, KindExpired, `{"reason":"deadline passed"}`)},
			decided(api.ConfirmExpired, "deadline passed"), 0},
		{"withdrawn", []local.ConfirmRecord{asked("Q", 1), step("Q", 2, KindWithdrawn, `{"reason":"not asked about for a minute"}`)},
			decided(api.ConfirmWithdrawn, "not asked about for a minute"), 0},
		{"failed", []local.ConfirmRecord{asked("Q", 1), step("Q", 2, KindFailed, `{"reason":"no chat connected"}`)},
			decided(api.ConfirmFailed, "no chat connected"), 0},
		{"the first decision stands", []local.ConfirmRecord{asked("Q", 1),
			step("Q", 2, KindAnswered, `{"answer":"yes","by":"uid 1000 pid 1"}`),
			step("Q", 3, KindAnswered, `{"answer":"no","by":"uid 1000 pid 2"}`),
			step("Q", 4, KindExpired, `{"reason":"deadline passed"}`)},
			decided(api.ConfirmYes, "uid 1000 pid 1"), 2},
		{"asked twice", []local.ConfirmRecord{asked("Q", 1), asked("Q", 2)}, pending, 1},
		{"a step of a question never asked", []local.ConfirmRecord{step("Q", 1, KindFailed, `{"reason":"x"}`)}, nil, 1},
		{"an unknown kind", []local.ConfirmRecord{asked("Q", 1), step("Q", 2, "maybe", `{}`)}, pending, 1},
		{"an unknown answer", []local.ConfirmRecord{asked("Q", 1), step("Q", 2, KindAnswered, `{"answer":"maybe"}`)}, pending, 1},
		{"evidence that does not parse", []local.ConfirmRecord{asked("Q", 1), step("Q", 2, KindExpired, `[]`)}, pending, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qs, errs := fold(tc.recs)
			assert.Len(t, errs, tc.errors)
			assert.Equal(t, tc.want, qs["Q"])
		})
	}
}

// TestEvolveIsPure: evolve leaves the question it is given as it was, and
// the same question and record always give the same result.
func TestEvolveIsPure(t *testing.T) {
	r := local.ConfirmRecord{Seq: 1, QuestionID: "Q", Kind: KindAsked, Timestamp: 5000, Data: `{"question":"a","deadline_ms":9000}`}
	q, err := evolve(nil, r)
	require.NoError(t, err)
	before := *q
	ans := local.ConfirmRecord{Seq: 2, QuestionID: "Q", Kind: KindAnswered, Timestamp: 6000, Data: `{"answer":"yes","by":"me"}`}
	a, err := evolve(q, ans)
	require.NoError(t, err)
	b, err := evolve(q, ans)
	require.NoError(t, err)
	assert.Equal(t, before, *q, "the input is not changed")
	assert.Equal(t, a, b)
	assert.Equal(t, api.ConfirmYes, a.State)

	// The wire forms: seconds, decided only once decided, requester only
	// if there is one.
	assert.Equal(t, api.Question{Seq: 1, ID: "Q", Question: "a", State: api.ConfirmPending,
		AskedUnixSeconds: 5, DeadlineUnixSeconds: 9}, q.wire())
	assert.Equal(t, api.Question{Seq: 2, ID: "Q", Question: "a", State: api.ConfirmYes,
		AskedUnixSeconds: 5, DeadlineUnixSeconds: 9, DecidedUnixSeconds: ptr(uint64(6)), DecidedBy: ptr("me")}, a.wire())
	assert.Equal(t, api.ConfirmInfo{ID: "Q", State: api.ConfirmYes, DeadlineUnixSeconds: 9}, a.info())
}
