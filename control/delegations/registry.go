// Package delegations is the daemon's registry of delegated agent runs:
// commands that an `scv delegate` process (the owner) started in their own
// process group and registered (docs/delegations.md). The registry lives
// in memory and in the machine's local store, so that a restarted daemon
// still knows what runs; its reaper, a service the daemon starts and
// stops, stops the trees whose owner is gone. Process trees are found and
// signalled through package control/proc.
package delegations

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"scv/control/api"
	"scv/control/proc"
	"scv/control/startstop"
	"scv/ledger/local"
	"scv/reducer"
)

// Registry is the daemon's registry of delegated agent runs. It keeps the
// registry in Store, so that a restarted daemon still knows what runs, and
// stops trees whose owner is gone (Sweep, every SweepEvery once started).
// It implements control.Delegations.
type Registry struct {
	Store local.Delegations
	// Grace is how long a stopped tree has between SIGTERM and SIGKILL
	// (0: proc.DefaultKillGrace).
	Grace  time.Duration
	Clock  func() time.Time
	Logger *slog.Logger
	// SweepEvery is how often the reaper looks for orphans (0:
	// DefaultSweepEvery).
	SweepEvery time.Duration

	loop    startstop.Loop
	mu      sync.Mutex
	entries map[string]*delegation
	reaped  uint64
	boot    string
}

// delegation is one registered run. stopping marks an entry whose tree is
// being stopped: one caller stops it, the others leave it alone.
type delegation struct {
	local.Delegation
	orphaned bool
	stopping bool
	// jobs is how many background jobs of its own the delegation last
	// reported (delegation_update); it is not kept across a restart of
	// the daemon, and the delegation reports again.
	jobs uint32
}

// Delegation defaults.
const (
	// DefaultSweepEvery is how often the daemon looks for orphans.
	DefaultSweepEvery = 500 * time.Millisecond
	maxHandle         = 64
)

func (r *Registry) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

func (r *Registry) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Load reads the registry. Entries of an earlier boot are removed: every
// process they named is gone, and their PIDs may name others now.
func (r *Registry) Load(ctx context.Context) error {
	rows, err := r.Store.Delegations(ctx)
	if err != nil {
		return err
	}
	boot, err := bootID()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.boot = boot
	r.entries = map[string]*delegation{}
	r.mu.Unlock()
	for _, d := range rows {
		if d.BootID != boot {
			if _, err := r.Store.DeleteDelegation(ctx, d.Handle); err != nil {
				return err
			}
			r.logger().Info("delegation of an earlier boot dropped", "handle", d.Handle)
			continue
		}
		r.mu.Lock()
		r.entries[d.Handle] = &delegation{Delegation: d}
		r.mu.Unlock()
	}
	return nil
}

// bootID names this boot of the machine.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// validHandle: 1 to 64 characters of [0-9A-Za-z_-], so that a handle
// fits an environment variable and a comma-separated chain as is.
func validHandle(h string) bool {
	if h == "" || len(h) > maxHandle {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func invalid(format string, args ...any) error {
	return api.Errorf(api.ErrInvalidArgument, format, args...)
}

// Register checks c against the processes it names and records it: the
// command's process must be alive (or just exited and not yet reaped), lead
// its own process group, and be a child of the owner. (Its tag is not
// checked: /proc/PID/environ is empty while the process is in the middle
// of an exec.)
func (r *Registry) Register(ctx context.Context, c api.CmdDelegationRegister) (api.DelegationInfo, error) {
	if !validHandle(c.Handle) {
		return api.DelegationInfo{}, invalid("handle %q: want 1 to %d characters of [0-9A-Za-z_-]", c.Handle, maxHandle)
	}
	if err := reducer.ValidName("agent", c.Agent); err != nil {
		return api.DelegationInfo{}, err
	}
	if len(c.Session) > 200 {
		return api.DelegationInfo{}, invalid("session is longer than 200 bytes")
	}
	chain := proc.ParseChain(c.Parent)
	if len(chain) == 0 || chain[len(chain)-1] != c.Handle || strings.Count(c.Parent, ",")+1 != len(chain) {
		return api.DelegationInfo{}, invalid("parent %q: want the SCV_PARENT chain, comma-separated, ending with the handle %s", c.Parent, c.Handle)
	}
	for _, h := range chain {
		if !validHandle(h) {
			return api.DelegationInfo{}, invalid("parent %q: %q is not a handle", c.Parent, h)
		}
	}
	if c.Chat != "" {
		if _, _, err := api.ParseChat(c.Chat); err != nil {
			return api.DelegationInfo{}, err
		}
	}
	if !filepath.IsAbs(c.Cwd) {
		return api.DelegationInfo{}, invalid("cwd %q is not an absolute path", c.Cwd)
	}
	owner, err := proc.Identify(int(c.OwnerPID))
	if err != nil || !owner.Alive() {
		return api.DelegationInfo{}, invalid("owner process %d is not running", c.OwnerPID)
	}
	p, err := proc.Read(int(c.PID))
	if err != nil {
		return api.DelegationInfo{}, invalid("process %d is not running", c.PID)
	}
	switch {
	case p.PPID != owner.PID:
		return api.DelegationInfo{}, invalid("process %d is not a child of owner %d", c.PID, c.OwnerPID)
	case p.PGID != p.PID:
		return api.DelegationInfo{}, invalid("process %d does not lead its own process group", c.PID)
	}
	r.mu.Lock()
	boot := r.boot
	r.mu.Unlock()
	d := local.Delegation{
		Handle: c.Handle, Agent: c.Agent, Session: c.Session, Depth: uint32(len(chain)), Parent: c.Parent,
		PID: p.PID, PIDStart: p.Start, OwnerPID: owner.PID, OwnerStart: owner.Start, BootID: boot,
		Cwd: filepath.Clean(c.Cwd), Started: r.now().UnixMilli(), Chat: c.Chat,
	}
	if err := r.Store.PutDelegation(ctx, d); err != nil {
		return api.DelegationInfo{}, err
	}
	e := &delegation{Delegation: d}
	r.mu.Lock()
	r.entries[d.Handle] = e
	r.mu.Unlock()
	r.logger().Info("delegation registered", "handle", d.Handle, "agent", d.Agent, "pid", d.PID, "owner", d.OwnerPID)
	return r.info(e), nil
}

// Done ends a delegation whose command has exited: whatever is left of its
// tree is stopped, and the entry removed. It reports whether anything had
// to be stopped. A handle being stopped by someone else is left to them.
func (r *Registry) Done(ctx context.Context, handle string) (stopped bool, err error) {
	e, err := r.claim(handle)
	if err != nil || e == nil {
		return false, err
	}
	n, err := r.stop(ctx, e)
	return n > 0, err
}

// claim marks handle's entry as being stopped by the caller; nil (and no
// error) when someone else already is.
func (r *Registry) claim(handle string) (*delegation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[handle]
	if !ok {
		return nil, fmt.Errorf("%w: delegation %q", api.ErrNotFound, handle)
	}
	if e.stopping {
		return nil, nil
	}
	e.stopping = true
	return e, nil
}

// stop stops e's tree and removes the entry; it returns how many
// processes it signalled. If the tree would not stop, the entry stays, to
// be tried again.
func (r *Registry) stop(ctx context.Context, e *delegation) (int, error) {
	t := proc.Tree{Handle: e.Handle, Leader: proc.Ident{PID: e.PID, Start: e.PIDStart}}
	grace := r.Grace
	if grace <= 0 {
		grace = proc.DefaultKillGrace
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+5*time.Second)
	defer cancel()
	n, err := t.Stop(stopCtx, grace)
	if err == nil {
		_, err = r.Store.DeleteDelegation(context.WithoutCancel(ctx), e.Handle)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		e.stopping = false
		return n, err
	}
	delete(r.entries, e.Handle)
	return n, nil
}

// Kill stops one delegation by handle.
func (r *Registry) Kill(ctx context.Context, handle string) error {
	e, err := r.claim(handle)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("%w: delegation %s is already being stopped", api.ErrConflict, handle)
	}
	n, err := r.stop(ctx, e)
	r.logger().Info("delegation killed", "handle", handle, "signalled", n, "err", err)
	return err
}

// Sweep marks delegations whose owner is gone as orphaned and stops them,
// counting each in reaped; it returns the handles it stopped.
func (r *Registry) Sweep(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	var orphans []*delegation
	for _, e := range r.entries {
		if !e.orphaned && !(proc.Ident{PID: e.OwnerPID, Start: e.OwnerStart}).Alive() {
			e.orphaned = true
		}
		if e.orphaned && !e.stopping {
			e.stopping = true
			orphans = append(orphans, e)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(orphans, func(a, b *delegation) int { return strings.Compare(a.Handle, b.Handle) })
	var killed []string
	var errs []error
	for _, e := range orphans {
		n, err := r.stop(ctx, e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		r.reaped++
		r.mu.Unlock()
		killed = append(killed, e.Handle)
		r.logger().Info("orphaned delegation reaped", "handle", e.Handle, "owner", e.OwnerPID, "signalled", n)
	}
	if len(errs) > 0 {
		return killed, fmt.Errorf("stop orphans: %w", errs[0])
	}
	return killed, nil
}

// Start starts the reaper: it sweeps for orphans every SweepEvery until
// Stop.
func (r *Registry) Start(ctx context.Context) error {
	every := r.SweepEvery
	if every <= 0 {
		every = DefaultSweepEvery
	}
	r.loop.Run(ctx, func(ctx context.Context) { r.run(ctx, every) })
	return nil
}

// Stop stops the reaper and waits for it.
func (r *Registry) Stop() { r.loop.Stop() }

// run sweeps every interval until ctx ends.
func (r *Registry) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.Sweep(ctx); err != nil {
				r.logger().Error("sweep delegations", "err", err)
			}
		}
	}
}

// Active reports whether handle is registered.
func (r *Registry) Active(handle string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.entries[handle]
	return ok
}

// ChatOf is the chat that started the work the SCV_PARENT chain parent
// names: that of its innermost registered delegation that has one, or "".
func (r *Registry) ChatOf(parent string) string {
	chain := proc.ParseChain(parent)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(chain) - 1; i >= 0; i-- {
		if e, ok := r.entries[chain[i]]; ok && e.Chat != "" {
			return e.Chat
		}
	}
	return ""
}

// Update records the background jobs that a process of the delegation
// reports: its owner (the `scv delegate` process), or a process started
// in it (whose SCV_DELEGATION is its handle, such as a nested SCV). Anyone
// else is refused, and nothing changes.
func (r *Registry) Update(handle string, jobs uint32, peer int) (api.DelegationInfo, error) {
	r.mu.Lock()
	e, ok := r.entries[handle]
	r.mu.Unlock()
	if !ok {
		return api.DelegationInfo{}, fmt.Errorf("%w: delegation %q", api.ErrNotFound, handle)
	}
	owner := peer > 0 && (proc.Ident{PID: e.OwnerPID, Start: e.OwnerStart}) == identOf(peer)
	if !owner && proc.Innermost(peer) != handle {
		return api.DelegationInfo{}, api.NewError(api.CodeForbidden, api.ReasonForbidden,
			"process %d does not own delegation %s: only its owner or a process started in it reports its jobs", peer, handle)
	}
	r.mu.Lock()
	e.jobs = jobs
	r.mu.Unlock()
	r.logger().Info("delegation updated", "handle", handle, "background_jobs", jobs)
	return r.info(e), nil
}

// identOf is pid's identity now, or the zero Ident.
func identOf(pid int) proc.Ident {
	id, _ := proc.Identify(pid)
	return id
}

// Busy says what of the delegations a restart waits for: those with
// background jobs.
func (r *Registry) Busy() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.entries {
		if e.jobs > 0 && !e.orphaned {
			out = append(out, fmt.Sprintf("delegation %s (%d background jobs)", e.Handle, e.jobs))
		}
	}
	slices.Sort(out)
	return out
}

// Summary counts running delegations (orphans awaiting cleanup not
// included) and those reaped since the daemon started.
func (r *Registry) Summary() api.DelegationSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := api.DelegationSummary{Reaped: r.reaped}
	for _, e := range r.entries {
		if !e.orphaned {
			s.Active++
		}
	}
	return s
}

// List is the summary with its entries, oldest first; all adds orphans
// awaiting cleanup.
func (r *Registry) List(all bool) api.DelegationSummary {
	s := r.Summary()
	r.mu.Lock()
	var es []*delegation
	for _, e := range r.entries {
		if all || !e.orphaned {
			es = append(es, e)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(es, func(a, b *delegation) int {
		if c := a.Started - b.Started; c != 0 {
			return int(max(min(c, 1), -1))
		}
		return strings.Compare(a.Handle, b.Handle)
	})
	for _, e := range es {
		s.Entries = append(s.Entries, r.info(e))
	}
	return s
}

// info is e on the wire, with its live process count.
func (r *Registry) info(e *delegation) api.DelegationInfo {
	r.mu.Lock()
	orphaned, jobs := e.orphaned, e.jobs
	r.mu.Unlock()
	t := proc.Tree{Handle: e.Handle, Leader: proc.Ident{PID: e.PID, Start: e.PIDStart}}
	d := api.DelegationInfo{
		Handle: e.Handle, Agent: e.Agent, Session: e.Session, Depth: e.Depth,
		PID: uint32(e.PID), OwnerPID: uint32(e.OwnerPID), Processes: uint32(t.Count()),
		Cwd: e.Cwd, StartedUnixSeconds: uint64(e.Started / 1000), Orphaned: orphaned,
	}
	if jobs > 0 {
		d.BackgroundJobs = &jobs
	}
	return d
}
