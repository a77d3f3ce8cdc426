-- The IDs of the batches of exposures apps have sent (POST /api/exposures),
-- so that a batch sent again after a lost answer is not counted twice.
-- IDs older than rollout.ExposureBatchMemory are pruned when batches are
-- added.

-- +goose Up
CREATE TABLE exposure_batches (
    id          text        PRIMARY KEY,
    received_at timestamptz NOT NULL
);
CREATE INDEX exposure_batches_received_at ON exposure_batches (received_at);

-- +goose Down
DROP TABLE exposure_batches;
