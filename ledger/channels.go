package ledger

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"

	"scv/reducer"
)

// ChannelAccount is one row of the channel account settings: the daemon's
// configuration of one chat account, changed in place by channel_set,
// channel_logout and reload. Like the delegation registry it is
// operational state, not project history, and has no events. The ledger
// stores what it is given; what the values mean (and which are valid) is
// the channel manager's business (package control/channels).
type ChannelAccount struct {
	Channel     string `db:"channel"`
	Account     string `db:"account"`
	Enabled     bool   `db:"enabled"`
	Workspace   string `db:"workspace"`
	RemoteTools string `db:"remote_tools"`
	Senders     string `db:"senders"`
	Purpose     string `db:"purpose"`
	OwnerID     string `db:"owner_id"`
	BotID       string `db:"bot_id"`
	// Source is who last set the account: "api" or "file".
	Source string `db:"source"`
	// Credentials and State are the connector's own, opaque JSON; empty
	// is stored as "{}".
	Credentials string `db:"credentials"`
	State       string `db:"state"`
	// Updated is when the row was last written, in Unix milliseconds;
	// zero is stamped with the ledger's clock.
	Updated int64 `db:"updated_unix_ms"`
}

const channelColumns = `channel, account, enabled, workspace, remote_tools, senders, purpose, owner_id, bot_id, source, credentials, state, updated_unix_ms`

const putChannelSQL = `INSERT INTO channel_accounts (` + channelColumns + `) VALUES (
	:channel, :account, :enabled, :workspace, :remote_tools, :senders, :purpose, :owner_id, :bot_id, :source, :credentials, :state, :updated_unix_ms)
	ON CONFLICT (channel, account) DO UPDATE SET
	enabled = excluded.enabled, workspace = excluded.workspace, remote_tools = excluded.remote_tools,
	senders = excluded.senders, purpose = excluded.purpose, owner_id = excluded.owner_id, bot_id = excluded.bot_id,
	source = excluded.source, credentials = excluded.credentials, state = excluded.state,
	updated_unix_ms = excluded.updated_unix_ms`

const deleteChannelSQL = `DELETE FROM channel_accounts WHERE channel = ? AND account = ?`

// PutChannelAccount inserts a, or replaces every column of the row with
// the same channel and account. Credentials or state that are not JSON
// are refused with reducer.ErrInvalidArgument and nothing changes.
func (l *Ledger) PutChannelAccount(ctx context.Context, a ChannelAccount) error {
	return l.ReplaceChannelAccounts(ctx, []ChannelAccount{a}, nil)
}

// DeleteChannelAccount removes the account's row (its settings,
// credentials and state) and reports whether it was there.
func (l *Ledger) DeleteChannelAccount(ctx context.Context, channel, account string) (bool, error) {
	var found bool
	err := l.exclusive(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, deleteChannelSQL, channel, account)
		if err != nil {
			return storage(err)
		}
		n, _ := res.RowsAffected()
		found = n > 0
		return nil
	})
	return found, err
}

// ReplaceChannelAccounts deletes the accounts del names ({channel,
// account}; one that is not there is no error) and puts every account of
// put, as PutChannelAccount does, in one transaction: all of it is kept
// or none.
func (l *Ledger) ReplaceChannelAccounts(ctx context.Context, put []ChannelAccount, del [][2]string) error {
	rows := make([]ChannelAccount, len(put))
	now := l.clock().UnixMilli()
	for i, a := range put {
		for _, v := range []*string{&a.Credentials, &a.State} {
			if *v == "" {
				*v = "{}"
			}
			if !json.Valid([]byte(*v)) {
				return fmt.Errorf("%w: channel account %s:%s: credentials and state must be JSON", reducer.ErrInvalidArgument, a.Channel, a.Account)
			}
		}
		if a.Updated == 0 {
			a.Updated = now
		}
		rows[i] = a
	}
	return l.exclusive(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		for _, k := range del {
			if _, err := tx.ExecContext(ctx, deleteChannelSQL, k[0], k[1]); err != nil {
				return storage(err)
			}
		}
		for _, a := range rows {
			if _, err := tx.NamedExecContext(ctx, putChannelSQL, a); err != nil {
				return storage(err)
			}
		}
		return nil
	})
}

// ChannelAccounts lists every account, ordered by channel and account.
func (l *Ledger) ChannelAccounts(ctx context.Context) ([]ChannelAccount, error) {
	as := []ChannelAccount{}
	if err := l.r.SelectContext(ctx, &as, `SELECT `+channelColumns+` FROM channel_accounts ORDER BY channel, account`); err != nil {
		return nil, fmt.Errorf("%w: list channel accounts: %v", ErrStorage, err)
	}
	return as, nil
}
