package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrGone is returned for a process that no longer exists: it has exited
// (a zombie counts as exited), or its PID now names another process.
var ErrGone = errors.New("process gone")

// Info is one process as /proc/PID/stat shows it.
type Info struct {
	PID, PPID, PGID, SID int
	State                byte   // 'R', 'S', 'D', 'Z', ...
	Start                uint64 // field 22, starttime: clock ticks since boot
	Comm                 string // field 2, the command name without its parentheses
}

// dead reports whether info is a process that has exited but was not
// reaped yet ('Z'), or is being torn down ('X').
func (info Info) dead() bool { return info.State == 'Z' || info.State == 'X' }

// Read parses /proc/PID/stat. A process that does not exist gives an error
// wrapping ErrGone.
func Read(pid int) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("proc: read %d: %w", pid, ErrGone)
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return Info{}, fmt.Errorf("proc: read %d: %w", pid, ErrGone)
		}
		return Info{}, fmt.Errorf("proc: read %d: %w", pid, err)
	}
	info, err := parseStat(data)
	if err != nil {
		return Info{}, fmt.Errorf("proc: read %d: %w", pid, err)
	}
	return info, nil
}

// statFields is how many fields parseStat needs after the command name:
// state (field 3) to starttime (field 22).
const statFields = 22 - 2

// parseStat parses the text of /proc/PID/stat. The command name, field 2,
// is in parentheses and may itself hold spaces and parentheses, so the
// fields after it are read from the last ')'.
func parseStat(data []byte) (Info, error) {
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	if open < 0 || closing < open {
		return Info{}, errors.New("stat: no command name")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(data[:open])))
	if err != nil {
		return Info{}, fmt.Errorf("stat: pid: %w", err)
	}
	rest := bytes.Fields(data[closing+1:])
	if len(rest) < statFields {
		return Info{}, fmt.Errorf("stat: %d fields after the command name, want %d", len(rest), statFields)
	}
	if len(rest[0]) != 1 {
		return Info{}, fmt.Errorf("stat: state %q", rest[0])
	}
	info := Info{PID: pid, State: rest[0][0], Comm: string(data[open+1 : closing])}
	for _, f := range []struct {
		dst   *int
		field int
	}{{&info.PPID, 4}, {&info.PGID, 5}, {&info.SID, 6}} {
		if *f.dst, err = strconv.Atoi(string(rest[f.field-3])); err != nil {
			return Info{}, fmt.Errorf("stat: field %d: %w", f.field, err)
		}
	}
	if info.Start, err = strconv.ParseUint(string(rest[22-3]), 10, 64); err != nil {
		return Info{}, fmt.Errorf("stat: starttime: %w", err)
	}
	return info, nil
}

// Ident names one process for its whole life: a PID and its start time.
type Ident struct {
	PID   int
	Start uint64
}

// Identify returns the identity of the process that has pid now.
func Identify(pid int) (Ident, error) {
	info, err := Read(pid)
	if err != nil {
		return Ident{}, err
	}
	return info.ident(), nil
}

func (info Info) ident() Ident { return Ident{PID: info.PID, Start: info.Start} }

// Alive reports whether the process id names still runs: its PID exists,
// with the same start time, and it is not a zombie.
func (id Ident) Alive() bool {
	info, err := Read(id.PID)
	return err == nil && info.Start == id.Start && !info.dead()
}

// Signal sends sig to the process id names, and only to it. It pins the
// process holding the PID with a pidfd, checks the start time, and sends
// through the pidfd. A process that is gone, a zombie, or has another start
// time (a recycled PID) gives ErrGone and is not signalled. Without
// pidfd_open (ENOSYS, or EPERM from a seccomp filter) it checks and then
// calls kill(2).
func Signal(id Ident, sig unix.Signal) error {
	if id.PID <= 0 {
		// kill(0) and kill(-1) would reach whole groups: never.
		return fmt.Errorf("proc: signal %d: %w", id.PID, ErrGone)
	}
	fd, err := unix.PidfdOpen(id.PID, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
		if !id.Alive() {
			return ErrGone
		}
		err = unix.PidfdSendSignal(fd, sig, nil, 0)
	case errors.Is(err, unix.ESRCH):
		return ErrGone
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		if !id.Alive() {
			return ErrGone
		}
		err = unix.Kill(id.PID, sig)
	default:
		return fmt.Errorf("proc: signal %d: pidfd_open: %w", id.PID, err)
	}
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("proc: signal %d: %w", id.PID, err)
	}
	return nil
}
