-- +goose Up
-- The registry of running delegations: agent commands that an `scv
-- delegate` process (the owner) started and registered. It is the daemon's
-- operational state, not project history: a row lives while its delegation
-- runs and is deleted when it ends, so that a restarted daemon still knows
-- what runs. Processes are named by PID and start time (clock ticks since
-- boot, /proc/PID/stat) within one boot (boot_id), so that a recycled PID
-- is never taken for the process that was registered.
CREATE TABLE delegations (
    handle          TEXT    PRIMARY KEY,
    agent           TEXT    NOT NULL,
    session         TEXT    NOT NULL,
    depth           INTEGER NOT NULL,
    parent          TEXT    NOT NULL,
    pid             INTEGER NOT NULL,
    pid_start       INTEGER NOT NULL,
    owner_pid       INTEGER NOT NULL,
    owner_start     INTEGER NOT NULL,
    boot_id         TEXT    NOT NULL,
    cwd             TEXT    NOT NULL,
    started_unix_ms INTEGER NOT NULL
);

-- +goose Down
DROP TABLE delegations;
