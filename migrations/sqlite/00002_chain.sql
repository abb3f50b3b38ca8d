-- +goose Up
-- Tamper evidence: each event's SHA-256, chained to the previous event of
-- the same project (ledger.ChainHash gives the canonical encoding). NULL
-- only for a row written by something other than the ledger, which
-- `scv ledger verify` reports.
ALTER TABLE events ADD COLUMN hash BLOB CHECK (hash IS NULL OR length(hash) = 32);

-- +goose Down
ALTER TABLE events DROP COLUMN hash;
