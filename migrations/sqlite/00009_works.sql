-- +goose Up
-- The projects' work this daemon runs (docs/work.md): N live agents kept on
-- a project's ready tasks. Like agents it is the daemon's operational state,
-- not project history: a row lives while the work does, so that a restarted
-- daemon resumes it. `spec` is what the work was started with, a JSON
-- object the work package reads (the agents' count and command, their
-- environment, the labels, the prompt template).
CREATE TABLE works (
    project         TEXT    PRIMARY KEY,
    spec            TEXT    NOT NULL CHECK (json_valid(spec)),
    started_unix_ms INTEGER NOT NULL
);

-- +goose Down
DROP TABLE works;
