package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/oklog/ulid/v2"

	"scv/ledger"
	"scv/ledger/driver"
	"scv/ledger/sqlite/sqlitetest"
	"scv/reducer"
)

// histWriter lays down a valid history in a new ledger file fast: every
// command is decided and folded by the reducer itself (reducer.Decide,
// reducer.Evolve), so every event is one the daemon could have appended;
// each event carries its sequence and its chain hash (ledger.ChainHash),
// and they are written with sqlitetest.Raw into a file at schema version
// 5, the schema before the projects table. The next sqlite.Open migrates
// it, deriving every project's row from its events (migration 00006), and
// the ledger that opens it first summarizes those rows once: after that
// it is a ledger like any other. Nothing here runs SQL.
type histWriter struct {
	ctx      context.Context
	raw      *sqlitetest.Raw
	ids      *rand.ChaCha8
	now      int64 // Unix ms of the next command
	seq      uint64
	projects map[string]*reducer.Project
	kinds    map[string]int
	batch    []driver.Event
	batches  chan []driver.Event
	inserted chan error
}

// histBatch is how many events go into one transaction.
const histBatch = 50_000

// newHistWriter creates the ledger file at path for events whose times
// start at start (Unix ms) and grow by a millisecond per command.
func newHistWriter(ctx context.Context, path string, start int64, seed byte) (*histWriter, error) {
	raw, err := sqlitetest.OpenRaw(ctx, path, 5)
	if err != nil {
		return nil, err
	}
	w := &histWriter{
		ctx: ctx, raw: raw, ids: rand.NewChaCha8([32]byte{'s', 'c', 'v', seed}), now: start,
		projects: map[string]*reducer.Project{}, kinds: map[string]int{},
		batches: make(chan []driver.Event, 4), inserted: make(chan error, 1),
	}
	// Inserting runs beside deciding: the two take about as long.
	go func() {
		var err error
		for b := range w.batches {
			if err == nil {
				_, err = raw.Append(ctx, b)
			}
		}
		w.inserted <- err
	}()
	return w, nil
}

// id mints a ULID at the writer's clock.
func (w *histWriter) id() string { return ulid.MustNew(uint64(w.now), w.ids).String() }

// do decides cmd against the project it names (by ID) at the writer's
// clock and appends what it causes. A refusal is a bug of the generator.
func (w *histWriter) do(cmd reducer.Command) []reducer.Event {
	var p *reducer.Project
	if _, ok := cmd.(reducer.CreateProject); !ok {
		p = w.projects[cmd.ProjectRef()]
		if p == nil {
			panic(fmt.Sprintf("scvbench: generated %T for unknown project %q", cmd, cmd.ProjectRef()))
		}
	}
	evs, err := reducer.Decide(p, reducer.Stamp(cmd, w.now))
	if err != nil {
		panic(fmt.Sprintf("scvbench: generated command %T refused: %v", cmd, err))
	}
	for i := range evs {
		e := &evs[i]
		w.seq++
		data, err := reducer.EncodeBody(e.Body)
		if err != nil {
			panic(err)
		}
		var prev []byte
		if p != nil {
			prev = p.ChainHead
		}
		kind := e.Body.Kind()
		e.Sequence = w.seq
		e.Hash = ledger.ChainHash(prev, w.seq, e.ProjectID, kind, e.Time/1000, e.Time, string(data))
		p = reducer.Evolve(p, *e)
		w.kinds[kind]++
		w.batch = append(w.batch, driver.Event{Sequence: w.seq, ProjectID: e.ProjectID, Kind: kind,
			Timestamp: e.Time / 1000, TimestampMs: e.Time, Data: string(data), Hash: e.Hash})
		if len(w.batch) == histBatch {
			w.batches <- w.batch
			w.batch = make([]driver.Event, 0, histBatch)
		}
	}
	if p != nil {
		w.projects[p.ID] = p
	}
	w.now++
	return evs
}

// project creates a project and returns its ID.
func (w *histWriter) project(name, workspace string) string {
	return w.do(reducer.CreateProject{ProjectID: w.id(), Name: name, Workspace: workspace})[0].ProjectID
}

// task adds a task to project p and returns its ID.
func (w *histWriter) task(p, title string, maxRetries uint32, deps ...string) string {
	id := w.id()
	if deps == nil {
		deps = []string{}
	}
	w.do(reducer.AddTask{Project: p, TaskID: id, Title: title, DependsOn: deps, MaxRetries: maxRetries})
	return id
}

// close writes what is left and closes the file.
func (w *histWriter) close() error {
	if len(w.batch) > 0 {
		w.batches <- w.batch
		w.batch = nil
	}
	close(w.batches)
	err := <-w.inserted
	if cerr := w.raw.Close(); err == nil {
		err = cerr
	}
	return err
}

// generateWith runs fill on a new histWriter for the file at path and
// closes it, turning the generator's panics into an error.
func generateWith(ctx context.Context, path string, start int64, seed byte, fill func(w *histWriter)) (w *histWriter, took time.Duration, err error) {
	t := time.Now()
	w, err = newHistWriter(ctx, path, start, seed)
	if err != nil {
		return nil, 0, err
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		fill(w)
	}()
	if cerr := w.close(); err == nil {
		err = cerr
	}
	return w, time.Since(t), err
}
