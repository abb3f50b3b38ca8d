package sqlite_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/reducer"
)

func maxLive(t *testing.T, db *sqlx.DB) uint64 {
	t.Helper()
	var s uint64
	require.NoError(t, db.Get(&s, `SELECT coalesce(max(sequence), 0) FROM events`))
	return s
}

// TestEventsAreAppendOnlyAgainstACarelessHand edits the file behind the
// ledger's back through a raw connection: the schema itself refuses every
// change of an event, every removal no snapshot covers, any change or
// removal in the archive and the question log, a second project of a
// name; and a sequence is never handed out twice, also after rows were
// removed.
func TestEventsAreAppendOnlyAgainstACarelessHand(t *testing.T) {
	ctx := context.Background()
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
	original := rows(t, path)
	require.Len(t, original, 7)

	want := original
	refused := func(query string, args ...any) {
		t.Helper()
		_, err := db.Exec(query, args...)
		assert.ErrorContains(t, err, "append-only", query)
		assert.Equal(t, want, contents(t, path).Events, "%s: a refused statement changes nothing", query)
	}
	refused(`UPDATE events SET kind = 'x'`)
	refused(`UPDATE events SET data = '{}' WHERE sequence = 7`)
	refused(`DELETE FROM events WHERE sequence = 1`) // no snapshot covers it

	// A snapshot of p at 3 covers p's events 1..3, and nothing else.
	snapshotRow(t, db, p, 3)
	refused(`DELETE FROM events WHERE sequence <= 4`) // q's event 4 is not covered: none goes
	refused(`DELETE FROM events WHERE project_id = ? AND sequence = 6`, p)
	refused(`DELETE FROM events WHERE project_id = ?`, q)

	// Compaction's archive is as append-only as the tail.
	_, err := db.Exec(`INSERT INTO events_archive SELECT sequence, project_id, kind, timestamp, data, timestamp_ms, hash FROM events WHERE project_id = ? AND sequence <= 3`, p)
	require.NoError(t, err)
	want = rows(t, path)
	require.Len(t, want, 10, "p's 1..3 archived and still live")
	refused(`UPDATE events_archive SET data = '{}'`)
	refused(`DELETE FROM events_archive`)

	// A name is taken once, whoever inserts the row.
	_, err = db.Exec(`INSERT INTO projects (id, name, created_seq, head, live) VALUES (?, 'p', 8, 8, 0)`, id())
	assert.ErrorContains(t, err, "UNIQUE")

	res, err := db.Exec(`DELETE FROM events WHERE project_id = ? AND sequence <= 3`, p)
	require.NoError(t, err, "a snapshot covers p's events up to 3")
	n, err := res.RowsAffected()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	_, err = db.Exec(`UPDATE events SET kind = 'x' WHERE sequence = 6`)
	assert.ErrorContains(t, err, "append-only", "a snapshot does not make an event editable")

	// Remove the newest events (p's 6 and 7) under a snapshot at 7: the
	// next append gets 8, never a reused 6.
	snapshotRow(t, db, p, 7)
	_, err = db.Exec(`DELETE FROM events WHERE project_id = ? AND sequence > 5`, p)
	require.NoError(t, err)
	require.Equal(t, uint64(5), maxLive(t, db))
	got := exec(t, l, reducer.RecordHeartbeat{Project: q})
	require.Len(t, got.Events, 1)
	assert.Equal(t, uint64(8), got.Events[0].Sequence, "the next sequence is 1 + the largest ever used")

	// The same after a reopen, which must not take its tail from the
	// rows that are left.
	require.NoError(t, l.Close())
	snapshotRow(t, db, q, 8)
	_, err = db.Exec(`DELETE FROM events WHERE sequence = 8`)
	require.NoError(t, err)
	require.Equal(t, uint64(5), maxLive(t, db))
	l2 := open(t, path, ledger.Options{})
	got = exec(t, l2, reducer.RecordHeartbeat{Project: q})
	require.Len(t, got.Events, 1)
	assert.Equal(t, uint64(9), got.Events[0].Sequence, "a reopened ledger never reuses a sequence either")
	assert.Equal(t, uint64(7), project(t, l2, p).LastSequence, "p from its snapshot at 7, its tail gone")
	_, err = l2.Project(ctx, "q")
	require.NoError(t, err)
}

// TestConfirmLogIsAppendOnly: the schema refuses to change or remove a row
// of the question log, whoever asks.
func TestConfirmLogIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	store := openDB(t, path)
	_, err := store.AppendConfirm(ctx,
		confirm("Q1", "asked", 1, `{"question":"a"}`), confirm("Q1", "answered", 2, `{"answer":"no"}`))
	require.NoError(t, err)
	want, err := store.ConfirmLog(ctx, 0)
	require.NoError(t, err)

	db := rawDB(t, path)
	for _, s := range []string{
		`UPDATE confirm_log SET kind = 'answered' WHERE seq = 1`,
		`UPDATE confirm_log SET data = '{"answer":"yes"}'`,
		`DELETE FROM confirm_log WHERE seq = 2`,
		`DELETE FROM confirm_log`,
	} {
		_, err := db.Exec(s)
		assert.ErrorContains(t, err, "append-only", s)
	}
	_, err = db.Exec(`INSERT INTO confirm_log (question_id, kind, timestamp_ms, data) VALUES ('Q2', 'asked', 3, 'x')`)
	assert.Error(t, err, "data must be JSON")
	got, err := store.ConfirmLog(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, want, got, "nothing changed")
}

// TestStorageFailureKeepsNothing makes the database refuse the second
// event of a command (MarkStale over two silent runs): the command fails
// with ErrStorage, neither event is in the file or in the served state,
// no sequence is spent, and the ledger goes on.
func TestStorageFailureKeepsNothing(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	var clk atomic.Int64
	clk.Store(1000)
	l := open(t, path, ledger.Options{Clock: func() time.Time { return time.UnixMilli(clk.Load()) }})
	db := rawDB(t, path)
	f := newFixture(t, l, "alpha")
	task2, run2 := id(), id()
	exec(t, l, reducer.AddTask{Project: f.project, TaskID: task2, Title: "second"})
	exec(t, l, reducer.StartRun{Project: f.project, TaskID: task2, RunID: run2, Agent: "a"})
	before := contents(t, path)
	want := state(t, project(t, l, f.project))

	// run2 is a ULID: safe in the SQL text (triggers take no parameters).
	_, err := db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON events
		WHEN NEW.kind = 'run_stale' AND NEW.data LIKE '%` + run2 + `%'
		BEGIN SELECT RAISE(ABORT, 'poison'); END`)
	require.NoError(t, err)

	clk.Store(5000)
	res, err := l.Execute(ctx, reducer.MarkStale{Project: f.project, Window: 60})
	require.ErrorIs(t, err, ledger.ErrStorage)
	assert.Empty(t, res.Events)
	assert.Equal(t, before, contents(t, path), "a failed transaction keeps nothing, its projects row included")
	assert.Equal(t, want, state(t, project(t, l, f.project)), "the state must not show the first, rolled back event")

	// The next command is decided against the state before the failure.
	res = exec(t, l, reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
	assert.Equal(t, before.LastSequence+1, res.Events[0].Sequence, "no sequence spent on the failure")
	r1, _ := res.Project.Run(f.run)
	assert.Equal(t, reducer.RunRunning, r1.Status, "run 1 was never marked stale")

	_, err = db.Exec(`DROP TRIGGER poison`)
	require.NoError(t, err)
	res = exec(t, l, reducer.MarkStale{Project: f.project, Window: 60})
	require.Len(t, res.Events, 1, "only run 2 is silent now")
	assert.Equal(t, reducer.RunStaleMarked{RunID: run2}, res.Events[0].Body)

	folded := fold(t, rows(t, path))
	assert.Equal(t, state(t, folded[f.project]), state(t, project(t, l, f.project)))
	require.NoError(t, l.Close())
	assert.Equal(t, state(t, folded[f.project]), state(t, project(t, open(t, path, ledger.Options{}), f.project)))
	assert.Empty(t, problems(verify(t, path)))
}
