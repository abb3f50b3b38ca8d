package drivertest

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// ofProject is the events of evs of one project.
func ofProject(evs []driver.Event, project string) []driver.Event {
	var out []driver.Event
	for _, e := range evs {
		if e.ProjectID == project {
			out = append(out, e)
		}
	}
	return out
}

// heldRead is a driver whose next read, once asked for (holdNext), stops
// at its first History (a fold) until released.
type heldRead struct {
	driver.Driver
	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
}

// holdNext makes the next Read stop: entered is closed once its History
// is called, and release lets it go on.
func (d *heldRead) holdNext() (entered <-chan struct{}, release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	en, rel := make(chan struct{}), make(chan struct{})
	d.entered, d.release = en, rel
	return en, sync.OnceFunc(func() { close(rel) })
}

func (d *heldRead) Read(ctx context.Context, fn func(driver.Reader) error) error {
	d.mu.Lock()
	entered, release := d.entered, d.release
	d.entered, d.release = nil, nil
	d.mu.Unlock()
	if entered == nil {
		return d.Driver.Read(ctx, fn)
	}
	return d.Driver.Read(ctx, func(r driver.Reader) error {
		return fn(heldReader{r, sync.OnceFunc(func() { close(entered); <-release })})
	})
}

type heldReader struct {
	driver.Reader
	hold func()
}

func (r heldReader) History(ctx context.Context, projectID string, after, upTo uint64, fn func(driver.Event) error) error {
	r.hold()
	return r.Reader.History(ctx, projectID, after, upTo, fn)
}

// openHeld opens a ledger on a heldRead driver of a new database, with a
// project of 50 progress events.
func openHeld(t *testing.T, h Harness) (*env, *heldRead, *ledger.Ledger, fixture) {
	t.Helper()
	e := newEnv(t, h)
	d := &heldRead{Driver: h.Open(t, e.db)}
	l, err := ledger.Open(context.Background(), d, ledger.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	f := newFixture(t, l, "alpha")
	f.progress(t, l, 50, "step")
	return e, d, l, f
}

// waitHeld waits for the held read to begin (entered), failing if the
// compaction ends first (ended) or never reads.
func waitHeld(t *testing.T, entered <-chan struct{}, ended <-chan error) {
	t.Helper()
	select {
	case <-entered:
	case err := <-ended:
		t.Fatalf("the compaction read nothing outside the writer (%v)", err)
	case <-time.After(time.Minute):
		t.Fatal("the compaction began no read")
	}
}

// compactHeld starts a compaction of project whose first read is held
// (heldRead) and returns once that read has begun; the compaction goes on
// once release is called, and its error then arrives on ended (c holds
// its result after that).
func compactHeld(t *testing.T, d *heldRead, l *ledger.Ledger, project string, opts ledger.CompactOptions) (c *ledger.Compaction, ended <-chan error, release func()) {
	t.Helper()
	entered, release := d.holdNext()
	t.Cleanup(release)
	c = new(ledger.Compaction)
	done := make(chan error, 1)
	go func() {
		var err error
		*c, err = l.Compact(context.Background(), project, opts)
		done <- err
	}()
	waitHeld(t, entered, done)
	return c, done, release
}

// testCompaction: snapshots and compaction, archived or dropped.
func testCompaction(t *testing.T, h Harness) {
	t.Run("FoldWithoutTheWriter", func(t *testing.T) {
		t.Parallel()
		// A compaction derives the state at S in a read of its own, not
		// holding the writer: an append made while it folds commits
		// without waiting, stays live, and the compaction then stores
		// the state at the S it chose before the append.
		ctx := context.Background()
		e, d, l, f := openHeld(t, h)
		events := ofProject(e.history(), f.project)
		c, ended, release := compactHeld(t, d, l, f.project, ledger.CompactOptions{Retain: 10})
		appended := make(chan error, 1)
		go func() {
			_, err := l.Execute(ctx, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "meanwhile"})
			appended <- err
		}()
		select {
		case err := <-appended:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("an append waited for the compaction's fold")
		}
		release()
		require.NoError(t, <-ended)
		assert.Equal(t, events[len(events)-11].Sequence, c.Sequence, "S is chosen from the live tail before the append")
		assert.Equal(t, 11, c.Live, "the 10 retained and the append stay live")
		live := e.live(f.project)
		require.Len(t, live, 11)
		assert.Contains(t, live[10].Data, "meanwhile", "the append is the newest live event")
		want := viewOf(t, project(t, l, f.project))
		l = e.restart(l, ledger.Options{})
		assert.Equal(t, want, viewOf(t, project(t, l, f.project)), "snapshot and tail give the state the writer holds")
		assert.Empty(t, e.verify(ledger.VerifyOptions{}).Problems)
	})

	t.Run("PassedMeanwhile", func(t *testing.T) {
		t.Parallel()
		// A compaction that finds, once it holds the writer, that another
		// compacted past its S meanwhile compacts nothing.
		ctx := context.Background()
		e, d, l, f := openHeld(t, h)
		_, first, release := compactHeld(t, d, l, f.project, ledger.CompactOptions{Retain: 20})
		second, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 5})
		require.NoError(t, err)
		require.Positive(t, second.Sequence)
		release()
		require.NoError(t, <-first)
		var snaps []driver.Snapshot
		e.read(func(r driver.Reader) (err error) {
			snaps, err = r.Snapshots(ctx, f.project)
			return err
		})
		require.Len(t, snaps, 1, "the first, whose S was passed, stored no snapshot")
		assert.Equal(t, second.Sequence, snaps[0].Sequence)
		assert.Len(t, e.live(f.project), 5)
		assert.Empty(t, e.verify(ledger.VerifyOptions{}).Problems)
	})

	t.Run("Archive", func(t *testing.T) {
		t.Parallel()
		// A project compacted keeping its 100 newest events live: exactly
		// those stay live, the rest is archived row for row, reads give
		// the same answers (with compacted_before), also after a
		// restart, and the chain goes on.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		f.progress(t, l, 250, "step")
		other := newFixture(t, l, "beta")
		before := e.history()
		want := viewOf(t, project(t, l, f.project))
		due, err := l.CompactDue(ctx, 200)
		require.NoError(t, err)
		assert.Equal(t, []string{f.project}, due, "alpha has more than 200 live events, beta fewer")

		c, err := l.Compact(ctx, "alpha", ledger.CompactOptions{Retain: 100})
		require.NoError(t, err)
		assert.Equal(t, f.project, c.ProjectID)
		assert.Equal(t, 100, c.Live)
		assert.Equal(t, 253-100, c.Archived)
		live := e.live(f.project)
		require.Len(t, live, 100)
		assert.Greater(t, live[0].Sequence, c.Sequence, "the live tail starts after S")
		assert.Equal(t, ofProject(before, f.project)[152].Sequence, c.Sequence, "S is the newest event compacted")
		assert.Equal(t, before, e.history(), "the archive and the tail hold every event exactly, hashes included")
		assert.Equal(t, 100, e.row(f.project).Live)
		due, err = l.CompactDue(ctx, 200)
		require.NoError(t, err)
		assert.Empty(t, due)

		var snaps []driver.Snapshot
		e.read(func(r driver.Reader) (err error) {
			snaps, err = r.Snapshots(ctx, f.project)
			return err
		})
		require.Len(t, snaps, 1)
		sn := snaps[0]
		assert.Equal(t, c.Sequence, sn.Sequence)
		assert.Equal(t, reducer.SnapshotVersion, sn.Version)
		assert.Equal(t, ofProject(before, f.project)[152].Hash, sn.ChainHead, "the chain head at S")
		atS := foldRows(t, ofProject(before, f.project)[:153])[f.project]
		wantState, err := reducer.Snapshot(atS)
		require.NoError(t, err)
		assert.Equal(t, wantState, sn.State, "the state at S")

		// Reads: the same state; a page that reaches back before S is
		// marked.
		assert.Equal(t, want, viewOf(t, project(t, l, f.project)))
		page, err := l.EventsPage(ctx, f.project, 0, 0)
		require.NoError(t, err)
		assert.Equal(t, c.Sequence, page.CompactedBefore)
		assert.Equal(t, live, page.Rows, "the retained events after S")
		page, err = l.EventsPage(ctx, f.project, c.Sequence-1, 0)
		require.NoError(t, err)
		assert.Equal(t, c.Sequence, page.CompactedBefore, "one before S still reaches back")
		page, err = l.EventsPage(ctx, f.project, c.Sequence, 0)
		require.NoError(t, err)
		assert.Zero(t, page.CompactedBefore, "reading from S on carries no mark")
		assert.Equal(t, live, page.Rows)
		page, err = l.EventsPage(ctx, other.project, 0, 0)
		require.NoError(t, err)
		assert.Zero(t, page.CompactedBefore, "another project is untouched")
		assert.Len(t, page.Rows, 3)

		// After a restart: the same state, from the snapshot plus the
		// tail; the chain goes on; verify walks archive and tail as one.
		l = e.restart(l, ledger.Options{})
		assert.Equal(t, want, viewOf(t, project(t, l, f.project)))
		exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "after"})
		rep := e.verify(ledger.VerifyOptions{})
		assert.Empty(t, problems(rep))
		assert.Equal(t, 1, rep.Snapshots)

		// Compacting again keeping nothing live folds everything, on top
		// of the first snapshot.
		c2, err := l.Compact(ctx, "alpha", ledger.CompactOptions{Retain: 0})
		require.NoError(t, err)
		assert.Zero(t, c2.Live)
		assert.Equal(t, 101, c2.Archived)
		assert.Empty(t, e.live(f.project))
		p := viewOf(t, project(t, l, f.project))
		page, err = l.EventsPage(ctx, f.project, 0, 0)
		require.NoError(t, err)
		assert.Equal(t, c2.Sequence, page.CompactedBefore, "the latest snapshot's S")
		assert.Empty(t, page.Rows)
		l = e.restart(l, ledger.Options{})
		assert.Equal(t, p, viewOf(t, project(t, l, f.project)))
		assert.Equal(t, viewOf(t, foldRows(t, e.history())[f.project]), p, "snapshot + tail equals the full history's fold")
		rep = e.verify(ledger.VerifyOptions{})
		assert.Empty(t, problems(rep))
		assert.Equal(t, 2, rep.Snapshots)
	})

	t.Run("Steps", func(t *testing.T) {
		t.Parallel()
		// A tail longer than the step is compacted in steps, oldest
		// first, each a snapshot of its own with the events up to it
		// moved: 203 events to compact in steps of 40 leave 6 snapshots.
		// The whole compaction's S is chosen by its first read: an
		// append made meanwhile stays live. The result sums the steps;
		// the archive and tail still hold every event; state, restart
		// and verify agree.
		ctx := context.Background()
		e, d, l, f := openHeld(t, h)
		f.progress(t, l, 200, "more") // 253 events
		before := ofProject(e.history(), f.project)
		require.Len(t, before, 253)
		c, ended, release := compactHeld(t, d, l, f.project, ledger.CompactOptions{Retain: 50, Step: 40})
		exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "meanwhile"})
		release()
		require.NoError(t, <-ended)
		assert.Equal(t, before[202].Sequence, c.Sequence, "S, chosen before the append")
		assert.Equal(t, 203, c.Archived, "the steps' sum")
		assert.Equal(t, 51, c.Live, "the 50 retained and the append")
		live := e.live(f.project)
		require.Len(t, live, 51)
		assert.Contains(t, live[50].Data, "meanwhile")

		var snaps []driver.Snapshot
		e.read(func(r driver.Reader) (err error) {
			snaps, err = r.Snapshots(ctx, f.project)
			return err
		})
		var at []uint64
		for _, sn := range snaps {
			at = append(at, sn.Sequence)
		}
		var want []uint64
		for _, i := range []int{39, 79, 119, 159, 199, 202} {
			want = append(want, before[i].Sequence)
		}
		assert.Equal(t, want, at, "one snapshot per step, each at the step's newest event")
		assert.Equal(t, before, ofProject(e.history(), f.project)[:253], "archive and tail hold every event")

		view := viewOf(t, project(t, l, f.project))
		l = e.restart(l, ledger.Options{})
		assert.Equal(t, view, viewOf(t, project(t, l, f.project)), "the last snapshot and the tail")
		assert.Equal(t, viewOf(t, foldRows(t, e.history())[f.project]), view, "equal the full history's fold")
		rep := e.verify(ledger.VerifyOptions{})
		assert.Empty(t, problems(rep))
		assert.Equal(t, 6, rep.Snapshots)
	})

	t.Run("Drop", func(t *testing.T) {
		t.Parallel()
		// The operator may drop what compaction folds instead of
		// archiving it. The state is the same, before and after a
		// restart; the chain from the snapshot on verifies.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		f.progress(t, l, 40, "step")
		other := newFixture(t, l, "beta")
		want := viewOf(t, project(t, l, f.project))
		before := e.history()

		c, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 10, Drop: true})
		require.NoError(t, err)
		assert.Equal(t, 33, c.Archived, "left the live tail")
		assert.Equal(t, 10, c.Live)
		assert.Equal(t, sortedBySeq(append(ofProject(before, f.project)[33:], ofProject(before, other.project)...)), e.history(),
			"dropped, not archived: only the live tail is left of alpha")
		assert.Equal(t, want, viewOf(t, project(t, l, f.project)))
		page, err := l.EventsPage(ctx, f.project, 0, 0)
		require.NoError(t, err)
		assert.Equal(t, c.Sequence, page.CompactedBefore)
		assert.Len(t, page.Rows, 10)
		exec(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "after"})
		want = viewOf(t, project(t, l, f.project))

		l = e.restart(l, ledger.Options{})
		assert.Equal(t, want, viewOf(t, project(t, l, "alpha")), "from the snapshot alone, and the tail")
		rep := e.verify(ledger.VerifyOptions{})
		assert.Empty(t, problems(rep))
		require.Len(t, rep.Chains, 2)
		assert.Equal(t, c.Sequence, rep.Chains[0].From, "alpha's chain starts from its snapshot")
		assert.Equal(t, "alpha", rep.Chains[0].Name)
		assert.Equal(t, 11, rep.Chains[0].Events)
		assert.Zero(t, rep.Chains[1].From, "beta's from its creation")
		// Name and projects row survive the drop of the project_created
		// event.
		exec(t, l, reducer.AddTask{Project: "alpha", TaskID: id(), Title: "still alpha"})
		_, err = l.Execute(ctx, reducer.CreateProject{ProjectID: id(), Name: "alpha", Workspace: t.TempDir()})
		assert.ErrorIs(t, err, reducer.ErrConflict, "the name is still taken")
	})

	t.Run("DropEverything", func(t *testing.T) {
		t.Parallel()
		// Compaction that drops and keeps nothing live (project_compact's
		// default retain is 0) leaves a project of one snapshot and no
		// event: it is served, verified, exported and time-travelled as
		// before, and a forged snapshot is still found.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		f.progress(t, l, 5, "step")
		other := newFixture(t, l, "beta")
		want := viewOf(t, project(t, l, f.project))
		c, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 0, Drop: true})
		require.NoError(t, err)
		assert.Equal(t, 8, c.Archived)
		assert.Empty(t, ofProject(e.history(), f.project), "not one event of alpha left")
		l = e.restart(l, ledger.Options{})
		assert.Equal(t, want, viewOf(t, project(t, l, "alpha")), "from its snapshot alone")
		head := project(t, l, f.project).ChainHead

		rep := e.verify(ledger.VerifyOptions{Heads: map[string][]byte{f.project: head}})
		assert.Empty(t, problems(rep), "a project compacted away entirely verifies")
		require.Len(t, rep.Chains, 2)
		alpha := rep.Chains[1]
		if rep.Chains[0].ProjectID == f.project {
			alpha = rep.Chains[0]
		}
		assert.Equal(t, ledger.ChainReport{ProjectID: f.project, Name: "alpha", Head: head, From: c.Sequence}, alpha)
		assert.Equal(t, 1, rep.Snapshots)

		p, err := ledger.ProjectAt(ctx, e.readOnly(), "alpha", c.Sequence)
		require.NoError(t, err)
		assert.Equal(t, want, viewOf(t, p))
		_, err = ledger.ProjectAt(ctx, e.readOnly(), "alpha", c.Sequence-1)
		assert.ErrorIs(t, err, reducer.ErrNotFound)

		var bundle bytes.Buffer
		m, err := ledger.Export(ctx, e.readOnly(), "alpha", &bundle)
		require.NoError(t, err)
		assert.Zero(t, m.Events)
		assert.Equal(t, 1, m.Snapshots)
		b := bundle.Bytes()
		brep, err := ledger.VerifyBundle(bytes.NewReader(b), map[string][]byte{f.project: head})
		require.NoError(t, err)
		assert.Empty(t, problems(brep), "its bundle verifies")
		require.Len(t, brep.Chains, 1)
		assert.Equal(t, c.Sequence, brep.Chains[0].From)
		brep, err = ledger.VerifyBundle(bytes.NewReader(bytes.Replace(b, []byte(`\"name\":\"alpha\"`), []byte(`\"name\":\"gamma\"`), 1)), nil)
		require.NoError(t, err)
		assert.Contains(t, firstProblem(t, brep).What, "dropped", "a forged snapshot in the bundle")

		// The snapshot is all the proof there is: a forged one is found.
		sn := func() driver.Snapshot {
			var sn driver.Snapshot
			e.read(func(r driver.Reader) (err error) {
				sn, _, err = r.LatestSnapshot(ctx, f.project, maxSeq)
				return err
			})
			return sn
		}()
		require.NoError(t, l.Close())
		e.tamper(EditSnapshot{ProjectID: f.project, Sequence: sn.Sequence, State: bytes.Replace(sn.State, []byte(`"step"`), []byte(`"forged"`), 1)})
		pr := firstProblem(t, e.verify(ledger.VerifyOptions{}))
		assert.Equal(t, c.Sequence, pr.Sequence)
		assert.Contains(t, pr.What, "dropped")
		assert.Empty(t, problems(e.verify(ledger.VerifyOptions{Project: other.name})), "beta is sound")
	})

	t.Run("NothingToCompact", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		before := e.contents()
		for _, retain := range []int{3, 1000, -1} {
			c, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: retain})
			require.NoError(t, err, "retain %d", retain)
			assert.Zero(t, c.Sequence, "retain %d", retain)
			assert.Zero(t, c.Archived)
			assert.Equal(t, 3, c.Live)
		}
		assert.Equal(t, before, e.contents(), "nothing written")
		_, err := l.Compact(ctx, "nope", ledger.CompactOptions{})
		assert.ErrorIs(t, err, reducer.ErrNotFound)
	})
}

func sortedBySeq(evs []driver.Event) []driver.Event {
	return slices.SortedFunc(slices.Values(evs), func(a, b driver.Event) int { return cmp.Compare(a.Sequence, b.Sequence) })
}

// testProjectAt: the state of a project as the ledger knew it after any
// sequence.
func testProjectAt(t *testing.T, h Harness) {
	t.Run("EverySequence", func(t *testing.T) {
		t.Parallel()
		// A task goes ready, running, done over sequences, with another
		// project's events interleaved: ProjectAt at every sequence is
		// a fold of the history up to it, by ID and by name, before and
		// after a compaction moved everything into the archive and a
		// snapshot.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		proj, task, run := id(), id(), id()
		other := newFixture(t, l, "beta")
		created := lastSeq(t, l, reducer.CreateProject{ProjectID: proj, Name: "acme", Workspace: t.TempDir()})
		added := lastSeq(t, l, reducer.AddTask{Project: proj, TaskID: task, Title: "build"})
		exec(t, l, reducer.ProgressRun{Project: other.project, RunID: other.run, Progress: "elsewhere"})
		started := lastSeq(t, l, reducer.StartRun{Project: proj, TaskID: task, RunID: run, Agent: "codex"})
		progressed := lastSeq(t, l, reducer.ProgressRun{Project: proj, RunID: run, Progress: "half"})
		finished := lastSeq(t, l, reducer.FinishRun{Project: proj, RunID: run, Status: reducer.RunSucceeded})
		last := lastSeq(t, l, reducer.ProgressRun{Project: other.project, RunID: other.run, Progress: "later"})
		all := e.history()

		at := func(ref string, seq uint64) *reducer.Project {
			t.Helper()
			p, err := ledger.ProjectAt(ctx, e.readOnly(), ref, seq)
			require.NoError(t, err, "ProjectAt(%s, %d)", ref, seq)
			return p
		}
		foldTo := func(seq uint64) view {
			var upTo []driver.Event
			for _, r := range all {
				if r.Sequence <= seq {
					upTo = append(upTo, r)
				}
			}
			return viewOf(t, foldRows(t, upTo)[proj])
		}
		statusAt := func(seq uint64) reducer.TaskStatus {
			tk, ok := at("acme", seq).Task(task)
			require.True(t, ok)
			return tk.Status
		}
		check := func(when string) {
			t.Helper()
			for s := created; s <= last; s++ {
				want := foldTo(s)
				assert.Equal(t, want, viewOf(t, at("acme", s)), "%s: acme at %d", when, s)
				assert.Equal(t, want, viewOf(t, at(proj, s)), "%s: by ID at %d", when, s)
			}
			assert.Equal(t, reducer.TaskReady, statusAt(added), when)
			assert.Equal(t, reducer.TaskRunning, statusAt(started), when)
			assert.Equal(t, reducer.TaskRunning, statusAt(progressed), when)
			assert.Equal(t, reducer.TaskDone, statusAt(finished), when)
			assert.Equal(t, viewOf(t, project(t, l, proj)), viewOf(t, at("acme", last)), "%s: at the head, the current state", when)

			_, err := ledger.ProjectAt(ctx, e.readOnly(), "acme", last+1)
			assert.ErrorIs(t, err, ledger.ErrBeyondHead, "%s: past the newest event", when)
			_, err = ledger.ProjectAt(ctx, e.readOnly(), "acme", 1<<62)
			assert.ErrorIs(t, err, ledger.ErrBeyondHead, when)
			_, err = ledger.ProjectAt(ctx, e.readOnly(), "acme", created-1)
			assert.ErrorIs(t, err, reducer.ErrNotFound, "%s: before the project existed", when)
			_, err = ledger.ProjectAt(ctx, e.readOnly(), "nope", last)
			assert.ErrorIs(t, err, reducer.ErrNotFound, "%s: a project never created", when)
		}
		check("live")

		c, err := l.Compact(ctx, "acme", ledger.CompactOptions{Retain: 0})
		require.NoError(t, err)
		require.Equal(t, finished, c.Sequence, "everything of acme in the snapshot")
		require.Empty(t, e.live(proj))
		check("compacted")

		// One more event after the snapshot: folded on top of it; before
		// the snapshot, from the archive.
		after := lastSeq(t, l, reducer.AddTask{Project: proj, TaskID: id(), Title: "ship"})
		all = e.history()
		assert.Equal(t, foldTo(after), viewOf(t, at("acme", after)))
		assert.Equal(t, foldTo(started), viewOf(t, at("acme", started)), "before the snapshot, from the archive")
	})

	t.Run("AfterADroppedCompaction", func(t *testing.T) {
		t.Parallel()
		// Time travel to the snapshot and after it works; before it the
		// history is gone, and says so.
		ctx := context.Background()
		e := newEnv(t, h)
		l := e.open(ledger.Options{})
		f := newFixture(t, l, "alpha")
		f.progress(t, l, 20, "step")
		all := e.history()
		c, err := l.Compact(ctx, f.project, ledger.CompactOptions{Retain: 5, Drop: true})
		require.NoError(t, err)
		newest := lastSeq(t, l, reducer.ProgressRun{Project: f.project, RunID: f.run, Progress: "after"})
		want := viewOf(t, project(t, l, f.project))

		for _, s := range []uint64{c.Sequence, c.Sequence + 1, newest - 1} {
			p, err := ledger.ProjectAt(ctx, e.readOnly(), "alpha", s)
			require.NoError(t, err, "at %d", s)
			assert.Equal(t, s, p.LastSequence)
			if s <= all[len(all)-1].Sequence {
				var upTo []driver.Event
				for _, r := range all {
					if r.Sequence <= s {
						upTo = append(upTo, r)
					}
				}
				assert.Equal(t, viewOf(t, foldRows(t, upTo)[f.project]), viewOf(t, p), "at %d", s)
			}
		}
		p, err := ledger.ProjectAt(ctx, e.readOnly(), f.project, newest)
		require.NoError(t, err)
		assert.Equal(t, want, viewOf(t, p))
		_, err = ledger.ProjectAt(ctx, e.readOnly(), "alpha", c.Sequence-1)
		assert.ErrorIs(t, err, reducer.ErrNotFound)
		assert.Contains(t, err.Error(), "dropped")
		_, err = ledger.ProjectAt(ctx, e.readOnly(), "alpha", 1)
		assert.ErrorIs(t, err, reducer.ErrNotFound)
		_, err = ledger.ProjectAt(ctx, e.readOnly(), "alpha", newest+1)
		assert.ErrorIs(t, err, ledger.ErrBeyondHead)

		// Export and VerifyBundle of a dropped project verify the same
		// way.
		var bundle bytes.Buffer
		m, err := ledger.Export(ctx, e.readOnly(), "alpha", &bundle)
		require.NoError(t, err)
		assert.Equal(t, 6, m.Events)
		rep, err := ledger.VerifyBundle(&bundle, nil)
		require.NoError(t, err)
		assert.Empty(t, problems(rep))
		require.Len(t, rep.Chains, 1)
		assert.Equal(t, c.Sequence, rep.Chains[0].From)
	})
}
