-- Distinct users and experiments' history (see the SQLite migration of
-- the same number for what the tables hold).

-- +goose Up
CREATE TABLE exposure_users (
    feature_id text    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    integer NOT NULL CHECK (version >= 1),
    bucket     text    NOT NULL,
    hour       bigint  NOT NULL,
    sketch     bytea   NOT NULL DEFAULT '\x010c73'::bytea, -- an empty sketch
    PRIMARY KEY (feature_id, version, bucket, hour)
);
CREATE INDEX exposure_users_hour ON exposure_users (hour) WHERE hour > 0;

CREATE TABLE experiment_snapshots (
    experiment_id text   NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    day           bigint NOT NULL,
    taken_at      bigint NOT NULL,
    results       text   NOT NULL,
    PRIMARY KEY (experiment_id, day)
);

ALTER TABLE experiments ADD COLUMN dropped_exposures bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE experiments DROP COLUMN dropped_exposures;
DROP TABLE experiment_snapshots;
DROP TABLE exposure_users;
