package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"scv/reducer"
)

// Errors the ledger returns besides the reducer's refusals. Nothing above
// this package sees a driver error.
var (
	// ErrClosed: the ledger is shutting down or shut.
	ErrClosed = errors.New("ledger closed")
	// ErrStorage: the database failed; nothing of the command was kept.
	ErrStorage = errors.New("storage failure")
)

// MaxBatch bounds how many queued commands one transaction carries.
const MaxBatch = 1024

// Options configure Open.
type Options struct {
	// Clock returns the time commands are stamped with. Defaults to the
	// system clock.
	Clock func() time.Time
}

// Ledger is the event store of one instance and the single writer that
// appends to it.
type Ledger struct {
	path  string
	w, r  *sqlx.DB
	clock func() time.Time

	// The write queue. Whoever finds no leader becomes the leader and
	// commits batches until the queue is empty (see lead).
	qmu     sync.Mutex
	queue   []*request
	leading bool
	closed  bool
	drained chan struct{} // made by Close; closed when the last batch is done

	// Owned by the leader.
	insert   *sqlx.Stmt
	tail     *sqlx.Stmt
	state    *reducer.State
	lastSeq  uint64
	lastTime int64

	// How many events each project has in the live tail, for automatic
	// compaction.
	liveMu sync.Mutex
	live   map[string]int

	// The committed view, read by everyone.
	mu    sync.RWMutex
	view  map[string]*reducer.Project
	names map[string]string

	closeOnce sync.Once
	closeErr  error
}

// Result is what a committed command did.
type Result struct {
	// Events the command appended, with their sequences; empty when the
	// command changed nothing (such as MarkStale with nothing stale).
	Events []reducer.Event
	// Project is the committed state of the project the command addressed,
	// also when the command appended nothing (a coalesced heartbeat).
	Project *reducer.Project
}

type request struct {
	cmd   reducer.Command
	op    func(ctx context.Context, tx *sqlx.Tx) error // instead of cmd: maintenance, alone in its transaction
	reply chan response
}

// response answers a request, or (lead) hands its goroutine the writer's
// part: its request is now at the head of the queue.
type response struct {
	res  Result
	err  error
	lead bool
}

// Open opens (creating if needed) the ledger database at path, migrates it,
// folds its history into state, and starts the writer.
func Open(ctx context.Context, path string, opts Options) (*Ledger, error) {
	w, r, err := openSQLite(ctx, path)
	if err != nil {
		return nil, err
	}
	l := &Ledger{path: path, w: w, r: r, clock: opts.Clock}
	if l.clock == nil {
		l.clock = time.Now
	}
	if err := l.loadSnapshot(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	// Prepared once, on the one writer connection.
	if l.insert, err = w.PreparexContext(ctx, InsertSQL); err == nil {
		l.tail, err = w.PreparexContext(ctx, tailSQL)
	}
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return l, nil
}

// Path is the database file.
func (l *Ledger) Path() string { return l.path }

// Close stops taking commands, answers every queued one, and closes the
// database.
func (l *Ledger) Close() error {
	l.closeOnce.Do(func() {
		l.qmu.Lock()
		l.closed = true
		busy := l.leading
		if busy {
			l.drained = make(chan struct{})
		}
		l.qmu.Unlock()
		if busy {
			<-l.drained
		}
		l.closeErr = errors.Join(l.insert.Close(), l.tail.Close(), l.w.Close(), l.r.Close())
	})
	return l.closeErr
}

// Execute decides cmd against the committed state inside a write
// transaction, appends its events, and returns once they are durable
// (COMMIT returned with synchronous=FULL). A refused command appends
// nothing and returns the reducer's error.
func (l *Ledger) Execute(ctx context.Context, cmd reducer.Command) (Result, error) {
	return l.enqueue(ctx, &request{cmd: cmd, reply: make(chan response, 1)})
}

// enqueue queues req and returns its answer, leading the writer if no one
// does.
func (l *Ledger) enqueue(ctx context.Context, req *request) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	l.qmu.Lock()
	if l.closed {
		l.qmu.Unlock()
		return Result{}, ErrClosed
	}
	l.queue = append(l.queue, req)
	lead := !l.leading
	l.leading = true
	l.qmu.Unlock()
	// Once queued, the command is decided whatever the caller does: wait
	// for its outcome so that an acknowledged write is never in doubt.
	if lead {
		l.lead()
	}
	resp := <-req.reply
	if resp.lead {
		l.lead()
		resp = <-req.reply
	}
	return resp.res, resp.err
}

// lead is the writer's part, played by one caller at a time (group
// commit without a writer goroutine to wake): it takes every queued
// command, up to MaxBatch, into one transaction and answers them. Then it
// hands the part to the goroutine whose request heads the queue, or, with
// the queue empty, ends it. A caller that finds a leader only waits.
func (l *Ledger) lead() {
	l.qmu.Lock()
	n := min(len(l.queue), MaxBatch)
	// A maintenance op runs alone: cut the batch before it.
	for i, req := range l.queue[:n] {
		if req.op != nil {
			n = max(i, 1)
			break
		}
	}
	batch := slices.Clone(l.queue[:n])
	l.queue = slices.Delete(l.queue, 0, n)
	l.qmu.Unlock()

	l.commit(batch)

	l.qmu.Lock()
	defer l.qmu.Unlock()
	if len(l.queue) > 0 {
		l.queue[0].reply <- response{lead: true}
		return
	}
	l.leading = false
	if l.drained != nil {
		close(l.drained)
	}
}

// Project returns the committed state of the project with the given ID or
// name. It never waits for the writer.
func (l *Ledger) Project(ref string) (*reducer.Project, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if p, ok := l.view[ref]; ok {
		return p, true
	}
	if id, ok := l.names[ref]; ok {
		return l.view[id], true
	}
	return nil, false
}

// commit decides and appends a batch in one transaction and answers every
// request in it.
func (l *Ledger) commit(batch []*request) {
	out := make([]response, len(batch))
	if err := l.appendBatch(batch, out); err != nil {
		l.state.Rollback()
		err = l.storageError(err)
		for i := range out {
			out[i] = response{err: err}
		}
	} else {
		l.publish(l.state.Seal())
		l.liveMu.Lock()
		for i := range batch {
			for _, e := range out[i].res.Events {
				l.live[e.ProjectID]++
			}
		}
		l.liveMu.Unlock()
		for i, req := range batch {
			if out[i].err != nil || req.op != nil {
				continue
			}
			ref := req.cmd.ProjectRef()
			if len(out[i].res.Events) > 0 {
				ref = out[i].res.Events[0].ProjectID
			}
			out[i].res.Project, _ = l.Project(ref)
		}
	}
	for i, req := range batch {
		req.reply <- out[i]
	}
}

// InsertSQL is the one statement that appends an event. The sequence is
// given, not left to AUTOINCREMENT, because the event's hash covers it: the
// writer holds the lock and knows the tail, so it is the next one anyway.
const InsertSQL = `INSERT INTO events (sequence, project_id, kind, timestamp, timestamp_ms, data, hash) VALUES (?, ?, ?, ?, ?, ?, ?)`

const tailSQL = `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`

func (l *Ledger) appendBatch(batch []*request, out []response) error {
	ctx := context.Background()
	tx, err := l.w.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := FailAfterBegin.Hit(); err != nil {
		return err
	}

	// Decide against the state as it is inside this transaction: if
	// another writer appended since we last looked, fold its events first.
	var tail uint64
	if err := tx.StmtxContext(ctx, l.tail).GetContext(ctx, &tail); err != nil {
		return err
	}
	if tail != l.lastSeq {
		if err := l.load(ctx, tx); err != nil {
			return err
		}
	}
	if op := batch[0].op; op != nil {
		// The op's own error is its caller's answer, and nothing of it
		// is kept (the deferred rollback); only a failed COMMIT is the
		// batch's.
		if out[0].err = op(ctx, tx); out[0].err != nil {
			return nil
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		crashAt(FailAfterCommit)
		return nil
	}
	lastSeq, lastTime := l.lastSeq, l.lastTime
	now := max(l.clock().UnixMilli(), lastTime)
	ins := tx.StmtxContext(ctx, l.insert) // prepared once, on the one writer connection
	defer ins.Close()
	for i, req := range batch {
		evs, err := reducer.Decide(l.state, reducer.Stamp(req.cmd, now))
		if err != nil {
			out[i].err = err
			continue
		}
		for j := range evs {
			var prev []byte
			if p, ok := l.state.Project(evs[j].ProjectID); ok {
				prev = p.ChainHead
			}
			if err := appendEvent(ctx, ins, &evs[j], lastSeq+1, prev); err != nil {
				return err
			}
			reducer.Evolve(l.state, evs[j])
			lastSeq = evs[j].Sequence
		}
		out[i].res.Events = evs
	}
	if err := FailAfterInsert.Hit(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	crashAt(FailAfterCommit)
	if lastSeq != l.lastSeq {
		l.lastSeq, l.lastTime = lastSeq, now
	}
	return nil
}

// appendEvent inserts e as event seq, chained to prev, and sets its
// Sequence and Hash.
func appendEvent(ctx context.Context, ins *sqlx.Stmt, e *reducer.Event, seq uint64, prev []byte) error {
	data, err := reducer.EncodeBody(e.Body)
	if err != nil {
		return err
	}
	kind := e.Body.Kind()
	hash := ChainHash(prev, seq, e.ProjectID, kind, e.Time/1000, e.Time, string(data))
	if _, err := ins.ExecContext(ctx, seq, e.ProjectID, kind, e.Time/1000, e.Time, string(data), hash); err != nil {
		return err
	}
	e.Sequence, e.Hash = seq, hash
	return nil
}

// publish makes sealed projects visible to readers.
func (l *Ledger) publish(changed []*reducer.Project) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range changed {
		l.view[p.ID] = p
		l.names[p.Name] = p.ID
	}
}

// Row is one stored event as the events table holds it.
type Row struct {
	Sequence    uint64 `db:"sequence"`
	ProjectID   string `db:"project_id"`
	Kind        string `db:"kind"`
	Timestamp   int64  `db:"timestamp"`    // Unix seconds
	TimestampMs int64  `db:"timestamp_ms"` // the same instant in Unix milliseconds
	Data        string `db:"data"`
	Hash        []byte `db:"hash"` // nil for a row the ledger did not write
}

// Event decodes the row into a reducer event.
func (r Row) Event() (reducer.Event, error) {
	b, err := reducer.DecodeBody(r.Kind, []byte(r.Data))
	if err != nil {
		return reducer.Event{}, fmt.Errorf("event %d: %w", r.Sequence, err)
	}
	return reducer.Event{Sequence: r.Sequence, ProjectID: r.ProjectID, Time: r.TimestampMs, Body: b, Hash: r.Hash}, nil
}

const allEventsSQL = `SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM events ORDER BY sequence`

// loadSnapshot runs load inside one read transaction, so that the events
// it folds and the tail it records are of the same database snapshot, even
// while another writer appends.
func (l *Ledger) loadSnapshot(ctx context.Context) error {
	tx, err := l.r.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer tx.Rollback()
	return l.load(ctx, tx)
}

// load folds the whole history into a fresh state and publishes it. q must
// be a transaction: the events and the tail must come from one snapshot.
func (l *Ledger) load(ctx context.Context, q *sqlx.Tx) error {
	// Each project starts from its latest snapshot, then the live tail.
	s := reducer.NewState()
	var lastTime int64
	var snaps []storedSnapshot
	if err := q.SelectContext(ctx, &snaps, latestSnapshotsSQL); err != nil {
		return fmt.Errorf("load: snapshots: %w", err)
	}
	from := map[string]uint64{}
	for _, sn := range snaps {
		if sn.Version != reducer.SnapshotVersion {
			return fmt.Errorf("load: snapshot of %s at %d has format %d; this build reads %d", sn.ProjectID, sn.Sequence, sn.Version, reducer.SnapshotVersion)
		}
		p, err := reducer.Restore(s, sn.State)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		from[sn.ProjectID] = sn.Sequence
		lastTime = max(lastTime, p.Updated)
	}
	rows, err := q.QueryxContext(ctx, allEventsSQL)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer rows.Close()
	var lastSeq uint64
	live := map[string]int{}
	for rows.Next() {
		var r Row
		if err := rows.StructScan(&r); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		lastSeq = max(lastSeq, r.Sequence)
		live[r.ProjectID]++
		if r.Sequence <= from[r.ProjectID] {
			continue // folded into the snapshot
		}
		e, err := r.Event()
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		reducer.Evolve(s, e)
		lastTime = max(lastTime, e.Time)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	var tail uint64
	if err := sqlx.GetContext(ctx, q, &tail, tailSQL); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	s.Seal()
	l.state, l.lastSeq, l.lastTime = s, max(lastSeq, tail), lastTime
	l.liveMu.Lock()
	l.live = live
	l.liveMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.view, l.names = map[string]*reducer.Project{}, map[string]string{}
	for _, p := range s.Projects() {
		l.view[p.ID] = p
		l.names[p.Name] = p.ID
	}
	return nil
}

// MaxPage is the most events one Events call returns.
const MaxPage = 1000

// Events returns up to limit (at most MaxPage) live events of a project
// with a sequence above after, in order (EventsPage without the compaction
// mark).
func (l *Ledger) Events(ctx context.Context, projectID string, after uint64, limit int) ([]Row, error) {
	p, err := l.EventsPage(ctx, projectID, after, limit)
	return p.Rows, err
}

// Page is one reply's worth of a project's events.
type Page struct {
	Rows []Row
	// CompactedBefore is S, the newest sequence folded into the project's
	// latest snapshot, when the page reaches back before it (after < S):
	// the events up to S are no longer in the live tail. Zero otherwise.
	CompactedBefore uint64
}

// EventsPage returns up to limit (at most MaxPage) live events of a
// project with a sequence above after, in order, and says whether the
// request reached back into what compaction took out of the live tail. It
// reads one committed snapshot of the database and never waits for the
// writer.
func (l *Ledger) EventsPage(ctx context.Context, projectID string, after uint64, limit int) (Page, error) {
	if limit <= 0 || limit > MaxPage {
		limit = MaxPage
	}
	l.qmu.Lock()
	closed := l.closed
	l.qmu.Unlock()
	if closed {
		return Page{}, ErrClosed
	}
	// Sequences are SQLite integers; no event is above MaxInt64.
	after = min(after, math.MaxInt64)
	tx, err := l.r.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Page{}, storage(err)
	}
	defer tx.Rollback()
	page := Page{Rows: []Row{}}
	if err := tx.SelectContext(ctx, &page.Rows,
		`SELECT sequence, project_id, kind, timestamp, timestamp_ms, data, hash FROM events
		 WHERE project_id = ? AND sequence > ? ORDER BY sequence LIMIT ?`,
		projectID, after, limit); err != nil {
		return Page{}, storage(err)
	}
	var s sql.NullInt64
	if err := tx.GetContext(ctx, &s, `SELECT max(sequence) FROM snapshots WHERE project_id = ?`, projectID); err != nil {
		return Page{}, storage(err)
	}
	if s.Valid && after < uint64(s.Int64) {
		page.CompactedBefore = uint64(s.Int64)
	}
	return page, nil
}

// MarkStale is one sweep for silent runs: for every project that has a
// running run silent for longer than window at the ledger's clock, it
// executes reducer.MarkStale, which decides again inside the write
// transaction (a heartbeat committed first keeps the run alive). It
// returns how many runs it marked.
func (l *Ledger) MarkStale(ctx context.Context, window time.Duration) (int, error) {
	now := l.clock().UnixMilli()
	ms := window.Milliseconds()
	l.mu.RLock()
	var due []string
	for id, p := range l.view {
		if len(reducer.StaleRuns(p, now, ms)) > 0 {
			due = append(due, id)
		}
	}
	l.mu.RUnlock()
	marked := 0
	for _, id := range due {
		res, err := l.Execute(ctx, reducer.MarkStale{Project: id, Window: ms})
		if err != nil {
			return marked, err
		}
		marked += len(res.Events)
	}
	return marked, nil
}
