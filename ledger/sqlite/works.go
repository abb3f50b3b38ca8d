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

// PutWork writes w, inserting it or replacing the row of its project. A
// spec that is not a JSON object is refused with
// reducer.ErrInvalidArgument; nothing changes then.
func (d *DB) PutWork(ctx context.Context, w local.Work) error {
	var spec map[string]any
	if json.Unmarshal([]byte(w.Spec), &spec) != nil || spec == nil {
		return fmt.Errorf("%w: work of %s: spec is not a JSON object", reducer.ErrInvalidArgument, w.Project)
	}
	return d.write(ctx, func(tx *sqlx.Tx) error {
		_, err := tx.NamedExecContext(ctx, `INSERT INTO works (project, spec, started_unix_ms)
			VALUES (:project, :spec, :started_unix_ms)
			ON CONFLICT (project) DO UPDATE SET spec = excluded.spec, started_unix_ms = excluded.started_unix_ms`, w)
		return err
	})
}

// DeleteWork removes project's work and reports whether it was there.
func (d *DB) DeleteWork(ctx context.Context, project string) (bool, error) {
	return d.delete(ctx, `DELETE FROM works WHERE project = ?`, project)
}

// Works lists the works, oldest first.
func (d *DB) Works(ctx context.Context) ([]local.Work, error) {
	ws := []local.Work{}
	if err := d.r.SelectContext(ctx, &ws, `SELECT project, spec, started_unix_ms FROM works ORDER BY started_unix_ms, project`); err != nil {
		return nil, fmt.Errorf("%w: list works: %v", driver.ErrStorage, err)
	}
	return ws, nil
}
