package ledger

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"scv/ledger/driver"
	"scv/reducer"
)

// VerifyOptions narrow and extend Verify.
type VerifyOptions struct {
	// Project, when set, verifies only the project with this ID or name.
	Project string
	// Heads are chain heads saved earlier (project ID → hash). A chain
	// proves that nothing inside it changed, not that nothing was cut off
	// its end; a saved head proves that too.
	Heads map[string][]byte
	// Progress, when set, is called now and then with the events checked
	// so far and the total.
	Progress func(done, total int)
}

// Problem is one thing Verify found wrong.
type Problem struct {
	ProjectID string
	Sequence  uint64 // the first event that shows it; 0 for the database as a whole
	What      string
}

func (p Problem) String() string {
	if p.ProjectID == "" {
		return p.What
	}
	return fmt.Sprintf("project %s, sequence %d: %s", p.ProjectID, p.Sequence, p.What)
}

// ChainReport is what Verify saw of one project's chain.
type ChainReport struct {
	ProjectID string
	Name      string
	Events    int
	Head      []byte // the hash of its newest event
	// From is the sequence of the snapshot the chain starts from when the
	// operator dropped the events before it; 0 when it starts at the
	// project's creation. What a dropped history held is proven only by
	// the snapshot's recorded state hash.
	From uint64
}

// VerifyReport is the outcome of Verify: intact when Problems is empty.
type VerifyReport struct {
	// Integrity is the database's own check of its files ("ok" when
	// sound; SQLite's integrity_check), or "" where there is none (a
	// bundle, or a database without such a check).
	Integrity string
	Events    int // archived and live
	Snapshots int // snapshots re-derived from the events before them
	Chains    []ChainReport
	Problems  []Problem
	// ProjectsChecked says the projects table was compared with the
	// history (false for a bundle, or a database from before the table).
	ProjectsChecked bool
}

// maxProblems bounds the report; the first problem of each project is
// what an auditor needs to start from.
const maxProblems = 100

// Verify checks the ledger in drv without changing it: the database's own
// integrity check where it has one, then every project's hash chain, event
// by event in sequence order (recomputing each event's hash from its
// contents and its predecessor's hash), that the history folds through
// the reducer without contradiction, that every snapshot is what the
// events before it derive, and that the projects table agrees with the
// history. It reads one committed state, with or without a daemon
// running.
func Verify(ctx context.Context, drv driver.Driver, opts VerifyOptions) (*VerifyReport, error) {
	rep := &VerifyReport{}
	err := drv.Read(ctx, func(r driver.Reader) error {
		var err error
		if rep.Integrity, err = r.Integrity(ctx); err != nil {
			return fmt.Errorf("integrity check: %w", err)
		}
		if rep.Integrity != "" && rep.Integrity != "ok" {
			rep.Problems = append(rep.Problems, Problem{What: "the database's integrity check: " + rep.Integrity})
		}
		project := ""
		if opts.Project != "" {
			f, ok, err := r.Find(ctx, opts.Project)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: project %q", reducer.ErrNotFound, opts.Project)
			}
			project = f.ID
		}
		total, err := r.CountHistory(ctx, project)
		if err != nil {
			return err
		}
		snaps, err := r.Snapshots(ctx, project)
		if err != nil {
			return err
		}
		w := newWalker(rep)
		for _, sn := range snaps {
			w.snaps[sn.ProjectID] = append(w.snaps[sn.ProjectID], sn)
		}
		if err := r.History(ctx, project, 0, maxSeq, func(e driver.Event) error {
			w.check(e)
			rep.Events++
			if opts.Progress != nil && (rep.Events%10000 == 0 || rep.Events == total) {
				opts.Progress(rep.Events, total)
			}
			return nil
		}); err != nil {
			return err
		}
		w.snapshotsOnly()
		for _, id := range w.order {
			c := w.chains[id]
			if want, ok := opts.Heads[id]; ok && !bytes.Equal(want, c.Head) {
				w.problem(id, w.last[id], fmt.Sprintf("chain head %s differs from the saved head %s: events were cut off the end or rewritten",
					hex.EncodeToString(c.Head), hex.EncodeToString(want)))
			}
			rep.Chains = append(rep.Chains, *c)
		}
		w.leftoverSnapshots()
		for id := range opts.Heads {
			if _, ok := w.chains[id]; !ok && (project == "" || project == id) {
				w.problem(id, 0, "a saved head names a project that has no events")
			}
		}
		return w.checkProjection(ctx, r, project)
	})
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", drv.Name(), err)
	}
	return rep, nil
}

// checkProjection compares the projects table with what the history
// derives: a row for every project and none for anything else, its name
// and head, and, once summarized, its status, phase and counts.
func (w *walker) checkProjection(ctx context.Context, r driver.Reader, project string) error {
	rows, err := r.Projects(ctx, driver.ProjectFilter{})
	if err != nil {
		return err
	}
	if rows == nil {
		return nil // a database from before the projects table: nothing to compare
	}
	w.rep.ProjectsChecked = true
	seen := map[string]bool{}
	for _, row := range rows {
		if project != "" && row.ID != project {
			continue
		}
		seen[row.ID] = true
		p, ok := w.state[row.ID]
		if !ok {
			if !w.bad[row.ID] {
				w.problem(row.ID, row.Head, "the projects table has a row for a project the history does not create")
			}
			continue
		}
		var diff []string
		note := func(what string, got, want any) {
			if got != want {
				diff = append(diff, fmt.Sprintf("%s %v where the history derives %v", what, got, want))
			}
		}
		note("name", row.Name, p.Name)
		note("head", row.Head, p.LastSequence)
		if row.Summarized {
			want := summaryRow(p)
			note("status", row.Status, want.Status)
			note("phase", row.Phase, want.Phase)
			note("tasks", row.Tasks, want.Tasks)
			note("done", row.Done, want.Done)
			note("running", row.Running, want.Running)
		}
		if len(diff) > 0 {
			w.problem(row.ID, row.Head, "the projects table says "+strings.Join(diff, ", "))
		}
	}
	for _, id := range w.order {
		if !seen[id] && !w.bad[id] {
			w.problem(id, w.last[id], "the project has no row in the projects table")
		}
	}
	return nil
}

// walker checks one event after the other.
type walker struct {
	rep    *VerifyReport
	snaps  map[string][]driver.Snapshot // not yet checked, in sequence order
	seq    uint64                       // the last sequence seen
	state  map[string]*reducer.Project  // the newest of each, evolved within fold
	fold   *reducer.Fold
	chains map[string]*ChainReport
	order  []string
	last   map[string]uint64
	bad    map[string]bool // projects whose fold already failed
}

func newWalker(rep *VerifyReport) *walker {
	return &walker{rep: rep, snaps: map[string][]driver.Snapshot{}, state: map[string]*reducer.Project{}, fold: reducer.NewFold(),
		chains: map[string]*ChainReport{}, last: map[string]uint64{}, bad: map[string]bool{}}
}

// snapshotsOnly starts the chain of each project that has snapshots and
// no event left (compaction dropped them all): its latest snapshot stands
// for its whole history, as it does for the dropped history of a project
// whose newer events are left.
func (w *walker) snapshotsOnly() {
	var ids []string
	for id, pending := range w.snaps {
		if _, seen := w.chains[id]; !seen && len(pending) > 0 {
			ids = append(ids, id)
		}
	}
	// In the order of their latest snapshots.
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Compare(w.snaps[a][len(w.snaps[a])-1].Sequence, w.snaps[b][len(w.snaps[b])-1].Sequence)
	})
	for _, id := range ids {
		c := &ChainReport{ProjectID: id}
		w.chains[id] = c
		w.order = append(w.order, id)
		w.startFromSnapshot(c, driver.Event{ProjectID: id, Sequence: maxSeq})
		w.last[id] = c.From
	}
}

// leftoverSnapshots reports the snapshots at no event of their project.
func (w *walker) leftoverSnapshots() {
	for id, left := range w.snaps {
		for _, sn := range left {
			w.problem(id, sn.Sequence, "a snapshot is at a sequence that is not one of the project's events")
		}
	}
}

func (w *walker) problem(project string, seq uint64, what string) {
	if len(w.rep.Problems) < maxProblems {
		w.rep.Problems = append(w.rep.Problems, Problem{ProjectID: project, Sequence: seq, What: what})
	}
}

func (w *walker) check(r driver.Event) {
	c, seen := w.chains[r.ProjectID]
	if !seen {
		c = &ChainReport{ProjectID: r.ProjectID}
		w.chains[r.ProjectID] = c
		w.order = append(w.order, r.ProjectID)
		if r.Kind != reducer.KindProjectCreated && w.startFromSnapshot(c, r) {
			seen = true // the snapshot stands for the dropped history
		}
	}
	c.Events++
	w.last[r.ProjectID] = r.Sequence
	if r.Sequence == w.seq {
		w.problem(r.ProjectID, r.Sequence, "the event is both in the archive and in the live tail")
	}
	w.seq = r.Sequence
	switch want := ChainHash(c.Head, r.Sequence, r.ProjectID, r.Kind, r.Timestamp, r.TimestampMs, r.Data); {
	case r.Hash == nil:
		w.problem(r.ProjectID, r.Sequence, "the event has no hash: the ledger did not write it")
	case !bytes.Equal(want, r.Hash):
		w.problem(r.ProjectID, r.Sequence, "the hash does not match: this event was changed, or an event before it in the project is missing or out of order")
	}
	c.Head = r.Hash
	if r.Timestamp != r.TimestampMs/1000 {
		w.problem(r.ProjectID, r.Sequence, "timestamp and timestamp_ms disagree")
	}
	if w.bad[r.ProjectID] {
		return
	}
	if !seen && r.Kind != reducer.KindProjectCreated {
		w.problem(r.ProjectID, r.Sequence, "the project's first event is "+r.Kind+", not project_created")
		w.bad[r.ProjectID] = true
		return
	}
	e, err := eventOf(r)
	var p *reducer.Project
	if err == nil {
		p, err = fold(w.fold, w.state[r.ProjectID], e)
	}
	if err != nil {
		w.problem(r.ProjectID, r.Sequence, err.Error())
		w.bad[r.ProjectID] = true
		return
	}
	w.state[r.ProjectID] = p
	if !seen {
		c.Name = p.Name
	}
	for len(w.snaps[r.ProjectID]) > 0 && w.snaps[r.ProjectID][0].Sequence <= r.Sequence {
		sn := w.snaps[r.ProjectID][0]
		w.snaps[r.ProjectID] = w.snaps[r.ProjectID][1:]
		if sn.Sequence == r.Sequence {
			w.checkSnapshot(sn)
		} else {
			w.problem(r.ProjectID, sn.Sequence, "a snapshot is at a sequence that is not one of the project's events")
		}
	}
}

// startFromSnapshot starts a project's chain from its latest snapshot
// before r when the events up to it were dropped: the snapshot's state
// (checked against its recorded hash) and chain head take their place.
func (w *walker) startFromSnapshot(c *ChainReport, r driver.Event) bool {
	var sn *driver.Snapshot
	pending := w.snaps[r.ProjectID]
	for len(pending) > 0 && pending[0].Sequence < r.Sequence {
		sn, pending = &pending[0], pending[1:]
	}
	if sn == nil {
		return false
	}
	w.snaps[r.ProjectID] = pending
	w.rep.Snapshots++
	c.From = sn.Sequence
	sum := sha256.Sum256(sn.State)
	if !reducer.ReadsSnapshot(sn.Version) || !bytes.Equal(sum[:], sn.StateHash) {
		w.problem(r.ProjectID, sn.Sequence, "the history before this snapshot was dropped, and the snapshot does not match its recorded state hash (or has a format this build does not read)")
		w.bad[r.ProjectID] = true
		return true
	}
	p, err := reducer.Restore(sn.State)
	if err != nil {
		w.problem(r.ProjectID, sn.Sequence, err.Error())
		w.bad[r.ProjectID] = true
		return true
	}
	w.state[r.ProjectID] = p
	c.Head, c.Name, c.From = sn.ChainHead, p.Name, sn.Sequence
	return true
}

// checkSnapshot compares a stored snapshot with the state re-derived from
// the events up to its sequence.
func (w *walker) checkSnapshot(sn driver.Snapshot) {
	w.rep.Snapshots++
	p, ok := w.state[sn.ProjectID]
	if !ok {
		w.problem(sn.ProjectID, sn.Sequence, "a snapshot of a project the events do not create")
		return
	}
	derived, err := reducer.Snapshot(p)
	if err != nil {
		w.problem(sn.ProjectID, sn.Sequence, "snapshot: "+err.Error())
		return
	}
	sum := sha256.Sum256(sn.State)
	switch {
	case !reducer.ReadsSnapshot(sn.Version):
		w.problem(sn.ProjectID, sn.Sequence, fmt.Sprintf("the snapshot has format %d; this build reads 1 to %d", sn.Version, reducer.SnapshotVersion))
	case !bytes.Equal(sum[:], sn.StateHash):
		w.problem(sn.ProjectID, sn.Sequence, "the snapshot's state does not match its recorded state hash: the snapshot was changed")
	case !bytes.Equal(derived, sn.State):
		w.problem(sn.ProjectID, sn.Sequence, "the snapshot's state differs from the state the events before it derive")
	case !bytes.Equal(sn.ChainHead, p.ChainHead):
		w.problem(sn.ProjectID, sn.Sequence, "the snapshot's chain head is not the hash of its event")
	}
}
