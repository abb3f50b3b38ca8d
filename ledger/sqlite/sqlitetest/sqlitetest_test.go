package sqlitetest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// event is a stored event of project p with the chain hash the ledger
// would give it after prev.
func event(t *testing.T, prev []byte, seq uint64, p string, ms int64, b reducer.Body) driver.Event {
	t.Helper()
	data, err := reducer.EncodeBody(b)
	require.NoError(t, err)
	return driver.Event{Sequence: seq, ProjectID: p, Kind: b.Kind(), Timestamp: ms / 1000, TimestampMs: ms, Data: string(data),
		Hash: ledger.ChainHash(prev, seq, p, b.Kind(), ms/1000, ms, string(data))}
}

// TestRawHistoryBecomesALedger: a history laid down with Raw at schema 5
// is, after sqlite.Open and ledger.Open, a ledger like any other: its
// projects resolve, it verifies, and it goes on.
func TestRawHistoryBecomesALedger(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	raw, err := sqlitetest.OpenRaw(ctx, path, 5)
	require.NoError(t, err)
	const p = "01PROJECT"
	e1 := event(t, nil, 1, p, 1_800_000_000_000, reducer.ProjectCreated{Name: "acme", Workspace: "/srv/acme"})
	e2 := event(t, e1.Hash, 2, p, 1_800_000_001_000, reducer.TaskAdded{TaskID: "01TASK", Title: "build", DependsOn: []string{}})
	last, err := raw.Append(ctx, []driver.Event{e1, e2})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), last)
	require.NoError(t, raw.Close())

	c, err := sqlitetest.ReadAll(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, "ok", c.Integrity)
	assert.Equal(t, []driver.Event{e1, e2}, c.Events)
	assert.Equal(t, uint64(2), c.LastSequence)
	assert.Equal(t, map[string]int{p: 2}, c.Live)
	assert.Nil(t, c.Projects, "no projects table at schema 5")

	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	defer l.Close()
	got, err := l.Project(ctx, "acme")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), got.LastSequence)
	assert.Equal(t, e2.Hash, got.ChainHead)
	res, err := l.Execute(ctx, reducer.StartRun{Project: "acme", TaskID: "01TASK", RunID: "01RUN", Agent: "codex"})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), res.Events[0].Sequence)

	rep, err := ledger.Verify(ctx, db, ledger.VerifyOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
	c, err = sqlitetest.ReadAll(ctx, path)
	require.NoError(t, err)
	require.Len(t, c.Projects, 1)
	assert.True(t, c.Projects[0].Summarized)
}

// TestRawAppendNumbersAndStamps: Raw gives an event without a sequence the
// next one after the highest (never reusing one), stamps one without a
// time, and its rows are what ReadAll and Each read back.
func TestRawAppendNumbersAndStamps(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	raw, err := sqlitetest.OpenRaw(ctx, path, 0)
	require.NoError(t, err)
	defer raw.Close()
	hb := driver.Event{ProjectID: "p", Kind: reducer.KindHeartbeat, Data: `{}`}
	last, err := raw.Append(ctx, []driver.Event{hb, hb, hb})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), last)
	at10 := hb
	at10.Sequence, at10.TimestampMs = 10, 1_800_000_000_500
	last, err = raw.Append(ctx, []driver.Event{at10, hb})
	require.NoError(t, err)
	assert.Equal(t, uint64(11), last)

	var seqs []uint64
	require.NoError(t, sqlitetest.Each(ctx, path, func(e driver.Event) error {
		seqs = append(seqs, e.Sequence)
		assert.Equal(t, e.TimestampMs/1000, e.Timestamp)
		assert.Positive(t, e.TimestampMs)
		assert.Nil(t, e.Hash)
		return nil
	}))
	assert.Equal(t, []uint64{1, 2, 3, 10, 11}, seqs)
	c, err := sqlitetest.ReadAll(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, int64(1_800_000_000_500), c.Events[3].TimestampMs)
	assert.Empty(t, c.Projects, "Raw writes no projects rows")
	assert.NotNil(t, c.Projects, "the table is there")
}
