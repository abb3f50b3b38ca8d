-- +goose Up
-- The project ledger on PostgreSQL, shared by the daemons of a fleet. The
-- same tables as SQLite's (events, the archive, snapshots, projects),
-- plus the fleet's own: ledger_head, whose one row every write
-- transaction locks first (so writers commit one at a time, in sequence
-- order, fleet-wide), and leases, which say which daemon runs the
-- sweeper. The machine's own state (delegations, channel accounts,
-- questions) is not here: it stays in each daemon's local SQLite file.

-- The append-only event log. Sequences are handed out by the writer that
-- holds ledger_head's lock, never by a sequence object: those commit out
-- of order and leave gaps. data is kept as text, byte for byte, because
-- the event's hash covers its bytes.
CREATE TABLE events (
    sequence     BIGINT  PRIMARY KEY,
    project_id   TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    timestamp    BIGINT  NOT NULL,
    timestamp_ms BIGINT  NOT NULL,
    data         TEXT    NOT NULL,
    hash         BYTEA   CHECK (hash IS NULL OR length(hash) = 32),
    CHECK (timestamp = div(timestamp_ms, 1000))
);
CREATE INDEX events_project_sequence ON events (project_id, sequence);

CREATE TABLE events_archive (
    sequence     BIGINT  PRIMARY KEY,
    project_id   TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    timestamp    BIGINT  NOT NULL,
    timestamp_ms BIGINT  NOT NULL,
    data         TEXT    NOT NULL,
    hash         BYTEA
);
CREATE INDEX events_archive_project_sequence ON events_archive (project_id, sequence);

CREATE TABLE snapshots (
    project_id TEXT    NOT NULL,
    sequence   BIGINT  NOT NULL,
    version    INTEGER NOT NULL,
    state      BYTEA   NOT NULL,
    chain_head BYTEA,
    state_hash BYTEA,
    PRIMARY KEY (project_id, sequence)
);

-- See migrations/sqlite/00006_projects.sql.
CREATE TABLE projects (
    id          TEXT    PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    workspace   TEXT    NOT NULL DEFAULT '',
    created_seq BIGINT  NOT NULL,
    head        BIGINT  NOT NULL,
    live        BIGINT  NOT NULL,
    status      TEXT,
    phase       TEXT,
    tasks       BIGINT  NOT NULL DEFAULT 0,
    done        BIGINT  NOT NULL DEFAULT 0,
    running     BIGINT  NOT NULL DEFAULT 0,
    created_ms  BIGINT  NOT NULL DEFAULT 0,
    updated_ms  BIGINT  NOT NULL DEFAULT 0,
    heartbeat_ms BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX projects_running ON projects (running) WHERE running > 0;
CREATE INDEX projects_live ON projects (live);
CREATE INDEX projects_updated ON projects (updated_ms);

-- The last sequence handed out: one row, locked by every write
-- transaction before anything else.
CREATE TABLE ledger_head (
    one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    seq BIGINT  NOT NULL
);
INSERT INTO ledger_head (seq) VALUES (0);

-- Leases: which daemon does a fleet-wide job (the sweeper), until when,
-- and its term, which grows with every new holder and is checked inside
-- each transaction the holder writes for the job (a fencing token).
CREATE TABLE leases (
    name       TEXT   PRIMARY KEY,
    holder     TEXT   NOT NULL,
    term       BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: UPDATE refused', TG_TABLE_NAME;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION refuse_uncovered_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM snapshots
                   WHERE snapshots.project_id = OLD.project_id AND snapshots.sequence >= OLD.sequence) THEN
        RAISE EXCEPTION 'events are append-only: DELETE of an event no snapshot covers refused';
    END IF;
    RETURN OLD;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: DELETE refused', TG_TABLE_NAME;
END $$;
-- +goose StatementEnd

CREATE TRIGGER events_no_update BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION refuse_update();
CREATE TRIGGER events_no_uncovered_delete BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION refuse_uncovered_delete();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events FOR EACH STATEMENT EXECUTE FUNCTION refuse_delete();
CREATE TRIGGER events_archive_no_update BEFORE UPDATE ON events_archive FOR EACH ROW EXECUTE FUNCTION refuse_update();
CREATE TRIGGER events_archive_no_delete BEFORE DELETE ON events_archive FOR EACH ROW EXECUTE FUNCTION refuse_delete();
CREATE TRIGGER events_archive_no_truncate BEFORE TRUNCATE ON events_archive FOR EACH STATEMENT EXECUTE FUNCTION refuse_delete();

-- +goose Down
DROP TABLE leases;
DROP TABLE ledger_head;
DROP TABLE projects;
DROP TABLE snapshots;
DROP TABLE events_archive;
DROP TABLE events;
DROP FUNCTION refuse_delete();
DROP FUNCTION refuse_uncovered_delete();
DROP FUNCTION refuse_update();
