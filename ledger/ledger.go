package ledger

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"scv/ledger/driver"
	"scv/reducer"
)

// Errors the ledger returns besides the reducer's refusals, each of one of
// the domain's kinds (reducer.ErrUnavailable, ErrInvalidArgument,
// ErrConflict, ErrStorage, ErrStorageFull). Nothing above this package
// sees a driver's own error.
var (
	// ErrClosed: the ledger is shutting down or shut. It is
	// reducer.ErrUnavailable.
	ErrClosed = fmt.Errorf("%w: ledger closed", reducer.ErrUnavailable)
	// ErrStorage: the database failed; nothing of the command was kept.
	ErrStorage = driver.ErrStorage
	// ErrStorageFull: the database had no room for the write. Nothing of
	// the command was kept, and writes succeed again, without a restart,
	// once there is room. It wraps ErrStorage.
	ErrStorageFull = driver.ErrStorageFull
	// ErrUnavailable: the database could not be reached. Nothing of the
	// command was kept. It wraps ErrStorage.
	ErrUnavailable = driver.ErrUnavailable
	// ErrBeyondHead: a sequence asked for is past the newest one. It is
	// reducer.ErrInvalidArgument.
	ErrBeyondHead = fmt.Errorf("%w: beyond the ledger's head", reducer.ErrInvalidArgument)
	// ErrLeaseLost: a write fenced by a lease was refused, because the
	// writer no longer holds it (another daemon took it over). It is
	// reducer.ErrConflict.
	ErrLeaseLost = fmt.Errorf("%w: lease lost", reducer.ErrConflict)
)

// MaxBatch bounds how many queued commands one transaction carries, but
// for a group (SubmitAll) longer than that, which is carried whole.
const MaxBatch = 1024

// Options configure Open.
type Options struct {
	// Clock returns the time commands are stamped with. Nil: the driver's
	// clock (the server's, for a database daemons share), else the system
	// clock. Tests set it.
	Clock func() time.Time
	// CacheSize is how many projects are kept in memory (0:
	// DefaultCacheSize).
	CacheSize int
	// Failpoints are the failpoints set (see ParseFailpoints); nil for
	// none.
	Failpoints Failpoints
	// Metrics records what the ledger does (nil: nothing).
	Metrics Metrics
}

// Metrics is what the ledger records as it works (the daemon's
// *metrics.Recorder). Its methods must not block.
type Metrics interface {
	// ObserveBatch: one write transaction of that many commands
	// committed, in d.
	ObserveBatch(commands int, d time.Duration)
	// EventAppended: an event of that kind committed.
	EventAppended(kind string)
	// HeartbeatCoalesced: a heartbeat was answered without an event.
	HeartbeatCoalesced()
	// RunsMarkedStale: a sweep marked n runs stale.
	RunsMarkedStale(n int)
	// Compacted: a project was compacted.
	Compacted()
}

// noMetrics records nothing.
type noMetrics struct{}

func (noMetrics) ObserveBatch(int, time.Duration) {}
func (noMetrics) EventAppended(string)            {}
func (noMetrics) HeartbeatCoalesced()             {}
func (noMetrics) RunsMarkedStale(int)             {}
func (noMetrics) Compacted()                      {}

// Ledger is the event store of one instance and the single writer that
// appends to it, above a driver.
type Ledger struct {
	drv     driver.Driver
	clock   func() time.Time
	fail    Failpoints
	cache   *cache
	metrics Metrics

	// The write queue. Whoever finds no leader becomes the leader and
	// commits batches until the queue is empty (see lead).
	qmu     sync.Mutex
	queue   []*request
	leading bool
	closed  atomic.Bool   // set under qmu; read without it by the readers
	drained chan struct{} // made by Close; closed when the last batch is done

	// Owned by the leader. synced is the sequence up to which this ledger
	// has seen every append: while the database's last sequence equals
	// it, no one else has written, and cached projects are current.
	synced uint64
	// events is the last batch's slice of events, emptied, for the next
	// batch to fill without growing it again.
	events []driver.Event
	// lastTime is the newest event's time this ledger has seen, written
	// by the leader and read by MarkStale too.
	lastTime atomic.Int64

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
	cmd reducer.Command
	// fence, when set, must hold inside the transaction for cmd to be
	// decided at all.
	fence *Lease
	op    func(ctx context.Context, tx driver.Tx) error // instead of cmd: maintenance, alone in its transaction
	// The answer goes to reply, whose goroutine waits for it (Execute), or
	// to done, called by the goroutine that committed the batch once that
	// goroutine is no longer the writer (Submit): then no goroutine waits.
	reply chan response
	done  func(Result, error)
	// rest is how many requests of the same group (SubmitAll) follow
	// this one in the queue: a group is one transaction's.
	rest int
}

// response answers a request, or (lead) hands its goroutine the writer's
// part: its request is now at the head of the queue.
type response struct {
	res  Result
	err  error
	lead bool
}

// Open starts a ledger on drv. It reads no project: each is loaded from
// its latest snapshot and the events after it when first addressed, so
// opening does not grow with the number of projects or events. Projects
// whose summary a migrated database does not have yet get it now, once.
func Open(ctx context.Context, drv driver.Driver, opts Options) (*Ledger, error) {
	l := &Ledger{drv: drv, clock: opts.Clock, fail: opts.Failpoints, cache: newCache(opts.CacheSize), metrics: opts.Metrics}
	if l.metrics == nil {
		l.metrics = noMetrics{}
	}
	// Summaries first: the newest time is read from them too when
	// compaction took the newest event out of the live tail.
	if err := l.summarize(ctx); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	err := drv.Read(ctx, func(r driver.Reader) error {
		var err error
		var last int64
		l.synced, last, err = r.LastSequence(ctx)
		l.lastTime.Store(last)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return l, nil
}

// summarize derives the summary of every project row that has none.
func (l *Ledger) summarize(ctx context.Context) error {
	var rows []driver.Project
	if err := l.drv.Read(ctx, func(r driver.Reader) (err error) {
		rows, err = r.Projects(ctx, driver.ProjectFilter{Unsummarized: true})
		return err
	}); err != nil || len(rows) == 0 {
		return err
	}
	return l.exclusive(ctx, func(ctx context.Context, tx driver.Tx) error {
		for _, row := range rows {
			p, err := rebuild(ctx, tx, nil, row.ID, maxSeq)
			if err != nil {
				return err
			}
			if err := tx.UpdateProject(ctx, summaryRow(p), 0); err != nil {
				return err
			}
		}
		return nil
	})
}

// Driver is the database the ledger is on.
func (l *Ledger) Driver() driver.Driver { return l.drv }

// Close stops taking commands, answers every queued one, and closes the
// driver.
func (l *Ledger) Close() error {
	l.closeOnce.Do(func() {
		l.qmu.Lock()
		l.closed.Store(true)
		busy := l.leading
		if busy {
			l.drained = make(chan struct{})
		}
		l.qmu.Unlock()
		if busy {
			<-l.drained
		}
		l.closeErr = l.drv.Close()
	})
	return l.closeErr
}

func (l *Ledger) isClosed() bool { return l.closed.Load() }

// Execute decides cmd against the project's latest committed state inside
// a write transaction, appends its events, and returns once they are
// durable. A refused command appends nothing and returns the reducer's
// error.
func (l *Ledger) Execute(ctx context.Context, cmd reducer.Command) (Result, error) {
	return l.enqueue(ctx, &request{cmd: cmd, reply: make(chan response, 1)})
}

// Submit is Execute without waiting: done is called once with what
// Execute would return. It is called by the goroutine that committed the
// batch, after that goroutine handed the writer's part on, so done may
// take its time (encode and write a reply) but must not call the ledger's
// writer and wait; at most it delays the other answers of its batch. When
// no one is writing, the caller commits cmd itself, and done is called
// before Submit returns.
//
// This is how a server answers many clients without a goroutine to wake
// per answer: the answers of a batch are written by one goroutine.
func (l *Ledger) Submit(ctx context.Context, cmd reducer.Command, done func(Result, error)) {
	if lead, err := l.queueUp(ctx, &request{cmd: cmd, done: done}); err != nil {
		done(Result{}, err)
	} else if lead {
		l.lead()
	}
}

// enqueue queues req and returns its answer, leading the writer if no one
// does.
func (l *Ledger) enqueue(ctx context.Context, req *request) (Result, error) {
	lead, err := l.queueUp(ctx, req)
	if err != nil {
		return Result{}, err
	}
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

// queueUp queues reqs, together; lead reports that no one was writing, so the caller
// must lead.
func (l *Ledger) queueUp(ctx context.Context, reqs ...*request) (lead bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.closed.Load() {
		return false, ErrClosed
	}
	l.queue = append(l.queue, reqs...)
	lead = !l.leading
	l.leading = true
	return lead, nil
}

// lead is the writer's part, played by one caller at a time (group
// commit without a writer goroutine to wake): it takes every queued
// command, up to MaxBatch (see cut), into one transaction, hands the
// part on, and answers them. The part goes to the goroutine whose request
// heads the queue, or to a new goroutine when that request was submitted
// (no one waits for it); with the queue empty, the part ends once the
// batch is answered. A caller that finds a leader only waits.
//
// The transaction begins, and so holds the write lock, before the batch
// is taken: on a database daemons share, what queues while this daemon
// waits for another's turn rides in this one.
func (l *Ledger) lead() {
	start := time.Now()
	tx, err := l.drv.Begin(context.Background())
	l.qmu.Lock()
	n := cut(l.queue)
	batch := slices.Clone(l.queue[:n])
	l.queue = slices.Delete(l.queue, 0, n)
	l.qmu.Unlock()

	out := l.commit(tx, err, batch, start)

	// With more queued, the next batch need not wait for these answers.
	l.qmu.Lock()
	handed := l.handOnLocked()
	l.qmu.Unlock()
	for i, req := range batch {
		if req.done != nil {
			req.done(out[i].res, out[i].err)
		} else {
			req.reply <- out[i]
		}
	}
	if handed {
		return
	}
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.handOnLocked() {
		return
	}
	l.leading = false
	if l.drained != nil {
		close(l.drained) // every batch is answered
	}
}

// handOnLocked gives the writer's part to the request heading the queue,
// if there is one. l.qmu is held.
func (l *Ledger) handOnLocked() bool {
	if len(l.queue) == 0 {
		return false
	}
	if head := l.queue[0]; head.reply != nil {
		head.reply <- response{lead: true}
	} else {
		go l.lead()
	}
	return true
}

// batch is one write transaction's work: the newest version of each
// project it touched, which becomes the committed state once it commits.
type batch struct {
	tx      driver.Tx
	fold    *reducer.Fold // evolves work: what it copies of a project, it copies once per batch
	foreign bool          // someone else appended since this ledger last did
	seq     uint64
	work    map[string]*reducer.Project
	names   map[string]string // name -> ID, for the projects in work
	order   []string          // project IDs in the order first touched
	events  []driver.Event
	added   map[string]int // project ID -> events appended
}

// commit decides and appends a batch in tx, begun at start (or fails it
// with the error that began tx), and returns every request's answer.
func (l *Ledger) commit(tx driver.Tx, began error, reqs []*request, start time.Time) []response {
	out := make([]response, len(reqs))
	var b *batch
	err := began
	if err == nil {
		b, err = l.appendBatch(tx, reqs, out)
	}
	if err != nil {
		err = storageError(err)
		for i := range out {
			out[i] = response{err: err}
		}
	} else if b != nil {
		l.metrics.ObserveBatch(len(reqs), time.Since(start))
		for _, e := range b.events {
			l.metrics.EventAppended(e.Kind)
		}
		ps := make([]*reducer.Project, len(b.order))
		for i, id := range b.order {
			ps[i] = b.work[id]
		}
		l.cache.committed(ps)
		for i, req := range reqs {
			if out[i].err != nil || req.op != nil {
				continue
			}
			if _, ok := req.cmd.(reducer.RecordHeartbeat); ok && len(out[i].res.Events) == 0 {
				l.metrics.HeartbeatCoalesced()
			}
			id := b.names[req.cmd.ProjectRef()]
			if id == "" {
				id = req.cmd.ProjectRef()
			}
			out[i].res.Project = b.work[id]
		}
	}
	if b != nil {
		clear(b.events) // let go of the events' strings
		l.events = b.events[:0]
	}
	return out
}

// appendBatch runs reqs in the write transaction tx, ending it, and fills
// in each request's answer; an error is the whole batch's.
func (l *Ledger) appendBatch(tx driver.Tx, reqs []*request, out []response) (*batch, error) {
	ctx := context.Background()
	defer tx.Rollback()
	if err := l.fail.Hit(FailAfterBegin); err != nil {
		return nil, err
	}
	last, err := tx.Head(ctx)
	if err != nil {
		return nil, err
	}
	// The head-check failpoint (off) has the ledger believe nobody else
	// wrote since it last did.
	foreign := last != l.synced && !l.fail.Off(FailHeadCheck)
	b := &batch{tx: tx, fold: reducer.NewFold(), foreign: foreign, seq: last, events: l.events[:0], work: map[string]*reducer.Project{},
		names: map[string]string{}, added: map[string]int{}}
	if op := reqs[0].op; op != nil {
		// The op's own error is its caller's answer, and nothing of it
		// is kept (the deferred rollback); only a failed COMMIT is the
		// batch's.
		if out[0].err = op(ctx, tx); out[0].err != nil {
			return nil, nil
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
		l.fail.crashAt(FailAfterCommit)
		if !b.foreign {
			l.synced = last
		}
		return nil, nil
	}
	now, err := l.now(ctx)
	if err != nil {
		return nil, err
	}
	for i, req := range reqs {
		evs, err := l.decide(ctx, b, req, now)
		if err != nil {
			if !reducer.IsRefusal(err) {
				return nil, err
			}
			out[i].err = err
			continue
		}
		out[i].res.Events = evs
	}
	if len(b.events) > 0 {
		if err := tx.Append(ctx, b.events); err != nil {
			return nil, err
		}
	}
	for _, id := range b.order {
		if n := b.added[id]; n > 0 {
			if err := tx.UpdateProject(ctx, summaryRow(b.work[id]), n); err != nil {
				return nil, err
			}
		}
	}
	if err := l.fail.Hit(FailAfterInsert); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		if !errors.Is(err, ErrUnavailable) || len(b.events) == 0 {
			return nil, err
		}
		switch committed, known := l.inDoubt(b.events[len(b.events)-1]); {
		case !known:
			return nil, fmt.Errorf("%w; the COMMIT got no answer, and the database did not come back within %s to say whether it was recorded",
				err, InDoubtWait)
		case !committed:
			return nil, err
		}
		// The COMMIT reached the server, only its answer was lost.
	}
	l.fail.crashAt(FailAfterCommit)
	if !b.foreign {
		l.synced = b.seq
	}
	l.lastTime.Store(max(l.lastTime.Load(), now))
	return b, nil
}

// InDoubtWait bounds how long a writer whose COMMIT got no answer (the
// connection to a database server broke) waits for the server to say
// whether it committed.
const InDoubtWait = 30 * time.Second

// inDoubt reports whether the batch whose last event is last committed,
// although its COMMIT's answer was lost: it reads, until the database
// answers or InDoubtWait has passed, whether that event is there with its
// hash. Until then no caller of the batch is answered: an acknowledged
// write is there, and one refused is not (if the database stays away
// longer, the batch is refused although it may have committed, which the
// error says).
func (l *Ledger) inDoubt(last driver.Event) (committed, known bool) {
	ctx, cancel := context.WithTimeout(context.Background(), InDoubtWait)
	defer cancel()
	for {
		var found *driver.Event
		err := l.drv.Read(ctx, func(r driver.Reader) error {
			return r.History(ctx, last.ProjectID, last.Sequence-1, last.Sequence, func(e driver.Event) error {
				found = &e
				return nil
			})
		})
		if err == nil {
			return found != nil && bytes.Equal(found.Hash, last.Hash), true
		}
		select {
		case <-ctx.Done():
			return false, false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// now is the batch's time: the driver's clock (or the ledger's), never
// earlier than the newest event this ledger has seen.
func (l *Ledger) now(ctx context.Context) (int64, error) {
	var t time.Time
	if l.clock != nil {
		t = l.clock()
	} else {
		var err error
		if t, err = l.drv.Now(ctx); err != nil {
			return 0, err
		}
		if t.IsZero() {
			t = time.Now()
		}
	}
	return max(t.UnixMilli(), l.lastTime.Load()), nil
}

// decide decides one command of b against the newest state of the project
// it names, appends its events to b and folds them in.
func (l *Ledger) decide(ctx context.Context, b *batch, req *request, now int64) ([]reducer.Event, error) {
	cmd := req.cmd
	if f := req.fence; f != nil {
		held, err := b.tx.LeaseHeld(ctx, f.Name, f.Holder, f.Term, now)
		if err != nil {
			return nil, err
		}
		if !held {
			return nil, fmt.Errorf("%w: %s no longer holds lease %s of term %d", ErrLeaseLost, f.Holder, f.Name, f.Term)
		}
	}
	// A project that does not exist is nil: Decide refuses the command,
	// with its own checks first (limits).
	var p *reducer.Project
	if _, create := cmd.(reducer.CreateProject); !create {
		var err error
		if p, err = l.current(ctx, b, cmd.ProjectRef()); err != nil {
			return nil, err
		}
		if p != nil {
			now = max(now, p.Updated) // never earlier than the project's last event
		}
	}
	evs, err := reducer.Decide(p, reducer.Stamp(cmd, now))
	if err != nil {
		return nil, err
	}
	if p == nil {
		c := cmd.(reducer.CreateProject)
		if err := l.checkNew(ctx, b, c); err != nil {
			return nil, err
		}
		row := driver.Project{ID: evs[0].ProjectID, Name: c.Name, Workspace: c.Workspace, CreatedSeq: b.seq + 1, Head: b.seq + 1}
		ok, err := b.tx.InsertProject(ctx, row)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: a project named %q, or with ID %s, exists", reducer.ErrConflict, row.Name, row.ID)
		}
	}
	for j := range evs {
		b.seq++
		e, err := chained(&evs[j], b.seq, p)
		if err != nil {
			return nil, err
		}
		p = b.fold.Evolve(p, evs[j])
		b.events = append(b.events, e)
	}
	b.keep(p)
	b.added[p.ID] += len(evs)
	return evs, nil
}

// keep makes p the batch's newest version of its project.
func (b *batch) keep(p *reducer.Project) {
	if _, seen := b.work[p.ID]; !seen {
		b.order = append(b.order, p.ID)
	}
	b.work[p.ID] = p
	b.names[p.Name] = p.ID
}

// checkNew refuses a new project whose name or ID names a project already
// (by name or by ID: either must resolve to one project only), once the
// reducer has accepted it. The database holds names unique too:
// InsertProject refuses a taken one.
func (l *Ledger) checkNew(ctx context.Context, b *batch, c reducer.CreateProject) error {
	if row, ok, err := b.tx.Project(ctx, c.Name); err != nil {
		return err
	} else if ok && row.Name == c.Name {
		return fmt.Errorf("%w: a project named %q exists", reducer.ErrConflict, c.Name)
	} else if ok {
		return fmt.Errorf("%w: %q is the ID of project %q", reducer.ErrConflict, c.Name, row.Name)
	}
	if _, ok, err := b.tx.Project(ctx, c.ProjectID); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: project ID %s exists", reducer.ErrConflict, c.ProjectID)
	}
	return nil
}

// current is the newest state of the project ref names, inside b: the
// version b already made, else the cached one (checked against the
// database's head of the project when someone else has written since this
// ledger last did), else one loaded from the database. It becomes b's
// version of the project. It is nil, without an error, when ref names no
// project.
func (l *Ledger) current(ctx context.Context, b *batch, ref string) (*reducer.Project, error) {
	if id, ok := b.names[ref]; ok {
		return b.work[id], nil
	}
	if p, ok := b.work[ref]; ok {
		return p, nil
	}
	if p, ok := l.cache.get(ref); ok && !b.foreign {
		if q, ok := b.work[p.ID]; ok {
			return q, nil // named by the other of ID and name
		}
		b.keep(p)
		return p, nil
	}
	row, ok, err := b.tx.Project(ctx, ref)
	if err != nil || !ok {
		return nil, err
	}
	if p, ok := b.work[row.ID]; ok {
		return p, nil // named by the other of ID and name
	}
	p, cached := l.cache.get(row.ID)
	if !cached || p.LastSequence != row.Head {
		if p, err = rebuild(ctx, b.tx, p, row.ID, maxSeq); err != nil {
			return nil, err
		}
	}
	b.keep(p)
	return p, nil
}

// chained gives e its sequence and its link in the hash chain after p
// (nil before the project's first event), and returns it as stored.
func chained(e *reducer.Event, seq uint64, p *reducer.Project) (driver.Event, error) {
	data, err := reducer.EncodeBody(e.Body)
	if err != nil {
		return driver.Event{}, err
	}
	var prev []byte
	if p != nil {
		prev = p.ChainHead
	}
	kind, body := e.Body.Kind(), string(data)
	hash := ChainHash(prev, seq, e.ProjectID, kind, e.Time/1000, e.Time, body)
	e.Sequence, e.Hash = seq, hash
	return driver.Event{Sequence: seq, ProjectID: e.ProjectID, Kind: kind, Timestamp: e.Time / 1000,
		TimestampMs: e.Time, Data: body, Hash: hash}, nil
}

// summaryRow is the projects row of p (but for its live events, which
// UpdateProject counts).
func summaryRow(p *reducer.Project) driver.Project {
	return driver.Project{
		ID: p.ID, Name: p.Name, Workspace: p.Workspace, Head: p.LastSequence, Summarized: true,
		Status: string(p.Status()), Phase: string(p.Phase()),
		Tasks: p.TaskCount(), Done: p.DoneCount(), Running: p.RunningCount(),
		CreatedMs: p.Created, UpdatedMs: p.Updated, HeartbeatMs: p.LastHeartbeat,
	}
}

// storageError is the error every request of a failed batch gets: the
// driver's, which wraps ErrStorage, or err wrapped as ErrStorage.
func storageError(err error) error {
	if errors.Is(err, ErrStorage) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrStorage, err)
}

// Project returns the committed state of the project with the given ID or
// name: from memory when cached, else loaded from the database (its
// latest snapshot and the events after it). It never waits for the
// writer. On a database other daemons write too, a cached project is
// first checked against the database's head of it, so that a read
// reflects every write acknowledged before it, by any daemon.
func (l *Ledger) Project(ctx context.Context, ref string) (*reducer.Project, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	p, cached := l.cache.get(ref)
	if cached && (!l.drv.Shared() || l.fail.Off(FailHeadCheck)) {
		return p, nil
	}
	gen := l.cache.generation() // before the read: see putLoaded
	err := l.drv.Read(ctx, func(r driver.Reader) error {
		row, ok, err := r.Project(ctx, ref)
		if err != nil {
			return err
		}
		if !ok {
			return cmp.Or(reducer.ValidRef("project", ref), fmt.Errorf("%w: project %q", reducer.ErrNotFound, ref))
		}
		if !cached || p.ID != row.ID {
			p, cached = l.cache.get(row.ID)
		}
		if cached && p.LastSequence == row.Head {
			return nil
		}
		p, err = rebuild(ctx, r, p, row.ID, maxSeq)
		return err
	})
	if err != nil {
		return nil, readError(err)
	}
	l.cache.putLoaded(p, gen)
	return p, nil
}

// readError passes the reducer's refusals and ledger errors on, and wraps
// anything else as ErrStorage.
func readError(err error) error {
	if err == nil || reducer.IsRefusal(err) || errors.Is(err, ErrStorage) || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrStorage, err)
}

// CacheStats reports the project cache's hits and misses since Open and
// how many projects it holds.
func (l *Ledger) CacheStats() (hits, misses uint64, cached int) { return l.cache.stats() }

// Row is one stored event as the database holds it.
type Row struct {
	Sequence    uint64
	ProjectID   string
	Kind        string
	Timestamp   int64 // Unix seconds
	TimestampMs int64 // the same instant in Unix milliseconds
	Data        string
	Hash        []byte // nil for a row the ledger did not write
	// Archived says it was read from the archive, not the live tail.
	Archived bool
}

// Page is one reply's worth of a project's events.
type Page struct {
	Rows []Row
	// CompactedBefore is S, the newest sequence folded into the project's
	// latest snapshot, when the page reaches back before it (after < S):
	// the events up to S are no longer in the live tail. Zero otherwise.
	CompactedBefore uint64
}

// EventsPage returns up to limit (at most reducer.MaxEventsPage) live events of a
// project with a sequence above after, in order, and says whether the
// request reached back into what compaction took out of the live tail. It
// reads one committed state of the database and never waits for the
// writer.
func (l *Ledger) EventsPage(ctx context.Context, projectID string, after uint64, limit int) (Page, error) {
	if limit <= 0 || limit > reducer.MaxEventsPage {
		limit = reducer.MaxEventsPage
	}
	if l.isClosed() {
		return Page{}, ErrClosed
	}
	after = min(after, maxSeq)
	page := Page{Rows: []Row{}}
	err := l.drv.Read(ctx, func(r driver.Reader) error {
		if err := r.Live(ctx, projectID, after, maxSeq, limit, func(e driver.Event) error {
			page.Rows = append(page.Rows, Row(e))
			return nil
		}); err != nil {
			return err
		}
		s, ok, err := r.LatestSnapshot(ctx, projectID, maxSeq)
		if ok && after < s.Sequence {
			page.CompactedBefore = s.Sequence
		}
		return err
	})
	if err != nil {
		return Page{}, readError(err)
	}
	return page, nil
}

// Events returns up to limit (at most reducer.MaxEventsPage) live events of a project
// with a sequence above after, in order (EventsPage without the
// compaction mark).
func (l *Ledger) Events(ctx context.Context, projectID string, after uint64, limit int) ([]Row, error) {
	p, err := l.EventsPage(ctx, projectID, after, limit)
	return p.Rows, err
}

// EventsWhere returns the live events of a project up to sequence upto
// whose stored data keep accepts, in order, reading a page at a time
// (project_task_show's events of one task: O(the project's history)).
func (l *Ledger) EventsWhere(ctx context.Context, projectID string, upto uint64, keep func(data []byte) bool) ([]Row, error) {
	out := []Row{}
	for after := uint64(0); after < upto; {
		page, err := l.Events(ctx, projectID, after, reducer.MaxEventsPage)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if keep([]byte(r.Data)) {
				out = append(out, r)
			}
			after = r.Sequence
		}
		if len(page) < reducer.MaxEventsPage {
			break
		}
	}
	return out, nil
}

// MarkStale is one sweep for silent runs: for every project with a
// running run (the database's projects table says which, cached or not)
// that has one silent for longer than window at the ledger's clock, it
// executes reducer.MarkStale, which decides again inside the write
// transaction (a heartbeat committed first keeps the run alive). With a
// fence, each marking transaction first checks that the lease is still
// held (ErrLeaseLost when not: nothing is marked). It returns how many
// runs it marked.
func (l *Ledger) MarkStale(ctx context.Context, window time.Duration, fence *Lease) (marked int, err error) {
	defer func() { l.metrics.RunsMarkedStale(marked) }()
	ms := window.Milliseconds()
	return l.sweep(ctx, driver.ProjectFilter{Running: true}, fence,
		func(p *reducer.Project, now int64) bool { return len(reducer.StaleRuns(p, now, ms)) > 0 },
		func(id string) reducer.Command { return reducer.MarkStale{Project: id, Window: ms} })
}

// ExpireApprovals is one sweep for approvals nobody decides: for every
// project waiting for approval with an approval whose deadline passed more
// than grace ago at the ledger's clock, it executes
// reducer.ExpireApprovals, decided again inside the write transaction (a
// decision committed first stands). The daemon that asked decides its
// approvals at their deadline; this sweep is for those whose daemon is
// gone, on a database daemons share. Fenced as MarkStale is; it returns
// how many approvals it expired.
func (l *Ledger) ExpireApprovals(ctx context.Context, grace time.Duration, fence *Lease) (int, error) {
	ms := grace.Milliseconds()
	return l.sweep(ctx, driver.ProjectFilter{Status: string(reducer.ProjectWaitingApproval)}, fence,
		func(p *reducer.Project, now int64) bool { return len(reducer.OverdueApprovals(p, now, ms)) > 0 },
		func(id string) reducer.Command { return reducer.ExpireApprovals{Project: id, Grace: ms} })
}

// sweep executes cmd, fenced, for each project that filter names and due
// says has work at the ledger's clock, and returns how many events it
// appended.
func (l *Ledger) sweep(ctx context.Context, filter driver.ProjectFilter, fence *Lease,
	due func(p *reducer.Project, now int64) bool, cmd func(id string) reducer.Command) (int, error) {
	var ids []string
	if err := l.drv.Read(ctx, func(r driver.Reader) error {
		rows, err := r.Projects(ctx, filter)
		for _, row := range rows {
			ids = append(ids, row.ID)
		}
		return err
	}); err != nil {
		return 0, readError(err)
	}
	now, err := l.now(ctx)
	if err != nil {
		return 0, readError(err)
	}
	n := 0
	for _, id := range ids {
		p, err := l.Project(ctx, id)
		if err != nil {
			return n, err
		}
		if !due(p, now) {
			continue
		}
		res, err := l.enqueue(ctx, &request{cmd: cmd(id), fence: fence, reply: make(chan response, 1)})
		if err != nil {
			return n, err
		}
		n += len(res.Events)
	}
	return n, nil
}

// Lease is a lease held: a ledger-wide job (the sweeper) is done by the
// one holder of its lease, whose term fences every write it makes for it.
// Its JSON is what `scv ledger lease --json` prints.
type Lease struct {
	Name   string `json:"lease"`
	Holder string `json:"holder"`
	Term   uint64 `json:"term"`
	// Expires is when it ends unless renewed, in Unix milliseconds of the
	// ledger's clock.
	Expires int64 `json:"expires_unix_ms"`
}

// Leases are the leases of the ledger in drv as they stand, read without
// a daemon (`scv ledger lease`).
func Leases(ctx context.Context, drv driver.Driver) ([]Lease, error) {
	var out []Lease
	err := drv.Read(ctx, func(r driver.Reader) error {
		leases, err := r.Leases(ctx)
		for _, l := range leases {
			out = append(out, Lease{Name: l.Name, Holder: l.Holder, Term: l.Term, Expires: l.ExpiresMs})
		}
		return err
	})
	return out, err
}

// AcquireLease takes the lease name for holder for ttl, or renews it if
// holder has it; held is false, and nothing changes, while another holder
// has it unexpired. It runs as the writer, in its own transaction.
func (l *Ledger) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (lease Lease, held bool, err error) {
	err = l.exclusive(ctx, func(ctx context.Context, tx driver.Tx) error {
		now, err := l.now(ctx)
		if err != nil {
			return err
		}
		term, ok, err := tx.Lease(ctx, name, holder, ttl.Milliseconds(), now)
		lease, held = Lease{Name: name, Holder: holder, Term: term, Expires: now + ttl.Milliseconds()}, ok
		return err
	})
	return lease, held, err
}

// exclusive runs op as the writer, alone in one write transaction; op's
// error is returned and nothing of it is kept.
func (l *Ledger) exclusive(ctx context.Context, op func(context.Context, driver.Tx) error) error {
	_, err := l.enqueue(ctx, &request{op: op, reply: make(chan response, 1)})
	return err
}
