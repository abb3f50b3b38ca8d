package drivertest

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/reducer"
)

// maker makes the events and snapshots the ledger would store, for tests
// that drive a driver directly: each event chained to its project's
// previous one, each snapshot the fold of its project's events.
type maker struct {
	t     *testing.T
	seq   uint64
	ms    int64
	state map[string]*reducer.Project
}

func newMaker(t *testing.T) *maker {
	return &maker{t: t, ms: 1_700_000_000_000, state: map[string]*reducer.Project{}}
}

// event is the next event, of project p.
func (m *maker) event(p string, b reducer.Body) driver.Event {
	m.t.Helper()
	data, err := reducer.EncodeBody(b)
	require.NoError(m.t, err)
	m.seq++
	m.ms += 1000
	var prev []byte
	if s := m.state[p]; s != nil {
		prev = s.ChainHead
	}
	hash := ledger.ChainHash(prev, m.seq, p, b.Kind(), m.ms/1000, m.ms, string(data))
	m.state[p] = reducer.Evolve(m.state[p], reducer.Event{Sequence: m.seq, ProjectID: p, Time: m.ms, Body: b, Hash: hash})
	return driver.Event{Sequence: m.seq, ProjectID: p, Kind: b.Kind(), Timestamp: m.ms / 1000, TimestampMs: m.ms, Data: string(data), Hash: hash}
}

// created is p's project_created event.
func (m *maker) created(p, name string) driver.Event {
	return m.event(p, reducer.ProjectCreated{Name: name, Workspace: "/srv/" + name})
}

// beat is a heartbeat of p.
func (m *maker) beat(p string) driver.Event { return m.event(p, reducer.Heartbeat{}) }

// snapshot is p's snapshot as of now.
func (m *maker) snapshot(p string) driver.Snapshot {
	m.t.Helper()
	s := m.state[p]
	b, err := reducer.Snapshot(s)
	require.NoError(m.t, err)
	sum := sha256.Sum256(b)
	return driver.Snapshot{ProjectID: p, Sequence: s.LastSequence, Version: reducer.SnapshotVersion, State: b, ChainHead: s.ChainHead, StateHash: sum[:]}
}

// write runs fn in one write transaction of drv and commits it.
func write(t *testing.T, drv driver.Driver, fn func(ctx context.Context, tx driver.Tx)) {
	t.Helper()
	ctx := context.Background()
	tx, err := drv.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback()
	fn(ctx, tx)
	require.NoError(t, tx.Commit())
}

// appendAll appends evs in one transaction, with a projects row for each
// project_created among them.
func appendAll(t *testing.T, drv driver.Driver, evs ...driver.Event) {
	t.Helper()
	write(t, drv, func(ctx context.Context, tx driver.Tx) {
		for _, e := range evs {
			if e.Kind == reducer.KindProjectCreated {
				ok, err := tx.InsertProject(ctx, driver.Project{ID: e.ProjectID, Name: e.ProjectID + "-name", CreatedSeq: e.Sequence, Head: e.Sequence})
				require.NoError(t, err)
				require.True(t, ok)
			}
		}
		require.NoError(t, tx.Append(ctx, evs))
	})
}

// readAll reads everything drv holds in one read transaction.
func readAll(t *testing.T, drv driver.Driver) (last uint64, lastMs int64, hist []driver.Event, rows []driver.Project, snaps []driver.Snapshot) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, drv.Read(ctx, func(r driver.Reader) error {
		var err error
		if last, lastMs, err = r.LastSequence(ctx); err != nil {
			return err
		}
		if err := r.History(ctx, "", 0, maxSeq, func(e driver.Event) error {
			hist = append(hist, e)
			return nil
		}); err != nil {
			return err
		}
		if rows, err = r.Projects(ctx, driver.ProjectFilter{}); err != nil {
			return err
		}
		snaps, err = r.Snapshots(ctx, "")
		return err
	}))
	return
}

func collect(t *testing.T, each func(fn func(driver.Event) error) error) []driver.Event {
	t.Helper()
	var out []driver.Event
	require.NoError(t, each(func(e driver.Event) error {
		out = append(out, e)
		return nil
	}))
	return out
}

func seqsOf(evs []driver.Event) []uint64 {
	out := []uint64{}
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}

// testDriver drives the driver's interface directly, without the ledger:
// what each operation must do, so that a driver that gets one wrong fails
// here, by name, before the ledger's tests fail for it.
func testDriver(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("RollbackKeepsNothing", func(t *testing.T) {
		t.Parallel()
		drv := h.Open(t, h.Create(t))
		m := newMaker(t)
		p := id()
		ev := m.created(p, "alpha")

		tx, err := drv.Begin(ctx)
		require.NoError(t, err)
		head, err := tx.Head(ctx)
		require.NoError(t, err)
		assert.Zero(t, head, "an empty ledger")
		ok, err := tx.InsertProject(ctx, driver.Project{ID: p, Name: "alpha", CreatedSeq: 1, Head: 1})
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, tx.Append(ctx, []driver.Event{ev}))
		require.NoError(t, tx.UpdateProject(ctx, driver.Project{ID: p, Head: 1, Summarized: true, Status: "active", Phase: "discovery"}, 1))
		require.NoError(t, tx.InsertSnapshot(ctx, m.snapshot(p)))
		// The transaction reads its own writes.
		last, lastMs, err := tx.LastSequence(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), last)
		assert.Equal(t, ev.TimestampMs, lastMs)
		head, err = tx.Head(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), head, "Head sees the transaction's own appends")
		row, ok, err := tx.Project(ctx, "alpha")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, 1, row.Live)
		assert.Equal(t, []driver.Event{ev}, collect(t, func(fn func(driver.Event) error) error { return tx.History(ctx, p, 0, maxSeq, fn) }))
		require.NoError(t, tx.Rollback())
		require.NoError(t, tx.Rollback(), "a second Rollback does nothing")

		last, lastMs, hist, rows, snaps := readAll(t, drv)
		assert.Zero(t, last, "a rolled back append uses no sequence")
		assert.Zero(t, lastMs)
		assert.Empty(t, hist)
		assert.Empty(t, rows)
		assert.Empty(t, snaps)

		// Committed, it is all there; a Rollback after Commit does nothing.
		tx, err = drv.Begin(ctx)
		require.NoError(t, err)
		ok, err = tx.InsertProject(ctx, driver.Project{ID: p, Name: "alpha", CreatedSeq: 1, Head: 1})
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, tx.Append(ctx, []driver.Event{ev}))
		require.NoError(t, tx.Commit())
		require.NoError(t, tx.Rollback())
		tx, err = drv.Begin(ctx)
		require.NoError(t, err)
		head, err = tx.Head(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), head, "a later transaction sees the committed head")
		require.NoError(t, tx.Rollback())
		last, lastMs, hist, rows, _ = readAll(t, drv)
		assert.Equal(t, uint64(1), last)
		assert.Equal(t, ev.TimestampMs, lastMs)
		assert.Equal(t, []driver.Event{ev}, hist, "every field as appended, the hash included")
		assert.Equal(t, []driver.Project{{ID: p, Name: "alpha", CreatedSeq: 1, Head: 1}}, rows, "a new row is not summarized")
	})

	t.Run("AppendMany", func(t *testing.T) {
		t.Parallel()
		// One Append of many events, live and archived mixed, as a
		// batch of the writer or a copy carries: every one stored as
		// given, in sequence order.
		drv := h.Open(t, h.Create(t))
		m := newMaker(t)
		p := id()
		evs := []driver.Event{m.created(p, "alpha")}
		for i := range 150 {
			e := m.beat(p)
			e.Archived = i%7 == 3
			evs = append(evs, e)
		}
		appendAll(t, drv, evs...)
		last, _, hist, _, _ := readAll(t, drv)
		assert.Equal(t, uint64(len(evs)), last)
		require.Len(t, hist, len(evs))
		for i := range evs {
			assert.Equal(t, evs[i], hist[i], "event %d", i+1)
		}
	})

	t.Run("ReadIsOneCommittedState", func(t *testing.T) {
		t.Parallel()
		drv := h.Open(t, h.Create(t))
		m := newMaker(t)
		p := id()
		appendAll(t, drv, m.created(p, "alpha"))

		// An uncommitted append is not read, and the read does not wait
		// for the writer.
		next := m.beat(p)
		tx, err := drv.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.Append(ctx, []driver.Event{next}))
		last, _, hist, _, _ := readAll(t, drv)
		assert.Equal(t, uint64(1), last, "a read saw an uncommitted append")
		assert.Len(t, hist, 1)
		require.NoError(t, tx.Rollback())

		// A commit while a read runs is not seen by that read.
		require.NoError(t, drv.Read(ctx, func(r driver.Reader) error {
			before, _, err := r.LastSequence(ctx)
			require.NoError(t, err)
			appendAll(t, drv, next)
			after, _, err := r.LastSequence(ctx)
			require.NoError(t, err)
			assert.Equal(t, before, after, "a read saw a commit made after it began")
			n, err := r.CountHistory(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			return nil
		}))
		last, _, _, _, _ = readAll(t, drv)
		assert.Equal(t, next.Sequence, last, "the next read sees it")
	})

	t.Run("ProjectRows", func(t *testing.T) {
		t.Parallel()
		drv := h.Open(t, h.Create(t))
		a, b, c := id(), id(), id()
		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			for _, r := range []driver.Project{{ID: a, Name: "alpha", CreatedSeq: 1, Head: 1}, {ID: b, Name: "beta", CreatedSeq: 2, Head: 2}} {
				ok, err := tx.InsertProject(ctx, r)
				require.NoError(t, err)
				require.True(t, ok)
			}
			for _, r := range []driver.Project{
				{ID: c, Name: "alpha", CreatedSeq: 3, Head: 3}, // a taken name
				{ID: a, Name: "gamma", CreatedSeq: 3, Head: 3}, // a taken ID
			} {
				ok, err := tx.InsertProject(ctx, r)
				require.NoError(t, err)
				assert.False(t, ok, "%+v inserted", r)
			}
		})
		_, _, _, rows, _ := readAll(t, drv)
		require.Len(t, rows, 2, "a refused insert adds no row")
		assert.Equal(t, "alpha", rows[0].Name)
		assert.Equal(t, a, rows[0].ID, "the refused insert changed nothing")

		// By ID, else by name; an ID wins over another project's name.
		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			ok, err := tx.InsertProject(ctx, driver.Project{ID: c, Name: b, CreatedSeq: 3, Head: 3})
			require.NoError(t, err)
			require.True(t, ok)
		})
		require.NoError(t, drv.Read(ctx, func(r driver.Reader) error {
			for ref, want := range map[string]string{a: a, "alpha": a, "beta": b, b: b, c: c} {
				row, ok, err := r.Project(ctx, ref)
				require.NoError(t, err)
				if assert.True(t, ok, ref) {
					assert.Equal(t, want, row.ID, "Project(%s)", ref)
				}
			}
			_, ok, err := r.Project(ctx, "nope")
			require.NoError(t, err)
			assert.False(t, ok)
			return nil
		}))

		// UpdateProject rewrites the summary and adds to the live count;
		// ID, name and creation stay.
		summary := driver.Project{ID: a, Name: "ignored", CreatedSeq: 99, Head: 7, Live: 99, Summarized: true, Status: "active",
			Phase: "implementation", Tasks: 3, Done: 1, Running: 1, CreatedMs: 1000, UpdatedMs: 7000}
		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			require.NoError(t, tx.UpdateProject(ctx, summary, 5))
			require.NoError(t, tx.UpdateProject(ctx, summary, -2))
			err := tx.UpdateProject(ctx, driver.Project{ID: id(), Head: 1}, 1)
			assert.ErrorIs(t, err, driver.ErrStorage, "a project with no row")
		})
		want := summary
		want.Name, want.CreatedSeq, want.Live = "alpha", 1, 3
		assert.Equal(t, want, func() driver.Project {
			var row driver.Project
			require.NoError(t, drv.Read(ctx, func(r driver.Reader) (err error) {
				row, _, err = r.Project(ctx, a)
				return err
			}))
			return row
		}())

		// The filters, each row in creation order.
		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			require.NoError(t, tx.UpdateProject(ctx, driver.Project{ID: b, Head: 2, Summarized: true, Status: "active", Phase: "planning"}, 10))
		})
		require.NoError(t, drv.Read(ctx, func(r driver.Reader) error {
			for _, tc := range []struct {
				f    driver.ProjectFilter
				want []string
			}{
				{driver.ProjectFilter{}, []string{a, b, c}},
				{driver.ProjectFilter{Running: true}, []string{a}},
				{driver.ProjectFilter{LiveOver: 3}, []string{b}},
				{driver.ProjectFilter{LiveOver: 2}, []string{a, b}},
				{driver.ProjectFilter{Unsummarized: true}, []string{c}},
				{driver.ProjectFilter{Running: true, LiveOver: 3}, nil},
				{driver.ProjectFilter{Status: "active"}, []string{a, b}},
				{driver.ProjectFilter{Status: "waiting_approval"}, nil},
				{driver.ProjectFilter{Status: "active", Running: true}, []string{a}},
				{driver.ProjectFilter{Unarchived: true}, []string{a, b, c}},
			} {
				rows, err := r.Projects(ctx, tc.f)
				require.NoError(t, err)
				var got []string
				for _, row := range rows {
					got = append(got, row.ID)
				}
				assert.Equal(t, tc.want, got, "%+v", tc.f)
			}
			return nil
		}))
	})

	t.Run("DeleteLiveNeedsASnapshot", func(t *testing.T) {
		t.Parallel()
		drv := h.Open(t, h.Create(t))
		m := newMaker(t)
		p, q := id(), id()
		appendAll(t, drv, m.created(p, "p"), m.beat(p), m.beat(p), m.created(q, "q"), m.beat(p))
		snapAt3 := func() driver.Snapshot {
			mm := newMaker(t)
			mm.created(p, "p")
			mm.beat(p)
			mm.beat(p)
			return mm.snapshot(p)
		}()
		require.Equal(t, uint64(3), snapAt3.Sequence)
		_, _, before, _, _ := readAll(t, drv)

		refused := func(what string, fn func(ctx context.Context, tx driver.Tx) error) {
			t.Helper()
			tx, err := drv.Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback()
			err = fn(ctx, tx)
			assert.ErrorIs(t, err, driver.ErrStorage, "%s: the schema must refuse it", what)
			require.NoError(t, tx.Rollback())
			_, _, after, _, _ := readAll(t, drv)
			assert.Equal(t, before, after, "%s: nothing deleted", what)
		}
		refused("no snapshot", func(ctx context.Context, tx driver.Tx) error {
			_, err := tx.DeleteLive(ctx, p, 3)
			return err
		})
		refused("a snapshot of another project", func(ctx context.Context, tx driver.Tx) error {
			qs := m.snapshot(q)
			if err := tx.InsertSnapshot(ctx, qs); err != nil {
				return err
			}
			_, err := tx.DeleteLive(ctx, p, 3)
			return err
		})
		refused("an event after the snapshot", func(ctx context.Context, tx driver.Tx) error {
			if err := tx.InsertSnapshot(ctx, snapAt3); err != nil {
				return err
			}
			_, err := tx.DeleteLive(ctx, p, 5)
			return err
		})

		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			require.NoError(t, tx.InsertSnapshot(ctx, snapAt3))
			n, err := tx.DeleteLive(ctx, p, 3)
			require.NoError(t, err)
			assert.Equal(t, 3, n)
		})
		assert.Equal(t, []uint64{5}, seqsOf(collectLive(t, drv, p)))
		assert.Equal(t, []uint64{4}, seqsOf(collectLive(t, drv, q)))
	})

	t.Run("SequencesNeverReused", func(t *testing.T) {
		t.Parallel()
		db := h.Create(t)
		drv := h.Open(t, db)
		m := newMaker(t)
		p, q := id(), id()
		first := m.created(q, "q")
		appendAll(t, drv, first, m.created(p, "p"), m.beat(p))
		_, lastMs, _, _, _ := readAll(t, drv)
		assert.Equal(t, m.ms, lastMs, "the time of the newest event")
		newest := m.beat(p)
		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			require.NoError(t, tx.Append(ctx, []driver.Event{newest}))
			require.NoError(t, tx.UpdateProject(ctx, driver.Project{ID: p, Head: 4, Summarized: true, Status: "active", Phase: "discovery",
				UpdatedMs: newest.TimestampMs}, 3))
		})
		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			require.NoError(t, tx.InsertSnapshot(ctx, m.snapshot(p)))
			n, err := tx.DeleteLive(ctx, p, 4)
			require.NoError(t, err)
			require.Equal(t, 3, n)
		})
		last, lastMs, hist, _, _ := readAll(t, drv)
		assert.Equal(t, []driver.Event{first}, hist)
		assert.Equal(t, uint64(4), last, "the newest events were deleted: the highest sequence ever appended stays")
		assert.Equal(t, newest.TimestampMs, lastMs, "the newest time stays too: its projects row keeps it")
		require.NoError(t, drv.Close())

		drv = h.Open(t, db) // a restart must not take the tail from the rows left
		last, lastMs, _, _, _ = readAll(t, drv)
		assert.Equal(t, uint64(4), last, "after a reopen")
		assert.Equal(t, newest.TimestampMs, lastMs, "after a reopen")
	})

	t.Run("ArchiveAndHistory", func(t *testing.T) {
		t.Parallel()
		drv := h.Open(t, h.Create(t))
		m := newMaker(t)
		p, q := id(), id()
		appendAll(t, drv, m.created(p, "p"), m.beat(p), m.created(q, "q"), m.beat(p), m.beat(q))
		s4 := m.snapshot(p)
		appendAll(t, drv, m.beat(p), m.beat(p), m.beat(q))
		s7 := m.snapshot(p)
		_, _, all, _, _ := readAll(t, drv)
		ofP := func(evs []driver.Event) []driver.Event {
			var out []driver.Event
			for _, e := range evs {
				if e.ProjectID == p {
					out = append(out, e)
				}
			}
			return out
		}
		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			require.NoError(t, tx.InsertSnapshot(ctx, s4))
			n, err := tx.Archive(ctx, p, 4)
			require.NoError(t, err)
			assert.Equal(t, 3, n, "p's events 1, 2 and 4")
			n, err = tx.DeleteLive(ctx, p, 4)
			require.NoError(t, err)
			assert.Equal(t, 3, n)
		})
		write(t, drv, func(ctx context.Context, tx driver.Tx) { require.NoError(t, tx.InsertSnapshot(ctx, s7)) })
		for i := range all { // History says which it read from the archive
			all[i].Archived = all[i].ProjectID == p && all[i].Sequence <= 4
		}

		require.NoError(t, drv.Read(ctx, func(r driver.Reader) error {
			hist := func(project string, after, upTo uint64) []driver.Event {
				return collect(t, func(fn func(driver.Event) error) error { return r.History(ctx, project, after, upTo, fn) })
			}
			live := func(project string, after, upTo uint64, limit int) []uint64 {
				return seqsOf(collect(t, func(fn func(driver.Event) error) error { return r.Live(ctx, project, after, upTo, limit, fn) }))
			}
			assert.Equal(t, all, hist("", 0, maxSeq), "archive and live tail, as one history in sequence order")
			assert.Equal(t, ofP(all), hist(p, 0, maxSeq), "byte for byte, hashes included")
			assert.Equal(t, []uint64{4, 6}, seqsOf(hist(p, 2, 6)), "(after, upTo]")
			assert.Equal(t, []uint64{3, 5, 8}, seqsOf(hist(q, 0, maxSeq)))
			assert.Empty(t, hist("nope", 0, maxSeq))
			n, err := r.CountHistory(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, 5, n)
			n, err = r.CountHistory(ctx, "")
			require.NoError(t, err)
			assert.Equal(t, 8, n)

			assert.Equal(t, []uint64{6, 7}, live(p, 0, maxSeq, 0), "only the live tail")
			assert.Equal(t, []uint64{6}, live(p, 0, maxSeq, 1), "at most limit")
			assert.Equal(t, []uint64{7}, live(p, 6, maxSeq, 0))
			assert.Equal(t, []uint64{6}, live(p, 0, 6, 0))
			assert.Equal(t, []uint64{3, 5, 8}, live(q, 0, maxSeq, 0))
			for i, want := range []uint64{6, 7} {
				s, ok, err := r.LiveAt(ctx, p, i)
				require.NoError(t, err)
				assert.True(t, ok)
				assert.Equal(t, want, s, "LiveAt(%d)", i)
			}
			_, ok, err := r.LiveAt(ctx, p, 2)
			require.NoError(t, err)
			assert.False(t, ok, "past the end")

			_, ok, err = r.LatestSnapshot(ctx, p, 3)
			require.NoError(t, err)
			assert.False(t, ok, "no snapshot up to 3")
			for upTo, want := range map[uint64]driver.Snapshot{4: s4, 6: s4, 7: s7, maxSeq: s7} {
				got, ok, err := r.LatestSnapshot(ctx, p, upTo)
				require.NoError(t, err)
				if assert.True(t, ok) {
					assert.Equal(t, want, got, "up to %d", upTo)
				}
			}
			snaps, err := r.Snapshots(ctx, "")
			require.NoError(t, err)
			assert.Equal(t, []driver.Snapshot{s4, s7}, snaps)
			snaps, err = r.Snapshots(ctx, q)
			require.NoError(t, err)
			assert.Empty(t, snaps)
			return nil
		}))
	})

	t.Run("Find", func(t *testing.T) {
		t.Parallel()
		drv := h.Open(t, h.Create(t))
		m := newMaker(t)
		p, q := id(), id()
		appendAll(t, drv, m.created(p, "alpha"), m.created(q, "beta"), m.beat(q))
		sq := m.snapshot(q)
		// q's history up to its snapshot is dropped: only the snapshot
		// names it.
		write(t, drv, func(ctx context.Context, tx driver.Tx) {
			require.NoError(t, tx.InsertSnapshot(ctx, sq))
			_, err := tx.DeleteLive(ctx, q, sq.Sequence)
			require.NoError(t, err)
		})
		require.NoError(t, drv.Read(ctx, func(r driver.Reader) error {
			for ref, want := range map[string]driver.Found{
				p: {ID: p, Name: "alpha", CreatedSeq: 1}, "alpha": {ID: p, Name: "alpha", CreatedSeq: 1},
				q: {ID: q, Name: "beta"}, "beta": {ID: q, Name: "beta"},
			} {
				got, ok, err := r.Find(ctx, ref)
				require.NoError(t, err)
				if assert.True(t, ok, ref) {
					assert.Equal(t, want, got, "Find(%s)", ref)
				}
			}
			_, ok, err := r.Find(ctx, "nope")
			require.NoError(t, err)
			assert.False(t, ok)
			integrity, err := r.Integrity(ctx)
			require.NoError(t, err)
			assert.Contains(t, []string{"ok", ""}, integrity)
			return nil
		}))
	})

	t.Run("ReadOnly", func(t *testing.T) {
		t.Parallel()
		db := h.Create(t)
		drv := h.Open(t, db)
		m := newMaker(t)
		p := id()
		appendAll(t, drv, m.created(p, "alpha"))
		ro := h.OpenReadOnly(t, db)
		want := func() []driver.Event { _, _, h, _, _ := readAll(t, ro); return h }()
		require.Len(t, want, 1, "the read-only driver reads what the writer committed")
		if tx, err := ro.Begin(ctx); err == nil {
			err = tx.Append(ctx, []driver.Event{m.beat(p)})
			if err == nil {
				err = tx.Commit()
			}
			tx.Rollback()
			assert.ErrorIs(t, err, driver.ErrStorage, "a write through a read-only driver")
		} else {
			assert.ErrorIs(t, err, driver.ErrStorage)
		}
		_, _, got, _, _ := readAll(t, ro)
		assert.Equal(t, want, got, "nothing written")
	})

	t.Run("ErrorsWrapErrStorage", func(t *testing.T) {
		t.Parallel()
		drv := h.Open(t, h.Create(t))
		require.NoError(t, drv.Close())
		_, err := drv.Begin(ctx)
		assert.ErrorIs(t, err, driver.ErrStorage, "Begin on a closed driver")
		err = drv.Read(ctx, func(driver.Reader) error { return nil })
		assert.ErrorIs(t, err, driver.ErrStorage, "Read on a closed driver")
	})
}

func collectLive(t *testing.T, drv driver.Driver, project string) []driver.Event {
	t.Helper()
	var out []driver.Event
	require.NoError(t, drv.Read(context.Background(), func(r driver.Reader) error {
		out = collect(t, func(fn func(driver.Event) error) error {
			return r.Live(context.Background(), project, 0, maxSeq, 0, fn)
		})
		return nil
	}))
	return out
}
