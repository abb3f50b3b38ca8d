-- +goose Up
-- Leases: which daemon does a ledger-wide job (the sweeper), until when,
-- and its term, which grows with every new holder and is checked inside
-- each transaction the holder writes for the job (a fencing token). A
-- SQLite ledger has one daemon, which always holds them; the table is
-- here so that the ledger's logic is the same on every database.
CREATE TABLE leases (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    term       INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);

-- +goose Down
DROP TABLE leases;
