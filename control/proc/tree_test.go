package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestChain(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{",", nil},
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{",a,,b,", []string{"a", "b"}},
	} {
		assert.Equal(t, tc.want, ParseChain(tc.in), "%q", tc.in)
	}
	assert.Equal(t, "h", ExtendChain("", "h"))
	assert.Equal(t, "a,b,h", ExtendChain("a,b", "h"))
	assert.Equal(t, "a,b,h", ExtendChain("a,,b,", "h"))
}

func ExampleExtendChain() {
	outer := ExtendChain("", "01OUTER")
	inner := ExtendChain(outer, "01INNER")
	fmt.Println(inner)
	fmt.Println(ParseChain(inner))
	// Output:
	// 01OUTER,01INNER
	// [01OUTER 01INNER]
}

func TestTaggedEnv(t *testing.T) {
	env := func(vars ...string) []byte { return []byte(strings.Join(vars, "\x00") + "\x00") }
	for _, tc := range []struct {
		environ []byte
		handle  string
		want    bool
	}{
		{env(TagEnv + "=h"), "h", true},
		{env("A=1", ParentEnv+"=x,h,y"), "h", true},
		{env(ParentEnv + "=x,hh,y"), "h", false},
		{env(TagEnv+"=x", TagEnv+"=h"), "h", true}, // any occurrence
		{env("X" + TagEnv + "=h"), "h", false},
		{env(TagEnv + "h"), "h", false},
		{env(TagEnv + "="), "", false},
		{nil, "h", false},
	} {
		assert.Equal(t, tc.want, taggedEnv(tc.environ, tc.handle), "%q in %q", tc.handle, tc.environ)
	}
}

// TestInnermost: the first SCV_DELEGATION of an environment, never one
// named in SCV_PARENT alone; and the calling process's own.
func TestInnermost(t *testing.T) {
	env := func(vars ...string) []byte { return []byte(strings.Join(vars, "\x00") + "\x00") }
	assert.Equal(t, "h", innermostEnv(env("A=1", TagEnv+"=h", ParentEnv+"=x,h")))
	assert.Equal(t, "a", innermostEnv(env(TagEnv+"=a", TagEnv+"=b")), "the first, as getenv reads it")
	assert.Equal(t, "", innermostEnv(env(ParentEnv+"=x,h")))
	assert.Equal(t, "", innermostEnv(env("X"+TagEnv+"=h")))
	assert.Equal(t, "", innermostEnv(nil))
	assert.Equal(t, os.Getenv(TagEnv), Innermost(os.Getpid()))
	assert.Equal(t, "", Innermost(0))
}

// TestTreeMembersAndStop starts a leader whose child has a grandchild in
// the group and another that called setsid: all four are members, the
// setsid one by its tag alone, and Stop ends them all with SIGTERM, well
// before the grace.
func TestTreeMembersAndStop(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	setsids := map[string]string{"helper": self}
	if bin, err := exec.LookPath("setsid"); err == nil {
		setsids["util-linux"] = bin
	}
	for name, setsid := range setsids {
		t.Run(name, func(t *testing.T) { testTreeMembersAndStop(t, setsid) })
	}
}

func testTreeMembersAndStop(t *testing.T, setsid string) {
	noLeftovers(t)
	dir := t.TempDir()
	script := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	script("child.sh", `
		sleep 60 &
		echo $! > "$D/gc"
		`+helperEnv+`=setsid "$SETSID" /bin/sh "$D/sid.sh" &
		echo $$ > "$D/child"
		wait`)
	script("sid.sh", `
		echo $$ > "$D/sid"
		exec sleep 60`)
	handle := handleFor(t)
	k := start(t, handle, []string{"D=" + dir, "SETSID=" + setsid}, "/bin/sh", "-c", `/bin/sh "$D/child.sh" & wait`)

	child := readPID(t, filepath.Join(dir, "child"))
	gc := readPID(t, filepath.Join(dir, "gc"))
	sid := readPID(t, filepath.Join(dir, "sid"))
	want := []int{k.Pid, child, gc, sid}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(sorted(want), pids(k.tree.Members())) },
		5*time.Second, 5*time.Millisecond, "members %v, want %v", pids(k.tree.Members()), want)
	assert.Equal(t, 4, k.tree.Count())

	for _, pid := range []int{child, gc} {
		info, err := Read(pid)
		require.NoError(t, err)
		assert.Equal(t, k.Pid, info.PGID, "pid %d in the leader's group", pid)
	}
	leader, err := Read(k.Pid)
	require.NoError(t, err)
	escaped, err := Read(sid)
	require.NoError(t, err)
	assert.Equal(t, sid, escaped.SID, "own session")
	assert.NotEqual(t, leader.SID, escaped.SID)
	assert.Equal(t, sid, escaped.PGID, "own group")
	assert.True(t, Tagged(sid, handle))
	assert.Equal(t, sorted([]int{k.Pid, child, gc}), pids(Tree{Leader: k.id}.Members()),
		"without the handle the group is found but not the escaped process")

	ids := make([]Ident, 0, len(want))
	for _, pid := range want {
		id, err := Identify(pid)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	n, err := k.tree.Stop(ctx, 3*time.Second)
	took := time.Since(begin)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	assert.Less(t, took, 3*time.Second, "SIGTERM was enough; Stop should not wait out the grace")
	for _, id := range ids {
		assert.False(t, id.Alive(), "pid %d", id.PID)
	}
	assert.Zero(t, k.tree.Count())

	ws := k.wait(t)
	assert.True(t, ws.Signaled())
	assert.Equal(t, unix.SIGTERM, ws.Signal())
}

// TestStopKillsAfterGrace: a tree that ignores SIGTERM is killed once the
// grace has passed.
func TestStopKillsAfterGrace(t *testing.T) {
	noLeftovers(t)
	dir := t.TempDir()
	k := start(t, handleFor(t), []string{"D=" + dir}, "/bin/sh", "-c", `
		trap '' TERM
		sleep 60 &
		echo $! > "$D/gc"
		wait`)
	gc := readPID(t, filepath.Join(dir, "gc"))
	gcID, err := Identify(gc)
	require.NoError(t, err)
	require.Equal(t, 2, k.tree.Count())

	const grace = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	n, err := k.tree.Stop(ctx, grace)
	took := time.Since(begin)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.GreaterOrEqual(t, took, grace)
	assert.False(t, k.id.Alive())
	assert.False(t, gcID.Alive())

	ws := k.wait(t)
	assert.True(t, ws.Signaled())
	assert.Equal(t, unix.SIGKILL, ws.Signal())
}

// TestStopSparesRecycledPID: a tree whose recorded leader has since died
// and whose PID now belongs to someone else (the decoy, a group leader
// with a child, untagged) has no members, and Stop signals nobody.
func TestStopSparesRecycledPID(t *testing.T) {
	noLeftovers(t)
	dir := t.TempDir()
	decoy, err := os.StartProcess("/bin/sh", []string{"sh", "-c", `sleep 60 & echo $! > "$D/gc"; wait`}, &os.ProcAttr{
		Env: []string{"D=" + dir, "PATH=" + os.Getenv("PATH")},
		Sys: &unix.SysProcAttr{Setpgid: true},
	})
	require.NoError(t, err)
	decoyID, err := Identify(decoy.Pid)
	require.NoError(t, err)
	decoyTree := Tree{Leader: decoyID}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := decoyTree.Stop(ctx, 0)
		assert.NoError(t, err)
		assert.Equal(t, 2, n)
		ws, err := WaitTree(decoy.Pid)
		assert.NoError(t, err)
		assert.True(t, ws.Signaled())
	})
	gc := readPID(t, filepath.Join(dir, "gc"))
	require.Equal(t, sorted([]int{decoy.Pid, gc}), pids(decoyTree.Members()))

	recorded := Ident{PID: decoy.Pid, Start: decoyID.Start - 1}
	assert.False(t, recorded.Alive())
	assert.ErrorIs(t, Signal(recorded, unix.SIGKILL), ErrGone)

	stale := Tree{Handle: handleFor(t), Leader: recorded}
	assert.Empty(t, stale.Members())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := stale.Stop(ctx, 200*time.Millisecond)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.True(t, decoyID.Alive(), "the decoy survives")
	assert.Equal(t, 2, decoyTree.Count())
}

// TestMembersExcludesSelf: the calling process is never a member, whether
// it is the leader, in the group, or tagged.
func TestMembersExcludesSelf(t *testing.T) {
	t.Run("leader", func(t *testing.T) {
		me, err := Identify(os.Getpid())
		require.NoError(t, err)
		assert.NotContains(t, pids(Tree{Leader: me}.Members()), os.Getpid())
	})

	t.Run("tagged", func(t *testing.T) {
		// The test binary, started tagged, lists its own tree.
		noLeftovers(t)
		self, err := os.Executable()
		require.NoError(t, err)
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		require.NoError(t, err)
		defer out.Close()
		// Under -race, a binary sleeps a second on exit unless told not to.
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GORACE=") })
		env = append(env, helperEnv+"=members", "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
		p, err := Start([]string{self}, "", env, handleFor(t), "", nil, out, os.Stderr)
		require.NoError(t, err)
		ws, err := WaitTree(p.Pid)
		require.NoError(t, err)
		require.Equal(t, 0, ExitCode(ws))
		data, err := os.ReadFile(out.Name())
		require.NoError(t, err)
		assert.Equal(t, "self="+strconv.Itoa(p.Pid)+" members=\n", string(data))
	})

	t.Run("pick", func(t *testing.T) {
		const self = 100
		leader := Info{PID: 200, PGID: 200, State: 'S', Start: 7}
		all := []Info{
			{PID: self, PGID: 200, State: 'S', Start: 1}, // tagged and in the group
			{PID: 300, PGID: 200, State: 'R', Start: 9},  // in the group
			{PID: 301, PGID: 200, State: 'Z', Start: 9},  // in the group, exited
			{PID: 302, PGID: 302, State: 'S', Start: 9},  // tagged, escaped
			{PID: 303, PGID: 303, State: 'S', Start: 9},  // stranger
			{PID: 304, PGID: 200, State: 'X', Start: 9},  // in the group, dying
			{PID: 305, PGID: 303, State: 'D', Start: 9},  // tagged, in another group
			{PID: 306, PGID: 306, State: 'Z', Start: 9},  // tagged, exited
		}
		tagged := func(pid int, handle string) bool {
			return handle == "h" && (pid == self || pid == 302 || pid == 305 || pid == 306)
		}
		tree := Tree{Handle: "h", Leader: leader.ident()}

		got := tree.pick(append([]Info{leader}, all...), self, tagged)
		assert.Equal(t, []int{200, 300, 302, 305}, pids(got))

		zombie := leader
		zombie.State = 'Z'
		got = tree.pick(append(all, zombie), self, tagged)
		assert.Equal(t, []int{300, 302, 305}, pids(got), "a zombie leader still holds its group")

		recycled := leader
		recycled.Start++
		got = tree.pick(append(all, recycled), self, tagged)
		assert.Equal(t, []int{302, 305}, pids(got), "another process with the leader's PID: its group is not ours")

		got = tree.pick(all, self, tagged)
		assert.Equal(t, []int{302, 305}, pids(got), "leader gone: only the tag counts")

		got = tree.pick(append(all, leader, leader), 0, tagged)
		assert.Equal(t, []int{self, 200, 300, 302, 305}, pids(got), "no duplicates; self only when not the caller")
	})
}

func sorted(pids []int) []int {
	out := append([]int(nil), pids...)
	slices.Sort(out)
	return out
}
