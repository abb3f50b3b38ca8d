package proc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestReadOddComm runs sleep under the name "a) b": Read must take the
// fields after the last ')', and the identity must die with the process.
func TestReadOddComm(t *testing.T) {
	noLeftovers(t)
	bin := filepath.Join(t.TempDir(), "a) b")
	data, err := os.ReadFile("/bin/sleep")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	k := start(t, handleFor(t), nil, bin, "60")

	info, err := Read(k.Pid)
	require.NoError(t, err)
	sid, err := unix.Getsid(0)
	require.NoError(t, err)
	assert.Equal(t, k.Pid, info.PID)
	assert.Equal(t, "a) b", info.Comm)
	assert.Equal(t, os.Getpid(), info.PPID)
	assert.Equal(t, k.Pid, info.PGID)
	assert.Equal(t, sid, info.SID)
	assert.Contains(t, "RSD", string(info.State))
	assert.NotZero(t, info.Start)
	id, err := Identify(k.Pid)
	require.NoError(t, err)
	assert.Equal(t, Ident{PID: k.Pid, Start: info.Start}, id)
	assert.True(t, id.Alive())

	require.NoError(t, Signal(id, unix.SIGTERM))
	waitState(t, k.Pid, 'Z')
	assert.False(t, id.Alive(), "a zombie is not alive")
	assert.ErrorIs(t, Signal(id, unix.SIGTERM), ErrGone, "a zombie is gone")

	ws := k.wait(t)
	assert.True(t, ws.Signaled())
	assert.Equal(t, unix.SIGTERM, ws.Signal())
	assert.Equal(t, 143, ExitCode(ws))
	assert.False(t, id.Alive())
	_, err = Read(k.Pid)
	assert.ErrorIs(t, err, ErrGone)
	assert.ErrorIs(t, Signal(id, unix.SIGTERM), ErrGone)
}

// TestParseStat covers command names that would fool a parser splitting on
// spaces or on the first ')'.
func TestParseStat(t *testing.T) {
	tail := " S 10 20 30 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"
	for _, tc := range []struct {
		line string
		comm string
	}{
		{"42 (sleep)" + tail, "sleep"},
		{"42 (a) b)" + tail, "a) b"},
		{"42 ()) (x) S 1 2 3)" + tail, ")) (x) S 1 2 3"},
		{"42 ()" + tail, ""},
		{"42 (\n)" + tail, "\n"},
	} {
		info, err := parseStat([]byte(tc.line))
		require.NoError(t, err, tc.line)
		assert.Equal(t, Info{PID: 42, PPID: 10, PGID: 20, SID: 30, State: 'S', Start: 987654, Comm: tc.comm}, info, tc.line)
	}
	for _, bad := range []string{
		"",
		"42 sleep S 10 20 30",
		"42 (sleep) S 10 20 30 0 -1",
		"x (sleep)" + tail,
		"42 (sleep) SS 10 20 30 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654",
		"42 (sleep) S 10 20 30 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 -5",
		")42 (",
	} {
		_, err := parseStat([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func FuzzParseStat(f *testing.F) {
	self, err := os.ReadFile("/proc/self/stat")
	require.NoError(f, err)
	f.Add(self)
	f.Add([]byte("42 (a) b) S 10 20 30 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000"))
	f.Add([]byte("42 ()(() Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"))
	f.Add([]byte(")("))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := parseStat(data)
		if err != nil {
			return
		}
		assert.NotZero(t, info.State)
		assert.Contains(t, string(data), "("+info.Comm+")")
	})
}

// TestSignalRefusesBadPID: Signal never turns a zero or negative PID into
// kill(0) or kill(-1).
func TestSignalRefusesBadPID(t *testing.T) {
	for _, pid := range []int{0, -1} {
		assert.ErrorIs(t, Signal(Ident{PID: pid}, 0), ErrGone)
		assert.False(t, Ident{PID: pid}.Alive())
	}
}
