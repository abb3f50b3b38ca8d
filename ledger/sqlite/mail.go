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
	mailColumns = `seq, account, uid_validity, uid, kind, timestamp_ms, data`
	insertMail  = `INSERT INTO mail_journal (account, uid_validity, uid, kind, timestamp_ms, data) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (account, uid_validity, uid, kind) DO NOTHING`
	selectMail = `SELECT ` + mailColumns + ` FROM mail_journal WHERE account = ? AND seq > ? ORDER BY seq`
	insertItem = `INSERT INTO mail_outbox (account, uid_validity, uid, data) VALUES (?, ?, ?, ?)
		ON CONFLICT (account, uid_validity, uid) DO NOTHING`
	deleteItem  = `DELETE FROM mail_outbox WHERE account = ? AND uid_validity = ? AND uid = ?`
	selectItems = `SELECT seq, account, uid_validity, uid, data FROM mail_outbox WHERE account = ? ORDER BY seq`
)

// AppendMail appends recs to the mail journal, puts the outbox items put
// and deletes the outbox items of the mails del names, in one
// transaction: all of it is kept or none. Data that is not JSON is refused
// with reducer.ErrInvalidArgument; a step a mail has taken already, an
// item of a mail that has one, or the deletion of an item that is not
// there with reducer.ErrConflict.
func (d *DB) AppendMail(ctx context.Context, recs []local.MailRecord, put []local.MailItem, del []local.MailKey) ([]local.MailRecord, error) {
	out := make([]local.MailRecord, len(recs))
	copy(out, recs)
	for _, r := range out {
		if !json.Valid([]byte(r.Data)) {
			return nil, fmt.Errorf("%w: mail record %s %d/%d %s: data is not JSON", reducer.ErrInvalidArgument, r.Account, r.UIDValidity, r.UID, r.Kind)
		}
	}
	for _, it := range put {
		if !json.Valid([]byte(it.Data)) {
			return nil, fmt.Errorf("%w: outbox item %s %d/%d: data is not JSON", reducer.ErrInvalidArgument, it.Account, it.UIDValidity, it.UID)
		}
	}
	if len(out)+len(put)+len(del) == 0 {
		return out, nil
	}
	err := d.write(ctx, func(tx *sqlx.Tx) error {
		for i, r := range out {
			res, err := tx.ExecContext(ctx, insertMail, r.Account, r.UIDValidity, r.UID, r.Kind, r.Timestamp, r.Data)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("%w: mail %s %d/%d is %s already", reducer.ErrConflict, r.Account, r.UIDValidity, r.UID, r.Kind)
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return err
			}
			out[i].Seq = uint64(seq)
		}
		for _, k := range del {
			res, err := tx.ExecContext(ctx, deleteItem, k.Account, k.UIDValidity, k.UID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("%w: mail %s %d/%d is not in the outbox", reducer.ErrConflict, k.Account, k.UIDValidity, k.UID)
			}
		}
		for _, it := range put {
			res, err := tx.ExecContext(ctx, insertItem, it.Account, it.UIDValidity, it.UID, it.Data)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("%w: mail %s %d/%d is in the outbox already", reducer.ErrConflict, it.Account, it.UIDValidity, it.UID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MailJournal reads account's records of the mail journal after seq
// after, in order. It never waits for the writer.
func (d *DB) MailJournal(ctx context.Context, account string, after uint64) ([]local.MailRecord, error) {
	recs := []local.MailRecord{}
	if err := d.r.SelectContext(ctx, &recs, selectMail, account, after); err != nil {
		return nil, fmt.Errorf("%w: read the mail journal: %v", driver.ErrStorage, err)
	}
	return recs, nil
}

// MailOutbox reads account's outbox, oldest first. It never waits for the
// writer.
func (d *DB) MailOutbox(ctx context.Context, account string) ([]local.MailItem, error) {
	items := []local.MailItem{}
	if err := d.r.SelectContext(ctx, &items, selectItems, account); err != nil {
		return nil, fmt.Errorf("%w: read the mail outbox: %v", driver.ErrStorage, err)
	}
	return items, nil
}
