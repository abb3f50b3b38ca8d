package main

import (
	"scv/control/daemon/daemonproc"

	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger/driver"
	"scv/ledger/postgres/pgcluster"
	"scv/ledger/postgres/pgtest"
	"scv/ledger/sqlite/sqlitetest"
)

// The daemon is built once for the tests of this package, without the
// race detector (only the harness runs under it).
var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

func scvBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "scvrel-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "scv")
		buildErr = daemonproc.Build(context.Background(), builtBin)
	})
	require.NoError(t, buildErr)
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// testEnv is the environment of one check: the short settings, or the
// long ones with SCV_LONG=1, and a folder whose paths fit a socket's
// 108 bytes.
func testEnv(t *testing.T) env {
	t.Helper()
	cfg := shortConfig()
	if os.Getenv("SCV_LONG") == "1" {
		cfg.long()
	}
	cfg.Seed = rand.Uint64()
	dir, err := os.MkdirTemp("", "scvrel")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Logf("seed %d", cfg.Seed)
	cfg.Out = filepath.Join(dir, "out") // the pictures go with the test's folder
	return env{cfg: cfg, bin: scvBinary(t), dir: dir, logf: t.Logf}
}

// TestReliabilityCrash runs the crash check on the real daemon: 10
// SIGKILLs under 64 writing clients (200 with SCV_LONG=1), then every
// acknowledged write must be in the database and the state a replay.
func TestReliabilityCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon and kills it under load")
	}
	e := testEnv(t)
	reliableCrash(t, e)
}

// TestReliabilityCrashPG runs the crash check on PostgreSQL (--pg): a
// private cluster (cmd/scvpg), the daemon SIGKILLed under load and the
// server stopped and started under load 3 times (20 with SCV_LONG=1).
// It is skipped where PostgreSQL is not installed.
func TestReliabilityCrashPG(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon, starts PostgreSQL and kills them under load")
	}
	if _, err := daemonproc.PGProgram("initdb"); err != nil {
		t.Skipf("PostgreSQL is not installed: %v", err)
	}
	e := testEnv(t)
	e.cfg.PG = true
	reliableCrash(t, e, "refused unavailable")
}

// TestReliabilityCrashPGBouncer is TestReliabilityCrashPG with the daemon
// reaching the server through a PgBouncer in session mode (--pgbouncer):
// the kills and the server's stops happen behind it. It is skipped where
// PostgreSQL or pgbouncer is not installed, unless $SCV_REQUIRE_PGBOUNCER
// is set.
func TestReliabilityCrashPGBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon, starts PostgreSQL and PgBouncer and kills them under load")
	}
	if _, err := daemonproc.PGProgram("initdb"); err != nil {
		t.Skipf("PostgreSQL is not installed: %v", err)
	}
	pgtest.NeedBouncer(t)
	e := testEnv(t)
	e.cfg.PG, e.cfg.PgBouncer = true, true
	reliableCrash(t, e, "on PostgreSQL through PgBouncer: ", "refused unavailable")
}

// reliableCrash runs the crash check in e: it must pass with no problem,
// no acknowledged write lost, and a figure that says each of says.
func reliableCrash(t *testing.T, e env, says ...string) {
	t.Helper()
	r := crashCheck(context.Background(), e)
	for _, p := range r.Problems {
		t.Errorf("problem: %s", p)
	}
	assert.True(t, r.Pass())
	assert.Contains(t, r.Figure, " 0 of ", "no acknowledged write lost")
	for _, w := range says {
		assert.Contains(t, r.Figure, w)
	}
	t.Logf("RELIABILITY: %s", r.Line())
}

// TestCrashCheckSeesLostWrites runs the crash check against a daemon
// whose storage loses committed writes: a wrapper deletes the database's
// write-ahead log before each start, as a disk that acknowledged flushes
// it never made would lose it in a power cut. The check must fail, naming
// acknowledged writes that are not in the ledger.
func TestCrashCheckSeesLostWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon and kills it under load")
	}
	e := testEnv(t)
	e.cfg.Kills = 3
	wrapper := filepath.Join(e.dir, "lossy-scv")
	script := `#!/bin/sh
if [ "$1" = daemon ]; then
	prev=
	for a in "$@"; do
		if [ "$prev" = --db ]; then rm -f "$a-wal" "$a-shm"; fi
		prev=$a
	done
fi
exec ` + e.bin + ` "$@"
`
	require.NoError(t, os.WriteFile(wrapper, []byte(script), 0o700))
	e.bin = wrapper
	e.dir = filepath.Join(e.dir, "run")
	require.NoError(t, os.Mkdir(e.dir, 0o700))
	r := crashCheck(context.Background(), e)
	require.False(t, r.Pass(), "the check passed although the daemon lost its log: %s", r.Figure)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "is not in the ledger")
	t.Logf("%s", r.Figure)
	for _, p := range r.Problems[:min(len(r.Problems), 6)] {
		t.Logf("problem: %s", p)
	}
}

// TestReliabilityReaders runs the readers check: reader processes beside
// a daemon under write load, for 2 s (60 s with SCV_LONG=1).
func TestReliabilityReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon and runs reader processes beside it")
	}
	e := testEnv(t)
	if os.Getenv("SCV_LONG") != "1" {
		e.cfg.ReadFor, e.cfg.After = 2*time.Second, 2*time.Second
	}
	r := readersCheck(context.Background(), e)
	for _, p := range r.Problems {
		t.Errorf("problem: %s", p)
	}
	assert.True(t, r.Pass())
	t.Logf("RELIABILITY: %s", r.Line())
}

// history builds the events of a history the clients of logs could have
// left: every stored progress of each client, its run started first.
type history struct {
	seq    uint64
	events []struct {
		seq        uint64
		kind, data string
	}
}

func (h *history) add(kind, data string) {
	h.seq++
	h.events = append(h.events, struct {
		seq        uint64
		kind, data string
	}{h.seq, kind, data})
}

func (h *history) task(id string) {
	h.add("task_added", `{"task_id":"`+id+`","title":"t","depends_on":[],"max_retries":0}`)
}

func (h *history) started(run, task string) {
	h.add("run_started", `{"run_id":"`+run+`","task_id":"`+task+`","agent":"scvrel"}`)
}

func (h *history) progress(run, text string) {
	h.add("run_progress", `{"run_id":"`+run+`","progress":"`+text+`"}`)
}

func (h *history) check(logs []clientLog) (*historyCheck, []string) {
	var p problems
	c := newHistoryCheck("P", logs, &p)
	for _, e := range h.events {
		c.add(e.seq, "P", e.kind, e.data)
	}
	c.finish()
	return c, p.all()
}

// TestHistoryCheck shows that the crash check's checker finds what it is
// there to find: an acknowledged write missing, a write applied twice,
// writes out of the order they were acknowledged in, a write nobody sent,
// a sequence that does not increase, and an acknowledged project, task or
// run start missing; and that a history with none of these passes.
func TestHistoryCheck(t *testing.T) {
	logs := func() []clientLog {
		return []clientLog{
			// Client 0 sent 4 and was answered for 1, 2 and 4; 3 went
			// unanswered (the daemon was killed).
			{Task: "T0", Run: "R0", RunAcked: true, Sent: 4, Acked: []uint32{1, 2, 4}},
			// Client 1's run start went unanswered; it learned its run
			// from project_tasks.
			{Task: "T1", Run: "R1", Sent: 2, Acked: []uint32{2}},
		}
	}
	good := func() *history {
		h := &history{}
		h.add("project_created", `{"name":"crash","workspace":"/w"}`)
		h.task("T0")
		h.task("T1")
		h.started("R0", "T0")
		h.started("R1", "T1")
		h.progress("R0", "c0-1")
		h.progress("R1", "c1-1")
		h.progress("R0", "c0-2")
		h.progress("R0", "c0-3") // unacknowledged, landed
		h.progress("R1", "c1-2")
		h.progress("R0", "c0-4")
		return h
	}

	c, probs := good().check(logs())
	assert.Empty(t, probs, "a sound history")
	assert.Zero(t, c.RefusedLanded)
	l := logs()
	l[0].Refused = []uint32{3} // refused unavailable, yet stored
	l[1].Refused = []uint32{1, 3}
	c, probs = good().check(l)
	assert.Empty(t, probs, "a refused request that landed is in doubt, not a problem")
	assert.Equal(t, 2, c.RefusedLanded, "c0-3 and c1-1")
	assert.Equal(t, 0, c.Lost)
	assert.Equal(t, 4, c.Acked)
	assert.Equal(t, 2, c.Landed, "c0-3 and c1-1 landed unanswered")
	assert.Equal(t, 0, c.Doubt)
	assert.Equal(t, 11, c.Events)

	for _, tc := range []struct {
		name  string
		edit  func(h *history, logs []clientLog)
		lost  int
		finds string
	}{
		{"acknowledged progress missing", func(h *history, _ []clientLog) {
			h.events = h.events[:len(h.events)-1] // c0-4, acknowledged
		}, 1, `acknowledged progress "c0-4" of run R0 is not in the ledger`},
		{"acknowledged but never stored, though later ones are", func(h *history, _ []clientLog) {
			h.events = append(h.events[:7], h.events[8:]...) // c0-2
		}, 1, `acknowledged progress "c0-2" of run R0 is not in the ledger`},
		{"applied twice", func(h *history, _ []clientLog) { h.progress("R0", "c0-4") }, 0, `"c0-4" is stored twice`},
		{"out of order", func(h *history, _ []clientLog) {
			h.events[5].data, h.events[7].data = h.events[7].data, h.events[5].data // c0-2 before c0-1
		}, 0, `"c0-1" comes after "c0-2"`},
		{"never sent", func(h *history, _ []clientLog) { h.progress("R0", "c0-5") }, 0, `"c0-5" was never sent`},
		{"another run", func(h *history, _ []clientLog) { h.progress("R1", "c0-5") }, 0, `client 0 sent it for run R0`},
		{"sequence reused", func(h *history, _ []clientLog) {
			h.events[6].seq = h.events[5].seq
		}, 0, "is stored twice"},
		{"sequence goes back", func(h *history, _ []clientLog) {
			h.events[6].seq = 1
		}, 0, "sequences do not strictly increase"},
		{"run start missing", func(h *history, _ []clientLog) {
			h.events = append(h.events[:3], h.events[4:]...) // run_started R0
		}, 0, "acknowledged project_run_start (run R0) is not in the ledger"},
		{"a second run", func(h *history, _ []clientLog) { h.started("R9", "T1") }, 0, "a second run R9"},
		{"project missing", func(h *history, _ []clientLog) { h.events = h.events[1:] }, 0, "acknowledged project_create of P"},
		{"task missing", func(h *history, _ []clientLog) {
			h.events = append(h.events[:2], h.events[3:]...)
		}, 0, "acknowledged project_task_add of task T1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, l := good(), logs()
			tc.edit(h, l)
			c, probs := h.check(l)
			require.NotEmpty(t, probs, "the checker must see it")
			assert.Contains(t, strings.Join(probs, "\n"), tc.finds)
			assert.Equal(t, tc.lost, c.Lost)
		})
	}
}

// TestReadWAL checks the WAL reader against SQLite's own recovery: on a
// ledger file in WAL mode written through sqlitetest.Raw (one commit per
// append, no checkpoint yet), every frame is in use, and a copy of the
// file and its log holds every append when SQLite opens it; with the last
// frame's checksum broken, the reader ends the log at the commit before
// it, and SQLite, opening that copy, recovers exactly the appends before
// the last one.
func TestReadWAL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "w.db")
	raw, err := sqlitetest.OpenRaw(ctx, path, 0)
	require.NoError(t, err)
	defer raw.Close()
	const appends = 20
	for i := range appends {
		_, err := raw.Append(ctx, []driver.Event{{ProjectID: "p", Kind: "heartbeat", Data: `{"pad":"` + strings.Repeat("x", 100*i) + `"}`}})
		require.NoError(t, err)
	}
	w, err := readWAL(path + "-wal")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, w.Frames, appends, "at least a frame per commit")
	assert.Equal(t, 4096, w.PageSize)
	assert.Equal(t, fileSize(path+"-wal"), w.Size)
	assert.Equal(t, w.Size, w.Live(), "nothing but the current log in the file")

	// What SQLite recovers from a copy of the file and its log.
	recovered := func(name string, wal []byte) int {
		t.Helper()
		db, err := os.ReadFile(path)
		require.NoError(t, err)
		cp := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(cp, db, 0o600))
		require.NoError(t, os.WriteFile(cp+"-wal", wal, 0o600))
		c, err := sqlitetest.ReadAll(ctx, cp)
		require.NoError(t, err)
		return len(c.Events)
	}
	b, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	assert.Equal(t, appends, recovered("whole.db", b), "SQLite recovers every commit of the log")

	// Break the last frame's page: the log ends at the commit before it.
	b[len(b)-100] ^= 0xff
	broken := filepath.Join(dir, "broken-wal")
	require.NoError(t, os.WriteFile(broken, b, 0o600))
	w2, err := readWAL(broken)
	require.NoError(t, err)
	assert.Less(t, w2.Frames, w.Frames)
	assert.Positive(t, w2.Frames)
	assert.Equal(t, appends-1, recovered("broken.db", b), "SQLite drops the last commit too")

	missing, err := readWAL(filepath.Join(dir, "none"))
	require.NoError(t, err)
	assert.Equal(t, walInfo{}, missing)
}

// TestParseFlags checks the short and long settings and that a flag given
// explicitly wins over --long.
func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"crash", "readers"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"crash", "readers"}, c.Checks)
	assert.Equal(t, 15, c.Kills)
	assert.Equal(t, 64, c.Clients)
	assert.Equal(t, 5*time.Second, c.ReadFor)
	assert.NotZero(t, c.Seed)

	c, err = parseFlags([]string{"--long", "crash"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 200, c.Kills)
	assert.Equal(t, 60*time.Second, c.ReadFor)

	assert.Equal(t, 20, c.Outages)
	assert.False(t, c.PG)

	c, err = parseFlags([]string{"--long", "--kills", "3", "--seed", "7", "--pg", "--outages", "2", "crash"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3, c.Kills)
	assert.Equal(t, uint64(7), c.Seed)
	assert.True(t, c.PG)
	assert.Equal(t, 2, c.Outages)

	c, err = parseFlags([]string{"linear"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, faultKinds, c.Faults)
	assert.Equal(t, 3*time.Second, c.LinearFor)
	c, err = parseFlags([]string{"--long", "--faults", "kill,failover", "--failpoints", "head-check=off", "linear"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"kill", "failover"}, c.Faults)
	assert.Equal(t, 30*time.Second, c.LinearFor)
	assert.Equal(t, "head-check=off", c.Failpoints)

	for _, bad := range [][]string{{}, {"nope"}, {"--kills", "0", "crash"}, {"--faults", "kill,quake", "linear"},
		{"--faults", "kill,kill", "linear"}} {
		_, err := parseFlags(bad, io.Discard)
		assert.Error(t, err, "%v", bad)
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 49852: "49,852", 1234567: "1,234,567", -1000: "-1,000"} {
		assert.Equal(t, want, commas(n))
	}
}

// TestProjectOf checks the state comparison: the same project in two
// encodings (key order, the rest of the status) compares equal, a
// different one does not, and the difference is shown.
func TestProjectOf(t *testing.T) {
	a, err := projectOf([]byte(`{"version":"1","pid":7,"project":{"kind":"tasks","project_id":"P","tasks":[{"id":"T","progress":"c1-2"}]}}`))
	require.NoError(t, err)
	b, err := projectOf([]byte(`{"project":{"project_id":"P","tasks":[{"progress":"c1-2","id":"T"}],"kind":"tasks"},"pid":9}`))
	require.NoError(t, err)
	assert.Equal(t, a, b)
	c, err := projectOf([]byte(`{"project":{"kind":"tasks","project_id":"P","tasks":[{"id":"T","progress":"c1-3"}]}}`))
	require.NoError(t, err)
	assert.NotEqual(t, a, c)
	assert.Contains(t, firstDifference(c, a), `"c1-3"`)
	_, err = projectOf([]byte(`{"version":"1"}`))
	assert.Error(t, err, "a reply without a project")
}

// needPG skips t where PostgreSQL is not installed, unless
// $SCV_REQUIRE_PG says it must be (as in CI): then it fails.
func needPG(t *testing.T) {
	t.Helper()
	if pgcluster.Installed() {
		return
	}
	msg := "PostgreSQL is not installed (Debian: apt-get install postgresql)"
	if os.Getenv(pgtest.RequireEnv) != "" {
		t.Fatal(msg + "; " + pgtest.RequireEnv + " is set, so this is a failure")
	}
	t.Skip(msg)
}

// TestReliabilityLinear runs the linear check's short form under every
// fault kind: three daemons on one PostgreSQL ledger, 16 clients for a few
// seconds each, and each history must be linearizable, with nothing
// acknowledged lost and every daemon taking writes after the faults. The
// long form is `scvrel --long linear`, in `make reliability`.
func TestReliabilityLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon, starts PostgreSQL and three daemons, and injects faults")
	}
	needPG(t)
	e := testEnv(t)
	e.cfg.LinearFor = shortConfig().LinearFor
	results := linearCheck(context.Background(), e)
	require.Len(t, results, len(faultKinds))
	for i, r := range results {
		assert.Equal(t, "linear/"+faultKinds[i], r.Name)
		for _, p := range r.Problems {
			t.Errorf("%s: problem: %s", r.Name, p)
		}
		assert.Contains(t, r.Figure, "; 0 violations;", r.Name)
		assert.Contains(t, r.Figure, " 0 lost", r.Name)
		if faultKinds[i] != "none" {
			assert.NotContains(t, r.Figure, "no faults", "%s: the faults were injected", r.Name)
		}
		t.Logf("RELIABILITY: %s", r.Line())
	}
}

// TestLinearCatchesHeadCheckOff: a fleet whose daemons trust their caches
// (the failpoint head-check=off) double-claims tasks and answers stale
// reads, and the linear check must say so: the check can fail.
func TestLinearCatchesHeadCheckOff(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon and starts PostgreSQL and three daemons")
	}
	needPG(t)
	e := testEnv(t)
	e.cfg.LinearFor, e.cfg.Faults, e.cfg.Failpoints = 2*time.Second, []string{"none"}, "head-check=off"
	results := linearCheck(context.Background(), e)
	require.Len(t, results, 1)
	r := results[0]
	t.Log(r.Line())
	require.False(t, r.Pass(), "the broken variant passed the check")
	assert.NotContains(t, r.Figure, "; 0 violations;")
	assert.Contains(t, r.Problems[0], "is not linearizable: ")
}
