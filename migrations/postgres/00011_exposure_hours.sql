-- Exposures become one total per feature, version, bucket and hour, so that
-- rows grow with time and configuration, never with the number of batches
-- apps send. hour is the Unix seconds of the start of the UTC hour the
-- counts were stored in (as in SQLite); the totals kept before this
-- migration get hour 0. Versions start at 1.

-- +goose Up
ALTER TABLE exposures ADD COLUMN hour bigint NOT NULL DEFAULT 0;
ALTER TABLE exposures ALTER COLUMN hour DROP DEFAULT;
ALTER TABLE exposures DROP CONSTRAINT exposures_pkey;
ALTER TABLE exposures ADD PRIMARY KEY (feature_id, version, bucket, hour);
DELETE FROM exposures WHERE version < 1;
ALTER TABLE exposures ADD CONSTRAINT exposures_version_check CHECK (version >= 1);

-- +goose Down
CREATE TABLE exposures_total (
    feature_id text    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    integer NOT NULL,
    bucket     text    NOT NULL,
    count      bigint  NOT NULL CHECK (count >= 0),
    PRIMARY KEY (feature_id, version, bucket)
);
INSERT INTO exposures_total (feature_id, version, bucket, count)
SELECT feature_id, version, bucket, least(sum(count), 9223372036854775807)::bigint
FROM exposures
GROUP BY feature_id, version, bucket;
DROP TABLE exposures;
ALTER TABLE exposures_total RENAME TO exposures;
ALTER TABLE exposures RENAME CONSTRAINT exposures_total_pkey TO exposures_pkey;
