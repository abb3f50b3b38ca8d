package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

// TestConfirmLogRoundTrip: records appended together get increasing
// sequences, survive a reopen field for field, read back in order after
// any sequence, and are not project events.
func TestConfirmLogRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})

	got, err := l.AppendConfirm(ctx)
	require.NoError(t, err)
	assert.Empty(t, got, "nothing to append")

	asked := ledger.ConfirmRecord{QuestionID: "Q1", Kind: "asked", Timestamp: 1_700_000_000_123,
		Data: `{"question":"Deploy?","chat":"local:owner","deadline_ms":1700001800123}`}
	first, err := l.AppendConfirm(ctx, asked)
	require.NoError(t, err)
	require.Len(t, first, 1)
	assert.Equal(t, uint64(1), first[0].Seq)
	assert.Zero(t, asked.Seq, "the caller's record is not changed")

	answered := ledger.ConfirmRecord{QuestionID: "Q1", Kind: "answered", Timestamp: 1_700_000_060_000,
		Data: `{"answer":"yes","by":"uid 1000 pid 4242"}`}
	asked2 := ledger.ConfirmRecord{QuestionID: "Q2", Kind: "asked", Timestamp: 1_700_000_060_000, Data: `{}`}
	failed2 := ledger.ConfirmRecord{QuestionID: "Q2", Kind: "failed", Timestamp: 1_700_000_060_000,
		Data: `{"reason":"no chat connected"}`}
	rest, err := l.AppendConfirm(ctx, answered, asked2, failed2)
	require.NoError(t, err)
	require.Len(t, rest, 3)
	for i, r := range rest {
		assert.Equal(t, uint64(i+2), r.Seq)
	}
	require.NoError(t, l.Close())

	l = open(t, path, ledger.Options{})
	all, err := l.ConfirmLog(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, append(first, rest...), all, "in order, every field kept")
	tail, err := l.ConfirmLog(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, rest[1:], tail, "only after seq 2")
	none, err := l.ConfirmLog(ctx, 4)
	require.NoError(t, err)
	assert.Empty(t, none)

	// A record that is not JSON is refused, and so is the whole call.
	_, err = l.AppendConfirm(ctx, asked, ledger.ConfirmRecord{QuestionID: "Q3", Kind: "asked", Data: "not json"})
	assert.ErrorIs(t, err, reducer.ErrInvalidArgument)
	all2, err := l.ConfirmLog(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, all, all2, "nothing appended")

	var events int
	require.NoError(t, rawDB(t, path).Get(&events, `SELECT count(*) FROM events`))
	assert.Zero(t, events, "the question log is not project history")

	require.NoError(t, l.Close())
	_, err = l.AppendConfirm(ctx, asked)
	assert.ErrorIs(t, err, ledger.ErrClosed)
}

// TestConfirmLogAppendOnly: the schema refuses to change or remove a row of
// the question log, whoever asks.
func TestConfirmLogAppendOnly(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	_, err := l.AppendConfirm(ctx,
		ledger.ConfirmRecord{QuestionID: "Q1", Kind: "asked", Timestamp: 1, Data: `{"question":"a"}`},
		ledger.ConfirmRecord{QuestionID: "Q1", Kind: "answered", Timestamp: 2, Data: `{"answer":"no"}`})
	require.NoError(t, err)
	want, err := l.ConfirmLog(ctx, 0)
	require.NoError(t, err)

	db := rawDB(t, path)
	_, err = db.Exec(`UPDATE confirm_log SET kind = 'answered' WHERE seq = 1`)
	assert.ErrorContains(t, err, "append-only")
	_, err = db.Exec(`UPDATE confirm_log SET data = '{"answer":"yes"}'`)
	assert.ErrorContains(t, err, "append-only")
	_, err = db.Exec(`DELETE FROM confirm_log WHERE seq = 2`)
	assert.ErrorContains(t, err, "append-only")
	_, err = db.Exec(`DELETE FROM confirm_log`)
	assert.ErrorContains(t, err, "append-only")
	_, err = db.Exec(`INSERT INTO confirm_log (question_id, kind, timestamp_ms, data) VALUES ('Q2', 'asked', 3, 'x')`)
	assert.Error(t, err, "data must be JSON")

	got, err := l.ConfirmLog(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, want, got, "nothing changed")
}
