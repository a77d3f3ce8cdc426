-- Environments (rollout.Environment): development, staging, production…
-- A feature's definition is shared; its configuration is per environment:
-- a row of features per (environment, key), each with its own id, so that
-- versions, churn reports, override spans and exposures, keyed by that id,
-- are per environment as they stand. Ramps, change requests, audit events
-- and commits name their environment ('' in audit events and commits: all
-- of them, as a segment's or a token's). Tokens name theirs (NULL: every
-- environment). Everything that exists before becomes production's. A
-- deleted environment keeps its row (deleted_at), features and history.
--
-- SQLite cannot drop the UNIQUE of features.key: the table is made again,
-- with foreign keys off (a PRAGMA that only works outside a transaction),
-- so that dropping the old table does not cascade to versions, exposures
-- and spans, which keep pointing at the table named features.

-- +goose NO TRANSACTION
-- +goose Up
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TABLE environments (
    key        TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL,
    protected  INTEGER NOT NULL DEFAULT 0,
    position   INTEGER NOT NULL,
    created_at TEXT    NOT NULL,
    deleted_at TEXT
);
INSERT INTO environments (key, name, protected, position, created_at)
    VALUES ('production', 'Production', 0, 0, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

CREATE TABLE features_next (
    id          TEXT    PRIMARY KEY,
    environment TEXT    NOT NULL DEFAULT 'production',
    key         TEXT    NOT NULL,
    version     INTEGER NOT NULL CHECK (version >= 1),
    config      TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL,
    archived_at TEXT,
    UNIQUE (environment, key)
);
INSERT INTO features_next (id, environment, key, version, config, created_at, updated_at, archived_at)
    SELECT id, 'production', key, version, config, created_at, updated_at, archived_at FROM features;
DROP TABLE features;
ALTER TABLE features_next RENAME TO features;

CREATE TABLE commits_next (
    revision    INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('feature', 'token', 'segment', 'environment')),
    key         TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    environment TEXT    NOT NULL DEFAULT ''
);
INSERT INTO commits_next (revision, kind, key, created_at, environment)
    SELECT revision, kind, key, created_at, CASE WHEN kind = 'feature' THEN 'production' ELSE '' END FROM commits;
DROP TABLE commits;
ALTER TABLE commits_next RENAME TO commits;

ALTER TABLE ramps ADD COLUMN environment TEXT NOT NULL DEFAULT 'production';
DROP INDEX ramps_feature;
DROP INDEX ramps_live;
CREATE INDEX ramps_feature ON ramps (environment, feature_key, created_at);
CREATE UNIQUE INDEX ramps_live ON ramps (environment, feature_key) WHERE state IN ('active', 'paused');

ALTER TABLE change_requests ADD COLUMN environment TEXT NOT NULL DEFAULT 'production';
DROP INDEX change_requests_feature;
CREATE INDEX change_requests_feature ON change_requests (environment, feature_key, created_at);

ALTER TABLE audit_events ADD COLUMN environment TEXT NOT NULL DEFAULT 'production';
CREATE INDEX audit_events_environment ON audit_events (environment, id);

ALTER TABLE tokens ADD COLUMN environment TEXT;
UPDATE tokens SET environment = 'production' WHERE role IN ('evaluate', 'sdk', 'client');

COMMIT;
PRAGMA foreign_keys = ON;

-- +goose Down
-- Other environments' features go first, with foreign keys on, so that
-- their versions, reports and exposures go with them.
DELETE FROM features WHERE environment <> 'production';
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TABLE features_prev (
    id         TEXT    PRIMARY KEY,
    key        TEXT    NOT NULL UNIQUE,
    version    INTEGER NOT NULL CHECK (version >= 1),
    config     TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL,
    archived_at TEXT
);
INSERT INTO features_prev (id, key, version, config, created_at, updated_at, archived_at)
    SELECT id, key, version, config, created_at, updated_at, archived_at FROM features;
DROP TABLE features;
ALTER TABLE features_prev RENAME TO features;

CREATE TABLE commits_prev (
    revision   INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind IN ('feature', 'token', 'segment')),
    key        TEXT    NOT NULL,
    created_at TEXT    NOT NULL
);
INSERT INTO commits_prev (revision, kind, key, created_at)
    SELECT revision, CASE WHEN kind = 'environment' THEN 'feature' ELSE kind END,
           CASE WHEN kind = 'environment' THEN 'environment:' || key ELSE key END, created_at
    FROM commits;
DROP TABLE commits;
ALTER TABLE commits_prev RENAME TO commits;

DELETE FROM ramps WHERE environment <> 'production';
DROP INDEX ramps_feature;
DROP INDEX ramps_live;
ALTER TABLE ramps DROP COLUMN environment;
CREATE INDEX ramps_feature ON ramps (feature_key, created_at);
CREATE UNIQUE INDEX ramps_live ON ramps (feature_key) WHERE state IN ('active', 'paused');

DELETE FROM change_requests WHERE environment <> 'production';
DROP INDEX change_requests_feature;
ALTER TABLE change_requests DROP COLUMN environment;
CREATE INDEX change_requests_feature ON change_requests (feature_key, created_at);

DROP INDEX audit_events_environment;
ALTER TABLE audit_events DROP COLUMN environment;

UPDATE tokens SET revoked_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE environment <> 'production' AND revoked_at IS NULL;
ALTER TABLE tokens DROP COLUMN environment;

DROP TABLE environments;

COMMIT;
PRAGMA foreign_keys = ON;
