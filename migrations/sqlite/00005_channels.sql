-- +goose Up
-- Channel account settings: the daemon's configuration of its chat
-- accounts, changed in place by channel_set, channel_logout and reload.
-- source says who last set an account: `api` (channel_set) or `file` (the
-- settings file, which reload reconciles). credentials and state are the
-- connector's own (opaque JSON), removed with the account at logout.
CREATE TABLE channel_accounts (
    channel      TEXT    NOT NULL,
    account      TEXT    NOT NULL,
    enabled      INTEGER NOT NULL,
    workspace    TEXT    NOT NULL,
    remote_tools TEXT    NOT NULL,
    senders      TEXT    NOT NULL,
    purpose      TEXT    NOT NULL,
    owner_id     TEXT    NOT NULL,
    bot_id       TEXT    NOT NULL,
    source       TEXT    NOT NULL,
    credentials  TEXT    NOT NULL DEFAULT '{}',
    state        TEXT    NOT NULL DEFAULT '{}',
    updated_unix_ms INTEGER NOT NULL,
    PRIMARY KEY (channel, account)
);

-- Questions to the owner and what became of them, one row per step
-- (asked, answered, expired, withdrawn, failed): the audit of who decided
-- what and when. Append-only, as the events are; a question's state is
-- folded from its rows.
CREATE TABLE confirm_log (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    question_id  TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    data         TEXT    NOT NULL CHECK (json_valid(data))
);
CREATE INDEX confirm_log_question ON confirm_log (question_id, seq);

-- +goose StatementBegin
CREATE TRIGGER confirm_log_no_update BEFORE UPDATE ON confirm_log
BEGIN
    SELECT RAISE(ABORT, 'confirm_log is append-only: UPDATE refused');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER confirm_log_no_delete BEFORE DELETE ON confirm_log
BEGIN
    SELECT RAISE(ABORT, 'confirm_log is append-only: DELETE refused');
END;
-- +goose StatementEnd

-- The chat that started a delegation's work, if any (`<channel>:<account>`):
-- a question its agent asks goes there.
ALTER TABLE delegations ADD COLUMN chat TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE delegations DROP COLUMN chat;
DROP TABLE confirm_log;
DROP TABLE channel_accounts;
