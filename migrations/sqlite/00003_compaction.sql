-- +goose Up
-- Compaction moves a project's events up to a snapshot out of the live
-- tail. What it moves is kept here, row for row with its hash, unless the
-- operator chose to drop it; the archive is as append-only as the tail.
CREATE TABLE events_archive (
    sequence     INTEGER PRIMARY KEY,
    project_id   TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    timestamp    INTEGER NOT NULL,
    data         TEXT    NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    hash         BLOB
);
CREATE INDEX events_archive_project_sequence ON events_archive (project_id, sequence);

-- +goose StatementBegin
CREATE TRIGGER events_archive_no_update BEFORE UPDATE ON events_archive
BEGIN
    SELECT RAISE(ABORT, 'the archive is append-only: UPDATE refused');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER events_archive_no_delete BEFORE DELETE ON events_archive
BEGIN
    SELECT RAISE(ABORT, 'the archive is append-only: DELETE refused');
END;
-- +goose StatementEnd

-- A snapshot records the chain head at its sequence (the hash of that
-- event) and the SHA-256 of the state it holds, so that an auditor can
-- re-derive it from the events before it.
ALTER TABLE snapshots ADD COLUMN chain_head BLOB;
ALTER TABLE snapshots ADD COLUMN state_hash BLOB;

-- +goose Down
ALTER TABLE snapshots DROP COLUMN state_hash;
ALTER TABLE snapshots DROP COLUMN chain_head;
DROP TRIGGER events_archive_no_delete;
DROP TRIGGER events_archive_no_update;
DROP TABLE events_archive;
