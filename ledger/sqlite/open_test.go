package sqlite_test

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"scv/ledger"
	"scv/ledger/sqlite"
	"scv/reducer"
)

// TestOpenSetsWAL: the file is in WAL mode, so that readers never wait for
// the writer.
func TestOpenSetsWAL(t *testing.T) {
	path := dbPath(t)
	openDB(t, path)
	var mode string
	require.NoError(t, rawDB(t, path).Get(&mode, `PRAGMA journal_mode`))
	assert.Equal(t, "wal", mode)
}

// TestOpenTakesThePathLiterally: a database path is a file name, not a
// URI. A '%' in it is not decoded (a folder "50%41off" is not "50Aoff"),
// and '#', '&' or a space are ordinary characters; a '?' is refused.
func TestOpenTakesThePathLiterally(t *testing.T) {
	for _, folder := range []string{"50%41off", "a#b", "a&_pragma=x", "a b"} {
		dir := t.TempDir()
		decoy := filepath.Join(dir, "50Aoff")
		require.NoError(t, os.Mkdir(decoy, 0o700))
		path := filepath.Join(dir, folder, "ledger.db")

		db, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		require.NoError(t, err, "open %q", path)
		l, err := ledger.Open(context.Background(), db, ledger.Options{})
		require.NoError(t, err)
		exec(t, l, reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: dir})
		require.NoError(t, l.Close())
		assert.NoFileExists(t, filepath.Join(decoy, "ledger.db"), "the ledger wrote to another file")
		if assert.FileExists(t, path) {
			assert.Len(t, rows(t, path), 1, "folder %q", folder)
		}
	}
	_, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "a?b.db"), sqlite.Options{})
	assert.ErrorContains(t, err, "may not contain '?'")
}

// TestOpenReadOnlyCreatesNothing: the offline tools' open of a path with
// no database is an error, and creates no file; a write through it fails.
func TestOpenReadOnlyCreatesNothing(t *testing.T) {
	path := dbPath(t)
	_, err := sqlite.OpenReadOnly(context.Background(), path)
	require.Error(t, err)
	assert.NoFileExists(t, path)
	assert.Empty(t, dirState(t, filepath.Dir(path)))
}

// TestOpenRefusesWhatItCannotUse: a directory, something that is not a
// regular file, a file that is not a SQLite database (or whose header was
// overwritten), and a file or folder this process cannot write are
// refused by name and left exactly as they were, with nothing new beside
// them. An empty file is a new database.
func TestOpenRefusesWhatItCannotUse(t *testing.T) {
	ctx := context.Background()
	sound := dbPath(t)
	require.NoError(t, openDB(t, sound).Close())
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
			before := dirState(t, dir)
			_, err := sqlite.Open(ctx, path, sqlite.Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.says)
			if tc.corrupt {
				assert.ErrorIs(t, err, sqlite.ErrCorrupt)
			}
			assert.Equal(t, before, dirState(t, dir), "the folder is as it was")
		})
	}

	t.Run("unwritable", func(t *testing.T) {
		dir := t.TempDir()
		if os.Geteuid() == 0 {
			// Root writes any file: make the file system read-only.
			if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
				t.Skipf("cannot mount a tmpfs here: %v", err)
			}
			t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		}
		path := filepath.Join(dir, "ledger.db")
		require.NoError(t, os.WriteFile(path, soundBytes, 0o600))
		if os.Geteuid() == 0 {
			require.NoError(t, unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
		} else {
			require.NoError(t, os.Chmod(path, 0o400))
			require.NoError(t, os.Chmod(dir, 0o500))
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
		}
		before := dirState(t, dir)
		_, err := sqlite.Open(ctx, path, sqlite.Options{})
		require.ErrorIs(t, err, sqlite.ErrNotWritable)
		assert.Contains(t, err.Error(), path)
		assert.Equal(t, before, dirState(t, dir), "the folder is as it was")
		_, err = sqlite.Open(ctx, filepath.Join(dir, "new.db"), sqlite.Options{})
		require.ErrorIs(t, err, sqlite.ErrNotWritable, "a new file in a folder it cannot write")
		assert.Equal(t, before, dirState(t, dir))
	})

	empty := dbPath(t)
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	db, err := sqlite.Open(ctx, empty, sqlite.Options{})
	require.NoError(t, err, "an empty file is a new database")
	require.NoError(t, db.Close())
}

// TestQuickCheckFindsADamagedPage flips the bits of the b-tree header of a
// page of the events table in the middle of the file: QuickCheck names
// the file and the damage, Open refuses it as damaged, and the file is
// left as it was.
func TestQuickCheckFindsADamagedPage(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	p := id()
	exec(t, l, reducer.CreateProject{ProjectID: p, Name: "acme", Workspace: t.TempDir()})
	for i := range 300 {
		exec(t, l, reducer.AddTask{Project: p, TaskID: id(), Title: fmt.Sprintf("task %d with a title long enough to fill pages", i)})
	}
	require.NoError(t, l.Close())
	require.NoError(t, sqlite.QuickCheck(ctx, path), "a sound file passes")

	page, size := middleEventsPage(t, path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	off := (page - 1) * size
	for i := off; i < off+8; i++ {
		b[i] ^= 0xff
	}
	require.NoError(t, os.WriteFile(path, b, 0o600))
	before := dirState(t, filepath.Dir(path))

	err = sqlite.QuickCheck(ctx, path)
	require.ErrorIs(t, err, sqlite.ErrCorrupt)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "quick_check")
	// Opening reads no event (it does not grow with the history), so it
	// does not see the damage; the first read of the page does, as a
	// storage failure, and verify never passes the file.
	db, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	l, err = ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	_, err = l.Project(ctx, p)
	assert.ErrorIs(t, err, ledger.ErrStorage)
	require.NoError(t, l.Close())
	ro, err := sqlite.OpenReadOnly(ctx, path)
	require.NoError(t, err)
	rep, err := ledger.Verify(ctx, ro, ledger.VerifyOptions{})
	ro.Close()
	if err == nil {
		assert.NotEqual(t, "ok", rep.Integrity, "verify runs the full integrity_check")
		assert.NotEmpty(t, rep.Problems)
	} else {
		assert.ErrorIs(t, err, ledger.ErrStorage)
		assert.ErrorContains(t, err, "malformed")
	}
	assert.Equal(t, before, dirState(t, filepath.Dir(path)), "nothing changed")
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

// TestOpenKeepsSQLitesLockOnTheFile: while a database is open, this
// process holds SQLite's shared lock on the file. Without it another
// process closing the database (sqlite3 taking a backup) takes itself for
// the last user and deletes the -wal file under the ledger, and a crash
// then loses every write acknowledged since.
func TestOpenKeepsSQLitesLockOnTheFile(t *testing.T) {
	path := dbPath(t)
	l := open(t, path, ledger.Options{})
	p := id()
	exec(t, l, reducer.CreateProject{ProjectID: p, Name: "acme", Workspace: t.TempDir()})
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

	sqlite3, err := osexec.LookPath("sqlite3")
	if err != nil {
		t.Log("no sqlite3 on PATH: the backup half is left out")
		return
	}
	exec(t, l, reducer.AddTask{Project: p, TaskID: id(), Title: "before the backup"})
	out, err := osexec.Command(sqlite3, path, ".backup "+filepath.Join(t.TempDir(), "copy.db")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.FileExists(t, path+"-wal", "the backup's close deleted the WAL under the open ledger")
}

// TestConcurrentFirstOpens: processes may start on a fresh file at once.
// Every Open succeeds, each migrating the schema or finding it migrated,
// and the ledgers then work together.
func TestConcurrentFirstOpens(t *testing.T) {
	const openers = 4
	for round := range 3 {
		path := dbPath(t)
		ws := t.TempDir()
		dbs := make([]*sqlite.DB, openers)
		errs := make([]error, openers)
		var wg sync.WaitGroup
		for i := range openers {
			wg.Go(func() { dbs[i], errs[i] = sqlite.Open(context.Background(), path, sqlite.Options{}) })
		}
		wg.Wait()
		won := 0
		for i := range openers {
			if !assert.NoError(t, errs[i], "round %d opener %d", round, i) {
				continue
			}
			l, err := ledger.Open(context.Background(), dbs[i], ledger.Options{})
			require.NoError(t, err)
			_, err = l.Execute(context.Background(), reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: ws})
			if err == nil {
				won++
			} else {
				assert.ErrorIs(t, err, reducer.ErrConflict)
			}
			require.NoError(t, l.Close())
		}
		assert.Equal(t, 1, won, "round %d", round)
		assert.Len(t, fold(t, rows(t, path)), 1, "round %d", round)
	}
}

// TestOpenWhileAnotherWriterAppends opens ledgers on a file while another
// ledger creates projects in it: each decides its first commands against
// every project acknowledged before its Open returned, and serves them.
// (The other writer paces itself, as a daemon does: two writers in tight
// loops on one file would starve each other on SQLite's lock.)
func TestOpenWhileAnotherWriterAppends(t *testing.T) {
	path := dbPath(t)
	ws := t.TempDir()
	a := open(t, path, ledger.Options{})
	var mu sync.Mutex
	var acked []string
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			name := fmt.Sprintf("beta%d", i)
			if _, err := a.Execute(context.Background(), reducer.CreateProject{ProjectID: id(), Name: name, Workspace: ws}); err != nil {
				t.Errorf("a: %v", err)
				return
			}
			mu.Lock()
			acked = append(acked, name)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer func() {
		stop.Store(true)
		<-done
	}()
	// The rounds must race a writer that has begun (on a busy machine
	// five rounds can end before its first commit).
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 0
	}, 10*time.Second, time.Millisecond)
	for round := range 5 {
		b := open(t, path, ledger.Options{})
		mu.Lock()
		before := slices.Clone(acked)
		mu.Unlock()
		for _, name := range before {
			_, err := b.Execute(context.Background(), reducer.CreateProject{ProjectID: id(), Name: name, Workspace: ws})
			require.ErrorIs(t, err, reducer.ErrConflict, "round %d: b accepted a second project named %s", round, name)
			assert.Equal(t, name, project(t, b, name).Name)
		}
		require.NoError(t, b.Close())
	}
	stop.Store(true)
	<-done
	require.NotEmpty(t, acked)
	names := map[string]int{}
	for _, p := range fold(t, rows(t, path)) {
		names[p.Name]++
	}
	for n, k := range names {
		assert.Equal(t, 1, k, "name %s", n)
	}
	assert.Empty(t, problems(verify(t, path)))
}
