package ledger_test

import (
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

func maxSequence(t *testing.T, db *sqlx.DB) uint64 {
	t.Helper()
	var s uint64
	require.NoError(t, db.Get(&s, `SELECT COALESCE(MAX(sequence), 0) FROM events`))
	return s
}

// snapshot writes a genuine snapshot of project at seq, folded from its
// rows up to seq, as compaction would.
func snapshot(t *testing.T, db *sqlx.DB, project string, seq uint64) {
	t.Helper()
	st := reducer.NewState()
	var base uint64
	var prev []byte
	if err := db.Get(&prev, `SELECT state FROM snapshots WHERE project_id = ? AND sequence <= ? ORDER BY sequence DESC LIMIT 1`, project, seq); err == nil {
		_, err := reducer.Restore(st, prev)
		require.NoError(t, err)
		require.NoError(t, db.Get(&base, `SELECT max(sequence) FROM snapshots WHERE project_id = ? AND sequence <= ?`, project, seq))
	}
	for _, r := range rows(t, db) {
		if r.ProjectID == project && r.Sequence > base && r.Sequence <= seq {
			e, err := r.Event()
			require.NoError(t, err)
			reducer.Evolve(st, e)
		}
	}
	p, ok := st.Project(project)
	require.True(t, ok)
	state, err := reducer.Snapshot(p)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO snapshots (project_id, sequence, version, state) VALUES (?, ?, ?, ?)`,
		project, seq, reducer.SnapshotVersion, state)
	require.NoError(t, err)
}

// TestEventsAreAppendOnlyAgainstACarelessHand edits the table behind the
// ledger's back through a raw connection: the schema itself must refuse
// every change of an event and every removal no snapshot covers, and a
// sequence is never handed out twice, also after rows were removed.
func TestEventsAreAppendOnlyAgainstACarelessHand(t *testing.T) {
	path := dbPath(t)
	ws := t.TempDir()
	l := open(t, path, ledger.Options{})
	db := rawDB(t, path)

	// p: 1 created, 2 task added, 3 heartbeat; q: 4 created, 5 heartbeat;
	// p: 6, 7 heartbeats.
	p, q := id(), id()
	exec(t, l, reducer.CreateProject{ProjectID: p, Name: "p", Workspace: ws})
	exec(t, l, reducer.AddTask{Project: p, TaskID: id(), Title: "t"})
	exec(t, l, reducer.RecordHeartbeat{Project: p})
	exec(t, l, reducer.CreateProject{ProjectID: q, Name: "q", Workspace: ws})
	exec(t, l, reducer.RecordHeartbeat{Project: q})
	exec(t, l, reducer.RecordHeartbeat{Project: p})
	exec(t, l, reducer.RecordHeartbeat{Project: p})
	original := rows(t, db)
	require.Len(t, original, 7)
	require.Equal(t, uint64(7), original[6].Sequence)

	_, err := db.Exec(`UPDATE events SET kind = 'x'`)
	assert.ErrorContains(t, err, "append-only")
	_, err = db.Exec(`UPDATE events SET data = '{}' WHERE sequence = 7`)
	assert.ErrorContains(t, err, "append-only")
	assert.Equal(t, original, rows(t, db), "a refused UPDATE changes nothing")

	_, err = db.Exec(`DELETE FROM events WHERE sequence = 1`)
	assert.ErrorContains(t, err, "append-only", "no snapshot covers event 1")
	assert.Equal(t, original, rows(t, db), "a refused DELETE removes nothing")

	// A snapshot of p at 3 covers p's events 1..3, and nothing else.
	snapshot(t, db, p, 3)
	_, err = db.Exec(`DELETE FROM events WHERE sequence <= 4`)
	assert.ErrorContains(t, err, "append-only", "q's event 4 is not covered")
	assert.Equal(t, original, rows(t, db), "a statement refused for one row removes none")
	_, err = db.Exec(`DELETE FROM events WHERE project_id = ? AND sequence = 6`, p)
	assert.ErrorContains(t, err, "append-only", "p's event 6 is after the snapshot")
	_, err = db.Exec(`DELETE FROM events WHERE project_id = ?`, q)
	assert.ErrorContains(t, err, "append-only", "q has no snapshot")
	assert.Equal(t, original, rows(t, db))

	res, err := db.Exec(`DELETE FROM events WHERE project_id = ? AND sequence <= 3`, p)
	require.NoError(t, err, "a snapshot covers p's events up to 3")
	n, err := res.RowsAffected()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	assert.Equal(t, original[3:], rows(t, db))
	_, err = db.Exec(`UPDATE events SET kind = 'x' WHERE sequence = 6`)
	assert.ErrorContains(t, err, "append-only", "a snapshot does not make an event editable")

	// Remove the newest events (p's 6 and 7) under a snapshot at 7: the
	// next append must get 8, never a reused 6.
	snapshot(t, db, p, 7)
	_, err = db.Exec(`DELETE FROM events WHERE project_id = ? AND sequence > 5`, p)
	require.NoError(t, err)
	require.Equal(t, uint64(5), maxSequence(t, db))
	got := exec(t, l, reducer.RecordHeartbeat{Project: q})
	require.Len(t, got.Events, 1)
	assert.Equal(t, uint64(8), got.Events[0].Sequence, "the next sequence is 1 + the largest ever used")
	assert.Equal(t, uint64(8), maxSequence(t, db))

	// The same after a reopen, which must not take its tail from the rows
	// that are left.
	require.NoError(t, l.Close())
	_, err = db.Exec(`DELETE FROM events WHERE project_id = ? AND sequence <= 7`, p)
	require.NoError(t, err, "nothing of p is left; a reopen folds q alone")
	snapshot(t, db, q, 8)
	_, err = db.Exec(`DELETE FROM events WHERE sequence = 8`)
	require.NoError(t, err)
	require.Equal(t, uint64(5), maxSequence(t, db))
	l2 := open(t, path, ledger.Options{})
	got = exec(t, l2, reducer.RecordHeartbeat{Project: q})
	require.Len(t, got.Events, 1)
	assert.Equal(t, uint64(9), got.Events[0].Sequence, "a reopened ledger never reuses a sequence either")
}
