package ledger

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"

	"scv/reducer"
)

// ConfirmRecord is one step of a question to the owner (asked, answered,
// expired, withdrawn, failed), one row of the append-only confirm_log: the
// audit of who decided what and when. Like the delegation registry it is
// not project history and has no events; unlike it, it is never changed
// or removed (the schema's triggers refuse UPDATE and DELETE).
type ConfirmRecord struct {
	// Seq is the row's place in the log, strictly increasing, set by
	// AppendConfirm.
	Seq        uint64 `db:"seq"`
	QuestionID string `db:"question_id"`
	Kind       string `db:"kind"`
	// Timestamp is the daemon's clock when the step was taken, in Unix
	// milliseconds.
	Timestamp int64 `db:"timestamp_ms"`
	// Data is the step's evidence, a JSON object.
	Data string `db:"data"`
}

const (
	confirmColumns = `seq, question_id, kind, timestamp_ms, data`
	insertConfirm  = `INSERT INTO confirm_log (question_id, kind, timestamp_ms, data) VALUES (?, ?, ?, ?)`
	selectConfirm  = `SELECT ` + confirmColumns + ` FROM confirm_log WHERE seq > ? ORDER BY seq`
)

// AppendConfirm appends recs to the question log in one transaction, in
// order, and returns them with Seq set: all of them are kept or none. A
// record whose Data is not valid JSON is refused with
// reducer.ErrInvalidArgument and nothing is appended.
func (l *Ledger) AppendConfirm(ctx context.Context, recs ...ConfirmRecord) ([]ConfirmRecord, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	out := make([]ConfirmRecord, len(recs))
	copy(out, recs)
	for _, r := range out {
		if !json.Valid([]byte(r.Data)) {
			return nil, fmt.Errorf("%w: confirm record %s %s: data is not JSON", reducer.ErrInvalidArgument, r.QuestionID, r.Kind)
		}
	}
	err := l.exclusive(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		for i := range out {
			res, err := tx.ExecContext(ctx, insertConfirm, out[i].QuestionID, out[i].Kind, out[i].Timestamp, out[i].Data)
			if err != nil {
				return storage(err)
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return storage(err)
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
func (l *Ledger) ConfirmLog(ctx context.Context, after uint64) ([]ConfirmRecord, error) {
	recs := []ConfirmRecord{}
	if err := l.r.SelectContext(ctx, &recs, selectConfirm, after); err != nil {
		return nil, fmt.Errorf("%w: read the question log: %v", ErrStorage, err)
	}
	return recs, nil
}
