package sqlite

// These tests are inside the package: they reach the driver's own
// connections, to read their settings and to set SQLite's page limit on
// the writer.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// TestDurabilityPragmas: the promise that an acknowledged write survives a
// crash rests on these settings of the connections the driver really
// uses. A SIGKILL test cannot see a missing fsync (the page cache
// survives the process), so they are checked here.
func TestDurabilityPragmas(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	d, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	defer d.Close()
	ro, err := OpenReadOnly(ctx, path)
	require.NoError(t, err)
	defer ro.Close()
	for _, c := range []struct {
		name string
		pool interface {
			GetContext(context.Context, any, string, ...any) error
		}
		want map[string]string
	}{
		{"writer", d.w, map[string]string{"journal_mode": "wal", "synchronous": "2", "journal_size_limit": "67108864",
			"query_only": "0", "foreign_keys": "1", "busy_timeout": "5000"}},
		{"reader", d.r, map[string]string{"journal_mode": "wal", "synchronous": "2", "query_only": "1"}},
		{"read-only", ro.r, map[string]string{"journal_mode": "wal", "query_only": "1"}},
	} {
		for name, want := range c.want {
			var got string
			require.NoError(t, c.pool.GetContext(ctx, &got, "PRAGMA "+name))
			assert.Equal(t, want, got, "%s connection: PRAGMA %s", c.name, name)
		}
	}
	assert.Equal(t, 1, d.w.Stats().MaxOpenConnections, "one writer connection: appends queue in the ledger, never on SQLITE_BUSY")
}

// faultLedger opens a ledger at a fresh path with one project, acme.
func faultLedger(t *testing.T, dir string) (l *ledger.Ledger, d *DB, path, project string) {
	t.Helper()
	path = filepath.Join(dir, "ledger.db")
	d, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	l, err = ledger.Open(context.Background(), d, ledger.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	project = ulid.Make().String()
	_, err = l.Execute(context.Background(), reducer.CreateProject{ProjectID: project, Name: "acme", Workspace: dir})
	require.NoError(t, err)
	return l, d, path, project
}

// addTask adds a task titled title and returns its event's sequence.
func addTask(l *ledger.Ledger, project, title string) (uint64, error) {
	res, err := l.Execute(context.Background(), reducer.AddTask{Project: project, TaskID: ulid.Make().String(), Title: title})
	if err != nil {
		return 0, err
	}
	return res.Events[0].Sequence, nil
}

// titles lists the titles of the project's tasks as the ledger serves
// them.
func titles(t *testing.T, l *ledger.Ledger, project string) []string {
	t.Helper()
	p, err := l.Project(context.Background(), project)
	require.NoError(t, err)
	var out []string
	for _, task := range p.Tasks() {
		out = append(out, task.Title)
	}
	slices.Sort(out)
	return out
}

// fillUntilRefused adds tasks until one is refused and returns the
// titles acknowledged, the last acknowledged sequence and the refusal.
func fillUntilRefused(t *testing.T, l *ledger.Ledger, project string) ([]string, uint64, error) {
	t.Helper()
	var acked []string
	var last uint64
	for i := range 100_000 {
		title := fmt.Sprintf("task %d with a title that takes some room in a page", i)
		seq, err := addTask(l, project, title)
		if err != nil {
			return acked, last, err
		}
		acked = append(acked, title)
		last = seq
	}
	t.Fatal("100000 tasks and no refusal")
	return nil, 0, nil
}

// assertRecovers checks the ledger after a refusal: the refused command
// left nothing, the next write gets the next sequence, and a reopen
// serves exactly the acknowledged tasks.
func assertRecovers(t *testing.T, l *ledger.Ledger, path, project string, acked []string, last uint64) {
	t.Helper()
	want := append(slices.Clone(acked), "after")
	slices.Sort(want)
	seq, err := addTask(l, project, "after")
	require.NoError(t, err, "writes resume once there is room")
	assert.Equal(t, last+1, seq, "no sequence spent on the refused write, none reused")
	assert.Equal(t, want, titles(t, l, project))
	require.NoError(t, l.Close())
	d, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	again, err := ledger.Open(context.Background(), d, ledger.Options{})
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, want, titles(t, again, project), "the file holds what was acknowledged, nothing else")
	row, ok := rowOf(t, d, project)
	require.True(t, ok)
	assert.Equal(t, seq, row.Head, "the projects row agrees")
	assert.Equal(t, len(want)+1, row.Live)
}

func rowOf(t *testing.T, d *DB, ref string) (driver.Project, bool) {
	t.Helper()
	var p driver.Project
	var ok bool
	require.NoError(t, d.Read(context.Background(), func(r driver.Reader) (err error) {
		p, ok, err = r.Project(context.Background(), ref)
		return err
	}))
	return p, ok
}

// TestStorageFullAtThePageLimit makes SQLite itself run out of room (the
// writer's max_page_count at the file's present size, so that an INSERT
// needing a new page fails with SQLITE_FULL): the command is refused with
// ErrStorageFull, which is an ErrStorage, and keeps nothing; once the
// limit is raised the same ledger writes again.
func TestStorageFullAtThePageLimit(t *testing.T) {
	ctx := context.Background()
	l, d, path, project := faultLedger(t, t.TempDir())
	var pages int
	require.NoError(t, d.w.GetContext(ctx, &pages, `PRAGMA page_count`))
	_, err := d.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+2))
	require.NoError(t, err)

	acked, last, err := fillUntilRefused(t, l, project)
	require.ErrorIs(t, err, ledger.ErrStorageFull)
	assert.ErrorIs(t, err, ledger.ErrStorage, "a full disk is a storage failure")
	assert.Contains(t, err.Error(), "nothing of the request was kept")
	acked = slices.Sorted(slices.Values(acked))
	assert.Equal(t, acked, titles(t, l, project), "the refused task is not served")

	_, err = d.w.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`)
	require.NoError(t, err)
	assertRecovers(t, l, path, project, acked, last)
	t.Logf("SQLITE_FULL after %d tasks at %d pages: refused with ErrStorageFull, recovered without reopening", len(acked), pages)
}

// TestStorageFullAtTheFileSizeLimit lowers this process's RLIMIT_FSIZE to
// just above the database's files: the WAL append of a COMMIT then fails
// with EFBIG, which SQLite reports as a plain I/O error; the driver must
// still call it ErrStorageFull, keep nothing of the command, and write
// again once the limit is raised. The limit is the process's: this test
// must not run in parallel with others.
func TestStorageFullAtTheFileSizeLimit(t *testing.T) {
	l, _, path, project := faultLedger(t, t.TempDir())
	for i := range 50 {
		_, err := addTask(l, project, fmt.Sprintf("seed %d", i))
		require.NoError(t, err)
	}
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_FSIZE, &old))
	var largest int64
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		largest = max(largest, fi.Size())
	}
	limit := uint64(largest) + 64<<10
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: old.Max}))
	restore := func() { require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &old)) }
	defer restore()

	acked, last, err := fillUntilRefused(t, l, project)
	require.ErrorIs(t, err, ledger.ErrStorageFull, "EFBIG is reported as SQLITE_IOERR_WRITE; it still means no room")
	assert.Contains(t, err.Error(), "RLIMIT_FSIZE")
	for i := range 50 {
		acked = append(acked, fmt.Sprintf("seed %d", i))
	}
	acked = slices.Sorted(slices.Values(acked))
	assert.Equal(t, acked, titles(t, l, project), "the refused task is not served")
	_, err = addTask(l, project, "still full")
	require.ErrorIs(t, err, ledger.ErrStorageFull, "the writer is not wedged: it tries again and is refused again")

	restore()
	assertRecovers(t, l, path, project, acked, last)
	t.Logf("EFBIG at a %d-byte limit after %d tasks: refused with ErrStorageFull, recovered without reopening", limit, len(acked))
}

// TestStorageFullOnAFullDisk fills a small tmpfs (root only, where mounts
// are allowed) until the disk has no room: ENOSPC, which SQLite reports as
// SQLITE_FULL; the command is refused with ErrStorageFull, and once a file
// is deleted to make room the same ledger writes again.
func TestStorageFullOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); TestStorageFullAtTheFileSizeLimit covers the same path", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	ballast := filepath.Join(dir, "ballast")
	require.NoError(t, os.WriteFile(ballast, make([]byte, 256<<10), 0o600))
	l, _, path, project := faultLedger(t, dir)

	acked, last, err := fillUntilRefused(t, l, project)
	require.ErrorIs(t, err, ledger.ErrStorageFull)
	assert.Contains(t, err.Error(), "bytes left on the file system")
	acked = slices.Sorted(slices.Values(acked))
	assert.Equal(t, acked, titles(t, l, project), "the refused task is not served")

	require.NoError(t, os.Remove(ballast))
	assertRecovers(t, l, path, project, acked, last)
	t.Logf("ENOSPC on a 1 MiB tmpfs after %d tasks: refused with ErrStorageFull (%v), recovered once room was made", len(acked), err)
}

// TestStorageErrorKeepsOtherFailures: an error that is not about room
// stays a plain ErrStorage.
func TestStorageErrorKeepsOtherFailures(t *testing.T) {
	_, d, path, _ := faultLedger(t, t.TempDir())
	_, err := d.w.Exec(`INSERT INTO no_such_table VALUES (1)`)
	require.Error(t, err)
	got := storageError(path, err)
	assert.ErrorIs(t, got, driver.ErrStorage)
	assert.NotErrorIs(t, got, driver.ErrStorageFull)
	assert.NoError(t, storageError(path, nil))
}
