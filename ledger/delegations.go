package ledger

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"scv/reducer"
)

// Delegation is one row of the delegation registry: an agent command an
// `scv delegate` process (the owner) started and registered. The registry
// is the daemon's operational state, kept so that a restarted daemon still
// knows what runs; it is not project history and has no events.
type Delegation struct {
	Handle  string `db:"handle"`
	Agent   string `db:"agent"`
	Session string `db:"session"`
	Depth   uint32 `db:"depth"`
	// Parent is the SCV_PARENT chain the command was started with, the
	// handle itself last.
	Parent string `db:"parent"`
	// The command's process (and process group) and its owner, each named
	// by PID and start time (clock ticks since boot) within BootID.
	PID        int    `db:"pid"`
	PIDStart   uint64 `db:"pid_start"`
	OwnerPID   int    `db:"owner_pid"`
	OwnerStart uint64 `db:"owner_start"`
	BootID     string `db:"boot_id"`
	Cwd        string `db:"cwd"`
	// Started is when the daemon registered it, in Unix milliseconds.
	Started int64 `db:"started_unix_ms"`
	// Chat is the chat that started its work (`<channel>:<account>`), or
	// "".
	Chat string `db:"chat"`
}

const delegationColumns = `handle, agent, session, depth, parent, pid, pid_start, owner_pid, owner_start, boot_id, cwd, started_unix_ms, chat`

// PutDelegation registers d. A handle that is already registered is
// refused with reducer.ErrConflict and nothing changes.
func (l *Ledger) PutDelegation(ctx context.Context, d Delegation) error {
	return l.exclusive(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM delegations WHERE handle = ?`, d.Handle); err != nil {
			return storage(err)
		}
		if n > 0 {
			return fmt.Errorf("%w: delegation %s is already registered", reducer.ErrConflict, d.Handle)
		}
		_, err := tx.NamedExecContext(ctx, `INSERT INTO delegations (`+delegationColumns+`) VALUES (
			:handle, :agent, :session, :depth, :parent, :pid, :pid_start, :owner_pid, :owner_start, :boot_id, :cwd, :started_unix_ms, :chat)`, d)
		if err != nil {
			return storage(err)
		}
		return nil
	})
}

// DeleteDelegation removes handle from the registry and reports whether it
// was there.
func (l *Ledger) DeleteDelegation(ctx context.Context, handle string) (bool, error) {
	var found bool
	err := l.exclusive(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM delegations WHERE handle = ?`, handle)
		if err != nil {
			return storage(err)
		}
		n, _ := res.RowsAffected()
		found = n > 0
		return nil
	})
	return found, err
}

// Delegations lists the registry, oldest first.
func (l *Ledger) Delegations(ctx context.Context) ([]Delegation, error) {
	ds := []Delegation{}
	if err := l.r.SelectContext(ctx, &ds, `SELECT `+delegationColumns+` FROM delegations ORDER BY started_unix_ms, handle`); err != nil {
		return nil, fmt.Errorf("%w: list delegations: %v", ErrStorage, err)
	}
	return ds, nil
}
