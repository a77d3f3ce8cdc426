-- Segments (rollout.Segment): named sets of conditions that features'
-- rules use, with their history; and commits of kind 'segment' in the
-- change feed. SQLite cannot change a CHECK constraint: the commits table
-- is made again.

-- +goose Up
CREATE TABLE segments (
    key        TEXT    PRIMARY KEY,
    version    INTEGER NOT NULL CHECK (version >= 1),
    config     TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL
);

CREATE TABLE segment_versions (
    segment_key TEXT    NOT NULL REFERENCES segments (key) ON DELETE CASCADE,
    version     INTEGER NOT NULL CHECK (version >= 1),
    actor       TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    summary     TEXT    NOT NULL,
    comment     TEXT    NOT NULL DEFAULT '',
    config      TEXT    NOT NULL,
    PRIMARY KEY (segment_key, version)
);

CREATE TABLE commits_next (
    revision   INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind IN ('feature', 'token', 'segment')),
    key        TEXT    NOT NULL,
    created_at TEXT    NOT NULL
);
INSERT INTO commits_next (revision, kind, key, created_at) SELECT revision, kind, key, created_at FROM commits;
DROP TABLE commits;
ALTER TABLE commits_next RENAME TO commits;

-- +goose Down
-- Segment commits become no-op feature commits of no feature: readers of
-- the feed reload a feature that does not exist, which changes nothing.
CREATE TABLE commits_prev (
    revision   INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind IN ('feature', 'token')),
    key        TEXT    NOT NULL,
    created_at TEXT    NOT NULL
);
INSERT INTO commits_prev (revision, kind, key, created_at)
    SELECT revision, CASE WHEN kind = 'segment' THEN 'feature' ELSE kind END,
           CASE WHEN kind = 'segment' THEN 'segment:' || key ELSE key END, created_at
    FROM commits;
DROP TABLE commits;
ALTER TABLE commits_prev RENAME TO commits;
DROP TABLE segment_versions;
DROP TABLE segments;
