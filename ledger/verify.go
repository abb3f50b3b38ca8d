package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

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
	Integrity string // SQLite's integrity_check: "ok" when the file is sound
	Events    int    // archived and live
	Snapshots int    // snapshots re-derived from the events before them
	Chains    []ChainReport
	Problems  []Problem
}

// allRows is the archive and the live tail as one table.
const allRows = `(SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM events
	UNION ALL SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM events_archive)`

// maxProblems bounds the report; the first problem of each project is
// what an auditor needs to start from.
const maxProblems = 100

// Verify checks the database at path without changing it: SQLite's
// integrity check, then every project's hash chain, event by event in
// sequence order (recomputing each event's hash from its contents and its
// predecessor's hash), and that the history folds through the reducer
// without contradiction. It works with or without a daemon running.
func Verify(ctx context.Context, path string, opts VerifyOptions) (*VerifyReport, error) {
	tx, done, err := readFile(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer done()

	rep := &VerifyReport{}
	var lines []string
	if err := tx.SelectContext(ctx, &lines, `PRAGMA integrity_check`); err != nil {
		return nil, fmt.Errorf("verify: integrity check: %w", err)
	}
	rep.Integrity = strings.Join(lines, "; ")
	if rep.Integrity != "ok" {
		rep.Problems = append(rep.Problems, Problem{What: "SQLite integrity check: " + rep.Integrity})
	}

	project := ""
	if opts.Project != "" {
		if project, _, err = resolveProject(ctx, tx, opts.Project); err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
	}
	var total int
	if err := tx.GetContext(ctx, &total, `SELECT count(*) FROM `+allRows+` WHERE ? = '' OR project_id = ?`, project, project); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	var snaps []storedSnapshot
	if err := tx.SelectContext(ctx, &snaps, `SELECT project_id, sequence, version, state, chain_head, state_hash
		FROM snapshots WHERE ? = '' OR project_id = ? ORDER BY sequence`, project, project); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	rows, err := tx.QueryxContext(ctx, `SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash
		FROM `+allRows+` WHERE ? = '' OR project_id = ? ORDER BY sequence`, project, project)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer rows.Close()

	w := &walker{rep: rep, state: reducer.NewState(), chains: map[string]*ChainReport{}, snaps: map[string][]storedSnapshot{}}
	for _, sn := range snaps {
		w.snaps[sn.ProjectID] = append(w.snaps[sn.ProjectID], sn)
	}
	for rows.Next() {
		var r Row
		if err := rows.StructScan(&r); err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		w.check(r)
		rep.Events++
		if opts.Progress != nil && (rep.Events%10000 == 0 || rep.Events == total) {
			opts.Progress(rep.Events, total)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	for _, id := range w.order {
		c := w.chains[id]
		if want, ok := opts.Heads[id]; ok && !bytes.Equal(want, c.Head) {
			w.problem(id, w.last[id], fmt.Sprintf("chain head %s differs from the saved head %s: events were cut off the end or rewritten",
				hex.EncodeToString(c.Head), hex.EncodeToString(want)))
		}
		rep.Chains = append(rep.Chains, *c)
	}
	for id, left := range w.snaps {
		for _, sn := range left {
			w.problem(id, sn.Sequence, "a snapshot is at a sequence that is not one of the project's events")
		}
	}
	for id := range opts.Heads {
		if _, ok := w.chains[id]; !ok && (project == "" || project == id) {
			w.problem(id, 0, "a saved head names a project that has no events")
		}
	}
	return rep, nil
}

// walker checks one event after the other.
type walker struct {
	rep    *VerifyReport
	snaps  map[string][]storedSnapshot // not yet checked, in sequence order
	seq    uint64                      // the last sequence seen
	state  *reducer.State
	chains map[string]*ChainReport
	order  []string
	last   map[string]uint64
	bad    map[string]bool // projects whose fold already failed
}

func (w *walker) problem(project string, seq uint64, what string) {
	if len(w.rep.Problems) < maxProblems {
		w.rep.Problems = append(w.rep.Problems, Problem{ProjectID: project, Sequence: seq, What: what})
	}
}

func (w *walker) check(r Row) {
	if w.last == nil {
		w.last, w.bad = map[string]uint64{}, map[string]bool{}
	}
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
	e, err := r.Event()
	if err == nil {
		err = fold(w.state, e)
	}
	if err != nil {
		w.problem(r.ProjectID, r.Sequence, err.Error())
		w.bad[r.ProjectID] = true
		return
	}
	if !seen {
		if p, ok := w.state.Project(r.ProjectID); ok {
			c.Name = p.Name
		}
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
func (w *walker) startFromSnapshot(c *ChainReport, r Row) bool {
	var sn *storedSnapshot
	pending := w.snaps[r.ProjectID]
	for len(pending) > 0 && pending[0].Sequence < r.Sequence {
		sn, pending = &pending[0], pending[1:]
	}
	if sn == nil {
		return false
	}
	w.snaps[r.ProjectID] = pending
	w.rep.Snapshots++
	sum := sha256.Sum256(sn.State)
	if sn.Version != reducer.SnapshotVersion || !bytes.Equal(sum[:], sn.StateHash) {
		w.problem(r.ProjectID, sn.Sequence, "the history before this snapshot was dropped, and the snapshot does not match its recorded state hash (or has a format this build does not read)")
		w.bad[r.ProjectID] = true
		return true
	}
	p, err := reducer.Restore(w.state, sn.State)
	if err != nil {
		w.problem(r.ProjectID, sn.Sequence, err.Error())
		w.bad[r.ProjectID] = true
		return true
	}
	c.Head, c.Name, c.From = sn.ChainHead, p.Name, sn.Sequence
	return true
}

// checkSnapshot compares a stored snapshot with the state re-derived from
// the events up to its sequence.
func (w *walker) checkSnapshot(sn storedSnapshot) {
	w.rep.Snapshots++
	p, ok := w.state.Project(sn.ProjectID)
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
	case sn.Version != reducer.SnapshotVersion:
		w.problem(sn.ProjectID, sn.Sequence, fmt.Sprintf("the snapshot has format %d; this build reads %d", sn.Version, reducer.SnapshotVersion))
	case !bytes.Equal(sum[:], sn.StateHash):
		w.problem(sn.ProjectID, sn.Sequence, "the snapshot's state does not match its recorded state hash: the snapshot was changed")
	case !bytes.Equal(derived, sn.State):
		w.problem(sn.ProjectID, sn.Sequence, "the snapshot's state differs from the state the events before it derive")
	case !bytes.Equal(sn.ChainHead, p.ChainHead):
		w.problem(sn.ProjectID, sn.Sequence, "the snapshot's chain head is not the hash of its event")
	}
}

// fold evolves e into s, turning the reducer's panic on an event that
// contradicts the state into an error.
func fold(s *reducer.State, e reducer.Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New(fmt.Sprint("the event contradicts the history before it: ", p))
		}
	}()
	reducer.Evolve(s, e)
	return nil
}
