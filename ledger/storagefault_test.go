package ledger

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"scv/reducer"
)

// These tests are inside the package: they reach the writer's own
// connection to set SQLite's page limit on it.

// faultLedger opens a ledger at a fresh path with one project, acme.
func faultLedger(t *testing.T) (l *Ledger, path, project string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	project = ulid.Make().String()
	_, err = l.Execute(context.Background(), reducer.CreateProject{ProjectID: project, Name: "acme", Workspace: t.TempDir()})
	require.NoError(t, err)
	return l, path, project
}

// addTask adds a task titled title and returns its event's sequence.
func addTask(l *Ledger, project, title string) (uint64, error) {
	res, err := l.Execute(context.Background(), reducer.AddTask{Project: project, TaskID: ulid.Make().String(), Title: title})
	if err != nil {
		return 0, err
	}
	return res.Events[0].Sequence, nil
}

// titles lists the titles of the project's tasks as the ledger serves
// them.
func titles(l *Ledger, project string) []string {
	p, _ := l.Project(project)
	var out []string
	for _, task := range p.Tasks() {
		out = append(out, task.Title)
	}
	slices.Sort(out)
	return out
}

// fillUntilRefused adds tasks until one is refused and returns the
// refusal, the titles acknowledged and the last acknowledged sequence.
func fillUntilRefused(t *testing.T, l *Ledger, project string) (error, []string, uint64) {
	t.Helper()
	var acked []string
	var last uint64
	for i := range 100_000 {
		title := fmt.Sprintf("task %d", i)
		seq, err := addTask(l, project, title)
		if err != nil {
			return err, acked, last
		}
		acked = append(acked, title)
		last = seq
	}
	t.Fatal("100000 tasks and no refusal")
	return nil, nil, 0
}

// assertRecovers checks the ledger after a refusal: the refused command
// left nothing in memory, the next write gets the next sequence, and a
// reopen serves exactly the acknowledged tasks.
func assertRecovers(t *testing.T, l *Ledger, path, project string, acked []string, last uint64) {
	t.Helper()
	want := append(slices.Clone(acked), "after")
	slices.Sort(want)
	seq, err := addTask(l, project, "after")
	require.NoError(t, err, "writes resume once there is room")
	assert.Equal(t, last+1, seq, "no sequence spent on the refused write, none reused")
	assert.Equal(t, want, titles(l, project))
	require.NoError(t, l.Close())
	again, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, want, titles(again, project), "the file holds what was acknowledged, nothing else")
}

// TestStorageFullAtThePageLimit makes SQLite itself run out of room (the
// writer's max_page_count at the file's present size, so that an INSERT
// needing a new page fails with SQLITE_FULL): the command is refused with
// ErrStorageFull, which is an ErrStorage, and keeps nothing; once the
// limit is raised the same ledger writes again.
func TestStorageFullAtThePageLimit(t *testing.T) {
	ctx := context.Background()
	l, path, project := faultLedger(t)
	var pages int
	require.NoError(t, l.w.GetContext(ctx, &pages, `PRAGMA page_count`))
	_, err := l.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages))
	require.NoError(t, err)

	err, acked, last := fillUntilRefused(t, l, project)
	require.ErrorIs(t, err, ErrStorageFull)
	assert.ErrorIs(t, err, ErrStorage, "a full disk is a storage failure")
	assert.Contains(t, err.Error(), "nothing of the request was kept")
	acked = slices.Sorted(slices.Values(acked))
	assert.Equal(t, acked, titles(l, project), "the refused task is not served")

	_, err = l.w.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`)
	require.NoError(t, err)
	assertRecovers(t, l, path, project, acked, last)
	t.Logf("SQLITE_FULL after %d tasks at %d pages: refused with ErrStorageFull, recovered without reopening", len(acked), pages)
}

// TestStorageFullAtTheFileSizeLimit lowers this process's RLIMIT_FSIZE to
// just above the database's files: the WAL append of a COMMIT then fails
// with EFBIG, which SQLite reports as a plain I/O error; the ledger must
// still call it ErrStorageFull, keep nothing of the command, and write
// again once the limit is raised. The limit is the process's: this test
// must not run in parallel with others.
func TestStorageFullAtTheFileSizeLimit(t *testing.T) {
	l, path, project := faultLedger(t)
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

	err, acked, last := fillUntilRefused(t, l, project)
	require.ErrorIs(t, err, ErrStorageFull, "EFBIG is reported as SQLITE_IOERR_WRITE; it still means no room")
	assert.Contains(t, err.Error(), "RLIMIT_FSIZE")
	for i := range 50 {
		acked = append(acked, fmt.Sprintf("seed %d", i))
	}
	acked = slices.Sorted(slices.Values(acked))
	assert.Equal(t, acked, titles(l, project), "the refused task is not served")
	_, err = addTask(l, project, "still full")
	require.ErrorIs(t, err, ErrStorageFull, "the writer is not wedged: it tries again and is refused again")

	restore()
	assertRecovers(t, l, path, project, acked, last)
	t.Logf("EFBIG at a %d-byte limit after %d tasks: refused with ErrStorageFull, recovered without reopening", limit, len(acked))
}

// TestStorageFullOnAFullDisk fills a small tmpfs (root only, where
// mounts are allowed) until the disk has no room: ENOSPC, which SQLite
// reports as SQLITE_FULL; the command is refused with ErrStorageFull, and
// once a file is deleted to make room the same ledger writes again.
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
	path := filepath.Join(dir, "ledger.db")
	l, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	project := ulid.Make().String()
	_, err = l.Execute(context.Background(), reducer.CreateProject{ProjectID: project, Name: "acme", Workspace: dir})
	require.NoError(t, err)

	err, acked, last := fillUntilRefused(t, l, project)
	require.ErrorIs(t, err, ErrStorageFull)
	assert.Contains(t, err.Error(), "bytes left on the file system")
	acked = slices.Sorted(slices.Values(acked))
	assert.Equal(t, acked, titles(l, project), "the refused task is not served")

	require.NoError(t, os.Remove(ballast))
	assertRecovers(t, l, path, project, acked, last)
	t.Logf("ENOSPC on a 1 MiB tmpfs after %d tasks: refused with ErrStorageFull (%v), recovered once room was made", len(acked), err)
}

// TestStorageErrorKeepsOtherFailures: an error that is not about room
// stays a plain ErrStorage.
func TestStorageErrorKeepsOtherFailures(t *testing.T) {
	l, _, _ := faultLedger(t)
	_, err := l.w.Exec(`INSERT INTO no_such_table VALUES (1)`)
	require.Error(t, err)
	got := l.storageError(err)
	assert.ErrorIs(t, got, ErrStorage)
	assert.NotErrorIs(t, got, ErrStorageFull)
}

// TestOpenKeepsSQLitesLockOnTheFile: while a ledger is open, this process
// holds SQLite's shared lock on the database file. Without it another
// process closing the database (sqlite3 taking a backup, as operations.md
// says to) takes itself for the last user and deletes the -wal file under
// the ledger, and a crash then loses every write acknowledged since.
func TestOpenKeepsSQLitesLockOnTheFile(t *testing.T) {
	l, path, project := faultLedger(t)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	ino := fi.Sys().(*syscall.Stat_t).Ino
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks: %v", err)
	}
	held := false
	for line := range strings.Lines(string(locks)) {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "POSIX" && f[4] == strconv.Itoa(os.Getpid()) && strings.HasSuffix(f[5], ":"+strconv.FormatUint(ino, 10)) {
			held = true
		}
	}
	assert.True(t, held, "no fcntl lock of this process on %s (inode %d) in /proc/locks:\n%s", path, ino, locks)

	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Log("no sqlite3 on PATH: the backup half is left out")
		return
	}
	_, err = addTask(l, project, "before the backup")
	require.NoError(t, err)
	out, err := exec.Command(sqlite, path, ".backup "+filepath.Join(t.TempDir(), "copy.db")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.FileExists(t, path+"-wal", "the backup's close deleted the WAL under the open ledger")
}

// TestOpenRefusesWhatItCannotUse: a directory, something that is not a
// regular file, and a file that is not a SQLite database (or whose header
// was overwritten) are refused by name and left exactly as they were, with
// nothing new beside them. An empty file is a new database.
func TestOpenRefusesWhatItCannotUse(t *testing.T) {
	ctx := context.Background()
	sound := filepath.Join(t.TempDir(), "sound.db")
	l, err := Open(ctx, sound, Options{})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	soundBytes, err := os.ReadFile(sound)
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		make    func(path string)
		corrupt bool
		says    string
	}{
		{"directory", func(p string) { require.NoError(t, os.Mkdir(p, 0o700)) }, false, "is a directory"},
		{"fifo", func(p string) { require.NoError(t, syscall.Mkfifo(p, 0o600)) }, false, "not a regular file"},
		{"text", func(p string) { require.NoError(t, os.WriteFile(p, []byte("hello world\n"), 0o600)) }, true, "SQLite header"},
		{"header zeroed", func(p string) {
			b := slices.Clone(soundBytes)
			copy(b, make([]byte, 16))
			require.NoError(t, os.WriteFile(p, b, 0o600))
		}, true, "SQLite header"},
		{"header only", func(p string) { require.NoError(t, os.WriteFile(p, soundBytes[:100], 0o600)) }, true, "damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ledger.db")
			tc.make(path)
			before := snapshotDir(t, dir)
			_, err := Open(ctx, path, Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.says)
			if tc.corrupt {
				assert.ErrorIs(t, err, ErrCorrupt)
			}
			assert.Equal(t, before, snapshotDir(t, dir), "the folder is as it was")
		})
	}

	empty := filepath.Join(t.TempDir(), "ledger.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	l, err = Open(ctx, empty, Options{})
	require.NoError(t, err, "an empty file is a new database")
	require.NoError(t, l.Close())
}

// TestQuickCheckFindsADamagedPage flips the bits of the b-tree header of
// a page of the events table in the middle of the file: Open fails, and
// QuickCheck names the file and the damage; the file is left as it was.
func TestQuickCheckFindsADamagedPage(t *testing.T) {
	ctx := context.Background()
	l, path, project := faultLedger(t)
	for i := range 300 {
		_, err := addTask(l, project, fmt.Sprintf("task %d with a title long enough to fill pages", i))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	require.NoError(t, QuickCheck(ctx, path), "a sound file passes")

	page, size := middleEventsPage(t, path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	off := (page - 1) * size
	for i := off; i < off+8; i++ {
		b[i] ^= 0xff
	}
	require.NoError(t, os.WriteFile(path, b, 0o600))
	before := snapshotDir(t, filepath.Dir(path))

	_, err = Open(ctx, path, Options{})
	require.Error(t, err, "the events table is read at open")
	err = QuickCheck(ctx, path)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "quick_check")
	assert.Equal(t, before, snapshotDir(t, filepath.Dir(path)), "nothing changed")
	t.Logf("page %d of %d damaged: %v", page, len(b)/size, err)
}

// middleEventsPage returns the leaf page of the events table nearest the
// middle of the file, and the page size.
func middleEventsPage(t *testing.T, path string) (page, size int) {
	t.Helper()
	db, err := sqlx.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var leaves []int
	require.NoError(t, db.Select(&leaves, `SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' ORDER BY pageno`))
	require.NoError(t, db.Get(&size, `PRAGMA page_size`))
	var count int
	require.NoError(t, db.Get(&count, `PRAGMA page_count`))
	require.GreaterOrEqual(t, len(leaves), 3, "the events table spans pages")
	page = leaves[0]
	for _, p := range leaves {
		if abs(p-count/2) < abs(page-count/2) {
			page = p
		}
	}
	return page, size
}

func abs(n int) int { return max(n, -n) }

// snapshotDir maps each entry of dir to its mode and the digest of its
// contents.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		var content []byte
		if fi.Mode().IsRegular() {
			content, err = os.ReadFile(p)
			require.NoError(t, err)
		}
		out[e.Name()] = fmt.Sprintf("%s %x", fi.Mode(), sha256.Sum256(content))
	}
	return out
}
