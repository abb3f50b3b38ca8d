package agents

import (
	"context"
	"slices"
	"strings"

	"scv/control/api"
	"scv/control/delegations"
	"scv/control/proc"
)

// Delegations is the daemon's delegations as `status` and `delegations`
// show them: those `scv delegate` registered (Registry) and the live
// agents (Agents), which are delegations too, owned by the daemon. It is
// the control.Service's Delegations.
type Delegations struct {
	Registry *delegations.Registry
	Agents   *Manager
}

// Active reports whether handle is a running delegation or live agent.
func (d Delegations) Active(handle string) bool {
	return d.Registry.Active(handle) || d.Agents.agent(handle) != nil
}

// Summary counts both; idle is the live agents between turns with no
// background job.
func (d Delegations) Summary() api.DelegationSummary {
	s := d.Registry.Summary()
	live, idle := d.Agents.counts()
	s.Active += live
	s.Idle = &idle
	return s
}

// List is the summary with every entry, oldest first.
func (d Delegations) List(all bool) api.DelegationSummary {
	s := d.Summary()
	s.Entries = d.Registry.List(all).Entries
	for _, a := range d.Agents.live() {
		s.Entries = append(s.Entries, a.delegation())
	}
	slices.SortStableFunc(s.Entries, func(a, b api.DelegationInfo) int {
		if a.StartedUnixSeconds != b.StartedUnixSeconds {
			return int(int64(a.StartedUnixSeconds) - int64(b.StartedUnixSeconds))
		}
		return strings.Compare(a.Handle, b.Handle)
	})
	return s
}

// Register registers a delegation of `scv delegate`.
func (d Delegations) Register(ctx context.Context, c api.CmdDelegationRegister) (api.DelegationInfo, error) {
	return d.Registry.Register(ctx, c)
}

// Done forgets a delegation of `scv delegate` whose command exited.
func (d Delegations) Done(ctx context.Context, handle string) (bool, error) {
	if d.Agents.agent(handle) != nil {
		return false, api.Errorf(api.ErrInvalidArgument, "%s is a live agent, owned by the daemon: stop it with agent_stop", handle)
	}
	return d.Registry.Done(ctx, handle)
}

// Kill stops a delegation, or a live agent (as agent_stop does).
func (d Delegations) Kill(ctx context.Context, handle string) error {
	if d.Agents.agent(handle) != nil {
		_, err := d.Agents.StopAgent(ctx, handle)
		return err
	}
	return d.Registry.Kill(ctx, handle)
}

// Sweep stops the orphaned delegations; a live agent is never one.
func (d Delegations) Sweep(ctx context.Context) ([]string, error) { return d.Registry.Sweep(ctx) }

// Update records the background jobs a process of the delegation (or live
// agent) reports; see delegations.Registry.Update for who may.
func (d Delegations) Update(ctx context.Context, c api.CmdDelegationUpdate) (api.DelegationInfo, error) {
	peer := 0
	if p, ok := api.PeerOf(ctx); ok {
		peer = int(p.PID)
	}
	a := d.Agents.agent(c.Handle)
	if a == nil {
		return d.Registry.Update(c.Handle, c.BackgroundJobs, peer)
	}
	if peer <= 0 || proc.Innermost(peer) != c.Handle {
		return api.DelegationInfo{}, api.NewError(api.CodeForbidden, api.ReasonForbidden,
			"process %d does not own live agent %s: only a process started in it reports its jobs", peer, a.name)
	}
	a.mu.Lock()
	a.jobs = c.BackgroundJobs
	a.mu.Unlock()
	a.log.Info("live agent updated", "background_jobs", c.BackgroundJobs)
	return a.delegation(), nil
}

// Busy says what a restart waits for: live agents' turns, and background
// jobs of delegations and live agents.
func (d Delegations) Busy() []string {
	return append(d.Agents.Busy(), d.Registry.Busy()...)
}

// ChatOf is the chat that started the work the SCV_PARENT chain parent
// names: that of its innermost live agent or delegation that has one.
func (d Delegations) ChatOf(parent string) string {
	chain := proc.ParseChain(parent)
	for i := len(chain) - 1; i >= 0; i-- {
		if c := d.Agents.ChatOf(chain[i]); c != "" {
			return c
		}
		if c := d.Registry.ChatOf(chain[i]); c != "" {
			return c
		}
	}
	return ""
}
