-- Scheduled ramps (rollout.Ramp). The ramp itself is the JSON in body; the
-- columns are what queries and the optimistic update need. A feature has
-- at most one live (active or paused) ramp.

-- +goose Up
CREATE TABLE ramps (
    id          TEXT    PRIMARY KEY,
    feature_key TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    revision    INTEGER NOT NULL,
    body        TEXT    NOT NULL,
    created_at  TEXT    NOT NULL
);
CREATE INDEX ramps_feature ON ramps (feature_key, created_at);
CREATE UNIQUE INDEX ramps_live ON ramps (feature_key) WHERE state IN ('active', 'paused');

-- +goose Down
DROP TABLE ramps;
