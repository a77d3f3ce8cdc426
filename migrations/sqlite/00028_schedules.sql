-- Scheduled changes (rollout.Schedule): a change of one feature (a patch,
-- its rules or its buckets, as the route's body) applied at a set time by
-- whichever instance claims it first. The schedule itself is the JSON in
-- body; the columns are what lists, the caps and the claim need. status
-- goes pending → running (claimed: claim names the claimant, claimed_at
-- when) → applied or failed, or pending → canceled.

-- +goose Up
CREATE TABLE schedules (
    id          TEXT    PRIMARY KEY,
    environment TEXT    NOT NULL,
    feature_key TEXT    NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'applied', 'failed', 'canceled')),
    due_at      TEXT    NOT NULL,
    claim       TEXT    NOT NULL DEFAULT '',
    claimed_at  TEXT,
    body        TEXT    NOT NULL,
    created_at  TEXT    NOT NULL
);
CREATE INDEX schedules_feature ON schedules (environment, feature_key, due_at);
CREATE INDEX schedules_due ON schedules (status, due_at);

-- +goose Down
DROP TABLE schedules;
