-- +goose Up
-- The live agents this daemon runs (docs/agents.md): ACP agents it started
-- and speaks to, between their turns. Like delegations it is the daemon's
-- operational state, not project history: a row lives while the agent does,
-- so that a restarted daemon starts the agent again and loads its
-- conversation (the ACP session `conversation`). What the agent was started
-- with is `spec`, a JSON object the agents package reads (the command, its
-- workspace and environment, the task its turns are runs of); `run_id` is
-- the run of a turn under way when the row was written ('' between turns),
-- which a daemon that died in the middle of the turn fails at its next start.
CREATE TABLE agents (
    handle          TEXT    PRIMARY KEY,
    name            TEXT    NOT NULL UNIQUE,
    spec            TEXT    NOT NULL CHECK (json_valid(spec)),
    conversation    TEXT    NOT NULL,
    turn            INTEGER NOT NULL,
    run_id          TEXT    NOT NULL,
    started_unix_ms INTEGER NOT NULL
);

-- +goose Down
DROP TABLE agents;
