-- Experiments (issue #33): metrics, the events apps track for them, the
-- experiments run on a feature row (one running at a time per row, so per
-- environment), and the first exposure of each user an experiment served.
-- Times are Unix milliseconds in both dialects. Users are kept as a 64-bit
-- hash (the first 8 bytes of MD5("user:" + ID), signed), never as IDs.

-- +goose Up
CREATE TABLE metrics (
    key              TEXT    PRIMARY KEY,
    kind             TEXT    NOT NULL CHECK (kind IN ('conversion', 'mean')),
    description      TEXT    NOT NULL,
    higher_is_better INTEGER NOT NULL CHECK (higher_is_better IN (0, 1)),
    created_at       INTEGER NOT NULL,
    created_by       TEXT    NOT NULL
);

-- One row per event apps tracked, in the environment of the token (or
-- ?env=) that sent it; value is 1 for conversions unless sent.
CREATE TABLE tracked_events (
    metric    TEXT    NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    environment TEXT    NOT NULL,
    user_hash INTEGER NOT NULL,
    at        INTEGER NOT NULL,
    value     REAL    NOT NULL,
    seq       INTEGER PRIMARY KEY AUTOINCREMENT
);
CREATE INDEX tracked_events_metric_at ON tracked_events (environment, metric, at);

-- The IDs of the batches of POST /api/track, as exposure_batches.
CREATE TABLE track_batches (
    id          TEXT    PRIMARY KEY,
    received_at INTEGER NOT NULL
);
CREATE INDEX track_batches_received_at ON track_batches (received_at);

CREATE TABLE experiments (
    id          TEXT    PRIMARY KEY,
    feature_id  TEXT    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    control     TEXT    NOT NULL,
    metrics     TEXT    NOT NULL, -- JSON array of metric keys
    hypothesis  TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    shares      TEXT    NOT NULL, -- JSON object: bucket → exact share at the start
    started_at  INTEGER NOT NULL,
    started_by  TEXT    NOT NULL,
    stopped_at  INTEGER,
    stopped_by  TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX experiments_feature ON experiments (feature_id, started_at);
CREATE UNIQUE INDEX experiments_running ON experiments (feature_id) WHERE stopped_at IS NULL;

-- The first exposure of each user while an experiment runs; multiple is 1
-- once the user was served another bucket too.
CREATE TABLE experiment_users (
    experiment_id TEXT    NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    user_hash     INTEGER NOT NULL,
    bucket        TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    at            INTEGER NOT NULL,
    multiple      INTEGER NOT NULL DEFAULT 0 CHECK (multiple IN (0, 1)),
    PRIMARY KEY (experiment_id, user_hash)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE experiment_users;
DROP TABLE experiments;
DROP TABLE track_batches;
DROP TABLE tracked_events;
DROP TABLE metrics;
