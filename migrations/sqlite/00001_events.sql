-- +goose Up
-- The append-only event log. AUTOINCREMENT keeps sequence numbers strictly
-- increasing and never reused, also after rows are deleted by compaction.
CREATE TABLE events (
    sequence   INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    timestamp  INTEGER NOT NULL,  -- Unix seconds, as the wire shows it
    data       TEXT    NOT NULL CHECK (json_valid(data)),
    -- The same instant in Unix milliseconds, which staleness and heartbeat
    -- coalescing are decided on.
    timestamp_ms INTEGER NOT NULL CHECK (timestamp = timestamp_ms / 1000)
);
CREATE INDEX events_project_sequence ON events (project_id, sequence);

-- A snapshot is the reducer's state of one project at a sequence. Events
-- may leave the live tail only once a snapshot covers them.
CREATE TABLE snapshots (
    project_id TEXT    NOT NULL,
    sequence   INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    state      BLOB    NOT NULL,
    PRIMARY KEY (project_id, sequence)
);

-- +goose StatementBegin
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: UPDATE refused');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER events_no_uncovered_delete BEFORE DELETE ON events
WHEN NOT EXISTS (
    SELECT 1 FROM snapshots
    WHERE snapshots.project_id = OLD.project_id AND snapshots.sequence >= OLD.sequence
)
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE of an event no snapshot covers refused');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER events_no_uncovered_delete;
DROP TRIGGER events_no_update;
DROP TABLE snapshots;
DROP TABLE events;
