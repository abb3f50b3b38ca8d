package control_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/delegations"
	"scv/control/proc"
	"scv/control/rpc"
	"scv/ledger/local"
)

// startTree starts sh -c script as a delegation's command would be
// started (own group, tagged), with this test process as its owner, and
// reaps it when the test ends.
func startTree(t *testing.T, handle, script string) *os.Process {
	t.Helper()
	p, err := proc.Start([]string{"/bin/sh", "-c", script}, t.TempDir(), os.Environ(), handle, "", nil, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		id, err := proc.Identify(p.Pid)
		if err == nil {
			proc.Tree{Handle: handle, Leader: id}.Stop(context.Background(), 0)
		}
		reap(p.Pid)
	})
	return p
}

// reap waits for the child pid, and for nothing else: other tests' children
// are theirs to wait for.
func reap(pid int) (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return ws, err
		}
	}
}

// status runs cmd and returns the whole reply.
func status(t *testing.T, c *rpc.Client, cmd api.Command) *api.DaemonStatus {
	t.Helper()
	st, err := c.Call(testCtx(t), cmd)
	require.NoError(t, err, "%s", encode(t, cmd))
	return st
}

func register(handle string, pid int) api.CmdDelegationRegister {
	return api.CmdDelegationRegister{
		Handle: handle, Agent: "codex", Session: "s1", Parent: handle,
		PID: uint32(pid), OwnerPID: uint32(os.Getpid()), Cwd: "/tmp",
	}
}

// TestDelegationRegisterRefused: a registration that does not describe a
// command its owner started as a delegation is refused with -32602
// invalid_argument, and the registry stays empty.
func TestDelegationRegisterRefused(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	h := ulid.Make().String()
	tree := startTree(t, h, "sleep 300")

	// A child of ours in our own process group.
	plain := exec.Command("sleep", "300")
	require.NoError(t, plain.Start())
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	t.Cleanup(func() {
		plain.Process.Kill()
		plain.Wait()
	})

	with := func(f func(*api.CmdDelegationRegister)) api.CmdDelegationRegister {
		r := register(h, tree.Pid)
		f(&r)
		return r
	}
	for name, cmd := range map[string]api.CmdDelegationRegister{
		"empty handle":             with(func(r *api.CmdDelegationRegister) { r.Handle, r.Parent = "", "" }),
		"handle with a comma":      with(func(r *api.CmdDelegationRegister) { r.Handle = "a,b" }),
		"handle with a space":      with(func(r *api.CmdDelegationRegister) { r.Handle, r.Parent = "a b", "a b" }),
		"empty agent":              with(func(r *api.CmdDelegationRegister) { r.Agent = "" }),
		"agent with a newline":     with(func(r *api.CmdDelegationRegister) { r.Agent = "co\ndex" }),
		"parent without handle":    with(func(r *api.CmdDelegationRegister) { r.Parent = "OTHER" }),
		"parent with empty link":   with(func(r *api.CmdDelegationRegister) { r.Parent = "OUTER,," + h }),
		"relative cwd":             with(func(r *api.CmdDelegationRegister) { r.Cwd = "work" }),
		"chat without account":     with(func(r *api.CmdDelegationRegister) { r.Chat = "local:" }),
		"chat without colon":       with(func(r *api.CmdDelegationRegister) { r.Chat = "local" }),
		"owner not running":        with(func(r *api.CmdDelegationRegister) { r.OwnerPID = uint32(gone.Process.Pid) }),
		"pid not running":          with(func(r *api.CmdDelegationRegister) { r.PID = uint32(gone.Process.Pid) }),
		"pid not the owner's":      with(func(r *api.CmdDelegationRegister) { r.PID = 1 }),
		"pid in the owner's group": with(func(r *api.CmdDelegationRegister) { r.PID = uint32(plain.Process.Pid) }),
	} {
		assertCode(t, callErr(t, c, cmd), -32602, "invalid_argument", name)
	}
	st := status(t, c, api.CmdDelegations{All: true})
	assert.Empty(t, st.Delegations.Entries)
	rows, err := d.store.Delegations(context.Background())
	require.NoError(t, err)
	assert.Empty(t, rows, "nothing was stored")
}

// TestDelegationLifecycle: a registered tree (a child in its group and a
// grandchild that left it with setsid) is listed with all its processes,
// counted in status, known to a registry loaded afresh, and stopped whole
// by delegation_kill, which names it in killed; its handle is then gone.
func TestDelegationLifecycle(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	h := ulid.Make().String()
	tree := startTree(t, h, "sleep 300 & setsid sleep 300 & wait")

	reg := register(h, tree.Pid)
	reg.Chat = "local:owner"
	st := status(t, c, reg)
	require.Len(t, st.Delegations.Entries, 1)
	e := st.Delegations.Entries[0]
	assert.Equal(t, h, e.Handle)
	assert.Equal(t, uint32(tree.Pid), e.PID)
	assert.Equal(t, uint32(os.Getpid()), e.OwnerPID)
	assert.Equal(t, uint32(1), e.Depth)
	assert.False(t, e.Orphaned)
	assertCode(t, callErr(t, c, register(h, tree.Pid)), -32002, "conflict", "second registration")

	// Counted whole once the setsid child has left the session (it is
	// counted before that too, as a member of the group).
	var members []proc.Info
	sessions := map[int]bool{}
	require.Eventually(t, func() bool {
		st = status(t, c, api.CmdDelegations{})
		members = proc.Tree{Handle: h, Leader: ident(t, tree.Pid)}.Members()
		clear(sessions)
		for _, m := range members {
			sessions[m.SID] = true
		}
		return len(st.Delegations.Entries) == 1 && st.Delegations.Entries[0].Processes == 3 && len(sessions) == 2
	}, 10*time.Second, 20*time.Millisecond, "sh, its sleep, and the setsid sleep in a session of its own")
	require.Len(t, members, 3)
	assert.Equal(t, uint64(1), status(t, c, api.CmdStatus{}).Delegations.Active)
	assert.True(t, d.srv.Service.DelegationActive(h))

	fresh := &delegations.Registry{Store: d.store}
	require.NoError(t, fresh.Load(context.Background()))
	assert.True(t, fresh.Active(h), "the registry is in the database")
	assert.Equal(t, "local:owner", fresh.ChatOf("OUTER,"+h+",INNER"), "the innermost registered delegation with a chat")
	assert.Empty(t, fresh.ChatOf("OUTER"))

	st = status(t, c, api.CmdDelegationKill{Handle: &h})
	assert.Equal(t, []string{h}, st.Delegations.Killed)
	assert.Equal(t, uint64(0), st.Delegations.Active)
	assert.Equal(t, uint64(0), st.Delegations.Reaped, "killing by handle is not reaping an orphan")
	for _, m := range members {
		assert.False(t, proc.Ident{PID: m.PID, Start: m.Start}.Alive(), "member %d stopped", m.PID)
	}
	ws, err := reap(tree.Pid)
	require.NoError(t, err)
	assert.True(t, ws.Signaled(), "the command was stopped by a signal")
	assert.Empty(t, status(t, c, api.CmdDelegations{All: true}).Delegations.Entries)
	assert.False(t, d.srv.Service.DelegationActive(h))
	assertCode(t, callErr(t, c, api.CmdDelegationKill{Handle: &h}), -32001, "not_found", "kill again")
}

// TestDelegationDone: the owner's delegation_done stops what is left of the
// tree (here a process that outlived the command) and forgets the handle.
func TestDelegationDone(t *testing.T) {
	d := startDaemon(t, nil)
	c := d.client(t)
	h := ulid.Make().String()
	tree := startTree(t, h, "setsid sleep 300 & echo started; exec sleep 300")
	status(t, c, register(h, tree.Pid))
	require.Eventually(t, func() bool {
		return proc.Tree{Handle: h, Leader: ident(t, tree.Pid)}.Count() == 2
	}, 10*time.Second, 20*time.Millisecond)

	// The command ends; its setsid child lives on.
	require.NoError(t, syscall.Kill(tree.Pid, syscall.SIGKILL))
	_, err := reap(tree.Pid)
	require.NoError(t, err)
	left := proc.Tree{Handle: h}.Members()
	require.Len(t, left, 1, "the tagged leftover")

	st := status(t, c, api.CmdDelegationDone{Handle: h})
	assert.Equal(t, []string{h}, st.Delegations.Killed, "something had to be stopped")
	assert.False(t, proc.Ident{PID: left[0].PID, Start: left[0].Start}.Alive())
	assert.False(t, d.srv.Service.DelegationActive(h))
}

func ident(t *testing.T, pid int) proc.Ident {
	t.Helper()
	id, err := proc.Identify(pid)
	require.NoError(t, err)
	return id
}

// TestDelegationRecycledPIDs: a registry entry whose recorded processes
// ended and whose PIDs now name others (here: the test process as owner,
// a live decoy as leader, each with another start time) is an orphan, and
// reaping it signals nobody: the decoy lives on.
func TestDelegationRecycledPIDs(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := context.Background()
	decoy := exec.Command("sleep", "60")
	decoy.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, decoy.Start())
	t.Cleanup(func() {
		decoy.Process.Kill()
		decoy.Wait()
	})
	was := ident(t, decoy.Process.Pid)
	self := ident(t, os.Getpid())
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)
	h := ulid.Make().String()
	require.NoError(t, d.store.PutDelegation(ctx, local.Delegation{
		Handle: h, Agent: "codex", Depth: 1, Parent: h,
		PID: was.PID, PIDStart: was.Start - 1, OwnerPID: self.PID, OwnerStart: self.Start - 1,
		BootID: strings.TrimSpace(string(boot)), Cwd: "/tmp", Started: time.Now().UnixMilli(),
	}))
	dels := &delegations.Registry{Store: d.store, Grace: 100 * time.Millisecond}
	require.NoError(t, dels.Load(ctx))
	assert.Zero(t, dels.List(true).Entries[0].Processes, "the decoy is not counted")

	killed, err := dels.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{h}, killed, "an owner PID with another start time is a gone owner")
	assert.Equal(t, uint64(1), dels.Summary().Reaped)
	time.Sleep(200 * time.Millisecond)
	assert.True(t, was.Alive(), "the decoy was not signalled")
	rows, err := d.store.Delegations(ctx)
	require.NoError(t, err)
	assert.Empty(t, rows)

	// An entry of an earlier boot is dropped at load, unsignalled.
	require.NoError(t, d.store.PutDelegation(ctx, local.Delegation{
		Handle: "OLDBOOT", Agent: "codex", Depth: 1, Parent: "OLDBOOT",
		PID: was.PID, PIDStart: was.Start, OwnerPID: 1, OwnerStart: 1, BootID: "another-boot", Cwd: "/tmp",
	}))
	require.NoError(t, dels.Load(ctx))
	assert.Empty(t, dels.List(true).Entries)
	rows, err = d.store.Delegations(ctx)
	require.NoError(t, err)
	assert.Empty(t, rows)
	assert.True(t, was.Alive())
}
