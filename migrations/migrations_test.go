package migrations_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"scv/ledger/sqlite"
	"scv/migrations"
)

// The schema objects the first migration owns, by sqlite_master type.
var (
	tables   = []string{"events", "snapshots"}
	triggers = []string{"events_no_update", "events_no_uncovered_delete"}
	indexes  = []string{"events_project_sequence"}
)

func openDB(t *testing.T) *sqlx.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sqlx.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.Ping())
	return db
}

// objects returns the names of the schema objects of the given type.
func objects(t *testing.T, db *sqlx.DB, typ string) []string {
	t.Helper()
	names := []string{}
	require.NoError(t, db.Select(&names, `SELECT name FROM sqlite_master WHERE type = ? AND name NOT LIKE 'sqlite_%' ORDER BY name`, typ))
	return names
}

func assertSchema(t *testing.T, db *sqlx.DB, present bool) {
	t.Helper()
	for typ, want := range map[string][]string{"table": tables, "trigger": triggers, "index": indexes} {
		got := objects(t, db, typ)
		for _, name := range want {
			if present {
				assert.Contains(t, got, name, "%s %s", typ, name)
			} else {
				assert.NotContains(t, got, name, "%s %s", typ, name)
			}
		}
	}
}

func assertVersion(t *testing.T, p *goose.Provider, want int64) {
	t.Helper()
	v, err := p.GetDBVersion(t.Context())
	require.NoError(t, err)
	assert.Equal(t, want, v, "provider's database version")
	pending, err := p.HasPending(t.Context())
	require.NoError(t, err)
	sources := p.ListSources()
	assert.Equal(t, want == sources[len(sources)-1].Version, !pending, "pending migrations at version %d", want)
}

// assertAppendOnly checks that the triggers of the schema bite: an UPDATE of
// an event is refused, and so is a DELETE no snapshot covers.
func assertAppendOnly(t *testing.T, db *sqlx.DB) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO events (project_id, kind, timestamp, timestamp_ms, data) VALUES ('p', 'heartbeat', 1, 1000, '{}')`)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE events SET kind = 'x'`)
	assert.ErrorContains(t, err, "append-only")
	_, err = db.Exec(`DELETE FROM events`)
	assert.ErrorContains(t, err, "append-only")
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM events WHERE kind = 'heartbeat'`))
	assert.Equal(t, 1, n)
	_, err = db.Exec(`INSERT INTO events (project_id, kind, timestamp, timestamp_ms, data) VALUES ('p', 'heartbeat', 1, 1000, 'not json')`)
	assert.Error(t, err, "data must be JSON")
}

func TestMigrationFilesAreNamedForGoose(t *testing.T) {
	names, err := fs.Glob(migrations.SQLite, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, n := range names {
		assert.Regexp(t, regexp.MustCompile(`^\d{5}_[a-z0-9_]+\.sql$`), n)
		b, err := fs.ReadFile(migrations.SQLite, n)
		require.NoError(t, err)
		assert.Contains(t, string(b), "-- +goose Up", n)
		assert.Contains(t, string(b), "-- +goose Down", n)
	}
}

// TestUpDownUp runs every migration up, down and up again on a real
// database file through the provider the ledger uses, checking the schema
// and the provider's version after each step.
func TestUpDownUp(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	p, err := sqlite.NewMigrator(db)
	require.NoError(t, err)
	files := len(p.ListSources())
	latest := p.ListSources()[files-1].Version
	require.Equal(t, int64(11), latest, "the newest migration is 00011; update this test with the next")

	assertVersion(t, p, 0)
	assertSchema(t, db, false)

	res, err := p.Up(ctx)
	require.NoError(t, err)
	assert.Len(t, res, files)
	assertVersion(t, p, latest)
	assertSchema(t, db, true)
	assert.True(t, hasColumn(t, db, "events", "hash"), "00002 adds the chain hash")
	assertAppendOnly(t, db)

	// Down one at a time: 00011 takes the mail journal and outbox away,
	// 00010 the email accounts' settings, 00009 the works, 00008 the live
	// agents, 00007 the leases, 00006 the projects table, 00005 the channel
	// settings and the question log, 00004 the delegation registry, 00003
	// the archive, 00002 the hash column, 00001 the rest.
	assert.Contains(t, objects(t, db, "table"), "mail_journal")
	assert.Contains(t, objects(t, db, "table"), "mail_outbox")
	down, err := p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(11), down.Source.Version)
	assert.NotContains(t, objects(t, db, "table"), "mail_journal")
	assert.NotContains(t, objects(t, db, "table"), "mail_outbox")
	assert.True(t, hasColumn(t, db, "channel_accounts", "email"))
	assertEmailColumn(t, db)
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(10), down.Source.Version)
	assert.False(t, hasColumn(t, db, "channel_accounts", "email"))
	assert.True(t, hasColumn(t, db, "channel_accounts", "credentials"), "the rest of the table stays")
	assert.Contains(t, objects(t, db, "table"), "works")
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(9), down.Source.Version)
	assert.NotContains(t, objects(t, db, "table"), "works")
	assert.Contains(t, objects(t, db, "table"), "agents")
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(8), down.Source.Version)
	assert.NotContains(t, objects(t, db, "table"), "agents")
	assert.Contains(t, objects(t, db, "table"), "leases")
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(7), down.Source.Version)
	assert.NotContains(t, objects(t, db, "table"), "leases")
	assert.Contains(t, objects(t, db, "table"), "projects")
	assert.Subset(t, objects(t, db, "index"), []string{"projects_running", "projects_live", "projects_updated"})
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(6), down.Source.Version)
	assert.NotContains(t, objects(t, db, "table"), "projects")
	assert.NotContains(t, objects(t, db, "index"), "projects_updated")
	assert.Contains(t, objects(t, db, "table"), "confirm_log")
	assert.True(t, hasColumn(t, db, "delegations", "chat"))
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(5), down.Source.Version)
	assert.NotContains(t, objects(t, db, "table"), "confirm_log")
	assert.NotContains(t, objects(t, db, "table"), "channel_accounts")
	assert.False(t, hasColumn(t, db, "delegations", "chat"))
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), down.Source.Version)
	assert.NotContains(t, objects(t, db, "table"), "delegations")
	assert.True(t, hasColumn(t, db, "snapshots", "state_hash"))
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(3), down.Source.Version)
	assert.False(t, hasColumn(t, db, "snapshots", "state_hash"))
	assert.NotContains(t, objects(t, db, "table"), "events_archive")
	assert.True(t, hasColumn(t, db, "events", "hash"))
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), down.Source.Version)
	assertVersion(t, p, 1)
	assert.False(t, hasColumn(t, db, "events", "hash"))
	assertSchema(t, db, true)
	down, err = p.Down(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), down.Source.Version)
	assertVersion(t, p, 0)
	assertSchema(t, db, false)
	_, err = p.Down(ctx)
	assert.ErrorIs(t, err, goose.ErrNoNextVersion, "nothing left to roll back")

	res, err = p.Up(ctx)
	require.NoError(t, err)
	assert.Len(t, res, files)
	assertVersion(t, p, latest)
	assertSchema(t, db, true)
	assert.True(t, hasColumn(t, db, "events", "hash"))
	assertAppendOnly(t, db)
	assertEmailColumn(t, db)

	// Up on an up-to-date database is a no-op.
	res, err = p.Up(ctx)
	require.NoError(t, err)
	assert.Empty(t, res)
	assertVersion(t, p, latest)
}

// assertEmailColumn checks 00010's column: empty by default, JSON or
// nothing. It leaves channel_accounts empty.
func assertEmailColumn(t *testing.T, db *sqlx.DB) {
	t.Helper()
	ins := `INSERT INTO channel_accounts (channel, account, enabled, workspace, remote_tools, senders, purpose, owner_id, bot_id, source, updated_unix_ms)
		VALUES ('email', 'work', 0, '', 'none', 'owner', 'chat', '', '', 'api', 1)`
	_, err := db.Exec(ins)
	require.NoError(t, err)
	var email string
	require.NoError(t, db.Get(&email, `SELECT email FROM channel_accounts`))
	assert.Empty(t, email, "'' by default")
	_, err = db.Exec(`UPDATE channel_accounts SET email = '{"imap":"imaps://h"}'`)
	assert.NoError(t, err)
	_, err = db.Exec(`UPDATE channel_accounts SET email = 'imaps://h'`)
	assert.Error(t, err, "email must be JSON")
	_, err = db.Exec(`DELETE FROM channel_accounts`)
	require.NoError(t, err)
}

func hasColumn(t *testing.T, db *sqlx.DB, table, column string) bool {
	t.Helper()
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, table, column))
	return n == 1
}

// TestMigrateIsIdempotent: sqlite.Migrate, as Open runs it, may run on a
// database that is already up to date.
func TestMigrateIsIdempotent(t *testing.T) {
	db := openDB(t)
	require.NoError(t, sqlite.Migrate(t.Context(), db))
	require.NoError(t, sqlite.Migrate(t.Context(), db))
	p, err := sqlite.NewMigrator(db)
	require.NoError(t, err)
	sources := p.ListSources()
	assertVersion(t, p, sources[len(sources)-1].Version)
	assertSchema(t, db, true)
}

// TestProjectsMigrationDerivesRows: 00006 fills the projects table from
// the history it finds: every project created (live or archived), and one
// whose creation compaction dropped, from its snapshot; each with the
// head of its history and its live count, unsummarized.
func TestProjectsMigrationDerivesRows(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	p, err := sqlite.NewMigrator(db)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 5)
	require.NoError(t, err)
	for _, s := range []string{
		// a: created live, one more event
		`INSERT INTO events (sequence, project_id, kind, timestamp, timestamp_ms, data) VALUES (1, 'a', 'project_created', 1, 1000, '{"name":"alpha","workspace":"/w"}')`,
		`INSERT INTO events (sequence, project_id, kind, timestamp, timestamp_ms, data) VALUES (4, 'a', 'heartbeat', 4, 4000, '{}')`,
		// b: created, archived up to 3, one live event
		`INSERT INTO events_archive (sequence, project_id, kind, timestamp, timestamp_ms, data) VALUES (2, 'b', 'project_created', 2, 2000, '{"name":"beta","workspace":"/w"}')`,
		`INSERT INTO events_archive (sequence, project_id, kind, timestamp, timestamp_ms, data) VALUES (3, 'b', 'heartbeat', 3, 3000, '{}')`,
		`INSERT INTO snapshots (project_id, sequence, version, state) VALUES ('b', 3, 1, '{"id":"b","name":"beta"}')`,
		`INSERT INTO events (sequence, project_id, kind, timestamp, timestamp_ms, data) VALUES (5, 'b', 'heartbeat', 5, 5000, '{}')`,
		// c: its history up to 6 dropped; nothing live
		`INSERT INTO snapshots (project_id, sequence, version, state) VALUES ('c', 6, 1, '{"id":"c","name":"gamma"}')`,
	} {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
	_, err = p.Up(ctx)
	require.NoError(t, err)
	type row struct {
		ID         string `db:"id"`
		Name       string `db:"name"`
		CreatedSeq uint64 `db:"created_seq"`
		Head       uint64 `db:"head"`
		Live       int    `db:"live"`
		Summarized bool   `db:"summarized"`
	}
	var rows []row
	require.NoError(t, db.Select(&rows, `SELECT id, name, created_seq, head, live, status IS NOT NULL AS summarized FROM projects ORDER BY id`))
	assert.Equal(t, []row{
		{ID: "a", Name: "alpha", CreatedSeq: 1, Head: 4, Live: 2},
		{ID: "b", Name: "beta", CreatedSeq: 2, Head: 5, Live: 1},
		{ID: "c", Name: "gamma", CreatedSeq: 0, Head: 6, Live: 0},
	}, rows)
}
