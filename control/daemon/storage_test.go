package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"scv/control/api"
	"scv/control/rpc"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// TestReliabilityStorageFull runs the real daemon into a full disk: its
// RLIMIT_FSIZE, lowered from outside to just above the size of its
// database files, makes the next WAL append fail (EFBIG; the SIGXFSZ that
// comes with it must not kill the daemon). Four writers keep adding tasks
// until twenty requests are refused with storage_full. Every acknowledged
// task must be there and no refused one; once the limit is raised the
// same process (no restart) takes writes again; after a clean stop
// ledger.Verify finds the file intact, holding exactly the acknowledged
// events.
func TestReliabilityStorageFull(t *testing.T) {
	began := time.Now()
	bin := scvBinary(t, oldRelease)
	dir := shortDir(t)
	db, sock := filepath.Join(dir, "ledger.db"), filepath.Join(dir, "d.sock")
	d := startProcess(t, bin, db, sock, "", "--compact-after", "0")
	pid := d.Pid()
	ctx := context.Background()
	c := dial(t, sock)
	_, err := c.Call(ctx, api.CmdProjectCreate{Name: "acme", Workspace: dir})
	require.NoError(t, err)

	addTask := func(c *rpc.Client, title string) error {
		_, err := c.Call(ctx, api.CmdProjectTaskAdd{Project: "acme", Title: title, DependsOn: []string{}})
		return err
	}
	// Some growth, less than SQLite's automatic checkpoint (1000 WAL
	// pages): the WAL then keeps growing at its end, where the limit
	// will be, rather than wrapping to its start.
	var acked []string
	for i := range 100 {
		title := fmt.Sprintf("grow %d", i)
		require.NoError(t, addTask(c, title))
		acked = append(acked, title)
	}

	var old unix.Rlimit
	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old))
	sizes := map[string]int64{}
	for _, p := range []string{db, db + "-wal"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		sizes[filepath.Base(p)] = fi.Size()
	}
	limit := uint64(max(sizes["ledger.db"], sizes["ledger.db-wal"])) + 128<<10
	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: old.Max}, nil))

	// Four writers, so that refused batches carry several requests.
	const wantRefused, maxAttempts = 20, 50_000
	var (
		mu       sync.Mutex
		refused  []string
		ackedLow []string
		other    []error
		attempts int
		message  string
	)
	var wg sync.WaitGroup
	for w := range 4 {
		wc := dial(t, sock)
		wg.Go(func() {
			for i := 0; ; i++ {
				mu.Lock()
				stop := len(refused) >= wantRefused || len(other) > 0 || attempts >= maxAttempts
				attempts++
				mu.Unlock()
				if stop {
					return
				}
				title := fmt.Sprintf("writer %d task %d", w, i)
				err := addTask(wc, title)
				var e *api.Error
				mu.Lock()
				switch {
				case err == nil:
					ackedLow = append(ackedLow, title)
				case errors.As(err, &e) && e.Code == api.CodeStorageFull && e.Data.Reason == api.ReasonStorageFull:
					refused = append(refused, title)
					message = e.Message
				default:
					other = append(other, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, other, "every refusal under the limit is storage_full")
	require.GreaterOrEqual(t, len(refused), wantRefused, "%d attempts and not %d refusals", attempts, wantRefused)
	assert.Contains(t, message, "disk is full")
	assert.Contains(t, message, "nothing of the request was kept")
	acked = append(acked, ackedLow...)

	// Reads still work: every acknowledged task is there, no refused one.
	tasks := func() []string {
		st, err := c.Call(ctx, api.CmdProjectTasks{Project: "acme"})
		require.NoError(t, err)
		var out []string
		for _, task := range st.Project.Tasks {
			out = append(out, task.Title)
		}
		slices.Sort(out)
		return out
	}
	served := tasks()
	assert.Equal(t, slices.Sorted(slices.Values(acked)), served, "exactly the acknowledged tasks, under the limit")
	lost, kept := 0, 0
	for _, title := range acked {
		if !slices.Contains(served, title) {
			lost++
		}
	}
	for _, title := range refused {
		if slices.Contains(served, title) {
			kept++
		}
	}

	// Room again: the same process writes.
	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_FSIZE, &old, nil))
	after := append([]string{refused[0]}, "after 1", "after 2", "after 3", "after 4")
	for _, title := range after {
		require.NoError(t, addTask(c, title), "writes resume once there is room")
	}
	acked = append(acked, after...)
	st, err := c.Call(ctx, api.CmdStatus{})
	require.NoError(t, err)
	assert.Equal(t, uint32(pid), st.PID, "no restart")
	assert.Equal(t, slices.Sorted(slices.Values(acked)), tasks())
	c.Close()

	d.stop(t)
	assert.Contains(t, d.Log(), "RLIMIT_FSIZE", "the daemon saw SIGXFSZ, and lived")
	rep := verifyIntact(t, db)
	events := 1 + len(acked) // the project, then one event per task
	assert.Equal(t, events, rep.Events)
	assert.Len(t, rep.Chains, 1)

	t.Logf("RELIABILITY: disk full: RLIMIT_FSIZE lowered to %d bytes (db %d, wal %d bytes): %d writes acknowledged and %d refused with storage_full (-32009) under it, %d acknowledged lost, %d refused kept; after raising it %d writes succeeded in the same daemon (pid %d, no restart); clean stop, verify intact (%d events); %s",
		limit, sizes["ledger.db"], sizes["ledger.db-wal"], len(ackedLow), len(refused), lost, kept, len(after), pid, events, time.Since(began).Round(time.Millisecond))
}

// TestReliabilityReadOnlyDatabase starts the daemon on a database it may
// not write, and on --db paths that are not database files: each time it
// must exit 1 with an error naming the path, leave the file byte for byte
// as it was, and create nothing beside it (not even its lock file). Root
// passes every permission check, so as root the daemon runs as nobody,
// and an immutable file (chattr +i) stands for the case root cannot
// write. A --db path whose folder does not exist is still created.
func TestReliabilityReadOnlyDatabase(t *testing.T) {
	began := time.Now()
	dir := shortDir(t)
	// The daemon may run as another user: it must reach its binary.
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "scv")
	install(t, scvBinary(t, oldRelease), bin)
	seed := filepath.Join(dir, "seed", "ledger.db")
	seedDatabase(t, seed)

	root := os.Geteuid() == 0
	var other *syscall.Credential // how the daemon runs: as the file's non-owner
	uid, gid := os.Getuid(), os.Getgid()
	if root {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Skipf("running as root and no user nobody to run the daemon as: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		other = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// folder makes a 0700 folder the daemon's user owns.
	folder := func(p string) string {
		require.NoError(t, os.MkdirAll(p, 0o700))
		require.NoError(t, os.Chown(p, uid, gid))
		return p
	}
	var facts []string
	refuse := func(t *testing.T, name, db string, cred *syscall.Credential, says ...string) {
		t.Helper()
		// A socket folder the daemon accepts: the refusal must be the
		// database's.
		run := filepath.Join(dir, "run-"+name)
		require.NoError(t, os.Mkdir(run, 0o700))
		if cred != nil {
			require.NoError(t, os.Chown(run, int(cred.Uid), int(cred.Gid)))
		}
		sock := filepath.Join(run, "d.sock")
		before := snapshotFolder(t, filepath.Dir(db))
		cmd := exec.Command(bin, "daemon", "--db", db, "--socket", sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out := refusedStart(t, cmd, sock)
		assert.Contains(t, out, db, "the error names the database")
		for _, s := range says {
			assert.Contains(t, out, s)
		}
		assert.Equal(t, before, snapshotFolder(t, filepath.Dir(db)), "the database and its folder are as they were")
		assert.NoFileExists(t, sock)
		if !t.Failed() {
			facts = append(facts, name)
		}
		t.Logf("%s: %s", name, strings.TrimSpace(out))
	}

	t.Run("read-only file", func(t *testing.T) {
		// A folder the daemon may write (and so could replace the file
		// in), a file it may only read.
		db := copyDatabase(t, seed, filepath.Join(folder(filepath.Join(dir, "rofile")), "ledger.db"))
		if root {
			require.NoError(t, os.Chown(db, 0, 0))
			require.NoError(t, os.Chmod(db, 0o644))
		} else {
			require.NoError(t, os.Chmod(db, 0o444))
		}
		refuse(t, "read-only file", db, other, "not writable", "permission denied")
	})
	t.Run("read-only folder", func(t *testing.T) {
		// A file the daemon may write, in a folder where it cannot create
		// the -wal and -shm files.
		ro := filepath.Join(dir, "rofolder")
		require.NoError(t, os.Mkdir(ro, 0o755))
		db := copyDatabase(t, seed, filepath.Join(ro, "ledger.db"))
		require.NoError(t, os.Chown(db, uid, gid))
		if !root {
			require.NoError(t, os.Chmod(ro, 0o555))
			t.Cleanup(func() { os.Chmod(ro, 0o755) })
		}
		refuse(t, "read-only folder", db, other, "not writable", "folder")
	})
	t.Run("immutable file as root", func(t *testing.T) {
		if !root {
			t.Skip("chattr +i needs root")
		}
		db := copyDatabase(t, seed, filepath.Join(folder(filepath.Join(dir, "immutable")), "ledger.db"))
		if out, err := exec.Command("chattr", "+i", db).CombinedOutput(); err != nil {
			t.Skipf("chattr +i is not possible here (%v: %s); the nobody cases cover a file the daemon cannot write", err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", db).Run() })
		refuse(t, "immutable file (root)", db, nil, "not writable", "operation not permitted")
	})
	t.Run("directory", func(t *testing.T) {
		db := folder(filepath.Join(dir, "isdir", "ledger.db"))
		refuse(t, "directory", db, nil, "is a directory")
		entries, err := os.ReadDir(db)
		require.NoError(t, err)
		assert.Empty(t, entries, "nothing created inside it")
	})
	t.Run("not a database", func(t *testing.T) {
		db := filepath.Join(folder(filepath.Join(dir, "text")), "ledger.db")
		require.NoError(t, os.WriteFile(db, []byte("notes, not a ledger\n"), 0o600))
		refuse(t, "text file", db, nil, "SQLite header")
	})
	t.Run("missing folder", func(t *testing.T) {
		// Created, as always.
		db := filepath.Join(dir, "new", "deeper", "ledger.db")
		// Answered once the ledger is open (the socket accepts before).
		d := startProcess(t, bin, db, filepath.Join(dir, "run-new", "d.sock"), "")
		d.stop(t)
		assert.FileExists(t, db)
	})
	t.Logf("RELIABILITY: read-only database: %d refusals passed (%s), each exit 1 naming the path, the file byte-identical, no new file beside it; a missing folder is created; %s",
		len(facts), strings.Join(facts, ", "), time.Since(began).Round(time.Millisecond))
}

// TestReliabilityCorruptDatabase damages a database two ways, its header
// (the 16 bytes "SQLite format 3\0" zeroed) and the b-tree header of a
// page of the events table in the middle of the file (bits flipped). A
// damaged header: the daemon must refuse to open, with an error naming
// the file and what is wrong (`scv daemon` exits 1 with it). A damaged
// page: the daemon reads no project at start (start-up does not grow with
// the history), so it starts, and the first request that reads the page
// is refused with a storage error naming the file and the damage, never
// answered with a wrong state. Either way the file is left byte for byte
// as it was, and ledger.Verify cannot read it and says what is wrong
// (`scv ledger verify` exits 1).
func TestReliabilityCorruptDatabase(t *testing.T) {
	began := time.Now()
	dir := shortDir(t)
	seed := filepath.Join(dir, "seed", "ledger.db")
	seedDatabase(t, seed)

	var facts []string
	for _, tc := range []struct {
		name       string
		damage     func(t *testing.T, b []byte, db string) string
		daemonSays []string
		verifySays string
		// starts: the damage shows at the first read of the project,
		// not at start.
		starts bool
	}{
		{
			name: "header",
			damage: func(t *testing.T, b []byte, _ string) string {
				copy(b, make([]byte, 16))
				return "first 16 bytes zeroed"
			},
			daemonSays: []string{"SQLite header", "database damaged"},
			verifySays: "file is not a database",
		},
		{
			name: "page",
			damage: func(t *testing.T, b []byte, db string) string {
				page, size, pages := middleEventsLeaf(t, db)
				for i := (page - 1) * size; i < (page-1)*size+8; i++ {
					b[i] ^= 0xff
				}
				return fmt.Sprintf("bits of page %d of %d (events table) flipped", page, pages)
			},
			daemonSays: []string{"database damaged", "malformed"},
			verifySays: "malformed",
			starts:     true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := copyDatabase(t, seed, filepath.Join(dir, tc.name, "ledger.db"))
			b, err := os.ReadFile(db)
			require.NoError(t, err)
			what := tc.damage(t, b, db)
			require.NoError(t, os.WriteFile(db, b, 0o600))
			before := snapshotFolder(t, filepath.Dir(db))

			sock := filepath.Join(dir, "run-"+tc.name, "d.sock")
			d := New(Config{DB: db, Socket: sock, Version: version})
			var out string
			if tc.starts {
				require.NoError(t, d.Open(context.Background()))
				served := make(chan error, 1)
				go func() { served <- d.Serve() }()
				c, err := rpc.Dial(context.Background(), sock)
				require.NoError(t, err)
				_, err = c.Call(context.Background(), api.CmdProjectEvents{Project: "acme"})
				c.Close()
				e := api.ErrorOf(err)
				require.NotNil(t, e, "a read of the damaged page must fail")
				assert.Equal(t, api.ReasonStorage, e.Data.Reason)
				out = e.Message
				require.NoError(t, d.Close())
				require.NoError(t, <-served)
			} else {
				err := d.Open(context.Background())
				require.Error(t, err, "the daemon must refuse to open")
				out = err.Error()
				assert.NoFileExists(t, sock)
			}
			assert.Contains(t, out, db, "the error names the database")
			for _, s := range tc.daemonSays {
				assert.Contains(t, out, s)
			}

			_, err = verifyLedger(db)
			require.Error(t, err, "verify passed a damaged file")
			vout := err.Error()
			assert.Contains(t, vout, tc.verifySays)
			after := snapshotFolder(t, filepath.Dir(db))
			if tc.starts {
				// The daemon that started took its lock beside the file
				// and opened its write-ahead log; the file itself is
				// unchanged.
				for _, f := range []string{"ledger.db.lock", "ledger.db-wal", "ledger.db-shm"} {
					delete(after, f)
				}
			}
			assert.Equal(t, before, after, "the file is byte-identical, nothing was created or deleted")
			if !t.Failed() {
				facts = append(facts, fmt.Sprintf("%s (%s): daemon %q; verify %q", tc.name, what, out, vout))
			}
		})
	}
	t.Logf("RELIABILITY: corrupt database: %s; files byte-identical; %s", strings.Join(facts, "; "), time.Since(began).Round(time.Millisecond))
}

// seedDatabase makes a database at db with a daemon: a project and 200
// tasks, so that the events table spans many pages, then a clean close.
// The daemon's lock file is removed, so that a later run that must create
// nothing would show it.
func seedDatabase(t *testing.T, db string) {
	t.Helper()
	d := New(Config{DB: db, Socket: filepath.Join(filepath.Dir(db), "seed.sock"), Version: version})
	ctx := context.Background()
	require.NoError(t, d.Open(ctx))
	_, err := d.Ledger().Execute(ctx, reducer.CreateProject{ProjectID: "P1", Name: "acme", Workspace: filepath.Dir(db)})
	require.NoError(t, err)
	for i := range 200 {
		_, err := d.Ledger().Execute(ctx, reducer.AddTask{Project: "P1", TaskID: fmt.Sprintf("T%d", i),
			Title: fmt.Sprintf("task %d, with a title long enough to fill a page or two of the events table", i)})
		require.NoError(t, err)
	}
	require.NoError(t, d.Close())
	require.NoError(t, os.Remove(db+".lock"))
}

// copyDatabase copies the database file from to to (creating its folder)
// and returns to.
func copyDatabase(t *testing.T, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o700))
	require.NoError(t, os.WriteFile(to, b, 0o600))
	return to
}

// refusedStart runs cmd, a daemon that must refuse to start, and returns
// what it wrote. It must exit with status 1; should it answer a request
// on sock instead, it is killed and the test fails. (The daemon listens
// before it opens the database: a connection alone proves nothing.)
func refusedStart(t *testing.T, cmd *exec.Cmd, sock string) string {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			var x *exec.ExitError
			if assert.ErrorAs(t, err, &x, "the daemon must refuse to start: %s", out.String()) {
				assert.Equal(t, 1, x.ExitCode(), "%s", out.String())
			}
			return out.String()
		case <-time.After(20 * time.Millisecond):
			c, err := rpc.Dial(context.Background(), sock)
			if err != nil {
				continue
			}
			_, err = c.Call(context.Background(), api.CmdStatus{})
			c.Close()
			if err == nil {
				cmd.Process.Kill()
				<-done
				t.Fatalf("the daemon started: %s", out.String())
			}
		}
	}
}

// snapshotFolder maps each entry of dir to its mode and the digest of its
// contents.
func snapshotFolder(t *testing.T, dir string) map[string]string {
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

// middleEventsLeaf returns the leaf page of the events table nearest the
// middle of the database file at db, the page size and the page count.
func middleEventsLeaf(t *testing.T, db string) (page, size, pages int) {
	t.Helper()
	p, err := sqlitetest.TablePages(context.Background(), db, "events")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(p.Leaves), 3, "the events table spans pages")
	size, pages = p.Size, p.Count
	page = p.Leaves[0]
	for _, l := range p.Leaves {
		if max(l-pages/2, pages/2-l) < max(page-pages/2, pages/2-page) {
			page = l
		}
	}
	return page, size, pages
}
