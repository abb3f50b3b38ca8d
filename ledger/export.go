package ledger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"scv/ledger/driver"
	"scv/reducer"
)

// BundleFormat names the format of the bundles Export writes.
const BundleFormat = "scv-ledger-bundle-v1"

// Manifest is the last line of a bundle: what it holds, so that a bundle
// cut short, or with lines taken out, does not pass for whole.
type Manifest struct {
	Format        string `json:"format"`
	ProjectID     string `json:"project_id"`
	Name          string `json:"name"`
	Events        int    `json:"events"`
	Snapshots     int    `json:"snapshots"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
	ChainHead     string `json:"chain_head"` // hex of the last event's hash
}

// bundleEvent is an event line. Data is the stored text as a JSON string,
// so that its bytes, which the hash covers, survive exactly.
type bundleEvent struct {
	Type        string `json:"type"`
	Sequence    uint64 `json:"sequence"`
	ProjectID   string `json:"project_id"`
	Kind        string `json:"kind"`
	Timestamp   int64  `json:"timestamp"`
	TimestampMs int64  `json:"timestamp_ms"`
	Data        string `json:"data"`
	Hash        string `json:"hash"`
}

// bundleSnapshot is a snapshot line. State is the stored state as a JSON
// string, for the same reason as an event's data: the state hash covers
// its bytes.
type bundleSnapshot struct {
	Type      string `json:"type"`
	Sequence  uint64 `json:"sequence"`
	Version   int    `json:"version"`
	State     string `json:"state"`
	ChainHead string `json:"chain_head"`
	StateHash string `json:"state_hash"`
}

type bundleManifest struct {
	Type string `json:"type"`
	Manifest
}

// bundleLine is any line of a bundle, as read back.
type bundleLine struct {
	Type          string `json:"type"`
	Sequence      uint64 `json:"sequence"`
	ProjectID     string `json:"project_id"`
	Kind          string `json:"kind"`
	Timestamp     int64  `json:"timestamp"`
	TimestampMs   int64  `json:"timestamp_ms"`
	Data          string `json:"data"`
	Hash          string `json:"hash"`
	Version       int    `json:"version"`
	State         string `json:"state"`
	ChainHead     string `json:"chain_head"`
	StateHash     string `json:"state_hash"`
	Format        string `json:"format"`
	Name          string `json:"name"`
	Events        int    `json:"events"`
	Snapshots     int    `json:"snapshots"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
}

// Export writes one project's whole history (archive and live tail) and
// its snapshots to w as a self-verifying bundle, JSON Lines: one "event"
// line per event in sequence order, one "snapshot" line per snapshot, and
// a final "manifest" line. It reads one committed state of drv without
// changing it, with or without a daemon running. VerifyBundle checks a
// bundle without the database.
func Export(ctx context.Context, drv driver.Driver, project string, w io.Writer) (Manifest, error) {
	m := Manifest{Format: BundleFormat}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	err := drv.Read(ctx, func(r driver.Reader) error {
		f, ok, err := r.Find(ctx, project)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: project %q", reducer.ErrNotFound, project)
		}
		m.ProjectID, m.Name = f.ID, f.Name
		var head []byte
		if err := r.History(ctx, m.ProjectID, 0, maxSeq, func(e driver.Event) error {
			if m.Events == 0 {
				m.FirstSequence = e.Sequence
			}
			m.Events++
			m.LastSequence, head = e.Sequence, e.Hash
			return enc.Encode(bundleEvent{Type: "event", Sequence: e.Sequence, ProjectID: e.ProjectID, Kind: e.Kind,
				Timestamp: e.Timestamp, TimestampMs: e.TimestampMs, Data: e.Data, Hash: hex.EncodeToString(e.Hash)})
		}); err != nil {
			return err
		}
		snaps, err := r.Snapshots(ctx, m.ProjectID)
		if err != nil {
			return err
		}
		if m.Events == 0 && len(snaps) > 0 {
			// Compaction dropped every event: the latest snapshot's is
			// the chain head.
			head = snaps[len(snaps)-1].ChainHead
		}
		m.ChainHead = hex.EncodeToString(head)
		for _, sn := range snaps {
			m.Snapshots++
			if err := enc.Encode(bundleSnapshot{Type: "snapshot", Sequence: sn.Sequence, Version: sn.Version, State: string(sn.State),
				ChainHead: hex.EncodeToString(sn.ChainHead), StateHash: hex.EncodeToString(sn.StateHash)}); err != nil {
				return err
			}
		}
		return enc.Encode(bundleManifest{Type: "manifest", Manifest: m})
	})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return m, fmt.Errorf("export: %w", err)
	}
	return m, nil
}

// VerifyBundle checks a bundle Export wrote, with no database: it
// recomputes every event's hash from its contents and its predecessor's,
// checks that the project starts with project_created, folds the events
// through the reducer, checks every snapshot against the state the events
// before it derive (state hash, bytes, chain head), and checks the
// manifest against what it walked (a bundle without one was cut short).
// heads are chain heads saved earlier, as for Verify. The report is intact
// when Problems is empty; its Integrity is empty (there is no SQLite
// file). An error is a failure to read r, not a finding.
func VerifyBundle(r io.Reader, heads map[string][]byte) (*VerifyReport, error) {
	rep := &VerifyReport{}
	w := newWalker(rep)
	var (
		events   []driver.Event
		snaps    []driver.Snapshot
		manifest *Manifest
		section  = 0 // 0 events, 1 snapshots, 2 manifest seen
		project  string
	)
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("verify bundle: %w", err)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			var l bundleLine
			if jerr := json.Unmarshal(line, &l); jerr != nil {
				w.problem("", 0, fmt.Sprintf("bundle line %d is not JSON: %v", n, jerr))
			} else {
				order := map[string]int{"event": 0, "snapshot": 1, "manifest": 2}
				s, known := order[l.Type]
				switch {
				case !known:
					w.problem("", 0, fmt.Sprintf("bundle line %d has unknown type %q", n, l.Type))
				case section == 2:
					w.problem("", 0, fmt.Sprintf("bundle line %d comes after the manifest", n))
				case s < section:
					w.problem("", 0, fmt.Sprintf("bundle line %d: a %s line after the %s lines", n, l.Type, []string{"event", "snapshot"}[section]))
				default:
					section = s
					switch l.Type {
					case "event":
						if project == "" {
							project = l.ProjectID
						}
						if l.ProjectID != project {
							w.problem(l.ProjectID, l.Sequence, fmt.Sprintf("bundle line %d: an event of project %s in a bundle of %s", n, l.ProjectID, project))
							continue
						}
						h, herr := hex.DecodeString(l.Hash)
						if herr != nil || len(h) == 0 {
							h = nil // reported by the walk as a missing hash
						}
						events = append(events, driver.Event{Sequence: l.Sequence, ProjectID: l.ProjectID, Kind: l.Kind,
							Timestamp: l.Timestamp, TimestampMs: l.TimestampMs, Data: l.Data, Hash: h})
					case "snapshot":
						ch, _ := hex.DecodeString(l.ChainHead)
						sh, _ := hex.DecodeString(l.StateHash)
						snaps = append(snaps, driver.Snapshot{ProjectID: project, Sequence: l.Sequence, Version: l.Version,
							State: []byte(l.State), ChainHead: ch, StateHash: sh})
					case "manifest":
						manifest = &Manifest{Format: l.Format, ProjectID: l.ProjectID, Name: l.Name, Events: l.Events, Snapshots: l.Snapshots,
							FirstSequence: l.FirstSequence, LastSequence: l.LastSequence, ChainHead: l.ChainHead}
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}

	if project == "" && manifest != nil {
		// No event: a project compaction dropped entirely, its snapshots
		// all there is of it.
		project = manifest.ProjectID
		for i := range snaps {
			snaps[i].ProjectID = project
		}
	}
	for i, sn := range snaps {
		if i > 0 && sn.Sequence <= snaps[i-1].Sequence {
			w.problem(project, sn.Sequence, "the bundle's snapshots are out of sequence order")
			continue
		}
		w.snaps[project] = append(w.snaps[project], sn)
	}
	for _, r := range events {
		if rep.Events > 0 && r.Sequence <= w.seq {
			w.problem(r.ProjectID, r.Sequence, "the bundle's events are out of sequence order, or one is repeated")
			continue
		}
		w.check(r)
		rep.Events++
	}
	w.snapshotsOnly()
	for _, id := range w.order {
		c := w.chains[id]
		if want, ok := heads[id]; ok && !bytes.Equal(want, c.Head) {
			w.problem(id, w.last[id], fmt.Sprintf("chain head %s differs from the saved head %s: events were cut off the end or rewritten",
				hex.EncodeToString(c.Head), hex.EncodeToString(want)))
		}
		rep.Chains = append(rep.Chains, *c)
	}
	w.leftoverSnapshots()
	for id := range heads {
		if _, ok := w.chains[id]; !ok {
			w.problem(id, 0, "a saved head names a project that has no events in the bundle")
		}
	}
	var first uint64
	if len(events) > 0 {
		first = events[0].Sequence
	}
	checkManifest(w, manifest, project, first, len(snaps))
	return rep, nil
}

// checkManifest compares the bundle's manifest with what the walk saw.
func checkManifest(w *walker, m *Manifest, project string, first uint64, snaps int) {
	rep := w.rep
	if m == nil {
		w.problem(project, w.seq, "the bundle has no manifest line: it was truncated")
		return
	}
	var c ChainReport
	if len(rep.Chains) > 0 {
		c = rep.Chains[0]
	}
	bad := func(what string, got, want any) {
		w.problem(m.ProjectID, w.seq, fmt.Sprintf("the manifest says %s %v, the bundle has %v: lines were removed, added or changed", what, want, got))
	}
	switch {
	case m.Format != BundleFormat:
		w.problem(m.ProjectID, 0, fmt.Sprintf("the bundle's format is %q; this build reads %q", m.Format, BundleFormat))
	case project == "":
		w.problem(m.ProjectID, 0, "the bundle has no events")
	case m.ProjectID != project:
		bad("project", project, m.ProjectID)
	case m.Events != rep.Events:
		bad("events", rep.Events, m.Events)
	case m.Snapshots != snaps:
		bad("snapshots", snaps, m.Snapshots)
	case m.FirstSequence != first:
		bad("first sequence", first, m.FirstSequence)
	case m.LastSequence != w.seq:
		bad("last sequence", w.seq, m.LastSequence)
	case m.ChainHead != hex.EncodeToString(c.Head):
		bad("chain head", hex.EncodeToString(c.Head), m.ChainHead)
	case c.Name != "" && m.Name != c.Name:
		bad("name", c.Name, m.Name)
	}
}
