-- +goose Up
-- The email accounts' mail journal (docs/mail.md): what each account did
-- with each mail, one row per step (claimed, decided, sent), keyed by the
-- mailbox's UIDVALIDITY and the mail's UID. It holds no text of a mail (at
-- most a SHA-256 of its Message-ID). Append-only, as the question log is;
-- the counts of `status` are folded from it. A mail takes each step once:
-- the unique index refuses a second claim, decision or sending.
CREATE TABLE mail_journal (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    account      TEXT    NOT NULL,
    uid_validity INTEGER NOT NULL,
    uid          INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    data         TEXT    NOT NULL CHECK (json_valid(data))
);
CREATE UNIQUE INDEX mail_journal_step ON mail_journal (account, uid_validity, uid, kind);
CREATE INDEX mail_journal_account ON mail_journal (account, seq);

-- +goose StatementBegin
CREATE TRIGGER mail_journal_no_update BEFORE UPDATE ON mail_journal
BEGIN
    SELECT RAISE(ABORT, 'mail_journal is append-only: UPDATE refused');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER mail_journal_no_delete BEFORE DELETE ON mail_journal
BEGIN
    SELECT RAISE(ABORT, 'mail_journal is append-only: DELETE refused');
END;
-- +goose StatementEnd

-- The text a digest needs of each mail reported and not yet sent (sender,
-- subject, summary): written in the transaction of the mail's `decided`
-- record, deleted in the transaction of its `sent` record, so that the
-- text is never in the journal and survives a crash until it is sent.
CREATE TABLE mail_outbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    account      TEXT    NOT NULL,
    uid_validity INTEGER NOT NULL,
    uid          INTEGER NOT NULL,
    data         TEXT    NOT NULL CHECK (json_valid(data)),
    UNIQUE (account, uid_validity, uid)
);

-- +goose Down
DROP TABLE mail_outbox;
DROP TABLE mail_journal;
