-- +goose Up
-- An email account's own settings (control/channels' Email: the IMAP URL,
-- the user, the mail chat, the rules, the digests), a JSON object that the
-- channels package writes and reads; '' for every other account. The
-- password is not here: it is in the account's credentials.
ALTER TABLE channel_accounts ADD COLUMN email TEXT NOT NULL DEFAULT '' CHECK (email = '' OR json_valid(email));

-- +goose Down
ALTER TABLE channel_accounts DROP COLUMN email;
