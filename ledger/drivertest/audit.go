package drivertest

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// testChain: every event is linked to its project's previous one.
func testChain(t *testing.T, h Harness) {
	t.Run("Links", func(t *testing.T) {
		t.Parallel()
		// Each stored hash is ledger.ChainHash of the event's fields and
		// its project's previous hash (for the first event after a
		// dropped history, the snapshot's chain head); a project's
		// ChainHead is its newest event's hash, after a restart too.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		a, b, c := newFixture(t, l, "alpha"), newFixture(t, l, "beta"), newFixture(t, l, "gamma")
		for i := range 10 {
			for _, f := range []fixture{a, b, c} {
				exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: strings.Repeat("é", i)})
			}
		}
		_, err := l.Compact(ctx, b.project, ledger.CompactOptions{Retain: 4})
		require.NoError(t, err)
		dropped, err := l.Compact(ctx, c.project, ledger.CompactOptions{Retain: 4, Drop: true})
		require.NoError(t, err)
		for _, f := range []fixture{a, b, c} {
			exec(t, l, reducer.RecordHeartbeat{Project: f.project, RunID: f.run})
		}

		var snap driver.Snapshot
		e.read(func(r driver.Reader) (err error) {
			snap, _, err = r.LatestSnapshot(ctx, c.project, maxSeq)
			return err
		})
		prev := map[string][]byte{c.project: snap.ChainHead}
		rows := e.history()
		for _, r := range rows {
			require.Len(t, r.Hash, ledger.HashSize, "event %d", r.Sequence)
			want := ledger.ChainHash(prev[r.ProjectID], r.Sequence, r.ProjectID, r.Kind, r.Timestamp, r.TimestampMs, r.Data)
			assert.Equal(t, want, r.Hash, "event %d is not linked to its project's previous event", r.Sequence)
			assert.Equal(t, r.TimestampMs/1000, r.Timestamp, "event %d", r.Sequence)
			prev[r.ProjectID] = r.Hash
		}
		assert.Greater(t, ofProject(rows, c.project)[0].Sequence, dropped.Sequence)
		for _, f := range []fixture{a, b, c} {
			assert.Equal(t, prev[f.project], project(t, l, f.project).ChainHead, f.name)
		}
		l = e.restart(l, ledger.Options{})
		for _, f := range []fixture{a, b, c} {
			assert.Equal(t, prev[f.project], project(t, l, f.project).ChainHead, "%s after a restart", f.name)
		}
	})
}

// verifiable makes a database with two projects, alpha (events 1 to 23)
// and beta (24 to 46), and returns alpha's fixture; the ledger is closed.
func verifiable(t *testing.T, e *env) fixture {
	t.Helper()
	l := e.open(ledger.Options{})
	var first fixture
	for i, name := range []string{"alpha", "beta"} {
		f := newFixture(t, l, name)
		if i == 0 {
			first = f
		}
		for i := range 20 {
			exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: strings.Repeat("x", i)})
		}
	}
	require.NoError(t, l.Close())
	return first
}

// compacted makes a database with alpha, 33 events, compacted up to 28
// (archived, or dropped), and returns the fixture and the snapshot.
func compacted(t *testing.T, e *env, drop bool) (fixture, driver.Snapshot) {
	t.Helper()
	l := e.open(ledger.Options{})
	f := newFixture(t, l, "alpha")
	for range 30 {
		exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "p"})
	}
	c, err := l.Compact(context.Background(), f.project, ledger.CompactOptions{Retain: 5, Drop: drop})
	require.NoError(t, err)
	require.Equal(t, uint64(28), c.Sequence)
	require.NoError(t, l.Close())
	var sn driver.Snapshot
	e.read(func(r driver.Reader) (err error) {
		sn, _, err = r.LatestSnapshot(context.Background(), f.project, maxSeq)
		return err
	})
	require.Empty(t, problems(e.verify(ledger.VerifyOptions{})))
	return f, sn
}

// testVerify: Verify passes an intact database and names the first event
// of each kind of tampering.
func testVerify(t *testing.T, h Harness) {
	t.Run("Intact", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, h)
		f := verifiable(t, e)
		var progress []string
		rep := e.verify(ledger.VerifyOptions{Progress: func(done, total int) { progress = append(progress, strings.Repeat("+", done*10/total)) }})
		assert.Empty(t, problems(rep))
		assert.Contains(t, []string{"ok", ""}, rep.Integrity)
		assert.True(t, rep.ProjectsChecked, "the projects table was compared with the history")
		assert.Equal(t, 46, rep.Events)
		require.Len(t, rep.Chains, 2)
		assert.Equal(t, "alpha", rep.Chains[0].Name)
		assert.Equal(t, "beta", rep.Chains[1].Name)
		assert.Equal(t, 23, rep.Chains[0].Events)
		assert.Equal(t, []string{"++++++++++"}, progress, "progress at the end")

		// The heads are the ledger's own.
		l := e.open(ledger.Options{})
		assert.Equal(t, project(t, l, f.project).ChainHead, rep.Chains[0].Head)
		assert.Equal(t, project(t, l, "beta").ChainHead, rep.Chains[1].Head)
		require.NoError(t, l.Close())

		// One project, by name, with its saved head.
		one := e.verify(ledger.VerifyOptions{Project: "alpha", Heads: map[string][]byte{f.project: rep.Chains[0].Head}})
		assert.Empty(t, problems(one))
		require.Len(t, one.Chains, 1)
		assert.Equal(t, 23, one.Events)
		_, err := ledger.Verify(context.Background(), e.readOnly(), ledger.VerifyOptions{Project: "nope"})
		assert.ErrorIs(t, err, reducer.ErrNotFound)

		// A saved head of a project with no events is a problem.
		bad := e.verify(ledger.VerifyOptions{Heads: map[string][]byte{"ghost": rep.Chains[0].Head}})
		assert.Equal(t, "ghost", firstProblem(t, bad).ProjectID)
	})

	forge := func(state []byte) []byte {
		return bytes.Replace(state, []byte(`"progress":"p"`), []byte(`"progress":"forged"`), 1)
	}
	for _, tc := range []struct {
		name string
		// setup builds the database, tamper changes it; the first
		// problem must be at seq and say what.
		setup  func(t *testing.T, e *env) (fixture, driver.Snapshot)
		tamper func(f fixture, sn driver.Snapshot) []Tampering
		seq    uint64
		what   string
	}{
		{"EditedData", plain, func(fixture, driver.Snapshot) []Tampering {
			return []Tampering{EditEvent{Sequence: 10, Data: `{"run_id":"x","progress":"forged"}`}}
		}, 10, "hash does not match"},
		{"EditedTimestamp", plain, func(fixture, driver.Snapshot) []Tampering {
			return []Tampering{EditEvent{Sequence: 7, ShiftMs: 1000}}
		}, 7, "hash does not match"},
		{"DeletedEvent", plain, func(fixture, driver.Snapshot) []Tampering {
			return []Tampering{DeleteEvent{Sequence: 12}}
		}, 13, "missing or out of order"},
		{"SwappedEvents", plain, func(fixture, driver.Snapshot) []Tampering {
			return []Tampering{SwapEvents{A: 14, B: 15}}
		}, 14, "hash does not match"},
		{"MovedToAnotherProject", plain, func(fixture, driver.Snapshot) []Tampering {
			return []Tampering{EditEvent{Sequence: 9, ProjectID: "someone-else"}}
		}, 9, "hash does not match"},
		{"RowTheLedgerDidNotWrite", plain, func(f fixture, _ driver.Snapshot) []Tampering {
			return []Tampering{InsertEvent{Event: driver.Event{ProjectID: f.project, Kind: reducer.KindHeartbeat,
				Timestamp: 1_900_000_000, TimestampMs: 1_900_000_000_000, Data: `{}`}}}
		}, 47, "no hash"},
		{"EditedArchivedEvent", archived, func(fixture, driver.Snapshot) []Tampering {
			return []Tampering{EditEvent{Sequence: 10, Data: `{"run_id":"x","progress":"forged"}`}}
		}, 10, "hash does not match"},
		{"DeletedArchivedEvent", archived, func(fixture, driver.Snapshot) []Tampering {
			return []Tampering{DeleteEvent{Sequence: 10}}
		}, 11, "missing or out of order"},
		{"EditedSnapshot", archived, func(f fixture, sn driver.Snapshot) []Tampering {
			return []Tampering{EditSnapshot{ProjectID: f.project, Sequence: sn.Sequence, State: forge(sn.State)}}
		}, 28, "recorded state hash"},
		{"EditedSnapshotHashFixed", archived, func(f fixture, sn driver.Snapshot) []Tampering {
			return []Tampering{EditSnapshot{ProjectID: f.project, Sequence: sn.Sequence, State: forge(sn.State), FixHash: true}}
		}, 28, "differs from the state the events before it derive"},
		{"EditedDroppedSnapshot", dropped, func(f fixture, sn driver.Snapshot) []Tampering {
			return []Tampering{EditSnapshot{ProjectID: f.project, Sequence: sn.Sequence, State: forge(sn.State)}}
		}, 28, "dropped"},
		{"EditedDroppedSnapshotHashFixed", dropped, func(f fixture, sn driver.Snapshot) []Tampering {
			// The task done in the snapshot, its hash made to match: the
			// chain cannot tell, the projects table's summary can.
			done := bytes.Replace(sn.State, []byte(`"status":"running"`), []byte(`"status":"done"`), 1)
			return []Tampering{EditSnapshot{ProjectID: f.project, Sequence: sn.Sequence, State: done, FixHash: true}}
		}, 33, "projects table"},
		{"CutTail", plain, func(fixture, driver.Snapshot) []Tampering {
			return []Tampering{DeleteEvent{Sequence: 46}, DeleteEvent{Sequence: 45}}
		}, 46, "projects table says head 46 where the history derives 44"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, h)
			f, sn := tc.setup(t, e)
			e.tamper(tc.tamper(f, sn)...)
			rep := e.verify(ledger.VerifyOptions{})
			pr := firstProblem(t, rep)
			assert.Equal(t, tc.seq, pr.Sequence, "%s", problems(rep))
			assert.Contains(t, pr.What, tc.what, "%s", problems(rep))
			assert.NotEmpty(t, pr.ProjectID)
		})
	}

	t.Run("CutTailWithItsRowFixed", func(t *testing.T) {
		t.Parallel()
		// Cutting events off the end, and fixing the projects row to
		// match, leaves a chain that is whole as far as it goes: only a
		// head saved before tells.
		e := newEnv(t, h)
		f := verifiable(t, e)
		saved := e.verify(ledger.VerifyOptions{}).Chains[0].Head
		row := e.row(f.project)
		e.tamper(DeleteEvent{Sequence: 23})
		assert.NotEmpty(t, problems(e.verify(ledger.VerifyOptions{})), "the projects row still says 23")
		row.Head, row.Live = 22, row.Live-1
		e.tamper(SetProjectRow{Row: row})
		assert.Empty(t, problems(e.verify(ledger.VerifyOptions{})), "a chain alone cannot see a cut tail")
		pr := firstProblem(t, e.verify(ledger.VerifyOptions{Heads: map[string][]byte{f.project: saved}}))
		assert.Equal(t, f.project, pr.ProjectID)
		assert.Equal(t, uint64(22), pr.Sequence)
		assert.Contains(t, pr.What, "saved head")
	})

	t.Run("ProjectsTable", func(t *testing.T) {
		t.Parallel()
		// Verify compares the projects table with what the history
		// derives: every row, and a row for every project.
		for _, tc := range []struct {
			name string
			edit func(row driver.Project) Tampering
			what string
		}{
			{"head", func(r driver.Project) Tampering { r.Head++; return SetProjectRow{Row: r} }, "head 24 where the history derives 23"},
			{"status", func(r driver.Project) Tampering { r.Status = "failed"; return SetProjectRow{Row: r} }, "status failed where the history derives active"},
			{"phase", func(r driver.Project) Tampering { r.Phase = "staging"; return SetProjectRow{Row: r} }, "phase staging"},
			{"tasks", func(r driver.Project) Tampering { r.Tasks = 7; return SetProjectRow{Row: r} }, "tasks 7 where the history derives 1"},
			{"done", func(r driver.Project) Tampering { r.Done = 1; return SetProjectRow{Row: r} }, "done 1 where the history derives 0"},
			{"running", func(r driver.Project) Tampering { r.Running = 0; return SetProjectRow{Row: r} }, "running 0 where the history derives 1"},
			{"name", func(r driver.Project) Tampering { r.Name = "renamed"; return SetProjectRow{Row: r} }, "name renamed where the history derives alpha"},
			{"deleted", func(r driver.Project) Tampering { return DeleteProjectRow{ID: r.ID} }, "no row in the projects table"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, h)
				f := verifiable(t, e)
				e.tamper(tc.edit(e.row(f.project)))
				rep := e.verify(ledger.VerifyOptions{})
				pr := firstProblem(t, rep)
				assert.Equal(t, f.project, pr.ProjectID)
				assert.Contains(t, pr.What, tc.what, "%s", problems(rep))
				assert.Len(t, rep.Problems, 1, "%s", problems(rep))
				assert.Empty(t, problems(e.verify(ledger.VerifyOptions{Project: "beta"})), "beta's row is sound")
			})
		}

		t.Run("extra", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, h)
			verifiable(t, e)
			ghost := id()
			e.tamper(SetProjectRow{Row: driver.Project{ID: ghost, Name: "ghost", CreatedSeq: 47, Head: 47, Summarized: true, Status: "active", Phase: "discovery"}})
			pr := firstProblem(t, e.verify(ledger.VerifyOptions{}))
			assert.Equal(t, ghost, pr.ProjectID)
			assert.Contains(t, pr.What, "does not create")
		})

		t.Run("unsummarized", func(t *testing.T) {
			t.Parallel()
			// A row not summarized yet (a migrated database) is compared
			// for its name and head only.
			e := newEnv(t, h)
			f := verifiable(t, e)
			row := e.row(f.project)
			row.Summarized, row.Status, row.Phase, row.Tasks, row.Done, row.Running = false, "", "", 0, 0, 0
			e.tamper(SetProjectRow{Row: row})
			rep := e.verify(ledger.VerifyOptions{})
			assert.Empty(t, problems(rep))
			// and the next ledger summarizes it at open.
			l := e.open(ledger.Options{})
			require.NoError(t, l.Close())
			assert.True(t, e.row(f.project).Summarized)
			assert.Equal(t, "active", e.row(f.project).Status)
			assert.Empty(t, problems(e.verify(ledger.VerifyOptions{})))
		})
	})
}

func plain(t *testing.T, e *env) (fixture, driver.Snapshot) {
	return verifiable(t, e), driver.Snapshot{}
}
func archived(t *testing.T, e *env) (fixture, driver.Snapshot) { return compacted(t, e, false) }
func dropped(t *testing.T, e *env) (fixture, driver.Snapshot)  { return compacted(t, e, true) }

// bundleDB makes a database with two projects, alpha compacted twice (its
// history split between archive and live tail, two snapshots), and
// returns alpha's fixture and chain head; the ledger is closed.
func bundleDB(t *testing.T, e *env) (fixture, []byte) {
	t.Helper()
	ctx := context.Background()
	l := e.open(ledger.Options{})
	f := newFixture(t, l, "alpha")
	f.progress(t, l, 30, "step")
	other := newFixture(t, l, "beta")
	exec(t, l, reducer.ProgressRun{Project: other.project, RunID: other.run, Progress: `with "quotes" & <tags>`})
	_, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 10})
	require.NoError(t, err)
	for range 20 {
		exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "more <steps> & \"more\" \u2028"})
	}
	_, err = l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 5})
	require.NoError(t, err)
	exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "last"})
	head := project(t, l, f.project).ChainHead
	require.NoError(t, l.Close())
	return f, head
}

func export(t *testing.T, drv driver.Driver, project string) ([]byte, ledger.Manifest) {
	t.Helper()
	var buf bytes.Buffer
	m, err := ledger.Export(context.Background(), drv, project, &buf)
	require.NoError(t, err)
	return buf.Bytes(), m
}

// testBundle: Export writes a self-verifying bundle; VerifyBundle finds it
// intact, and finds every change to it.
func testBundle(t *testing.T, h Harness) {
	t.Run("Intact", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, h)
		f, head := bundleDB(t, e)
		b, m := export(t, e.readOnly(), f.name)
		byID, _ := export(t, e.readOnly(), f.project)
		assert.Equal(t, b, byID, "by ID or by name, the same bytes")

		hist := ofProject(e.history(), f.project)
		n := len(hist)
		require.Greater(t, n, len(e.live(f.project)), "part of the history is archived")
		assert.Equal(t, ledger.BundleFormat, m.Format)
		assert.Equal(t, f.project, m.ProjectID)
		assert.Equal(t, f.name, m.Name)
		assert.Equal(t, n, m.Events)
		assert.Equal(t, 2, m.Snapshots)
		assert.Equal(t, hist[0].Sequence, m.FirstSequence)
		assert.Equal(t, hist[n-1].Sequence, m.LastSequence)
		assert.Equal(t, hex.EncodeToString(head), m.ChainHead)

		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		require.Len(t, lines, n+2+1)
		for i, line := range lines {
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &v))
			switch {
			case i < n:
				assert.Equal(t, "event", v["type"])
				assert.Equal(t, f.project, v["project_id"])
				assert.Equal(t, float64(hist[i].Sequence), v["sequence"])
				assert.Equal(t, hist[i].Data, v["data"], "the data is the stored text, byte for byte")
				assert.Equal(t, hex.EncodeToString(hist[i].Hash), v["hash"])
			case i < n+2:
				assert.Equal(t, "snapshot", v["type"])
			default:
				assert.Equal(t, "manifest", v["type"])
			}
		}

		rep, err := ledger.VerifyBundle(bytes.NewReader(b), nil)
		require.NoError(t, err)
		assert.Empty(t, problems(rep))
		assert.Empty(t, rep.Integrity, "no database")
		assert.False(t, rep.ProjectsChecked)
		assert.Equal(t, n, rep.Events)
		assert.Equal(t, 2, rep.Snapshots)
		require.Len(t, rep.Chains, 1)
		assert.Equal(t, head, rep.Chains[0].Head)
		assert.Equal(t, f.name, rep.Chains[0].Name)

		rep, err = ledger.VerifyBundle(bytes.NewReader(b), map[string][]byte{f.project: head})
		require.NoError(t, err)
		assert.Empty(t, problems(rep), "against the saved head")
		rep, err = ledger.VerifyBundle(bytes.NewReader(b), map[string][]byte{f.project: bytes.Repeat([]byte{1}, ledger.HashSize)})
		require.NoError(t, err)
		assert.Contains(t, firstProblem(t, rep).What, "saved head")

		_, err = ledger.Export(context.Background(), e.readOnly(), "nope", &bytes.Buffer{})
		assert.ErrorIs(t, err, reducer.ErrNotFound)
	})

	t.Run("Tampered", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, h)
		f, _ := bundleDB(t, e)
		b, m := export(t, e.readOnly(), f.project)
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		n := m.Events
		field := func(line, key string) any {
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &v))
			return v[key]
		}
		edit := func(line, key string, val any) string {
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &v))
			v[key] = val
			out, err := json.Marshal(v)
			require.NoError(t, err)
			return string(out)
		}
		without := func(i int) []string { return append(append([]string{}, lines[:i]...), lines[i+1:]...) }
		with := func(i int, line string) []string {
			out := append([]string{}, lines...)
			out[i] = line
			return out
		}
		seqOf := func(i int) uint64 { return uint64(field(lines[i], "sequence").(float64)) }
		mid := n / 2
		data := field(lines[mid], "data").(string)
		require.Contains(t, data, "step")
		state := field(lines[n], "state").(string)

		for _, tc := range []struct {
			name  string
			lines []string
			seq   uint64 // the sequence the first problem names; 0: any
			what  string
		}{
			{"edited data", with(mid, edit(lines[mid], "data", strings.Replace(data, "step", "stop", 1))), seqOf(mid), "hash does not match"},
			{"edited timestamp", with(1, edit(lines[1], "timestamp_ms", field(lines[1], "timestamp_ms").(float64)+1)), seqOf(1), "hash does not match"},
			{"removed event", without(mid), seqOf(mid + 1), "hash does not match"},
			{"removed first event", without(0), seqOf(1), "hash does not match"},
			{"removed last event", without(n - 1), 0, "manifest"},
			{"swapped events", with(mid+1, lines[mid]), seqOf(mid), "out of sequence order"},
			{"no manifest", lines[:len(lines)-1], 0, "truncated"},
			{"removed snapshot", without(n), 0, "snapshots"},
			{"edited snapshot state", with(n, edit(lines[n], "state", strings.Replace(state, f.name, "gamma", 1))), seqOf(n), "state hash"},
			{"edited snapshot chain head", with(n, edit(lines[n], "chain_head", hex.EncodeToString(make([]byte, 32)))), seqOf(n), "chain head"},
			{"edited manifest", with(len(lines)-1, edit(lines[len(lines)-1], "events", n+1)), 0, "manifest"},
			{"line after manifest", append(append([]string{}, lines...), lines[0]), 0, "after the manifest"},
			{"not JSON", with(2, "{nope"), 0, "not JSON"},
			{"another project's event", with(2, edit(lines[2], "project_id", "someone-else")), 0, "in a bundle of"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rep, err := ledger.VerifyBundle(strings.NewReader(strings.Join(tc.lines, "\n")+"\n"), nil)
				require.NoError(t, err)
				p := firstProblem(t, rep)
				if tc.seq != 0 {
					assert.Equal(t, tc.seq, p.Sequence, "%s", p)
				}
				assert.Contains(t, p.What, tc.what)
			})
		}
	})
}
