-- Experiments (issue #33): metrics, the events apps track for them, the
-- experiments run on a feature row (one running at a time per row, so per
-- environment), and the first exposure of each user an experiment served.
-- Times are Unix milliseconds in both dialects. Users are kept as a 64-bit
-- hash (the first 8 bytes of MD5("user:" + ID), signed), never as IDs.

-- +goose Up
CREATE TABLE metrics (
    key              text    PRIMARY KEY,
    kind             text    NOT NULL CHECK (kind IN ('conversion', 'mean')),
    description      text    NOT NULL,
    higher_is_better boolean NOT NULL,
    created_at       bigint NOT NULL,
    created_by       text    NOT NULL
);

-- One row per event apps tracked, in the environment of the token (or
-- ?env=) that sent it; value is 1 for conversions unless sent.
CREATE TABLE tracked_events (
    metric    text    NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    environment text    NOT NULL,
    user_hash bigint NOT NULL,
    at        bigint NOT NULL,
    value     double precision NOT NULL,
    seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY
);
CREATE INDEX tracked_events_metric_at ON tracked_events (environment, metric, at);

-- The IDs of the batches of POST /api/track, as exposure_batches.
CREATE TABLE track_batches (
    id          text    PRIMARY KEY,
    received_at bigint NOT NULL
);
CREATE INDEX track_batches_received_at ON track_batches (received_at);

CREATE TABLE experiments (
    id          text    PRIMARY KEY,
    feature_id  text    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    name        text    NOT NULL,
    control     text    NOT NULL,
    metrics     text    NOT NULL, -- JSON array of metric keys
    hypothesis  text    NOT NULL,
    version     bigint NOT NULL,
    shares      text    NOT NULL, -- JSON object: bucket → exact share at the start
    started_at  bigint NOT NULL,
    started_by  text    NOT NULL,
    stopped_at  bigint,
    stopped_by  text    NOT NULL DEFAULT ''
);
CREATE INDEX experiments_feature ON experiments (feature_id, started_at);
CREATE UNIQUE INDEX experiments_running ON experiments (feature_id) WHERE stopped_at IS NULL;

-- The first exposure of each user while an experiment runs; multiple is true
-- once the user was served another bucket too.
CREATE TABLE experiment_users (
    experiment_id text    NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    user_hash     bigint NOT NULL,
    bucket        text    NOT NULL,
    version       bigint NOT NULL,
    at            bigint NOT NULL,
    multiple      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (experiment_id, user_hash)
);

-- +goose Down
DROP TABLE experiment_users;
DROP TABLE experiments;
DROP TABLE track_batches;
DROP TABLE tracked_events;
DROP TABLE metrics;
