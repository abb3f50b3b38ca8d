package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"scv/ledger/driver"
)

// roomMargin is how close to the end of the room a file or the disk must
// be for an I/O error to count as having run out of it: more than the
// largest single write SQLite makes (a WAL frame, a page of up to 64 KiB
// plus its header).
const roomMargin = 128 << 10

// storageError wraps err, an error of the database at path, as
// driver.ErrStorageFull when the database had no room for a write, else
// as driver.ErrStorage; nil stays nil.
func storageError(path string, err error) error {
	if err == nil {
		return nil
	}
	if why, full := noRoom(path, err); full {
		return fmt.Errorf("%w, nothing of the request was kept (%s): %v", driver.ErrStorageFull, why, err)
	}
	if damaged(err) {
		return fmt.Errorf("%w: %w: %s: %v; nothing of the request was kept, and `scv ledger verify --db %s` says where",
			driver.ErrStorage, ErrCorrupt, path, err, path)
	}
	return fmt.Errorf("%w: %v", driver.ErrStorage, err)
}

// noRoom reports whether err is SQLite failing to write the database at
// path for lack of room, and says which room ran out. SQLite reports
// ENOSPC as SQLITE_FULL, but EFBIG, what a write past the process's
// RLIMIT_FSIZE gets, as a plain I/O error (SQLITE_IOERR_WRITE, with the
// errno out of reach behind database/sql): for a failed write, sync,
// truncation or -shm growth it looks at the limit and at the disk. A
// failed read is never a lack of room.
func noRoom(path string, err error) (string, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return "", false
	}
	full := se.Code()&0xff == sqlite3.SQLITE_FULL
	if !full && !failedWrite(se.Code()) {
		return "", false
	}
	if f, limit, ok := atFileSizeLimit(path); ok {
		return fmt.Sprintf("%s reached the process's file size limit (RLIMIT_FSIZE) of %d bytes", f, limit), true
	}
	if free, ok := diskFull(path); ok {
		return fmt.Sprintf("%d bytes left on the file system of %s", free, filepath.Dir(path)), true
	}
	if full {
		return "SQLite: database or disk is full", true
	}
	return "", false
}

// failedWrite reports whether code, an extended SQLite result code, is an
// I/O error that a lack of room can cause.
func failedWrite(code int) bool {
	switch code {
	case sqlite3.SQLITE_IOERR_WRITE, sqlite3.SQLITE_IOERR_FSYNC, sqlite3.SQLITE_IOERR_TRUNCATE, sqlite3.SQLITE_IOERR_SHMSIZE:
		return true
	}
	return false
}

// atFileSizeLimit reports which file of the database at path, if any, is
// within roomMargin of the process's RLIMIT_FSIZE, and the limit.
func atFileSizeLimit(path string) (string, uint64, bool) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_FSIZE, &lim) != nil || lim.Cur == unix.RLIM_INFINITY {
		return "", 0, false
	}
	for _, p := range []string{path + "-wal", path, path + "-shm", path + "-journal"} {
		if fi, err := os.Stat(p); err == nil && uint64(fi.Size())+roomMargin > lim.Cur {
			return p, lim.Cur, true
		}
	}
	return "", 0, false
}

// diskFull reports whether the file system holding the database at path
// has less than roomMargin left for this process, and how much it has.
func diskFull(path string) (uint64, bool) {
	var st unix.Statfs_t
	if unix.Statfs(filepath.Dir(path), &st) != nil {
		return 0, false
	}
	blocks := st.Bavail
	if os.Geteuid() == 0 {
		blocks = st.Bfree // root may use the reserved blocks too
	}
	free := blocks * uint64(st.Bsize)
	return free, free < roomMargin
}
