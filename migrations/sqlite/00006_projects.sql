-- +goose Up
-- The projects table: an index of the projects, derived from their
-- events and rewritten by the writer in the transaction that appends to
-- a project. It holds names unique (the database refuses a second
-- project of a name, inside the write transaction), says where each
-- project's history ends (head) and how much of it is live, and keeps a
-- summary of the derived state, so that listing projects, finding the
-- running runs to sweep and the projects to compact need not load them.
-- `scv ledger verify` checks it against the history.
CREATE TABLE projects (
    id          TEXT    PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    workspace   TEXT    NOT NULL DEFAULT '',
    created_seq INTEGER NOT NULL,
    head        INTEGER NOT NULL,
    live        INTEGER NOT NULL,
    -- The summary; status is NULL until the ledger derived it (rows this
    -- migration fills get it when the daemon first opens the database).
    status      TEXT,
    phase       TEXT,
    tasks       INTEGER NOT NULL DEFAULT 0,
    done        INTEGER NOT NULL DEFAULT 0,
    running     INTEGER NOT NULL DEFAULT 0,
    created_ms  INTEGER NOT NULL DEFAULT 0,
    updated_ms  INTEGER NOT NULL DEFAULT 0,
    heartbeat_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX projects_running ON projects (running) WHERE running > 0;
CREATE INDEX projects_live ON projects (live);
-- The newest time of any project: a ledger's clock never stamps before
-- it, also when compaction took the newest event out of the live tail.
CREATE INDEX projects_updated ON projects (updated_ms);

-- Every project of the history so far: through its project_created event
-- (live or archived), or, where compaction dropped that, its snapshots.
INSERT OR IGNORE INTO projects (id, name, created_seq, head, live)
SELECT c.project_id, c.name, c.sequence, 0, 0 FROM (
    SELECT project_id, json_extract(data, '$.name') AS name, sequence FROM events WHERE kind = 'project_created'
    UNION ALL
    SELECT project_id, json_extract(data, '$.name') AS name, sequence FROM events_archive WHERE kind = 'project_created'
) c;
INSERT INTO projects (id, name, created_seq, head, live)
SELECT project_id, json_extract(state, '$.name'), 0, 0, 0 FROM snapshots
WHERE project_id NOT IN (SELECT id FROM projects)
GROUP BY project_id;
UPDATE projects SET
    head = max(
        coalesce((SELECT max(sequence) FROM events WHERE project_id = projects.id), 0),
        coalesce((SELECT max(sequence) FROM events_archive WHERE project_id = projects.id), 0),
        coalesce((SELECT max(sequence) FROM snapshots WHERE project_id = projects.id), 0)),
    live = (SELECT count(*) FROM events WHERE project_id = projects.id);

-- +goose Down
DROP TABLE projects;
