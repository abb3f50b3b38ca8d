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

const channelColumns = `channel, account, enabled, workspace, remote_tools, senders, purpose, owner_id, bot_id, source, email, credentials, state, updated_unix_ms`

const putChannelSQL = `INSERT INTO channel_accounts (` + channelColumns + `) VALUES (
	:channel, :account, :enabled, :workspace, :remote_tools, :senders, :purpose, :owner_id, :bot_id, :source, :email, :credentials, :state, :updated_unix_ms)
	ON CONFLICT (channel, account) DO UPDATE SET
	enabled = excluded.enabled, workspace = excluded.workspace, remote_tools = excluded.remote_tools,
	senders = excluded.senders, purpose = excluded.purpose, owner_id = excluded.owner_id, bot_id = excluded.bot_id,
	source = excluded.source, email = excluded.email, credentials = excluded.credentials, state = excluded.state,
	updated_unix_ms = excluded.updated_unix_ms`

const deleteChannelSQL = `DELETE FROM channel_accounts WHERE channel = ? AND account = ?`

// DeleteChannelAccount removes the account's row (its settings,
// credentials and state) and reports whether it was there.
func (d *DB) DeleteChannelAccount(ctx context.Context, channel, account string) (bool, error) {
	return d.delete(ctx, deleteChannelSQL, channel, account)
}

// ReplaceChannelAccounts deletes the accounts del names ({channel,
// account}; one that is not there is no error) and puts every account of
// put (inserting it, or replacing every column of the row with the same
// channel and account), in one transaction: all of it is kept or none.
// Credentials or state that are not JSON, and email settings that are
// neither empty nor JSON, are refused with reducer.ErrInvalidArgument and
// nothing changes.
func (d *DB) ReplaceChannelAccounts(ctx context.Context, put []local.ChannelAccount, del [][2]string) error {
	rows := make([]local.ChannelAccount, len(put))
	now := d.clock().UnixMilli()
	for i, a := range put {
		for _, v := range []*string{&a.Credentials, &a.State} {
			if *v == "" {
				*v = "{}"
			}
			if !json.Valid([]byte(*v)) {
				return fmt.Errorf("%w: channel account %s:%s: credentials and state must be JSON", reducer.ErrInvalidArgument, a.Channel, a.Account)
			}
		}
		if a.Email != "" && !json.Valid([]byte(a.Email)) {
			return fmt.Errorf("%w: channel account %s:%s: email settings must be JSON", reducer.ErrInvalidArgument, a.Channel, a.Account)
		}
		if a.Updated == 0 {
			a.Updated = now
		}
		rows[i] = a
	}
	return d.write(ctx, func(tx *sqlx.Tx) error {
		for _, k := range del {
			if _, err := tx.ExecContext(ctx, deleteChannelSQL, k[0], k[1]); err != nil {
				return err
			}
		}
		for _, a := range rows {
			if _, err := tx.NamedExecContext(ctx, putChannelSQL, a); err != nil {
				return err
			}
		}
		return nil
	})
}

// ChannelAccounts lists every account, ordered by channel and account.
func (d *DB) ChannelAccounts(ctx context.Context) ([]local.ChannelAccount, error) {
	as := []local.ChannelAccount{}
	if err := d.r.SelectContext(ctx, &as, `SELECT `+channelColumns+` FROM channel_accounts ORDER BY channel, account`); err != nil {
		return nil, fmt.Errorf("%w: list channel accounts: %v", driver.ErrStorage, err)
	}
	return as, nil
}
