-- Exposures become one total per feature, version, bucket and hour, so that
-- rows grow with time and configuration, never with the number of batches
-- apps send. hour is the Unix seconds of the start of the UTC hour the
-- counts were stored in; the totals kept before this migration get hour 0.
-- A count is a whole number from 0 (typeof: an overflowing sum once turned
-- into a float; it is clamped here to the largest integer) and a version
-- fits PostgreSQL's integer.

-- +goose Up
CREATE TABLE exposures_by_hour (
    feature_id TEXT    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    INTEGER NOT NULL CHECK (version BETWEEN 1 AND 2147483647),
    bucket     TEXT    NOT NULL,
    hour       INTEGER NOT NULL,
    count      INTEGER NOT NULL CHECK (typeof(count) = 'integer' AND count >= 0),
    PRIMARY KEY (feature_id, version, bucket, hour)
);
INSERT INTO exposures_by_hour (feature_id, version, bucket, hour, count)
SELECT feature_id, version, bucket, 0,
       CASE WHEN count >= 9223372036854775807 THEN 9223372036854775807
            ELSE CAST(count AS INTEGER) END
FROM exposures
WHERE count > 0 AND version BETWEEN 1 AND 2147483647;
DROP TABLE exposures;
ALTER TABLE exposures_by_hour RENAME TO exposures;

-- +goose Down
CREATE TABLE exposures_total (
    feature_id TEXT    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    bucket     TEXT    NOT NULL,
    count      INTEGER NOT NULL CHECK (count >= 0),
    PRIMARY KEY (feature_id, version, bucket)
);
INSERT INTO exposures_total (feature_id, version, bucket, count)
SELECT feature_id, version, bucket, CAST(min(total(count), 9223372036854775807.0) AS INTEGER)
FROM exposures
GROUP BY feature_id, version, bucket;
DROP TABLE exposures;
ALTER TABLE exposures_total RENAME TO exposures;
