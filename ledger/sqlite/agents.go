package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"

	"scv/ledger/driver"
	"scv/ledger/local"
	"scv/reducer"
)

const agentColumns = `handle, name, spec, conversation, turn, run_id, started_unix_ms`

// PutAgent writes a, inserting it or replacing its row. A name that
// another handle has is refused with reducer.ErrConflict, a spec that is
// not a JSON object with reducer.ErrInvalidArgument; nothing changes then.
func (d *DB) PutAgent(ctx context.Context, a local.Agent) error {
	var spec map[string]any
	if json.Unmarshal([]byte(a.Spec), &spec) != nil || spec == nil {
		return fmt.Errorf("%w: agent %s: spec is not a JSON object", reducer.ErrInvalidArgument, a.Name)
	}
	return d.write(ctx, func(tx *sqlx.Tx) error {
		var other string
		err := tx.GetContext(ctx, &other, `SELECT handle FROM agents WHERE name = ? AND handle <> ?`, a.Name, a.Handle)
		if err == nil {
			return fmt.Errorf("%w: agent name %q is taken by %s", reducer.ErrConflict, a.Name, other)
		}
		_, err = tx.NamedExecContext(ctx, `INSERT INTO agents (`+agentColumns+`) VALUES (
			:handle, :name, :spec, :conversation, :turn, :run_id, :started_unix_ms)
			ON CONFLICT (handle) DO UPDATE SET name = excluded.name, spec = excluded.spec,
			conversation = excluded.conversation, turn = excluded.turn, run_id = excluded.run_id,
			started_unix_ms = excluded.started_unix_ms`, a)
		return err
	})
}

// DeleteAgent removes handle and reports whether it was there.
func (d *DB) DeleteAgent(ctx context.Context, handle string) (bool, error) {
	return d.delete(ctx, `DELETE FROM agents WHERE handle = ?`, handle)
}

// Agents lists the live agents, oldest first.
func (d *DB) Agents(ctx context.Context) ([]local.Agent, error) {
	as := []local.Agent{}
	if err := d.r.SelectContext(ctx, &as, `SELECT `+agentColumns+` FROM agents ORDER BY started_unix_ms, handle`); err != nil {
		return nil, fmt.Errorf("%w: list agents: %v", driver.ErrStorage, err)
	}
	return as, nil
}
