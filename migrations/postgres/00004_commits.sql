-- The change feed: one row per committed change of a feature or a token,
-- numbered by revision in commit order. revision holds the last revision
-- given out in its one row; every writing transaction increments it just
-- before committing, and holds that row's lock until it commits, so writers
-- are serialized on it and no revision can be seen committed before a lower
-- one. settings keeps values made once for the whole database (the session
-- key); write_probe is a one-row table written to check writes succeed.

-- +goose Up
CREATE TABLE revision (
    id       integer PRIMARY KEY CHECK (id = 1),
    revision bigint  NOT NULL
);
INSERT INTO revision (id, revision) VALUES (1, 0);

CREATE TABLE commits (
    revision   bigint      PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('feature', 'token')),
    key        text        NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE settings (
    name  text  PRIMARY KEY,
    value bytea NOT NULL
);

CREATE TABLE write_probe (
    id         integer     PRIMARY KEY CHECK (id = 1),
    checked_at timestamptz
);
INSERT INTO write_probe (id) VALUES (1);

-- +goose Down
DROP TABLE write_probe;
DROP TABLE settings;
DROP TABLE commits;
DROP TABLE revision;
