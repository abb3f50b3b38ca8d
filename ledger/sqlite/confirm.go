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

const (
	confirmColumns = `seq, question_id, kind, timestamp_ms, data`
	insertConfirm  = `INSERT INTO confirm_log (question_id, kind, timestamp_ms, data) VALUES (?, ?, ?, ?)`
	selectConfirm  = `SELECT ` + confirmColumns + ` FROM confirm_log WHERE seq > ? ORDER BY seq`
)

// AppendConfirm appends recs to the question log in one transaction, in
// order, and returns them with Seq set: all of them are kept or none. A
// record whose Data is not valid JSON is refused with
// reducer.ErrInvalidArgument and nothing is appended.
func (d *DB) AppendConfirm(ctx context.Context, recs ...local.ConfirmRecord) ([]local.ConfirmRecord, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	out := make([]local.ConfirmRecord, len(recs))
	copy(out, recs)
	for _, r := range out {
		if !json.Valid([]byte(r.Data)) {
			return nil, fmt.Errorf("%w: confirm record %s %s: data is not JSON", reducer.ErrInvalidArgument, r.QuestionID, r.Kind)
		}
	}
	err := d.write(ctx, func(tx *sqlx.Tx) error {
		for i := range out {
			res, err := tx.ExecContext(ctx, insertConfirm, out[i].QuestionID, out[i].Kind, out[i].Timestamp, out[i].Data)
			if err != nil {
				return err
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return err
			}
			out[i].Seq = uint64(seq)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ConfirmLog reads the question log after seq after, in order. It never
// waits for the writer.
func (d *DB) ConfirmLog(ctx context.Context, after uint64) ([]local.ConfirmRecord, error) {
	recs := []local.ConfirmRecord{}
	if err := d.r.SelectContext(ctx, &recs, selectConfirm, after); err != nil {
		return nil, fmt.Errorf("%w: read the question log: %v", driver.ErrStorage, err)
	}
	return recs, nil
}
