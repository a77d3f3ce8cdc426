-- Scheduled ramps (rollout.Ramp). The ramp itself is the JSON in body; the
-- columns are what queries and the optimistic update need. A feature has
-- at most one live (active or paused) ramp.

-- +goose Up
CREATE TABLE ramps (
    id          text        PRIMARY KEY,
    feature_key text        NOT NULL,
    state       text        NOT NULL,
    revision    integer     NOT NULL,
    body        text        NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX ramps_feature ON ramps (feature_key, created_at);
CREATE UNIQUE INDEX ramps_live ON ramps (feature_key) WHERE state IN ('active', 'paused');

-- +goose Down
DROP TABLE ramps;
