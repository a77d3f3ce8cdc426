-- Evaluations served per feature version and bucket, flushed from memory at
-- a short interval by every instance; flushes add to the stored counts.
-- bucket is '' for "no bucket" (disabled, no fallback).

-- +goose Up
CREATE TABLE exposures (
    feature_id text    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    integer NOT NULL,
    bucket     text    NOT NULL,
    count      bigint  NOT NULL CHECK (count >= 0),
    PRIMARY KEY (feature_id, version, bucket)
);

-- +goose Down
DROP TABLE exposures;
