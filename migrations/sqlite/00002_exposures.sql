-- Evaluations served per feature version and bucket, flushed from memory at
-- a short interval. bucket is '' for "no bucket" (disabled, no fallback).

-- +goose Up
CREATE TABLE exposures (
    feature_id TEXT    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    bucket     TEXT    NOT NULL,
    count      INTEGER NOT NULL CHECK (count >= 0),
    PRIMARY KEY (feature_id, version, bucket)
);

-- +goose Down
DROP TABLE exposures;
