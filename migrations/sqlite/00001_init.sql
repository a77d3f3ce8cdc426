-- Features, their history and the churn report of each change.
-- Times are RFC 3339 text in UTC with nanoseconds; JSON columns hold the
-- domain types (rollout.Feature, rollout.Report) as encoding/json writes them.

-- +goose Up
CREATE TABLE features (
    id         TEXT    PRIMARY KEY,
    key        TEXT    NOT NULL UNIQUE,
    version    INTEGER NOT NULL CHECK (version >= 1),
    config     TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL
);

-- The primary key (feature_id, version) also serves a feature's history
-- newest first and the foreign key's cascade.
CREATE TABLE versions (
    feature_id TEXT    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    INTEGER NOT NULL CHECK (version >= 1),
    actor      TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    summary    TEXT    NOT NULL,
    config     TEXT    NOT NULL,
    PRIMARY KEY (feature_id, version)
);

-- churn and modulo_churn repeat figures of report so they can be queried.
CREATE TABLE churn_reports (
    feature_id   TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    churn        REAL    NOT NULL,
    modulo_churn REAL    NOT NULL,
    report       TEXT    NOT NULL,
    PRIMARY KEY (feature_id, version),
    FOREIGN KEY (feature_id, version) REFERENCES versions (feature_id, version) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE churn_reports;
DROP TABLE versions;
DROP TABLE features;
