-- Features, their history and the churn report of each change.
-- JSON columns hold the domain types (rollout.Feature, rollout.Report) as
-- encoding/json writes them; they are json, not jsonb, so that bucket values
-- are kept byte for byte as written. A feature's times are read from its
-- config, which keeps nanoseconds; the timestamptz columns (microseconds)
-- are for queries.

-- +goose Up
CREATE TABLE features (
    id         text        PRIMARY KEY,
    key        text        NOT NULL UNIQUE,
    version    integer     NOT NULL CHECK (version >= 1),
    config     json        NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- The primary key (feature_id, version) also serves a feature's history
-- newest first and the foreign key's cascade.
CREATE TABLE versions (
    feature_id text        NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    integer     NOT NULL CHECK (version >= 1),
    actor      text        NOT NULL,
    created_at timestamptz NOT NULL,
    summary    text        NOT NULL,
    config     json        NOT NULL,
    PRIMARY KEY (feature_id, version)
);

-- churn and modulo_churn repeat figures of report so they can be queried.
CREATE TABLE churn_reports (
    feature_id   text             NOT NULL,
    version      integer          NOT NULL,
    churn        double precision NOT NULL,
    modulo_churn double precision NOT NULL,
    report       json             NOT NULL,
    PRIMARY KEY (feature_id, version),
    FOREIGN KEY (feature_id, version) REFERENCES versions (feature_id, version) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE churn_reports;
DROP TABLE versions;
DROP TABLE features;
