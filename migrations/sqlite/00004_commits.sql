-- The change feed: one row per committed change of a feature or a token,
-- numbered by revision in commit order. revision holds the last revision
-- given out in its one row; every writing transaction increments it, so
-- revisions follow the order in which writers hold SQLite's write lock.
-- settings keeps values made once for the whole database (the session
-- key); write_probe is a one-row table written to check writes succeed.

-- +goose Up
CREATE TABLE revision (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL
);
INSERT INTO revision (id, revision) VALUES (1, 0);

CREATE TABLE commits (
    revision   INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind IN ('feature', 'token')),
    key        TEXT    NOT NULL,
    created_at TEXT    NOT NULL
);

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);

CREATE TABLE write_probe (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    checked_at TEXT    NOT NULL
);
INSERT INTO write_probe (id, checked_at) VALUES (1, '');

-- +goose Down
DROP TABLE write_probe;
DROP TABLE settings;
DROP TABLE commits;
DROP TABLE revision;
