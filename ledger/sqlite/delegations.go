package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"scv/ledger/driver"
	"scv/ledger/local"
	"scv/reducer"
)

const delegationColumns = `handle, agent, session, depth, parent, pid, pid_start, owner_pid, owner_start, boot_id, cwd, started_unix_ms, chat`

// PutDelegation registers d. A handle that is already registered is
// refused with reducer.ErrConflict and nothing changes.
func (d *DB) PutDelegation(ctx context.Context, del local.Delegation) error {
	return d.write(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.NamedExecContext(ctx, `INSERT INTO delegations (`+delegationColumns+`) VALUES (
			:handle, :agent, :session, :depth, :parent, :pid, :pid_start, :owner_pid, :owner_start, :boot_id, :cwd, :started_unix_ms, :chat)
			ON CONFLICT (handle) DO NOTHING`, del)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: delegation %s is already registered", reducer.ErrConflict, del.Handle)
		}
		return nil
	})
}

// DeleteDelegation removes handle from the registry and reports whether it
// was there.
func (d *DB) DeleteDelegation(ctx context.Context, handle string) (bool, error) {
	return d.delete(ctx, `DELETE FROM delegations WHERE handle = ?`, handle)
}

// Delegations lists the registry, oldest first.
func (d *DB) Delegations(ctx context.Context) ([]local.Delegation, error) {
	ds := []local.Delegation{}
	if err := d.r.SelectContext(ctx, &ds, `SELECT `+delegationColumns+` FROM delegations ORDER BY started_unix_ms, handle`); err != nil {
		return nil, fmt.Errorf("%w: list delegations: %v", driver.ErrStorage, err)
	}
	return ds, nil
}

// delete runs query, a DELETE of one row, with args in a transaction of
// its own and reports whether the row was there.
func (d *DB) delete(ctx context.Context, query string, args ...any) (bool, error) {
	var found bool
	err := d.write(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		found = n > 0
		return nil
	})
	return found, err
}

// write runs fn in one transaction on the writer connection; an error of
// fn that is none of the store's own is a storage failure.
func (d *DB) write(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	if d.w == nil {
		return fmt.Errorf("%w: %s is open read-only", driver.ErrStorage, d.path)
	}
	tx, err := d.w.BeginTxx(ctx, nil)
	if err != nil {
		return d.fail(err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		if errors.Is(err, reducer.ErrConflict) || errors.Is(err, reducer.ErrInvalidArgument) {
			return err
		}
		return d.fail(err)
	}
	return d.fail(tx.Commit())
}
