package sqlite_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/local"
	"scv/ledger/sqlite"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// history is a ledger file's worth of real history, written by the ledger,
// and what the ledger served of it.
type history struct {
	path     string
	projects map[string]*reducer.Project // by ID, as served at the end
	names    map[string]string           // name -> ID
	silent   string                      // the project with a running run gone silent
	newestMs int64                       // the time of the newest event
	dels     []local.Delegation
	accounts []local.ChannelAccount
	confirms []local.ConfirmRecord
}

// writeHistory writes, with today's ledger, projects with tasks and runs
// (one still running), one compacted with its events archived, one with
// them dropped (its creation too), one whose events, the newest of all,
// were dropped to the last; and rows of the machine's own state.
func writeHistory(t *testing.T, clk *clockMs) history {
	t.Helper()
	ctx := context.Background()
	h := history{path: dbPath(t), projects: map[string]*reducer.Project{}, names: map[string]string{}}
	db := openDB(t, h.path)
	l, err := ledger.Open(ctx, db, ledger.Options{Clock: clk.Now})
	require.NoError(t, err)
	ws := t.TempDir()
	step := func(c reducer.Command) ledger.Result {
		clk.Add(1000)
		return exec(t, l, c)
	}

	// alpha: a task done through a run, one depending on it, one failed,
	// one whose run is still running and goes silent.
	alpha, t1, t2, t3, t4 := id(), id(), id(), id(), id()
	step(reducer.CreateProject{ProjectID: alpha, Name: "alpha", Workspace: ws})
	step(reducer.AddTask{Project: alpha, TaskID: t1, Title: "build"})
	step(reducer.AddTask{Project: alpha, TaskID: t2, Title: "test", DependsOn: []string{t1}})
	step(reducer.AddTask{Project: alpha, TaskID: t3, Title: "doomed"})
	step(reducer.AddTask{Project: alpha, TaskID: t4, Title: "long", MaxRetries: 2})
	r1, r3, r4 := id(), id(), id()
	step(reducer.StartRun{Project: alpha, TaskID: t1, RunID: r1, Agent: "codex"})
	step(reducer.ProgressRun{Project: alpha, RunID: r1, Progress: "half"})
	step(reducer.FinishRun{Project: alpha, RunID: r1, Status: reducer.RunSucceeded})
	step(reducer.StartRun{Project: alpha, TaskID: t3, RunID: r3, Agent: "claude"})
	step(reducer.FinishRun{Project: alpha, RunID: r3, Status: reducer.RunFailed})
	step(reducer.StartRun{Project: alpha, TaskID: t4, RunID: r4, Agent: "codex"})
	step(reducer.RecordHeartbeat{Project: alpha, RunID: r4})
	h.silent = alpha

	// beta: compacted, its events archived, then more.
	beta, bt := id(), id()
	step(reducer.CreateProject{ProjectID: beta, Name: "beta", Workspace: ws})
	step(reducer.AddTask{Project: beta, TaskID: bt, Title: "b"})
	br := id()
	step(reducer.StartRun{Project: beta, TaskID: bt, RunID: br, Agent: "codex"})
	for range 10 {
		step(reducer.ProgressRun{Project: beta, RunID: br, Progress: "b step"})
	}
	_, err = l.Compact(ctx, beta, ledger.CompactOptions{Retain: 3})
	require.NoError(t, err)
	step(reducer.FinishRun{Project: beta, RunID: br, Status: reducer.RunSucceeded})

	// gamma: compacted, its events (its creation among them) dropped.
	gamma, gt := id(), id()
	step(reducer.CreateProject{ProjectID: gamma, Name: "gamma", Workspace: ws})
	step(reducer.AddTask{Project: gamma, TaskID: gt, Title: "g"})
	step(reducer.UpdateTask{Project: gamma, TaskID: gt, Status: reducer.TaskBlocked})
	for range 5 {
		step(reducer.RecordHeartbeat{Project: gamma, TaskID: gt})
	}
	_, err = l.Compact(ctx, gamma, ledger.CompactOptions{Retain: 2, Drop: true})
	require.NoError(t, err)

	// delta: the newest events of all, dropped to the last.
	delta := id()
	step(reducer.CreateProject{ProjectID: delta, Name: "delta", Workspace: ws})
	step(reducer.AddTask{Project: delta, TaskID: id(), Title: "d"})
	h.newestMs = step(reducer.RecordHeartbeat{Project: delta}).Events[0].Time
	_, err = l.Compact(ctx, delta, ledger.CompactOptions{Retain: 0, Drop: true})
	require.NoError(t, err)

	for _, p := range []string{alpha, beta, gamma, delta} {
		h.projects[p] = project(t, l, p)
		h.names[h.projects[p].Name] = p
	}
	require.NoError(t, l.Close())

	// The machine's own state, in the same file.
	db = openDB(t, h.path)
	h.dels = []local.Delegation{delegation("01JDEL1", 1_700_000_000_001), delegation("01JDEL2", 1_700_000_000_002)}
	for _, d := range h.dels {
		require.NoError(t, db.PutDelegation(ctx, d))
	}
	h.accounts = []local.ChannelAccount{channelAccount("local", "owner"), channelAccount("wechat", "main")}
	require.NoError(t, db.ReplaceChannelAccounts(ctx, h.accounts, nil))
	h.confirms, err = db.AppendConfirm(ctx, confirm("Q1", "asked", 1, `{"question":"ship?"}`),
		confirm("Q1", "answered", 2, `{"answer":"yes"}`), confirm("Q2", "asked", 3, `{}`))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	return h
}

// clockMs is a settable clock in Unix milliseconds.
type clockMs struct{ ms int64 }

func (c *clockMs) Now() time.Time { return time.UnixMilli(c.ms) }
func (c *clockMs) Add(ms int64)   { c.ms += ms }

// atSchema5 copies h's history, row for row, into a new file built with
// migrations 00001 to 00005 only: a database as today's main writes it,
// without the projects table.
func atSchema5(t *testing.T, h history) string {
	t.Helper()
	path := dbPath(t)
	raw, err := sqlitetest.OpenRaw(context.Background(), path, 5)
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	db := rawDB(t, path)
	db.SetMaxOpenConns(1) // ATTACH is per connection
	for _, s := range []string{
		`ATTACH DATABASE '` + h.path + `' AS src`,
		`INSERT INTO events SELECT sequence, project_id, kind, timestamp, data, timestamp_ms, hash FROM src.events`,
		`INSERT INTO events_archive SELECT * FROM src.events_archive`,
		`INSERT INTO snapshots SELECT * FROM src.snapshots`,
		`INSERT INTO delegations SELECT * FROM src.delegations`,
		`INSERT INTO channel_accounts SELECT channel, account, enabled, workspace, remote_tools, senders, purpose, owner_id, bot_id, source, credentials, state, updated_unix_ms FROM src.channel_accounts`,
		`INSERT INTO confirm_log SELECT * FROM src.confirm_log`,
		// The counter past the dropped newest events.
		`UPDATE sqlite_sequence SET seq = (SELECT seq FROM src.sqlite_sequence s WHERE s.name = sqlite_sequence.name)`,
		`DETACH DATABASE src`,
	} {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
	var version int64
	require.NoError(t, db.Get(&version, `SELECT max(version_id) FROM goose_db_version`))
	require.Equal(t, int64(5), version)
	var tables int
	require.NoError(t, db.Get(&tables, `SELECT count(*) FROM sqlite_master WHERE name = 'projects'`))
	require.Zero(t, tables, "no projects table before 00006")
	require.NoError(t, db.Close())
	src, dst := contents(t, h.path), contents(t, path)
	require.Equal(t, src.Events, dst.Events)
	require.Equal(t, src.Snapshots, dst.Snapshots)
	require.Equal(t, src.LastSequence, dst.LastSequence)
	require.Nil(t, dst.Projects)
	return path
}

// TestMigrateFromSchema5 opens a database that today's main wrote (schema
// 00001 to 00005, real history: tasks, runs, a compaction archived, two
// dropped, the machine's own state) with this build: the offline tools
// read it as it is, before any migration; sqlite.Open migrates it and
// ledger.Open summarizes every project's row; every project then
// resolves by ID and by name with the state its history folds to, verify
// passes, the local store still reads its rows, and the ledger goes on
// (sequences, names, the stale sweep, compaction, the clock).
func TestMigrateFromSchema5(t *testing.T) {
	ctx := context.Background()
	clk := &clockMs{ms: 1_800_000_000_000}
	h := writeHistory(t, clk)
	path := atSchema5(t, h)
	before := contents(t, path)

	// Read-only, as it is: nothing migrated, the projects table missing.
	ro, err := sqlite.OpenReadOnly(ctx, path)
	require.NoError(t, err)
	rep, err := ledger.Verify(ctx, ro, ledger.VerifyOptions{})
	require.NoError(t, err)
	assert.Empty(t, problems(rep))
	assert.False(t, rep.ProjectsChecked, "no projects table to check")
	assert.Len(t, rep.Chains, 4)
	p, err := ledger.ProjectAt(ctx, ro, "alpha", h.projects[h.names["alpha"]].LastSequence)
	require.NoError(t, err)
	assert.Equal(t, state(t, h.projects[h.names["alpha"]]), state(t, p))
	_, err = ledger.ProjectAt(ctx, ro, "alpha", before.LastSequence+1)
	assert.ErrorIs(t, err, ledger.ErrBeyondHead)
	var bundle bytes.Buffer
	_, err = ledger.Export(ctx, ro, "beta", &bundle)
	require.NoError(t, err)
	brep, err := ledger.VerifyBundle(&bundle, nil)
	require.NoError(t, err)
	assert.Empty(t, problems(brep))
	require.NoError(t, ro.Close())
	assert.Equal(t, before, contents(t, path), "the offline tools changed nothing")

	// sqlite.Open migrates: a row for every project, not summarized yet.
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	var rows []driver.Project
	require.NoError(t, db.Read(ctx, func(r driver.Reader) (err error) {
		rows, err = r.Projects(ctx, driver.ProjectFilter{Unsummarized: true})
		return err
	}))
	assert.Len(t, rows, 4, "every project has an unsummarized row")

	// ledger.Open summarizes them, once.
	clk.ms = h.newestMs - 60_000 // a clock behind the newest (dropped) event
	l, err := ledger.Open(ctx, db, ledger.Options{Clock: clk.Now, CacheSize: 1})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	require.NoError(t, db.Read(ctx, func(r driver.Reader) (err error) {
		rows, err = r.Projects(ctx, driver.ProjectFilter{})
		return err
	}))
	require.Len(t, rows, 4)
	for _, row := range rows {
		want := h.projects[row.ID]
		require.NotNil(t, want, "a row for %s, which the history does not create", row.ID)
		created := uint64(0)
		if c := firstOf(before.Events, row.ID); c.Kind == reducer.KindProjectCreated {
			created = c.Sequence
		}
		assert.Equal(t, driver.Project{ID: want.ID, Name: want.Name, Workspace: want.Workspace, CreatedSeq: created, Head: want.LastSequence,
			Live: before.Live[row.ID], Summarized: true, Status: string(want.Status()), Phase: string(want.Phase()), Tasks: want.TaskCount(),
			Done: want.DoneCount(), Running: want.RunningCount(), CreatedMs: want.Created, UpdatedMs: want.Updated,
			HeartbeatMs: want.LastHeartbeat}, row, "%s's row", want.Name)
	}

	// Every project, by ID and by name, is what its history folds to.
	for name, pid := range h.names {
		want := state(t, h.projects[pid])
		assert.Equal(t, want, state(t, project(t, l, pid)), name)
		assert.Equal(t, want, state(t, project(t, l, name)), name)
		assert.Equal(t, want, state(t, foldFromSnapshot(t, before, pid)), "%s: the fold of its history", name)
	}
	rep = verify(t, path)
	assert.Empty(t, problems(rep))
	assert.True(t, rep.ProjectsChecked)

	// The local store reads its rows.
	dels, err := db.Delegations(ctx)
	require.NoError(t, err)
	assert.Equal(t, h.dels, dels)
	accounts, err := db.ChannelAccounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, h.accounts, accounts)
	confirms, err := db.ConfirmLog(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, h.confirms, confirms)
	more, err := db.AppendConfirm(ctx, confirm("Q2", "expired", 4, `{}`))
	require.NoError(t, err)
	assert.Equal(t, uint64(4), more[0].Seq, "the question log goes on where it was")

	// The ledger goes on.
	res := exec(t, l, reducer.RecordHeartbeat{Project: "gamma"})
	assert.Equal(t, before.LastSequence+1, res.Events[0].Sequence, "the next sequence, past the dropped ones")
	assert.GreaterOrEqual(t, res.Events[0].Time, h.newestMs, "never stamped before the newest event, dropped as it is")
	_, err = l.Execute(ctx, reducer.CreateProject{ProjectID: id(), Name: "delta", Workspace: t.TempDir()})
	assert.ErrorIs(t, err, reducer.ErrConflict, "a migrated project's name is taken")
	clk.ms = h.newestMs + time.Hour.Milliseconds()
	n, err := l.MarkStale(ctx, 30*time.Minute, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "alpha's silent run, found through its summarized row")
	due, err := l.CompactDue(ctx, 5)
	require.NoError(t, err)
	assert.Equal(t, []string{h.silent}, due, "alpha is the one with more than 5 live events")
	_, err = l.Compact(ctx, "alpha", ledger.CompactOptions{Retain: 2})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	rep = verify(t, path)
	assert.Empty(t, problems(rep))
}

// firstOf is the project's first stored event.
func firstOf(evs []driver.Event, project string) driver.Event {
	for _, e := range evs {
		if e.ProjectID == project {
			return e
		}
	}
	return driver.Event{}
}

// foldFromSnapshot is a project's state from its stored history alone:
// folded from its creation, or, where compaction dropped that, from the
// latest snapshot before its first stored event (or its latest, with no
// events left).
func foldFromSnapshot(t *testing.T, c sqlitetest.Contents, project string) *reducer.Project {
	t.Helper()
	first := firstOf(c.Events, project)
	var p *reducer.Project
	if first.Kind != reducer.KindProjectCreated {
		for _, sn := range c.Snapshots {
			if sn.ProjectID == project && (first.Sequence == 0 || sn.Sequence < first.Sequence) {
				var err error
				p, err = reducer.Restore(sn.State)
				require.NoError(t, err)
			}
		}
		require.NotNil(t, p, "no snapshot stands for %s's dropped history", project)
	}
	for _, e := range c.Events {
		if e.ProjectID == project {
			p = reducer.Evolve(p, eventOf(t, e))
		}
	}
	return p
}
