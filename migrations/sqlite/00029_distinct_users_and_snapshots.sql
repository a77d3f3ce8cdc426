-- Distinct users and experiments' history.
--
-- exposure_users: the distinct users a feature served per version and
-- bucket, as HyperLogLog sketches (package rollout/feature/hll's binary
-- form, at most 4,099 bytes), merged by register maximum: one row per
-- hour (hour: Unix seconds of its start) kept for two days, and one with
-- hour 0, every hour's union, kept with the version.
--
-- experiment_snapshots: an experiment's results as read on one UTC day
-- (day: Unix milliseconds of its start), at most one a day, for the chart
-- of the lift's interval over time; results is JSON (see
-- rollout.ResultsSnapshot).
--
-- experiments.dropped_exposures: first exposures that instances could not
-- record (their queue was full while the store was unreachable).

-- +goose Up
CREATE TABLE exposure_users (
    feature_id TEXT    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    INTEGER NOT NULL CHECK (version BETWEEN 1 AND 2147483647),
    bucket     TEXT    NOT NULL,
    hour       INTEGER NOT NULL,
    sketch     BLOB    NOT NULL DEFAULT X'010C73', -- an empty sketch
    PRIMARY KEY (feature_id, version, bucket, hour)
) WITHOUT ROWID;
CREATE INDEX exposure_users_hour ON exposure_users (hour) WHERE hour > 0;

CREATE TABLE experiment_snapshots (
    experiment_id TEXT    NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    day           INTEGER NOT NULL,
    taken_at      INTEGER NOT NULL,
    results       TEXT    NOT NULL,
    PRIMARY KEY (experiment_id, day)
) WITHOUT ROWID;

ALTER TABLE experiments ADD COLUMN dropped_exposures INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE experiments DROP COLUMN dropped_exposures;
DROP TABLE experiment_snapshots;
DROP TABLE exposure_users;
